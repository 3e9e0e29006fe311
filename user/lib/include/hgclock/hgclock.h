/* SPDX-License-Identifier: LGPL-2.1 */
/*
 * <hgclock/hgclock.h>: libhgclock's application API (libhgclock.so.1).
 *
 * ftrace's "perf" clock (the kernel's local_clock(), which stamps perf
 * samples) and "local" clock (sched_clock()), with the TSC they were
 * computed from and CLOCK_MONOTONIC, read in user space without a
 * system call on whatever CPU the caller runs on, from the conversions
 * the hgclock module publishes in /dev/hgclock-clock (no privilege
 * needed).
 *
 *	struct hgclock_clock *clk = hgclock_clock_open(NULL, 0);
 *	struct hgclock_reading r;
 *
 *	if (!clk)
 *		fprintf(stderr, "%s\n", hgclock_clock_strerror(errno));
 *	else if (hgclock_clock_read(clk, &r) == 0)
 *		printf("perf %llu\n", (unsigned long long)r.perf_ns);
 *
 * Applications record their own events in that clock into a file that
 * hgclock merge places on the host's timeline (hgclock_events_open()).
 *
 * Self-contained (no kernel header needed), C89 and C++.  The functions
 * and structures here are the whole ABI of libhgclock.so.1, versioned
 * HGCLOCK_1.0 (the clock) and HGCLOCK_1.1 (the events);
 * Documentation/library.rst, hgclock_clock_open(3) and
 * hgclock_events_open(3) say what each returns, and the versioning rule.
 */
#ifndef HGCLOCK_HGCLOCK_H
#define HGCLOCK_HGCLOCK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The version of this header.  A program built with MAJOR.MINOR runs
 * with any libhgclock.so.MAJOR of that MINOR or later
 * (hgclock_lib_version() says which one it got).
 */
#define HGCLOCK_LIB_VERSION_MAJOR	1
#define HGCLOCK_LIB_VERSION_MINOR	1
#define HGCLOCK_LIB_VERSION_PATCH	0
#define HGCLOCK_LIB_VERSION_NUMBER(major, minor, patch) \
	(((major) << 16) | ((minor) << 8) | (patch))
#define HGCLOCK_LIB_VERSION \
	HGCLOCK_LIB_VERSION_NUMBER(HGCLOCK_LIB_VERSION_MAJOR, \
				   HGCLOCK_LIB_VERSION_MINOR, \
				   HGCLOCK_LIB_VERSION_PATCH)

/*
 * The device hgclock_clock_open() opens when given NULL: the module's
 * public clock, mode 0444, which any user may map (module ABI 1.3 and
 * later).  With an older module, NULL opens HGCLOCK_CLOCK_DEVICE_OLD
 * instead, which needs root or the udev rule's group.
 */
#define HGCLOCK_CLOCK_DEVICE		"/dev/hgclock-clock"
#define HGCLOCK_CLOCK_DEVICE_OLD	"/dev/hgclock"

/*
 * Flags of hgclock_clock_open().  HGCLOCK_OPEN_NO_SYSCALL: never enter
 * the kernel in hgclock_clock_read(); where this CPU has no exact
 * conversion it fails with ENODATA instead of asking the kernel.
 */
#define HGCLOCK_OPEN_NO_SYSCALL		(1U << 0)

/* An open clock: the device and its read-only mapping.  Opaque. */
struct hgclock_clock;

/*
 * Flags of struct hgclock_reading.
 * HGCLOCK_READING_EXACT: computed in user space, without a system call,
 *	from this CPU's exact conversion: local_ns (and perf_ns) are to the
 *	nanosecond what the kernel's clocks return for this tsc on this cpu.
 * HGCLOCK_READING_SYSCALL: this CPU had no exact conversion; one ioctl
 *	read the clocks in the kernel instead: local_ns and perf_ns are the
 *	kernel's own values, read just after tsc (not computed from it).
 * HGCLOCK_READING_PERF: perf_ns holds a value (else it is 0).
 */
#define HGCLOCK_READING_EXACT		(1U << 0)
#define HGCLOCK_READING_SYSCALL		(1U << 1)
#define HGCLOCK_READING_PERF		(1U << 2)

/*
 * One reading of the clocks, all in the same CPU's terms.
 * @tsc:      the TSC (rdtscp), on @cpu.
 * @local_ns: ftrace's "local" clock, sched_clock(), in ns.
 * @perf_ns:  ftrace's "perf" clock, local_clock() (perf's default
 *            clock), in ns, with HGCLOCK_READING_PERF.
 * @mono_ns:  CLOCK_MONOTONIC in ns, read by clock_gettime() right after
 *            the others (the vDSO: no system call with the tsc or
 *            kvm-clock clocksource); not computed from @tsc.
 * @cpu:      the CPU the TSC was read on.
 * @flags:    HGCLOCK_READING_*.
 *
 * Its layout is part of the ABI of libhgclock.so.1: it never changes
 * there (a later minor version adds functions, never fields).
 */
struct hgclock_reading {
	uint64_t tsc;
	uint64_t local_ns;
	uint64_t perf_ns;
	uint64_t mono_ns;
	uint32_t cpu;
	uint32_t flags;
};

/*
 * Opens @path (NULL: HGCLOCK_CLOCK_DEVICE, else HGCLOCK_CLOCK_DEVICE_OLD
 * when that does not exist) read-only and maps the module's per-CPU
 * conversions; @path may name either device.  Without
 * HGCLOCK_OPEN_NO_SYSCALL it also opens HGCLOCK_CLOCK_DEVICE_OLD, when
 * this user may, for the ioctl fallback; else a CPU without an exact
 * conversion reads as ENODATA.  Returns a handle, or NULL with errno
 * set (hgclock_clock_strerror() turns it into advice).  Once per
 * process is enough: the handle may be used by every thread.
 */
struct hgclock_clock *hgclock_clock_open(const char *path, unsigned int flags);

/*
 * Reads the clocks on the calling CPU into *@reading.  Returns 0, or -1
 * with errno set (ENODATA, EAGAIN with HGCLOCK_OPEN_NO_SYSCALL).
 * Thread-safe; async-signal-safe with HGCLOCK_OPEN_NO_SYSCALL.
 */
int hgclock_clock_read(struct hgclock_clock *clk, struct hgclock_reading *reading);

/*
 * The fast path for stamping events: ftrace's "perf" clock alone
 * (local_clock(), perf's default sample clock) into *@perf_ns, from this
 * CPU's exact conversion without a system call; where there is none, the
 * ioctl fallback as hgclock_clock_read()'s.  Returns 0, or -1 with errno
 * set (ENODATA: no exact conversion, or no local_clock offset known, and
 * no fallback).  Thread-safe; async-signal-safe with
 * HGCLOCK_OPEN_NO_SYSCALL.  No CLOCK_MONOTONIC read, no structure filled.
 */
int hgclock_clock_perf_ns(struct hgclock_clock *clk, uint64_t *perf_ns);

/* Unmaps and closes; @clk may be NULL.  No read may be running on it. */
void hgclock_clock_close(struct hgclock_clock *clk);

/*
 * What an errno of hgclock_clock_open() or hgclock_clock_read() means
 * here and what to do about it: a sentence in static storage.
 */
const char *hgclock_clock_strerror(int errnum);

/* The library's HGCLOCK_LIB_VERSION, as built (compare with the header's). */
unsigned int hgclock_lib_version(void);

/* ---- application events (HGCLOCK_1.1, library 1.1 and later) ---- */

/*
 * Flags of hgclock_events_open().
 * HGCLOCK_EVENTS_LOCAL_CLOCK: stamp with ftrace's "local" clock
 *	(sched_clock()) instead of "perf" (local_clock(), perf's default),
 *	to match traces recorded with trace-cmd's default clock.
 * HGCLOCK_EVENTS_OVERWRITE: replace an existing file (else EEXIST).
 */
#define HGCLOCK_EVENTS_LOCAL_CLOCK	(1U << 0)
#define HGCLOCK_EVENTS_OVERWRITE	(1U << 1)

/* Kinds of hgclock_event(): a point in time, or a slice's two ends. */
#define HGCLOCK_EVENT_INSTANT		1
#define HGCLOCK_EVENT_BEGIN		2
#define HGCLOCK_EVENT_END		3

/* Longest name and text of one event, in bytes. */
#define HGCLOCK_EVENT_NAME_MAX		255
#define HGCLOCK_EVENT_TEXT_MAX		1023

/* An open event file.  Opaque. */
struct hgclock_events;

/*
 * Creates the event file @path (mode 0644 less the umask; an existing
 * file is an error, EEXIST, unless HGCLOCK_EVENTS_OVERWRITE) and writes
 * its header.  @clk stamps the events and must stay open until
 * hgclock_events_close().  Returns a handle, or NULL with errno set.
 * One per process is enough: the handle may be used by every thread.
 */
struct hgclock_events *hgclock_events_open(struct hgclock_clock *clk, const char *path,
					   unsigned int flags);

/*
 * Stamps the calling thread's event now, on the CPU it runs on, and
 * appends it to the buffer of that CPU: @kind HGCLOCK_EVENT_*, @name (1 to
 * HGCLOCK_EVENT_NAME_MAX bytes: what happened, e.g. "request"), @text
 * (NULL, or at most HGCLOCK_EVENT_TEXT_MAX bytes: details).  A BEGIN and
 * the END that follows it on the same thread with the same name make a
 * slice.  Returns 0, or -1 with errno set: EINVAL (kind, name or text),
 * ENODATA/EAGAIN (no clock reading, as hgclock_clock_read()), ENOMEM
 * (no buffer for a CPU's first event), EIO (an earlier write to the file
 * failed: the file is incomplete).  Thread-safe: the stamp and the
 * append happen under the lock of that CPU's buffer, so each CPU's
 * events are in time order in the file, and threads on different CPUs
 * do not wait for each other.  Not async-signal-safe.
 */
int hgclock_event(struct hgclock_events *evs, unsigned int kind, const char *name,
		  const char *text);

/*
 * Writes every CPU's buffered events to the file (those of threads that
 * have exited too).  0, or -1 with errno set.
 */
int hgclock_events_flush(struct hgclock_events *evs);

/*
 * Flushes, closes and frees @evs (may be NULL).  0, or -1 with errno set
 * when any write to the file failed (the file is then incomplete).  No
 * other call on @evs may be running or start: join the writers first.
 */
int hgclock_events_close(struct hgclock_events *evs);

#ifdef __cplusplus
}
#endif

#endif /* HGCLOCK_HGCLOCK_H */

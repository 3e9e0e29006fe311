/* SPDX-License-Identifier: LGPL-2.1 */
/*
 * libhgclock: the user-space side of /dev/hgclock.
 *
 * A thin, dependency-free library the hgclock tool and the selftests use:
 * opening the device with an error a person can act on, and one wrapper
 * per ioctl.  Functions return 0 or a negative errno; they never print.
 *
 * Internal: linked statically into the tool, never exported by
 * libhgclock.so.  Applications use <hgclock/hgclock.h> (user/lib/clock.c,
 * Documentation/library.rst), a small layer over the code here.
 */
#ifndef LIBHGCLOCK_H
#define LIBHGCLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <linux/hgclock.h>

#define HGCLOCK_DEV_PATH "/dev/" HGCLOCK_DEVICE_NAME

/* Exit statuses of the hgclock tool, documented in Documentation/tools.rst. */
enum hgclock_exit {
	HGCLOCK_EXIT_OK = 0,
	HGCLOCK_EXIT_FAILURE = 1,	/* an operation failed */
	HGCLOCK_EXIT_USAGE = 2,		/* bad command line */
	HGCLOCK_EXIT_NO_DEVICE = 3,	/* /dev/hgclock missing: module not loaded */
	HGCLOCK_EXIT_PERM = 4,		/* /dev/hgclock not accessible */
	HGCLOCK_EXIT_ABI = 5,		/* module speaks an incompatible ABI */
	HGCLOCK_EXIT_BAD_INPUT = 6,	/* an input file is corrupt or unsupported */
};

/* Opens @path (NULL: HGCLOCK_DEV_PATH); returns an fd or -errno. */
int hgclock_open(const char *path);
/*
 * The same, read-only: enough for GET_INFO, READ_CLOCK and the read-only
 * ring mapping (the zero-syscall clock), what the application API uses.
 */
int hgclock_open_readonly(const char *path);
/* A sentence explaining a failed hgclock_open() (static storage). */
const char *hgclock_open_hint(int err);
/* Maps a failed hgclock_open() to an exit status. */
enum hgclock_exit hgclock_open_exit(int err);

int hgclock_get_info(int fd, struct hgclock_info *info);
/* Reads on the calling CPU (cpu < 0) or on @cpu. */
int hgclock_read_clock(int fd, int cpu, struct hgclock_clock_sample *sample);
/*
 * Reads on every online CPU.  On success *@nr is the number of samples
 * written; -ENOSPC with *@nr set to the number needed when @cap is short.
 */
int hgclock_read_all_cpus(int fd, struct hgclock_clock_sample *samples,
			  unsigned int cap, unsigned int *nr);

/*
 * Every tracked thread: *@infos is malloc()ed (free() it), *@nr entries.
 * Retries while the set grows between the two calls.
 */
int hgclock_list_vcpus(int fd, struct hgclock_vcpu_info **infos, unsigned int *nr);
/* HGCLOCK_IOC_TRACK: @add 1 to track @tid, 0 to stop. */
int hgclock_track(int fd, int tid, int add);
/* Exit pairing on (1) or off (0) for the VM of process @vm_pid: host. */
int hgclock_pair_vm(int fd, int vm_pid, int on);

/* Names of the HGCLOCK_ROLE_* values and HGCLOCK_CLK_* bits. */
const char *hgclock_role_name(uint32_t role);
/* Writes "flag,flag" names of @clock_flags into @buf; returns @buf. */
char *hgclock_clock_flags_str(uint32_t clock_flags, char *buf, size_t len);

/*
 * The one parser of trace clock names, for every command's --clock and
 * for the clock a trace.dat records: "local" (ftrace's default,
 * sched_clock; alias "sched"), "perf" (local_clock) and "x86-tsc" (alias
 * "tsc").  Sets *@clock to an HGSYNC_CLOCK_* (user/lib/sync.h); 0 or
 * -EINVAL.
 */
int hgclock_clock_parse(const char *name, uint32_t *clock);
/* For messages: the names it accepts. */
#define HGCLOCK_CLOCK_NAMES "local, perf or x86-tsc"

/* ---- ring.c: the mapped rings ------------------------------------- */

/**
 * struct hgclock_map - a mapping of /dev/hgclock
 * @meta: the read-only meta area and data areas.
 * @map_size: its length.
 * @tail: the consumer positions; writable when mapped as the consumer,
 *	else a read-only view (NULL when not mapped at all).
 * @consumer_size: length of @tail's mapping.
 * @writable: true when this process is the ring's consumer.
 */
struct hgclock_map {
	const struct hgclock_meta *meta;
	size_t map_size;
	__u64 *tail;
	size_t consumer_size;
	int writable;
};

/* Flags of hgclock_map_open() */
#define HGCLOCK_MAP_CONSUMER	(1 << 0) /* map the tails writable: EBUSY if taken */
#define HGCLOCK_MAP_TAILS_RO	(1 << 1) /* map the tails read-only */

int hgclock_map_open(int fd, int flags, struct hgclock_map *map);
/*
 * Maps the public clock (/dev/hgclock-clock, ABI 1.3) open as @fd: its
 * one meta area, read-only (no tails, no data areas), after checking
 * what the module wrote in it.  0, -EPROTO for an area that is not one,
 * or mmap's -errno (-ENODEV and the like: not such a device).
 */
int hgclock_map_clock(int fd, struct hgclock_map *map);
void hgclock_map_close(struct hgclock_map *map);
const struct hgclock_meta_cpu *hgclock_map_slot(const struct hgclock_map *map,
						unsigned int cpu);
const void *hgclock_map_data(const struct hgclock_map *map, unsigned int cpu);

/* Called per record; a non-zero return stops the walk and is returned. */
typedef int (*hgclock_rec_fn)(const struct hgclock_rec_header *rec, void *ctx);

/*
 * Walks the records of one ring from *@tail up to @head (positions in
 * bytes, free running), calling @fn for each record but PAD, and advances
 * *@tail past what it walked.  Pure: works on any buffer laid out like a
 * ring.  Returns the number of records walked, -EBADMSG on a malformed
 * record (size not a multiple of 8, below the header, crossing the end of
 * the ring, or beyond @head) leaving *@tail at it, -ERANGE when @head is
 * behind *@tail or more than @ring_size ahead, or @fn's non-zero value.
 */
long hgclock_ring_walk(const void *data, uint64_t ring_size, uint64_t *tail,
		       uint64_t head, hgclock_rec_fn fn, void *ctx);

/*
 * Consumer: walks the records of @cpu's ring that are ready and then
 * publishes the new tail (release), freeing the space.  Needs
 * HGCLOCK_MAP_CONSUMER.  Same returns as hgclock_ring_walk().
 */
long hgclock_ring_consume(struct hgclock_map *map, unsigned int cpu,
			  hgclock_rec_fn fn, void *ctx);
/* Discards everything unread on every CPU. */
void hgclock_ring_skip_all(struct hgclock_map *map);

/* Names of record types and snapshot reasons, for printing. */
const char *hgclock_rec_name(unsigned int type);
/* The size of @type's struct: a shorter record of that type is malformed. */
size_t hgclock_rec_min_size(unsigned int type);
const char *hgclock_snap_reason_name(unsigned int reason);

int hgclock_ring_config(int fd, struct hgclock_ring_config *cfg);
/* cpu < 0: every online CPU.  Returns snapshots written or -errno. */
int hgclock_snapshot(int fd, int cpu);
/*
 * Guest: an exit pairing on @cpu (< 0: every online CPU), each recorded
 * as an EXIT_PAIR record in its CPU's ring.  Records written or -errno
 * (-ENODEV: no hypervisor).
 */
int hgclock_exit_pair(int fd, int cpu);

/* ---- uclock.c: the zero-syscall clock ------------------------------- */

/* sched_clock_ns = f(tsc) for @conv, exactly as the kernel computes it. */
uint64_t hgclock_conv_apply(const struct hgclock_conversion *conv, uint64_t tsc);

/*
 * How the TSC and the CPU that read it are paired (uclock.c's top comment,
 * Documentation/library.rst), hgclock_uclock_method()'s choice in this
 * order: RDTSCP, RSEQ, RDPID, else NONE.  IOCTL: hgclock_now()'s fallback.
 */
enum hgclock_uclock_method {
	HGCLOCK_UCLOCK_NONE,	/* none: -ENODATA, counted in no_method */
	HGCLOCK_UCLOCK_RDTSCP,	/* the TSC and TSC_AUX in one instruction */
	HGCLOCK_UCLOCK_RSEQ,	/* rseq cpu_id and RDTSC in one critical section */
	HGCLOCK_UCLOCK_RDPID,	/* RDPID, RDTSC, RDPID; both RDPIDs agree */
	HGCLOCK_UCLOCK_IOCTL,	/* read by the kernel (hgclock_now() only) */
};

/* The method hgclock_now_user() uses in this process. */
int hgclock_uclock_method(void);
/* 1 when @method can be used here (the CPU's instructions; glibc's rseq). */
int hgclock_uclock_available(int method);
/* "rdtscp", "rseq", "rdpid", "none", "ioctl". */
const char *hgclock_uclock_method_name(int method);

/**
 * struct hgclock_uclock_stats - process-wide counts of the zero-syscall clock
 * @no_method: readings answered -ENODATA for want of a method (none, or a
 *	thread without an rseq registration).
 * @retries: readings taken again because the thread changed CPU, or was
 *	preempted or signalled inside the rseq critical section.
 */
struct hgclock_uclock_stats {
	uint64_t no_method;
	uint64_t retries;
};

void hgclock_uclock_stats(struct hgclock_uclock_stats *stats);

/**
 * struct hgclock_now - one zero-syscall reading
 * @tsc: the TSC read (on @cpu).
 * @tsc_after: a TSC read after both clocks (the ioctl's), else @tsc.
 * @sched_clock_ns: ftrace "local" clock at @tsc.
 * @local_clock_ns: ftrace "perf" clock at @tsc, when @has_local.
 * @cpu: the CPU @tsc was read on.
 * @has_local: the meta area knew local_clock's offset.
 * @conv_flags: the conversion's HGCLOCK_CONV_* flags.
 * @method: how @tsc and @cpu were read, an HGCLOCK_UCLOCK_*.
 */
struct hgclock_now {
	uint64_t tsc;
	uint64_t tsc_after;
	uint64_t sched_clock_ns;
	uint64_t local_clock_ns;
	unsigned int cpu;
	int has_local;
	uint32_t conv_flags;
	int method;
};

/*
 * Reads sched_clock (and local_clock) without entering the kernel.
 * Returns 0, or -ENODATA when this CPU has no exact conversion or there is
 * no method (use HGCLOCK_IOC_READ_CLOCK), -EAGAIN when the conversion kept
 * changing or the thread kept moving, -ERANGE for a CPU beyond the area.
 */
int hgclock_now_user(const struct hgclock_map *map, struct hgclock_now *now);
/*
 * The same by @method (tests and benches): -EOPNOTSUPP when @method cannot
 * be used here, -ENODATA also when this thread has no rseq registration.
 */
int hgclock_now_user_method(const struct hgclock_map *map, struct hgclock_now *now,
			    int method);

/*
 * The same with the fallback: when no exact conversion is published, one
 * READ_CLOCK ioctl on @fd answers instead (then *@used_ioctl is 1).
 */
int hgclock_now(int fd, const struct hgclock_map *map, struct hgclock_now *now,
		int *used_ioctl);

struct hgclock_clock;

/*
 * The clocks through an application handle (<hgclock/hgclock.h>,
 * clock.c): what hgclock_clock_read() reads, with the CPU.  -errno.
 */
int hgclock_clock_now(struct hgclock_clock *clk, struct hgclock_now *now, int *used_ioctl);

#endif /* LIBHGCLOCK_H */

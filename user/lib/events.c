// SPDX-License-Identifier: LGPL-2.1
/*
 * Application events (<hgclock/hgclock.h>, HGCLOCK_1.1): an application
 * stamps its events with the clock ftrace and perf stamp theirs with,
 * into a file (appev.h) that hgclock merge puts on the host's timeline.
 *
 * Locking: a buffer per CPU, each with its own mutex, and no lock that
 * every event takes.  An event is stamped and appended under the lock of
 * the buffer of the CPU it is stamped on: the thread locks the buffer of
 * the CPU it last stamped on (a per-thread hint, no system call), reads
 * the clock, and keeps the record only if the reading's CPU is that
 * buffer's; otherwise (it moved) it unlocks and tries again with the
 * reading's CPU.  So a buffer holds only its CPU's records, appended in
 * the order they were stamped on that CPU, and the kernel's clocks are
 * monotonic per CPU: each buffer is in time order.  Threads on different
 * CPUs never take the same lock; threads on one CPU only when one of them
 * is switched out inside the few tens of nanoseconds of a stamp.
 *
 * The file: a full buffer is written, under its own lock and then the
 * handle's file lock (taken only for writes, in that order everywhere),
 * by whichever thread filled it.  A CPU's records reach the file through
 * its one buffer, in order: each CPU's records are in that CPU's time
 * order in the file, which is what hgclock merge streams and checks.
 * The file as a whole is not in time order any more (CPUs' buffers are
 * written in blocks), nor is a thread's sequence when the thread moved
 * between CPUs: its events are in its order on each CPU, and in time
 * order on the merged timeline, as any other per-CPU trace's.
 *
 * Lifetimes: a buffer is allocated the first time its CPU stamps an
 * event (64 KiB; CPUs that never run the application's events cost
 * nothing) and freed at hgclock_events_close().  Buffers belong to the
 * handle, not to threads: a thread that exits leaves its events in its
 * CPUs' buffers, written when they fill, at hgclock_events_flush() or at
 * close, so nothing is lost with the thread.  hgclock_events_flush()
 * writes every buffer that exists, one at a time: every event whose
 * hgclock_event() returned before the flush was called is in the file
 * when it returns.  hgclock_events_close() must not run while another
 * thread is in, or may still enter, a call on the handle (as before:
 * the handle is freed); the caller joins or stops its writers first.
 *
 * Fork: the child's buffers are copies of the parent's (a child opens
 * its own file: hgclock_events_open(3)), as with the one lock before.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <hgclock/hgclock.h>

#include "appev.h"
#include "libhgclock.h"

#define HGCLOCK_EXPORT __attribute__((visibility("default")))

#define HGCLOCK_EVENTS_FLAGS_ALL	(HGCLOCK_EVENTS_LOCAL_CLOCK | HGCLOCK_EVENTS_OVERWRITE)
#define HGEV_BUF_SIZE			(64 * 1024)

_Static_assert(HGCLOCK_EVENT_NAME_MAX == HGEV_NAME_MAX &&
	       HGCLOCK_EVENT_TEXT_MAX == HGEV_TEXT_MAX &&
	       HGCLOCK_EVENT_INSTANT == HGEV_KIND_INSTANT &&
	       HGCLOCK_EVENT_BEGIN == HGEV_KIND_BEGIN && HGCLOCK_EVENT_END == HGEV_KIND_END,
	       "the public constants are the file format's");

/*
 * One CPU's buffer.  @lock covers @len and @buf; cache-line aligned so
 * that two CPUs' locks never share a line.
 */
struct hgev_cpu_buf {
	pthread_mutex_t lock;
	size_t len;
	unsigned char buf[HGEV_BUF_SIZE];
} __attribute__((aligned(64)));

/*
 * @clk: not owned; the caller keeps it open until hgclock_events_close().
 * @file_lock: orders the writes to @fd and covers setting @error; taken
 *	inside a buffer's lock, never the other way round.
 * @error: the errno of the first failed write, then sticky: a file with
 *	a hole in it is not written on as if complete.  Set under
 *	@file_lock, read without it (atomically) on the event path.
 * @nr_cpus: one more than the highest CPU with a buffer (atomic).
 * @cpus: the buffers by CPU, NULL until the CPU's first event; set once
 *	(atomically, compare-and-swap), freed at close.
 */
struct hgclock_events {
	struct hgclock_clock *clk;
	int fd;
	uint32_t clock;
	pthread_mutex_t file_lock;
	int error;
	uint32_t nr_cpus;
	struct hgev_cpu_buf *cpus[HGEV_MAX_CPUS];
};

/*
 * The calling thread's id without a system call per event (gettid is one,
 * and costs more than the rest of an event): cached per thread.  A child
 * of fork() is a new process whose one thread kept the parent thread's
 * cache: the atfork child handler clears it.  glibc removes a library's
 * atfork handlers when it is unloaded, so registering one is safe.
 */
static __thread uint32_t cached_tid;
/* The CPU the thread last stamped an event on: where it most likely is. */
static __thread uint32_t cpu_hint;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void forget_tid(void)
{
	cached_tid = 0;
}

static void register_atfork(void)
{
	pthread_atfork(NULL, NULL, forget_tid);
}

static uint32_t current_tid(void)
{
	if (!cached_tid) {
		pthread_once(&atfork_once, register_atfork);
		cached_tid = (uint32_t)syscall(SYS_gettid);
	}
	return cached_tid;
}

static int events_error(struct hgclock_events *evs)
{
	return __atomic_load_n(&evs->error, __ATOMIC_RELAXED);
}

/* Writes @b's records to the file.  Under @b->lock.  0 or -errno. */
static int flush_cpu_locked(struct hgclock_events *evs, struct hgev_cpu_buf *b)
{
	int ret = 0;

	pthread_mutex_lock(&evs->file_lock);
	if (evs->error)
		ret = -EIO;
	else if (b->len)
		ret = hgev_write_all(evs->fd, b->buf, b->len);
	if (ret && !evs->error)
		__atomic_store_n(&evs->error, -ret, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&evs->file_lock);
	b->len = 0;
	return ret;
}

/* Every buffer written, one at a time.  0 or the first -errno. */
static int flush_all(struct hgclock_events *evs)
{
	uint32_t n = __atomic_load_n(&evs->nr_cpus, __ATOMIC_ACQUIRE);
	int ret = 0, r;

	for (uint32_t cpu = 0; cpu < n; cpu++) {
		struct hgev_cpu_buf *b = __atomic_load_n(&evs->cpus[cpu], __ATOMIC_ACQUIRE);

		if (!b)
			continue;
		pthread_mutex_lock(&b->lock);
		r = flush_cpu_locked(evs, b);
		pthread_mutex_unlock(&b->lock);
		if (r && !ret)
			ret = r;
	}
	/* No buffer at all: a failed write is still reported. */
	if (!ret && events_error(evs))
		ret = -EIO;
	return ret;
}

/*
 * @cpu's buffer, allocated at its first event.  Two threads may allocate
 * it at once: the first compare-and-swap wins, the other frees its copy.
 * NULL when out of memory.
 */
static struct hgev_cpu_buf *cpu_buf(struct hgclock_events *evs, uint32_t cpu)
{
	struct hgev_cpu_buf *b = __atomic_load_n(&evs->cpus[cpu], __ATOMIC_ACQUIRE);
	struct hgev_cpu_buf *none = NULL;
	uint32_t n;
	void *p;

	if (b)
		return b;
	if (posix_memalign(&p, 64, sizeof(*b)))
		return NULL;
	b = p;
	b->len = 0;
	pthread_mutex_init(&b->lock, NULL);
	if (!__atomic_compare_exchange_n(&evs->cpus[cpu], &none, b, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		pthread_mutex_destroy(&b->lock);
		free(b);
		return none;
	}
	/* Raise @nr_cpus past @cpu, after the pointer is visible. */
	n = __atomic_load_n(&evs->nr_cpus, __ATOMIC_RELAXED);
	while (n <= cpu && !__atomic_compare_exchange_n(&evs->nr_cpus, &n, cpu + 1, false,
							__ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
	return b;
}

HGCLOCK_EXPORT struct hgclock_events *hgclock_events_open(struct hgclock_clock *clk,
							  const char *path, unsigned int flags)
{
	unsigned char header[HGEV_HEADER_SIZE];
	struct hgclock_events *evs;
	char comm[17] = "";
	struct utsname u;
	int ret, oflags = O_WRONLY | O_CREAT | O_CLOEXEC;

	if (!clk || !path || (flags & ~HGCLOCK_EVENTS_FLAGS_ALL)) {
		errno = EINVAL;
		return NULL;
	}
	oflags |= flags & HGCLOCK_EVENTS_OVERWRITE ? O_TRUNC : O_EXCL;
	evs = calloc(1, sizeof(*evs));
	if (!evs)
		return NULL;
	evs->clk = clk;
	evs->clock = flags & HGCLOCK_EVENTS_LOCAL_CLOCK ? HGEV_CLOCK_LOCAL : HGEV_CLOCK_PERF;
	evs->fd = open(path, oflags, 0644);
	if (evs->fd < 0) {
		ret = errno;
		free(evs);
		errno = ret;
		return NULL;
	}
	if (prctl(PR_GET_NAME, comm))
		comm[0] = '\0';
	if (uname(&u))
		u.nodename[0] = '\0';
	hgev_encode_header(header, evs->clock, (uint32_t)getpid(), comm, u.nodename);
	ret = hgev_write_all(evs->fd, header, sizeof(header));
	if (ret) {
		close(evs->fd);
		free(evs);
		errno = -ret;
		return NULL;
	}
	pthread_mutex_init(&evs->file_lock, NULL);
	return evs;
}

HGCLOCK_EXPORT int hgclock_event(struct hgclock_events *evs, unsigned int kind,
				 const char *name, const char *text)
{
	uint32_t tid = current_tid(), cpu = cpu_hint;
	size_t name_len = name ? strnlen(name, HGEV_NAME_MAX + 1) : 0;
	size_t text_len = text ? strnlen(text, HGEV_TEXT_MAX + 1) : 0;
	struct hgev_cpu_buf *b;
	struct hgclock_now now;
	int used_ioctl, ret;
	unsigned int flags;
	uint64_t ts;
	size_t n;

	if (!evs || kind < HGCLOCK_EVENT_INSTANT || kind > HGCLOCK_EVENT_END ||
	    !name_len || name_len > HGEV_NAME_MAX || text_len > HGEV_TEXT_MAX) {
		errno = EINVAL;
		return -1;
	}
	if (cpu >= HGEV_MAX_CPUS)
		cpu = 0;
	/*
	 * Lock the buffer of the CPU the thread is likely on, stamp, and keep
	 * the lock only if the stamp was taken on that CPU: no other thread
	 * can then append a later stamp of that CPU before this one.  A miss
	 * needs the thread to have moved since its last event (or since the
	 * last try): it ends when the scheduler leaves it alone for a stamp.
	 */
	for (;;) {
		b = cpu_buf(evs, cpu);
		if (!b) {
			errno = ENOMEM;
			return -1;
		}
		pthread_mutex_lock(&b->lock);
		if (events_error(evs)) {
			ret = -EIO;
			goto out;
		}
		if (b->len + HGEV_REC_MAX > sizeof(b->buf)) {
			ret = flush_cpu_locked(evs, b);
			if (ret)
				goto out;
		}
		ret = hgclock_clock_now(evs->clk, &now, &used_ioctl);
		if (!ret && evs->clock == HGEV_CLOCK_PERF && !now.has_local)
			ret = -ENODATA;		/* sched_clock alone is not perf's clock */
		if (!ret && now.cpu >= HGEV_MAX_CPUS)
			ret = -ENODATA;		/* not a CPU the file can hold */
		if (ret || now.cpu == cpu)
			break;
		pthread_mutex_unlock(&b->lock);
		cpu = now.cpu;
	}
	if (ret)
		goto out;
	cpu_hint = cpu;
	ts = evs->clock == HGEV_CLOCK_PERF ? now.local_clock_ns : now.sched_clock_ns;
	flags = used_ioctl ? HGEV_REC_SYSCALL : HGEV_REC_EXACT;
	n = hgev_encode_record_len(b->buf + b->len, kind, flags, cpu, ts, tid, name,
				   name_len, text, text_len);
	b->len += n;
out:
	pthread_mutex_unlock(&b->lock);
	if (ret) {
		errno = -ret;
		return -1;
	}
	return 0;
}

HGCLOCK_EXPORT int hgclock_events_flush(struct hgclock_events *evs)
{
	int ret;

	if (!evs) {
		errno = EINVAL;
		return -1;
	}
	ret = flush_all(evs);
	if (ret) {
		errno = -ret;
		return -1;
	}
	return 0;
}

HGCLOCK_EXPORT int hgclock_events_close(struct hgclock_events *evs)
{
	int ret;

	if (!evs)
		return 0;
	ret = flush_all(evs);
	/* A close that fails (NFS, quota) loses data as a write would. */
	if (close(evs->fd) && !ret)
		ret = -errno;
	for (uint32_t cpu = 0; cpu < evs->nr_cpus; cpu++) {
		struct hgev_cpu_buf *b = evs->cpus[cpu];

		if (b) {
			pthread_mutex_destroy(&b->lock);
			free(b);
		}
	}
	pthread_mutex_destroy(&evs->file_lock);
	free(evs);
	if (ret) {
		errno = -ret;
		return -1;
	}
	return 0;
}

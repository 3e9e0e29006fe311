// SPDX-License-Identifier: LGPL-2.1
/*
 * Application events (<hgclock/hgclock.h>, HGCLOCK_1.1): an application
 * stamps its events with the clock ftrace and perf stamp theirs with,
 * into a file (appev.h) that hgclock merge puts on the host's timeline.
 *
 * Locking: one mutex per handle covers the clock read, the append to the
 * buffer and the write of a full buffer.  Stamping under the lock is
 * what orders the file: records are in stamp order, so one CPU's records
 * are in that CPU's time order, which the merge needs to stream them.
 * The cost is that threads stamping at the same instant take turns; a
 * stamp is a few tens of nanoseconds, and a full buffer (64 KiB, about
 * a thousand events) is written by whichever thread filled it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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
 * @lock: covers everything below it.
 * @clk: not owned; the caller keeps it open until hgclock_events_close().
 * @error: the errno of the first failed write, then sticky: a file with
 *	a hole in it is not written on as if complete.
 */
struct hgclock_events {
	struct hgclock_clock *clk;
	int fd;
	uint32_t clock;
	pthread_mutex_t lock;
	int error;
	size_t len;
	unsigned char buf[HGEV_BUF_SIZE];
};

/*
 * The calling thread's id without a system call per event (gettid is one,
 * and costs more than the rest of an event): cached per thread.  A child
 * of fork() is a new process whose one thread kept the parent thread's
 * cache: the atfork child handler clears it.  glibc removes a library's
 * atfork handlers when it is unloaded, so registering one is safe.
 */
static __thread uint32_t cached_tid;
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

/* Writes it all, through short writes and signals.  0 or -errno. */
static int write_all(int fd, const unsigned char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Under @evs->lock. */
static int flush_locked(struct hgclock_events *evs)
{
	int ret;

	if (evs->error)
		return -EIO;
	ret = write_all(evs->fd, evs->buf, evs->len);
	evs->len = 0;
	if (ret)
		evs->error = -ret;
	return ret;
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
	ret = write_all(evs->fd, header, sizeof(header));
	if (ret) {
		close(evs->fd);
		free(evs);
		errno = -ret;
		return NULL;
	}
	pthread_mutex_init(&evs->lock, NULL);
	return evs;
}

HGCLOCK_EXPORT int hgclock_event(struct hgclock_events *evs, unsigned int kind,
				 const char *name, const char *text)
{
	uint32_t tid = current_tid();
	size_t name_len = name ? strnlen(name, HGEV_NAME_MAX + 1) : 0;
	size_t text_len = text ? strnlen(text, HGEV_TEXT_MAX + 1) : 0;
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
	pthread_mutex_lock(&evs->lock);
	if (evs->error) {
		ret = -EIO;
		goto out;
	}
	if (evs->len + HGEV_REC_MAX > sizeof(evs->buf)) {
		ret = flush_locked(evs);
		if (ret)
			goto out;
	}
	/* The stamp: under the lock, so that the file is in stamp order. */
	ret = hgclock_clock_now(evs->clk, &now, &used_ioctl);
	if (!ret && evs->clock == HGEV_CLOCK_PERF && !now.has_local)
		ret = -ENODATA;		/* sched_clock alone is not perf's clock */
	if (ret)
		goto out;
	ts = evs->clock == HGEV_CLOCK_PERF ? now.local_clock_ns : now.sched_clock_ns;
	flags = used_ioctl ? HGEV_REC_SYSCALL : HGEV_REC_EXACT;
	n = hgev_encode_record_len(evs->buf + evs->len, kind, flags, now.cpu, ts, tid, name,
				   name_len, text, text_len);
	evs->len += n;
out:
	pthread_mutex_unlock(&evs->lock);
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
	pthread_mutex_lock(&evs->lock);
	ret = flush_locked(evs);
	pthread_mutex_unlock(&evs->lock);
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
	ret = flush_locked(evs);
	/* A close that fails (NFS, quota) loses data as a write would. */
	if (close(evs->fd) && !ret)
		ret = -errno;
	pthread_mutex_destroy(&evs->lock);
	free(evs);
	if (ret) {
		errno = -ret;
		return -1;
	}
	return 0;
}

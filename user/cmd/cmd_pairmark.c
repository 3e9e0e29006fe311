// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock pairmark [--interval MS] [--count N] [--duration S] [--marker FILE]
 *
 * In a guest without the hgclock module (Secure Boot, a locked-down
 * image): exit pairing done from user space, with ftrace's own
 * trace_marker as the guest's clock reading (Documentation/sync.rst,
 * "Guests without the module").  For each CPU it may run on, in turn, the
 * command pins itself there and
 *
 *   1. writes "hgclock_pair begin key=K seq=S" to trace_marker,
 *   2. executes CPUID with EAX = HGCLOCK_PAIR_LEAF(K), ECX = S: an exit to
 *      KVM, where the host module writes an EXIT_HOST record with the
 *      host's TSC (for a VM whose pairing a recorder turned on),
 *   3. writes "hgclock_pair end key=K seq=S".
 *
 * ftrace stamps a marker inside write(): the trace clock is read when the
 * event is reserved in the ring buffer (tracing_mark_write() ->
 * __trace_buffer_lock_reserve() -> __rb_reserve_next()), before the
 * write returns; so begin < CPUID < end in the guest's trace clock,
 * whichever it is, and the guest's trace.dat itself carries the pairing.
 * Markers and exit must be on one CPU for per-CPU clocks (local, perf):
 * the host side (user/lib/markpair.c) drops a pair whose markers are on
 * different CPUs, or whose exit came from another vCPU.
 *
 * K is random per run (16 bits), S counts from 1.  The host records at
 * most HGCLOCK_PAIR_MAX_PER_SEC exits a second per vCPU: rounds are at
 * least 1000 / HGCLOCK_PAIR_MAX_PER_SEC ms apart, measured from the end
 * of one to the start of the next, so any second holds at most that many
 * per CPU.  Needs no module and no privilege beyond writing trace_marker.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cpuid.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <linux/hgclock.h>

#include "cmd.h"
#include "libhgclock.h"
#include "markpair.h"

#define PAIRMARK_MIN_INTERVAL_MS	(1000 / HGCLOCK_PAIR_MAX_PER_SEC)
#define PAIRMARK_DEFAULT_INTERVAL_MS	100

static const char *const marker_paths[] = {
	"/sys/kernel/tracing/trace_marker",
	"/sys/kernel/debug/tracing/trace_marker",
};

static volatile sig_atomic_t pairmark_stop;

static void pairmark_on_signal(int sig)
{
	(void)sig;
	pairmark_stop = 1;
}

static void pairmark_usage(FILE *out)
{
	fprintf(out,
		"usage: hgclock pairmark [--interval MS] [--count N] [--duration S] [--marker FILE]\n"
		"In a guest without the hgclock module: on each CPU in turn, writes\n"
		"'" HG_MARKPAIR_PREFIX " begin key=K seq=S' to ftrace's trace_marker, exits to the\n"
		"host by CPUID (leaf 0x%x+K, subleaf S), then writes the 'end' line.\n"
		"A host recording this VM with pairing on records each exit, which lies\n"
		"between the two markers in this guest's trace.dat.  Rounds of one pairing\n"
		"per CPU, MS apart (default %d, at least %d); N rounds or S seconds\n"
		"(default: until SIGINT or SIGTERM).  --marker FILE: the trace_marker to\n"
		"write (default %s, else\n"
		"%s; an instance's for record -B).\n"
		"A pairing while the ring buffer is off (a tracer starting or stopping) is\n"
		"skipped and counted; none recorded at all is an error (exit 1).\n"
		"Prints the key and the number of pairings at the end.\n",
		HGCLOCK_PAIR_LEAF_BASE, PAIRMARK_DEFAULT_INTERVAL_MS, PAIRMARK_MIN_INTERVAL_MS,
		marker_paths[0], marker_paths[1]);
}

/*
 * marker_write()'s "not recording now": the ring buffer is off.  A
 * tracer turns it off while it sets up and when it stops (trace-cmd
 * record does both), so this is a pairing skipped, not an error.
 */
#define PAIRMARK_OFF	(-1)

/*
 * One full write of a marker line: HGCLOCK_EXIT_OK, PAIRMARK_OFF (not
 * said), or an exit status said.
 */
static int marker_write(int fd, const char *path, const char *line, size_t len)
{
	ssize_t n = write(fd, line, len);

	if (n == (ssize_t)len)
		return HGCLOCK_EXIT_OK;
	if (n < 0 && errno == EBADF)
		return PAIRMARK_OFF;
	if (n >= 0) {
		hg_err("%s: short write (%zd of %zu bytes)", path, n, len);
	} else if (errno == EINVAL) {
		hg_err("%s: markers are disabled (trace_options 'markers' off) or tracing is "
		       "disabled", path);
	} else {
		hg_err("%s: %s", path, strerror(errno));
	}
	return HGCLOCK_EXIT_FAILURE;
}

/* A key the host's EXIT_HOST records carry back: 16 random bits. */
static uint32_t pairmark_key(void)
{
	uint16_t key;

	if (getrandom(&key, sizeof(key), GRND_NONBLOCK) == (ssize_t)sizeof(key))
		return key;
	return (uint32_t)(time(NULL) ^ getpid()) & 0xffffu;
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Sleeps @ms, or less when a signal asks to stop. */
static void pairmark_sleep(uint64_t ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };

	while (!pairmark_stop && clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

/*
 * One pairing on @cpu: begin marker, CPUID, end marker.  1 when done, 0
 * when skipped (the CPU went away or the thread is not on it), 2 when
 * the ring buffer was off (no begin marker: no CPUID either; no end
 * marker: a begin and an exit the pairing reader ignores, as it does
 * any pairing without both markers), or -(exit status) after a failed
 * write.
 */
static int pair_on_cpu(int fd, const char *path, int cpu, uint32_t key, uint32_t seq)
{
	char begin[HG_MARKPAIR_LINE_MAX], end[HG_MARKPAIR_LINE_MAX];
	unsigned int eax, ebx, ecx, edx;
	int begin_len, end_len, ret;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) || sched_getcpu() != cpu)
		return 0;
	/* Formatted before the first write: nothing else between the markers. */
	begin_len = hg_marker_format(begin, sizeof(begin), false, key, seq);
	end_len = hg_marker_format(end, sizeof(end), true, key, seq);
	if (begin_len <= 0 || end_len <= 0)
		return -HGCLOCK_EXIT_FAILURE;
	ret = marker_write(fd, path, begin, (size_t)begin_len);
	if (ret == PAIRMARK_OFF)
		return 2;
	if (ret)
		return -ret;
	__cpuid_count(HGCLOCK_PAIR_LEAF(key), seq, eax, ebx, ecx, edx);
	(void)eax, (void)ebx, (void)ecx, (void)edx;
	ret = marker_write(fd, path, end, (size_t)end_len);
	if (ret == PAIRMARK_OFF)
		return 2;
	if (ret)
		return -ret;
	return 1;
}

int cmd_pairmark(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "interval", required_argument, NULL, 'i' },
		{ "count", required_argument, NULL, 'n' },
		{ "duration", required_argument, NULL, 'd' },
		{ "marker", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t interval_ms = PAIRMARK_DEFAULT_INTERVAL_MS, count = 0, duration_s = 0;
	uint64_t pairs = 0, skipped = 0, off = 0, rounds = 0;
	const char *path = NULL;
	struct sigaction sa;
	cpu_set_t allowed;
	unsigned int nr_allowed;
	uint32_t key, seq = 0;
	int c, fd = -1, status = HGCLOCK_EXIT_OK;
	double start_s;

	while ((c = getopt_long(argc, argv, "i:n:d:m:h", opts, NULL)) != -1) {
		switch (c) {
		case 'i':
			if (!parse_u64(optarg, 3600000, &interval_ms) ||
			    interval_ms < PAIRMARK_MIN_INTERVAL_MS) {
				hg_err("--interval wants %d..3600000 ms (the host records at "
				       "most %d pairings a second per vCPU), not '%s'",
				       PAIRMARK_MIN_INTERVAL_MS, HGCLOCK_PAIR_MAX_PER_SEC, optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'n':
			if (!parse_u64(optarg, UINT32_MAX, &count) || !count) {
				hg_err("--count wants 1..%u rounds, not '%s'", UINT32_MAX, optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'd':
			if (!parse_u64(optarg, 31 * 86400, &duration_s) || !duration_s) {
				hg_err("--duration wants 1..%d seconds, not '%s'", 31 * 86400,
				       optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'm':
			path = optarg;
			break;
		case 'h':
			pairmark_usage(stdout);
			return HGCLOCK_EXIT_OK;
		default:
			pairmark_usage(stderr);
			return HGCLOCK_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		pairmark_usage(stderr);
		return HGCLOCK_EXIT_USAGE;
	}

	if (path) {
		fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0) {
			hg_err("%s: %s", path, strerror(errno));
			return errno == EACCES || errno == EPERM ? HGCLOCK_EXIT_PERM :
				HGCLOCK_EXIT_FAILURE;
		}
	} else {
		int first_errno = ENOENT;

		for (size_t i = 0; i < sizeof(marker_paths) / sizeof(marker_paths[0]); i++) {
			fd = open(marker_paths[i], O_WRONLY | O_CLOEXEC);
			if (fd >= 0) {
				path = marker_paths[i];
				break;
			}
			if (i == 0 || first_errno == ENOENT)
				first_errno = errno;
		}
		if (fd < 0) {
			hg_err("cannot open %s (or %s): %s (tracefs mounted? root?)",
			       marker_paths[0], marker_paths[1], strerror(first_errno));
			return first_errno == EACCES || first_errno == EPERM ?
				HGCLOCK_EXIT_PERM : HGCLOCK_EXIT_FAILURE;
		}
	}

	/* The CPUs this thread may run on now: each gets a pairing per round. */
	if (sched_getaffinity(0, sizeof(allowed), &allowed)) {
		hg_err("sched_getaffinity: %s", strerror(errno));
		close(fd);
		return HGCLOCK_EXIT_FAILURE;
	}
	nr_allowed = (unsigned int)CPU_COUNT(&allowed);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = pairmark_on_signal;
	sigemptyset(&sa.sa_mask);
	/* No SA_RESTART: a signal ends the sleep between rounds at once. */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	key = pairmark_key();
	start_s = mono_s();
	while (!pairmark_stop && (!count || rounds < count) &&
	       (!duration_s || mono_s() - start_s < (double)duration_s)) {
		for (int cpu = 0; cpu < CPU_SETSIZE && !pairmark_stop; cpu++) {
			int ret;

			if (!CPU_ISSET(cpu, &allowed))
				continue;
			if (seq == UINT32_MAX) {
				pairmark_stop = 1;	/* never reused within a run */
				break;
			}
			ret = pair_on_cpu(fd, path, cpu, key, seq + 1);
			if (ret < 0) {
				status = -ret;
				goto out;
			}
			if (ret == 1) {
				seq++;
				pairs++;
			} else if (ret == 2) {
				seq++;	/* a half pairing's seq is not reused */
				off++;
			} else {
				skipped++;
			}
		}
		rounds++;
		if (rounds == 1 && !pairs && !off && !pairmark_stop) {
			hg_err("could not run on any of its %u CPUs (sched_setaffinity)", nr_allowed);
			status = HGCLOCK_EXIT_FAILURE;
			break;
		}
		if (pairmark_stop || (count && rounds >= count))
			break;
		if (duration_s) {
			/* Not past the end: a long interval is cut short by it. */
			double left_ms = ((double)duration_s - (mono_s() - start_s)) * 1000.0;

			if (left_ms <= 0)
				break;
			if (left_ms < (double)interval_ms) {
				pairmark_sleep((uint64_t)left_ms + 1);
				break;
			}
		}
		pairmark_sleep(interval_ms);
	}
out:
	sched_setaffinity(0, sizeof(allowed), &allowed);
	if (close(fd) && status == HGCLOCK_EXIT_OK) {
		hg_err("%s: %s", path, strerror(errno));
		status = HGCLOCK_EXIT_FAILURE;
	}
	/* Nothing recorded at all is an error: the markers went nowhere. */
	if (status == HGCLOCK_EXIT_OK && !pairs && off) {
		hg_err("%s: the ring buffer was off (tracing_on 0) at every pairing: start the "
		       "recording first", path);
		status = HGCLOCK_EXIT_FAILURE;
	}
	if (printf("pairmark: key %u, %llu pairings on %u CPUs in %llu rounds (last seq %u), "
		   "%llu skipped (CPU offline or not reached), %llu while the ring buffer was off\n",
		   key, (unsigned long long)pairs, nr_allowed, (unsigned long long)rounds, seq,
		   (unsigned long long)skipped, (unsigned long long)off) < 0 || fflush(stdout)) {
		if (status == HGCLOCK_EXIT_OK)
			status = HGCLOCK_EXIT_FAILURE;
	}
	return status;
}

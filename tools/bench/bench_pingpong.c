// SPDX-License-Identifier: GPL-2.0
/*
 * Benchmark helper: context switches through a pipe ping-pong between
 * two processes on one CPU (every round trip is two context switches).
 * Prints the ns per round trip; tools/bench/tracking.sh runs it with the
 * module absent, loaded, and loaded with both processes tracked, and
 * prints the ratios.
 *
 *   bench_pingpong ROUNDS [track|track1 [NR_OTHERS [NR_SESSIONS]]]
 *
 * With "track", both processes are tracked through HGCLOCK_IOC_TRACK (the
 * probes' full path for a tracked thread: lookup and a record per switch;
 * each switch puts one tracked thread in where another went out, so the
 * module writes the STOP of the one coming in and its RUN, coalescing
 * or not: a host CPU switching between two vCPUs).  With "track1", only
 * this process is tracked: it stops and runs again on one CPU with only
 * an untracked task in between, which the module coalesces (no record)
 * when coalesce_stop_us is not 0: an idle vCPU that halts and wakes where
 * it slept.
 * NR_OTHERS more threads, asleep, are tracked too: the table as full as
 * on a host with that many vCPUs, which must not slow the lookups down.
 * NR_SESSIONS (at least 1) open files of /dev/hgclock, each mapped as a
 * consumer so that every record is written to each one's ring (the
 * tracking file is the first): the producers' walk over the sessions.
 * Their rings are emptied every CHUNK round trips, which the time
 * includes (a few stores per ring).
 *
 * With HGCLOCK_PROBE_STATS set to the module's debugfs probe_stats file
 * (probe_stats=1), the counters are reset just before the timed loop and
 * read just after it; a second line gives the sched_switch probe's calls
 * and ns over the loop: "probe CALLS NS".
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "libhgclock.h"

static void pin0(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

/* The other tracked threads sleep in read() until the pipe closes. */
static int sleep_pipe[2];

static void *sleeper(void *arg)
{
	char c;

	(void)arg;
	if (read(sleep_pipe[0], &c, 1) < 0)
		return NULL;
	return NULL;
}

/* Round trips between two emptyings of the rings (160 bytes of records each). */
#define CHUNK 500

static int probe_stats_reset(const char *path)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	int ok = fd >= 0 && write(fd, "0\n", 2) == 2;

	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

/* The sum line "sched_switch CALLS NS" of the probe_stats file. */
static int probe_stats_read(const char *path, unsigned long long *calls,
			    unsigned long long *ns)
{
	FILE *f = fopen(path, "re");
	char line[256];
	int found = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "sched_switch %llu %llu", calls, ns) == 2)
			found = 0;
	fclose(f);
	return found;
}

static pid_t gettid_(void)
{
	return (pid_t)syscall(SYS_gettid);
}

struct sleeper_arg {
	pid_t tid;
};

static void *sleeper_tid(void *arg)
{
	((struct sleeper_arg *)arg)->tid = gettid_();
	return sleeper(NULL);
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 20000, i;
	int track1 = argc > 2 && !strcmp(argv[2], "track1");
	int track = track1 || (argc > 2 && !strcmp(argv[2], "track"));
	long nr_others = argc > 3 ? atol(argv[3]) : 0;
	long nr_sessions = argc > 4 ? atol(argv[4]) : 0;
	const char *stats = getenv("HGCLOCK_PROBE_STATS");
	unsigned long long calls = 0, ns = 0;
	struct hgclock_map *maps = NULL;
	int *fds = NULL;
	struct sleeper_arg *others = NULL;
	pthread_t *ths = NULL;
	int ping[2], pong[2], fd = -1;
	struct timespec t0, t1;
	pid_t child;
	char c = 0;

	if (pipe(sleep_pipe))
		return 1;
	if (nr_others > 0) {
		others = calloc(nr_others, sizeof(*others));
		ths = calloc(nr_others, sizeof(*ths));
		if (!others || !ths)
			return 1;
		for (i = 0; i < nr_others; i++)
			if (pthread_create(&ths[i], NULL, sleeper_tid, &others[i]))
				return 1;
		for (i = 0; i < nr_others; i++)
			while (!__atomic_load_n(&others[i].tid, __ATOMIC_ACQUIRE))
				sched_yield();
	}
	pin0();
	if (pipe(ping) || pipe(pong))
		return 1;
	child = fork();
	if (child < 0)
		return 1;
	if (child == 0) {
		/* Only our ends: the parent's close() must reach us as EOF. */
		close(ping[1]);
		close(pong[0]);
		for (;;) {
			if (read(ping[0], &c, 1) != 1)
				_exit(0);
			if (write(pong[1], &c, 1) != 1)
				_exit(1);
		}
	}
	close(ping[0]);
	close(pong[1]);
	if (track) {
		fd = hgclock_open(NULL);
		if (fd < 0 || hgclock_track(fd, getpid(), 1) ||
		    (!track1 && hgclock_track(fd, child, 1))) {
			fprintf(stderr, "bench_pingpong: cannot track (module loaded? root?)\n");
			return 1;
		}
		for (i = 0; i < nr_others; i++) {
			if (hgclock_track(fd, others[i].tid, 1)) {
				fprintf(stderr, "bench_pingpong: cannot track %ld threads\n",
					nr_others + 2);
				return 1;
			}
		}
		if (nr_sessions > 0) {
			maps = calloc(nr_sessions, sizeof(*maps));
			fds = calloc(nr_sessions, sizeof(*fds));
			if (!maps || !fds)
				return 1;
			fds[0] = fd;
			for (i = 1; i < nr_sessions; i++)
				fds[i] = hgclock_open(NULL);
			for (i = 0; i < nr_sessions; i++) {
				if (fds[i] < 0 ||
				    hgclock_map_open(fds[i], HGCLOCK_MAP_CONSUMER, &maps[i])) {
					fprintf(stderr, "bench_pingpong: cannot open and map session %ld of %ld\n",
						i + 1, nr_sessions);
					return 1;
				}
			}
		}
	}
	if (stats && probe_stats_reset(stats)) {
		fprintf(stderr, "bench_pingpong: cannot reset %s\n", stats);
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < rounds; i++) {
		if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1)
			return 1;
		if (nr_sessions > 0 && i % CHUNK == CHUNK - 1) {
			long j;

			for (j = 0; j < nr_sessions; j++)
				hgclock_ring_skip_all(&maps[j]);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (stats && probe_stats_read(stats, &calls, &ns)) {
		fprintf(stderr, "bench_pingpong: cannot read %s\n", stats);
		return 1;
	}
	close(ping[1]);
	waitpid(child, NULL, 0);
	if (fd >= 0) {
		hgclock_track(fd, getpid(), 0);
		for (i = 0; i < nr_others; i++)
			hgclock_track(fd, others[i].tid, 0);
		for (i = 0; i < nr_sessions; i++) {
			hgclock_map_close(&maps[i]);
			if (i)
				close(fds[i]);
		}
		close(fd);
	}
	free(maps);
	free(fds);
	close(sleep_pipe[1]);
	for (i = 0; i < nr_others; i++)
		pthread_join(ths[i], NULL);
	free(others);
	free(ths);
	printf("%.1f\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / rounds);
	if (stats)
		printf("probe %llu %llu\n", calls, ns);
	return 0;
}

// SPDX-License-Identifier: MIT
/*
 * An application recording its own events in perf's clock through
 * libhgclock (hgclock_events_open(3)), for hgclock merge --app: copy it
 * and build it with
 *
 *	cc -pthread -o hgclock-events hgclock-events.c $(pkg-config --cflags --libs hgclock)
 *
 *	hgclock-events [-l] [-i MS] FILE [SECONDS]
 *
 * Two threads each do units of work for SECONDS (default 1) or until
 * SIGINT or SIGTERM: a unit is a "unit" slice (a BEGIN and an END event,
 * its thread and number as text) around a sleep of MS milliseconds
 * (default 10; the system call a trace shows inside the slice), followed
 * by an instant "tick" and some computing.  The file is flushed about every
 * second, so that a kill -9 loses at most that.  With -l, the events are
 * in ftrace's local clock (trace-cmd's default) instead of perf's.
 * Exits 0, or 1 with the reason on standard error; FILE must not exist.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hgclock/hgclock.h>

static struct hgclock_events *evs;
static volatile sig_atomic_t stop;
static struct timespec end;
static long interval_ms = 10;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int past_end(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > end.tv_sec ||
	       (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec);
}

static void *worker(void *arg)
{
	const struct timespec pause = { interval_ms / 1000, interval_ms % 1000 * 1000000 };
	volatile unsigned long spin;
	char text[64];
	long unit;

	for (unit = 0; !stop && !past_end(); unit++) {
		snprintf(text, sizeof(text), "thread %ld unit %ld", (long)(size_t)arg, unit);
		if (hgclock_event(evs, HGCLOCK_EVENT_BEGIN, "unit", text))
			return (void *)(size_t)errno;	/* errno is this thread's */
		nanosleep(&pause, NULL);
		if (hgclock_event(evs, HGCLOCK_EVENT_END, "unit", text) ||
		    hgclock_event(evs, HGCLOCK_EVENT_INSTANT, "tick", NULL))
			return (void *)(size_t)errno;
		for (spin = 0; spin < 20000; spin++)
			;
		/* About once a second, by thread 0: what is recorded survives a crash. */
		if (!arg && unit % (1000 / interval_ms + 1) == 0 && hgclock_events_flush(evs))
			return (void *)(size_t)errno;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned int flags = 0;
	struct hgclock_clock *clk;
	struct sigaction sa;
	pthread_t threads[2];
	void *failed[2] = { NULL, NULL };
	int err = 0, i;

	while ((i = getopt(argc, argv, "li:")) != -1) {
		if (i == 'l')
			flags |= HGCLOCK_EVENTS_LOCAL_CLOCK;
		else if (i == 'i' && atol(optarg) > 0 && atol(optarg) <= 60000)
			interval_ms = atol(optarg);
		else
			optind = argc + 1;	/* usage */
	}
	if (optind >= argc || argc - optind > 2) {
		fprintf(stderr, "usage: hgclock-events [-l] [-i MS] FILE [SECONDS]\n");
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += optind + 1 < argc ? atoi(argv[optind + 1]) : 1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	clk = hgclock_clock_open(NULL, 0);
	if (!clk) {
		fprintf(stderr, "hgclock-events: %s\n", hgclock_clock_strerror(errno));
		return 1;
	}
	evs = hgclock_events_open(clk, argv[optind], flags);
	if (!evs) {
		fprintf(stderr, "hgclock-events: %s: %s\n", argv[optind],
			errno == EEXIST || errno == EINVAL ? hgclock_clock_strerror(errno) :
			strerror(errno));
		hgclock_clock_close(clk);
		return 1;
	}
	for (i = 0; i < 2; i++)
		if (pthread_create(&threads[i], NULL, worker, (void *)(size_t)i)) {
			fprintf(stderr, "hgclock-events: cannot start a thread\n");
			return 1;
		}
	for (i = 0; i < 2; i++)
		pthread_join(threads[i], &failed[i]);
	if (failed[0] || failed[1]) {
		err = (int)(size_t)(failed[0] ? failed[0] : failed[1]);
		fprintf(stderr, "hgclock-events: an event was not recorded: %s\n",
			hgclock_clock_strerror(err));
	}
	if (hgclock_events_close(evs)) {
		fprintf(stderr, "hgclock-events: %s: %s\n", argv[optind], strerror(errno));
		err = 1;
	}
	hgclock_clock_close(clk);
	return err ? 1 : 0;
}

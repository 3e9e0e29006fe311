// SPDX-License-Identifier: MIT
/*
 * An application recording its own events in perf's clock through
 * libhgclock (hgclock_events_open(3)), for hgclock merge --app: copy it
 * and build it with
 *
 *	cc -pthread -o hgclock-events hgclock-events.c $(pkg-config --cflags --libs hgclock)
 *
 *	hgclock-events FILE [UNITS [local]]
 *
 * Two threads each do UNITS (default 10) units of work; each unit is a
 * "unit" slice (a BEGIN and an END event) with its number as text, and
 * between units an instant "tick".  With "local", the events are in
 * ftrace's local clock (trace-cmd's default) instead of perf's.
 * Exits 0, or 1 with the reason on standard error; FILE must not exist.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hgclock/hgclock.h>

static struct hgclock_events *evs;
static int units = 10;

static void *worker(void *arg)
{
	volatile unsigned long spin;
	char text[64];
	int i;

	for (i = 0; i < units; i++) {
		snprintf(text, sizeof(text), "thread %ld unit %d", (long)(size_t)arg, i);
		if (hgclock_event(evs, HGCLOCK_EVENT_BEGIN, "unit", text))
			return (void *)(size_t)errno;	/* errno is this thread's */
		for (spin = 0; spin < 200000; spin++)
			;
		if (hgclock_event(evs, HGCLOCK_EVENT_END, "unit", text) ||
		    hgclock_event(evs, HGCLOCK_EVENT_INSTANT, "tick", NULL))
			return (void *)(size_t)errno;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned int flags = 0;
	struct hgclock_clock *clk;
	pthread_t threads[2];
	void *failed[2] = { NULL, NULL };
	int err = 0, i;

	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: hgclock-events FILE [UNITS [local]]\n");
		return 1;
	}
	if (argc > 2)
		units = atoi(argv[2]);
	if (argc > 3 && !strcmp(argv[3], "local"))
		flags |= HGCLOCK_EVENTS_LOCAL_CLOCK;
	clk = hgclock_clock_open(NULL, 0);
	if (!clk) {
		fprintf(stderr, "hgclock-events: %s\n", hgclock_clock_strerror(errno));
		return 1;
	}
	evs = hgclock_events_open(clk, argv[1], flags);
	if (!evs) {
		fprintf(stderr, "hgclock-events: %s: %s\n", argv[1],
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
		fprintf(stderr, "hgclock-events: %s: %s\n", argv[1], strerror(errno));
		err = 1;
	}
	hgclock_clock_close(clk);
	return err ? 1 : 0;
}

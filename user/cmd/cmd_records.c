// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock records [--follow] [--json] [--all] [--duration SEC]: every
 * record the host or guest module writes (snapshots, vCPU tracking, TSC
 * offset changes, losses), one line each, in ring order per CPU.  Becomes
 * the ring's consumer while it runs.  --json prints one JSON object per
 * line (JSON Lines), for scripts.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "libhgclock.h"
#include "output.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

struct rec_ctx {
	bool json;
	unsigned long nr;
};

static int print_rec(const struct hgclock_rec_header *h, void *arg)
{
	struct rec_ctx *ctx = arg;

	ctx->nr++;
	hg_print_record(h, ctx->json, NULL);
	return 0;
}

static void records_usage(FILE *out)
{
	fprintf(out,
		"usage: hgclock records [--follow] [--json] [--all] [--duration SEC]\n"
		"Prints the records of every CPU's ring.  By default starts with what\n"
		"arrives from now on; --all prints what was queued too.  --follow keeps\n"
		"reading until interrupted or --duration seconds have passed.\n");
}

int cmd_records(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "follow", no_argument, NULL, 'f' },
		{ "json", no_argument, NULL, 'j' },
		{ "all", no_argument, NULL, 'a' },
		{ "duration", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool follow = false, all = false;
	struct rec_ctx ctx = { 0 };
	uint64_t duration_s = 0;
	struct hgclock_map map;
	struct timespec start;
	int c, fd, ret = HGCLOCK_EXIT_OK;

	while ((c = getopt_long(argc, argv, "fjad:h", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			follow = true;
			break;
		case 'j':
			ctx.json = true;
			break;
		case 'a':
			all = true;
			break;
		case 'd':
			if (!parse_u64(optarg, 86400 * 365, &duration_s)) {
				hg_err("--duration wants seconds, not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			follow = true;
			break;
		case 'h':
			records_usage(stdout);
			return HGCLOCK_EXIT_OK;
		default:
			records_usage(stderr);
			return HGCLOCK_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		records_usage(stderr);
		return HGCLOCK_EXIT_USAGE;
	}
	fd = hg_open_device();
	if (fd < 0)
		return -fd;
	ret = hg_map_consumer(fd, &map);
	if (ret) {
		close(fd);
		return HGCLOCK_EXIT_FAILURE;
	}
	if (!all)
		hgclock_ring_skip_all(&map);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	clock_gettime(CLOCK_MONOTONIC, &start);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		struct timespec now;

		ret = hg_drain_all(&map, print_rec, &ctx);
		if (!ret)
			ret = hg_stdout_check();
		if (ret)
			goto out;
		if (!follow || stop)
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (duration_s && (uint64_t)(now.tv_sec - start.tv_sec) >= duration_s)
			break;
		if (poll(&pfd, 1, 100) < 0 && errno != EINTR) {
			hg_err("poll: %s", strerror(errno));
			ret = HGCLOCK_EXIT_FAILURE;
			break;
		}
	}
out:
	hgclock_map_close(&map);
	close(fd);
	return ret;
}

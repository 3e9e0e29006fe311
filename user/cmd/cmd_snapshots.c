// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock snapshots [--follow] [--json] [--no-trigger]: prints each CPU's
 * CYC2NS snapshots (clocks and TSC conversion) as they arrive in the ring,
 * and LOST records.  Becomes the ring's consumer while it runs.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "json.h"
#include "libhgclock.h"
#include "output.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

struct snap_ctx {
	struct json_writer *json;
	unsigned long nr_snapshots;
	unsigned long nr_lost;
};

static void conv_flags_str(uint32_t flags, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s%s%s",
		 flags & HGCLOCK_CONV_EXACT ? "exact" :
		 flags & HGCLOCK_CONV_DERIVED ? "derived" : "none",
		 flags & HGCLOCK_CONV_PVCLOCK ? ",kvm-clock" : "",
		 flags & HGCLOCK_CONV_SCHED_CLOCK_STABLE ? ",stable" : "",
		 flags & HGCLOCK_CONV_LOCAL_OFFSET ? ",local-offset" : "",
		 flags & HGCLOCK_CONV_VALID ? "" : ",invalid");
}

static int print_record(const struct hgclock_rec_header *rec, void *arg)
{
	struct snap_ctx *ctx = arg;
	char flags[96];

	if (rec->type == HGCLOCK_REC_LOST) {
		const struct hgclock_rec_lost *lost = (const void *)rec;

		ctx->nr_lost += lost->nr_lost;
		if (ctx->json) {
			json_begin_object(ctx->json, NULL);
			json_string(ctx->json, "type", "lost");
			json_u64(ctx->json, "cpu", rec->cpu);
			json_u64(ctx->json, "sched_clock_ns", rec->sched_clock_ns);
			json_u64(ctx->json, "nr_lost", lost->nr_lost);
			json_u64(ctx->json, "total_lost", lost->total_lost);
			json_end_object(ctx->json);
			if (ctx->json->depth == 0)
				json_finish(ctx->json);
		} else {
			printf("cpu %u  LOST %llu records (total %llu) before sched_clock %llu\n",
			       rec->cpu, (unsigned long long)lost->nr_lost,
			       (unsigned long long)lost->total_lost,
			       (unsigned long long)rec->sched_clock_ns);
		}
		return 0;
	}
	if (rec->type != HGCLOCK_REC_CYC2NS || rec->size < sizeof(struct hgclock_rec_cyc2ns))
		return 0;

	const struct hgclock_rec_cyc2ns *snap = (const void *)rec;

	ctx->nr_snapshots++;
	conv_flags_str(snap->conv.flags, flags, sizeof(flags));
	if (ctx->json) {
		struct json_writer *w = ctx->json;

		json_begin_object(w, NULL);
		json_string(w, "type", "cyc2ns");
		json_u64(w, "cpu", rec->cpu);
		json_u64(w, "seq", snap->seq);
		json_string(w, "reason", hgclock_snap_reason_name(snap->reason));
		json_u64(w, "tsc", rec->tsc);
		json_u64(w, "tsc_after", snap->tsc_after);
		json_u64(w, "sched_clock_ns", rec->sched_clock_ns);
		json_u64(w, "local_clock_ns", snap->local_clock_ns);
		json_u64(w, "tsc_khz", snap->tsc_khz);
		json_begin_object(w, "conv");
		json_u64(w, "tsc_base", snap->conv.tsc_base);
		json_i64(w, "offset_ns", (int64_t)snap->conv.offset_ns);
		json_u64(w, "mult", snap->conv.mult);
		json_u64(w, "shift", snap->conv.shift);
		json_i64(w, "pre_shift", snap->conv.pre_shift);
		json_i64(w, "local_offset_ns", (int64_t)snap->conv.local_offset_ns);
		json_u64(w, "bound_ns", snap->conv.bound_ns);
		json_string(w, "flags", flags);
		json_end_object(w);
		json_end_object(w);
		if (w->depth == 0)	/* JSON Lines: one record a line */
			json_finish(w);
	} else {
		printf("cpu %u  #%-5llu %-8s tsc %llu  sched_clock %llu  local_clock %llu\n"
		       "        mult %u shift %u offset %lld tsc_base %llu pre_shift %d"
		       " local_offset %lld bound %llu [%s]\n",
		       rec->cpu, (unsigned long long)snap->seq,
		       hgclock_snap_reason_name(snap->reason),
		       (unsigned long long)rec->tsc,
		       (unsigned long long)rec->sched_clock_ns,
		       (unsigned long long)snap->local_clock_ns,
		       snap->conv.mult, snap->conv.shift,
		       (long long)snap->conv.offset_ns,
		       (unsigned long long)snap->conv.tsc_base, snap->conv.pre_shift,
		       (long long)snap->conv.local_offset_ns,
		       (unsigned long long)snap->conv.bound_ns, flags);
	}
	return 0;
}

static int drain(struct hgclock_map *map, struct snap_ctx *ctx)
{
	int ret = hg_drain_all(map, print_record, ctx);

	/* A full disk or a closed pipe stops --follow. */
	return ret ? ret : hg_stdout_check();
}

static void snapshots_usage(FILE *out)
{
	fprintf(out,
		"usage: hgclock snapshots [--follow] [--json] [--no-trigger] [--all]\n"
		"Prints per-CPU clock snapshots (TSC, sched_clock, local_clock and the\n"
		"TSC->sched_clock conversion) from the ring.  By default asks for a fresh\n"
		"snapshot of every CPU first and skips what was queued before; --all\n"
		"prints the queued records too.  --follow keeps printing until interrupted;\n"
		"with --json it prints one JSON object per line (JSON Lines).\n");
}

int cmd_snapshots(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "follow", no_argument, NULL, 'f' },
		{ "json", no_argument, NULL, 'j' },
		{ "no-trigger", no_argument, NULL, 'n' },
		{ "all", no_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool follow = false, json = false, trigger = true, all = false;
	struct snap_ctx ctx = { 0 };
	struct hgclock_map map;
	struct json_writer w;
	int c, fd, ret;

	while ((c = getopt_long(argc, argv, "fjnah", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			follow = true;
			break;
		case 'j':
			json = true;
			break;
		case 'n':
			trigger = false;
			break;
		case 'a':
			all = true;
			break;
		case 'h':
			snapshots_usage(stdout);
			return HGCLOCK_EXIT_OK;
		default:
			snapshots_usage(stderr);
			return HGCLOCK_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		snapshots_usage(stderr);
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
	if (trigger && hgclock_snapshot(fd, -1) < 0) {
		hg_err("SNAPSHOT failed: %s", strerror(errno));
		ret = HGCLOCK_EXIT_FAILURE;
		goto out;
	}
	/* One array when the output ends; JSON Lines when it never does. */
	if (json) {
		json_init(&w, stdout, !follow);
		ctx.json = &w;
		if (!follow)
			json_begin_array(&w, NULL);
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	ret = drain(&map, &ctx);
	while (!ret && follow && !stop) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };

		/* The watermark may be high: also wake once a second. */
		if (poll(&pfd, 1, 1000) < 0 && errno != EINTR) {
			hg_err("poll: %s", strerror(errno));
			ret = HGCLOCK_EXIT_FAILURE;
			break;
		}
		ret = drain(&map, &ctx);
	}
	if (json && !follow) {
		json_end_array(&w);
		json_finish(&w);
	}
	if (!json && ctx.nr_lost)
		fprintf(stderr, "hgclock: %lu records were lost (ring full)\n", ctx.nr_lost);
out:
	hgclock_map_close(&map);
	close(fd);
	return ret;
}

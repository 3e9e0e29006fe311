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
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "libhgclock.h"

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

/* The fields every record has, then the type's own. */
static int print_rec(const struct hgclock_rec_header *h, void *arg)
{
	struct rec_ctx *ctx = arg;
	const char *sep = ctx->json ? ", " : " ";
	const char *q = ctx->json ? "\"" : "";

	ctx->nr++;
	if (ctx->json)
		printf("{\"type\": \"%s\", \"cpu\": %u, \"tsc\": %" PRIu64
		       ", \"sched_clock_ns\": %" PRIu64,
		       hgclock_rec_name(h->type), h->cpu, (uint64_t)h->tsc,
		       (uint64_t)h->sched_clock_ns);
	else
		printf("%-12s cpu %u tsc %" PRIu64 " sched_clock %" PRIu64,
		       hgclock_rec_name(h->type), h->cpu, (uint64_t)h->tsc,
		       (uint64_t)h->sched_clock_ns);

#define F(name, fmt, val) printf("%s%s%s%s%s" fmt, sep, q, name, q, ctx->json ? ": " : "=", val)
	switch (h->type) {
	case HGCLOCK_REC_LOST: {
		const struct hgclock_rec_lost *r = (const void *)h;

		F("nr_lost", "%" PRIu64, (uint64_t)r->nr_lost);
		F("total_lost", "%" PRIu64, (uint64_t)r->total_lost);
		break;
	}
	case HGCLOCK_REC_CYC2NS: {
		const struct hgclock_rec_cyc2ns *r = (const void *)h;

		F("reason", "%u", r->reason);
		F("tsc_after", "%" PRIu64, (uint64_t)r->tsc_after);
		F("local_clock_ns", "%" PRIu64, (uint64_t)r->local_clock_ns);
		F("mult", "%u", r->conv.mult);
		F("shift", "%u", r->conv.shift);
		F("offset_ns", "%" PRIu64, (uint64_t)r->conv.offset_ns);
		F("tsc_base", "%" PRIu64, (uint64_t)r->conv.tsc_base);
		F("pre_shift", "%d", r->conv.pre_shift);
		F("conv_flags", "%u", r->conv.flags);
		F("local_offset_ns", "%" PRIu64, (uint64_t)r->conv.local_offset_ns);
		F("bound_ns", "%" PRIu64, (uint64_t)r->conv.bound_ns);
		break;
	}
	case HGCLOCK_REC_VCPU_SEEN: {
		const struct hgclock_rec_vcpu_seen *r = (const void *)h;

		F("tid", "%d", r->tid);
		F("vm_pid", "%d", r->vm_pid);
		F("vcpu_id", "%d", r->vcpu_id);
		F("flags", "%u", r->flags);
		if (ctx->json)
			printf(", \"vm\": \"%.16s\"", r->vm_name);
		else
			printf(" vm=%.16s", r->vm_name[0] ? r->vm_name : "-");
		F("tsc_offset", "%" PRIu64, (uint64_t)r->tsc_offset);
		F("tsc_scaling_ratio", "%" PRIu64, (uint64_t)r->tsc_scaling_ratio);
		F("tsc_frac_bits", "%u", r->tsc_frac_bits);
		F("host_cpu", "%d", r->host_cpu);
		break;
	}
	case HGCLOCK_REC_VCPU_RUN:
	case HGCLOCK_REC_VCPU_STOP:
	case HGCLOCK_REC_VCPU_EXIT: {
		const struct hgclock_rec_vcpu *r = (const void *)h;

		F("tid", "%d", r->tid);
		F("vm_pid", "%d", r->vm_pid);
		F("vcpu_id", "%d", r->vcpu_id);
		break;
	}
	case HGCLOCK_REC_VCPU_MIGRATE: {
		const struct hgclock_rec_vcpu_migrate *r = (const void *)h;

		F("tid", "%d", r->tid);
		F("vm_pid", "%d", r->vm_pid);
		F("vcpu_id", "%d", r->vcpu_id);
		F("from_cpu", "%d", r->from_cpu);
		F("to_cpu", "%d", r->to_cpu);
		break;
	}
	case HGCLOCK_REC_TSC_OFFSET: {
		const struct hgclock_rec_tsc_offset *r = (const void *)h;

		F("tid", "%d", r->tid);
		F("vm_pid", "%d", r->vm_pid);
		F("vcpu_id", "%d", r->vcpu_id);
		F("flags", "%u", r->flags);
		F("previous_offset", "%" PRIu64, (uint64_t)r->previous_offset);
		F("next_offset", "%" PRIu64, (uint64_t)r->next_offset);
		F("tsc_scaling_ratio", "%" PRIu64, (uint64_t)r->tsc_scaling_ratio);
		F("tsc_frac_bits", "%u", r->tsc_frac_bits);
		break;
	}
	default:
		F("size", "%u", h->size);
		break;
	}
#undef F
	printf(ctx->json ? "}\n" : "\n");
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
	ret = hgclock_map_open(fd, HGCLOCK_MAP_CONSUMER, &map);
	if (ret) {
		hg_err(ret == -EBUSY ? "another process is reading the ring" :
		       "cannot map the ring: %s", strerror(-ret));
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
		unsigned int cpu;

		for (cpu = 0; cpu < map.meta->nr_cpus; cpu++) {
			long n = hgclock_ring_consume(&map, cpu, print_rec, &ctx);

			if (n < 0) {
				hg_err("ring of CPU %u: %s", cpu, strerror((int)-n));
				ret = HGCLOCK_EXIT_FAILURE;
				goto out;
			}
		}
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

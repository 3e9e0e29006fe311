// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock convert FILE [--guest ID] [--vcpu N] [--clock CLOCK] [--json]
 *                 [--method M] [--recompute] [VALUE...]
 *
 * Converts guest clock values to the host's same clock with the mapping
 * in a correlation file (its SEGMENTS section, or computed from the
 * records when it has none): the host value, the method, the error
 * bound and the host CPU the vCPU ran on.  Without VALUEs, reads lines
 * "VCPU VALUE" from standard input.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "libhgclock.h"
#include "sync.h"

static int parse_clock(const char *s, uint32_t *clock)
{
	if (!strcmp(s, "local") || !strcmp(s, "sched"))
		*clock = HGSYNC_CLOCK_SCHED;
	else if (!strcmp(s, "perf"))
		*clock = HGSYNC_CLOCK_LOCAL;
	else if (!strcmp(s, "x86-tsc") || !strcmp(s, "tsc"))
		*clock = HGSYNC_CLOCK_TSC;
	else
		return -1;
	return 0;
}

static void print_one(const struct hgsync *s, uint32_t guest, int vcpu, uint32_t clock,
		      uint64_t value, uint32_t method, bool json)
{
	struct hgsync_result r;
	int ret = hgsync_to_host_by(s, guest, vcpu, clock, value, method, &r);

	if (json) {
		printf("{\"guest\": %u, \"vcpu\": %d, \"clock\": \"%s\", \"guest_value\": %" PRIu64,
		       guest, vcpu, hgsync_clock_name(clock), value);
		if (ret)
			printf(", \"error\": \"%s\"}\n", ret == -ENOENT ?
			       "no mapping covers it" : "a conversion it needs is missing");
		else
			printf(", \"host_value\": %" PRIu64 ", \"method\": \"%s\", \"bound_ns\": %" PRIu64
			       ", \"host_cpu\": %d}\n", r.host_value, hgsync_method_name(r.method),
			       r.bound_ns, r.host_cpu);
		return;
	}
	if (ret)
		printf("%d %" PRIu64 " -> none (%s)\n", vcpu, value, ret == -ENOENT ?
		       "no mapping covers it" : "a conversion it needs is missing");
	else
		printf("%d %" PRIu64 " -> %" PRIu64 " %s +-%" PRIu64 " ns host_cpu %d\n", vcpu,
		       value, r.host_value, hgsync_method_name(r.method), r.bound_ns, r.host_cpu);
}

static void convert_usage(FILE *out)
{
	fprintf(out,
		"usage: hgclock convert FILE [--guest ID] [--vcpu N] [--clock CLOCK] [--json]\n"
		"                       [--method auto|kvm-exact|exit|probe] [--recompute] [VALUE...]\n"
		"Converts guest clock VALUEs (read on vCPU N of guest ID, default 0 and 0)\n"
		"to the host's same clock with the mapping in FILE.  CLOCK: local (ftrace's\n"
		"default, sched_clock; the default), perf (local_clock) or x86-tsc.\n"
		"Without VALUEs, reads \"VCPU VALUE\" lines from standard input.  Prints\n"
		"the host value, the method, the error bound and the host CPU.\n"
		"--method uses one method only (default: the best available).\n"
		"--recompute ignores the mapping stored in FILE and computes it again.\n");
}

int cmd_convert(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "guest", required_argument, NULL, 'g' },
		{ "vcpu", required_argument, NULL, 'v' },
		{ "clock", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "recompute", no_argument, NULL, 'r' },
		{ "method", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t guest = 0, vcpu = 0, value;
	uint32_t clock = HGSYNC_CLOCK_SCHED, method = 0;
	bool json = false;
	int flags = 0, c, ret;
	const void *buf;
	size_t len;
	struct hgsync s;
	const char *path;

	while ((c = getopt_long(argc, argv, "g:v:c:jrm:h", opts, NULL)) != -1) {
		switch (c) {
		case 'g':
			if (!parse_u64(optarg, HGSYNC_MAX_GUESTS - 1, &guest)) {
				hg_err("--guest wants a guest id (0..%d), not '%s'",
				       HGSYNC_MAX_GUESTS - 1, optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'v':
			if (!parse_u64(optarg, 4095, &vcpu)) {
				hg_err("--vcpu wants a vCPU number, not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'c':
			if (parse_clock(optarg, &clock)) {
				hg_err("--clock wants local, perf or x86-tsc, not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'j':
			json = true;
			break;
		case 'r':
			flags |= HGSYNC_IGNORE_SEGMENTS;
			break;
		case 'm':
			if (hgsync_method_parse(optarg) < 0) {
				hg_err("--method wants auto, kvm-exact, exit or probe, not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			method = (uint32_t)hgsync_method_parse(optarg);
			break;
		case 'h':
			convert_usage(stdout);
			return HGCLOCK_EXIT_OK;
		default:
			convert_usage(stderr);
			return HGCLOCK_EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		convert_usage(stderr);
		return HGCLOCK_EXIT_USAGE;
	}
	path = argv[optind++];
	for (int i = optind; i < argc; i++)
		if (!parse_u64(argv[i], UINT64_MAX, &value)) {
			hg_err("'%s' is not a clock value (an unsigned integer)", argv[i]);
			return HGCLOCK_EXIT_USAGE;
		}
	ret = hg_load_sync(path, flags, &s, &buf, &len);
	if (ret)
		return ret;
	if (guest >= s.nr_guests || !s.guests[guest].present) {
		hg_err("%s: no guest %" PRIu64 " in this file", path, guest);
		ret = HGCLOCK_EXIT_BAD_INPUT;
		goto out;
	}
	if (optind < argc) {
		for (int i = optind; i < argc; i++) {
			parse_u64(argv[i], UINT64_MAX, &value);
			print_one(&s, (uint32_t)guest, (int)vcpu, clock, value, method, json);
		}
	} else {
		char line[256];
		unsigned long lineno = 0;

		while (fgets(line, sizeof(line), stdin)) {
			unsigned long long v, x;
			char extra;

			lineno++;
			if (sscanf(line, "%llu %llu %c", &v, &x, &extra) != 2 || v > 4095) {
				hg_err("stdin line %lu: want \"VCPU VALUE\"", lineno);
				ret = HGCLOCK_EXIT_BAD_INPUT;
				goto out;
			}
			print_one(&s, (uint32_t)guest, (int)v, clock, x, method, json);
		}
	}
	ret = HGCLOCK_EXIT_OK;
out:
	hgsync_free(&s);
	hg_unmap_file(buf, len);
	return ret;
}

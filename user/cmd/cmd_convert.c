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

#include <trace-cmd.h>

#include "cmd.h"
#include "corr_check.h"
#include "libhgclock.h"
#include "markpair.h"
#include "output.h"
#include "sync.h"
#include "trace_pool.h"
#include "vcpu_lines.h"

static void print_one(const struct hgsync *s, uint32_t guest, int vcpu, uint32_t clock,
		      uint64_t value, uint32_t method, bool json)
{
	struct hgsync_result r;
	int ret = hgsync_to_host_by(s, guest, vcpu, clock, value, method, &r);
	char why[300];

	/* A guest without an agent: the reason (no markers for local/perf) is said. */
	if (ret == -ENOENT && s->guests[guest].agentless)
		hgsync_no_map_reason(s, guest, clock, why, sizeof(why));
	else
		snprintf(why, sizeof(why), "%s", ret == -ENOENT ? "no mapping covers it" :
			 "a conversion it needs is missing");

	if (json) {
		/* vcpu: the guest CPU; vcpu_id: KVM's (sync.rst, "vCPU identity"). */
		printf("{\"guest\": %u, \"vcpu\": %d, \"vcpu_id\": %d, \"identity\": \"%s\", "
		       "\"clock\": \"%s\", \"guest_value\": %" PRIu64, guest, vcpu,
		       hgsync_guest_vcpu_id(s, guest, vcpu),
		       s->guests[guest].id_flags & HGSYNC_ID_MAP ? "map" : "assumed",
		       hgsync_clock_name(clock), value);
		struct hgsync_place p;

		if (ret) {
			printf(", \"error\": \"%s\"}\n", why);
			return;
		}
		if (r.bound_ns == HGSYNC_NO_BOUND)
			/* A value no stated bound covers: null, never a number. */
			printf(", \"host_value\": %" PRIu64 ", \"method\": \"%s\", \"bound_ns\": null"
			       ", \"host_cpu\": %d", r.host_value, hgsync_method_name(r.method),
			       r.host_cpu);
		else
			printf(", \"host_value\": %" PRIu64 ", \"method\": \"%s\", \"bound_ns\": %" PRIu64
			       ", \"host_cpu\": %d", r.host_value, hgsync_method_name(r.method),
			       r.bound_ns, r.host_cpu);
		/*
		 * Which session and VM mapped it (the guest's own id unless it
		 * was migrated or restored: sync.rst, "Migration and restore"),
		 * and the vCPU's host thread then.
		 */
		if (!r.host_tsc || hgsync_vcpu_place(s, r.guest_id, vcpu, r.host_tsc, &p))
			p.tid = -1;
		printf(", \"incarnation\": %u, \"vm_pid\": %d, \"host_tid\": %d}\n", r.guest_id,
		       s->guests[r.guest_id].vm.vm_pid, p.tid);
		return;
	}
	if (ret)
		printf("%d %" PRIu64 " -> none (%s)\n", vcpu, value, why);
	else if (r.bound_ns == HGSYNC_NO_BOUND)
		printf("%d %" PRIu64 " -> %" PRIu64 " %s unbounded host_cpu %d\n", vcpu,
		       value, r.host_value, hgsync_method_name(r.method), r.host_cpu);
	else
		printf("%d %" PRIu64 " -> %" PRIu64 " %s +-%" PRIu64 " ns host_cpu %d\n", vcpu,
		       value, r.host_value, hgsync_method_name(r.method), r.bound_ns, r.host_cpu);
}

/*
 * --markers: guest @guest's marker pairings from its trace.dat @path
 * (markpair.h), added to @s as merge adds them.  0 or an exit status.
 */
static int add_markers(struct hgsync *s, uint32_t guest, const char *path)
{
	const struct hgsync_guest *g = &s->guests[guest];
	struct hg_markpair_opts opts = {
		.vm_pid = g->vm.vm_pid > 0 ? g->vm.vm_pid : -1, .key = -1,
		.cpu_vcpu = g->nr_cpu_vcpu ? g->cpu_vcpu : NULL, .nr_cpu_vcpu = g->nr_cpu_vcpu,
	};
	struct hg_markpair_stats st;
	struct hg_markpair *pairs = NULL;
	struct tracecmd_input *h;
	size_t nr = 0;
	char err[300];
	int ret;

	h = hg_markpair_open(path, err, sizeof(err));
	if (!h) {
		hg_err("%s", err);
		return HGCLOCK_EXIT_BAD_INPUT;
	}
	ret = hg_markpair_collect(h, s, &opts, &pairs, &nr, &st);
	hg_trace_close(h);
	if (ret == -EINVAL) {
		hg_err("%s: trace clock '%s' cannot be mapped", path, st.clock_name);
		return HGCLOCK_EXIT_BAD_INPUT;
	}
	if (!ret && nr)
		ret = hgsync_add_markpairs(s, guest, pairs, nr);
	free(pairs);
	if (ret) {
		hg_err("%s: marker pairings: %s", path, strerror(-ret));
		return ret == -ENOMEM ? HGCLOCK_EXIT_FAILURE : HGCLOCK_EXIT_BAD_INPUT;
	}
	fprintf(stderr, "hgclock convert: %s: %llu marker pairings on '%s' from %llu markers\n",
		path, (unsigned long long)st.pairs, st.clock_name,
		(unsigned long long)st.markers);
	return 0;
}

static void convert_usage(FILE *out)
{
	fprintf(out,
		"usage: hgclock convert FILE [--guest ID] [--vcpu N] [--clock CLOCK] [--json]\n"
		"                       [--method auto|kvm-exact|exit|probe|marker] [--recompute]\n"
		"                       [--markers GUEST.dat] [VALUE...]\n"
		"Converts guest clock VALUEs (read on guest CPU N of guest ID, default 0\n"
		"and 0; N is the CPU the guest's trace shows, not KVM's vcpu_id)\n"
		"to the host's same clock with the mapping in FILE.  CLOCK: local (ftrace's\n"
		"default, sched_clock; the default), perf (local_clock) or x86-tsc.\n"
		"Without VALUEs, reads \"VCPU VALUE\" lines from standard input.  Prints\n"
		"the host value, the method, the error bound and the host CPU.\n"
		"--method uses one method only (default: the best available).\n"
		"--recompute ignores the mapping stored in FILE and computes it again.\n"
		"--markers GUEST.dat adds the 'hgclock pairmark' marker pairings of guest\n"
		"ID's trace.dat (method marker), as merge does.\n");
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
		{ "markers", required_argument, NULL, 'M' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const char *const stdout_path = "-";
	uint64_t guest = 0, vcpu = 0, value;
	uint32_t clock = HGSYNC_CLOCK_SCHED, method = 0;
	bool json = false;
	int flags = 0, c, ret;
	const void *buf;
	size_t len;
	struct hgsync s;
	const char *path, *markers = NULL, *ins[2];

	hg_trace_pool_init();
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
			if (!parse_u64(optarg, HGCOR_MAX_VCPU_ID - 1, &vcpu)) {
				hg_err("--vcpu wants a guest CPU number, not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'c':
			if (hgclock_clock_parse(optarg, &clock)) {
				hg_err("--clock wants " HGCLOCK_CLOCK_NAMES ", not '%s'", optarg);
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
				hg_err("--method wants auto, kvm-exact, exit, probe or marker, "
				       "not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			method = (uint32_t)hgsync_method_parse(optarg);
			break;
		case 'M':
			markers = optarg;
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
	ins[0] = path;
	ins[1] = markers;
	ret = hg_check_outputs(ins, markers ? 2 : 1, &stdout_path, 1);
	if (!ret && markers)
		ret = hg_check_input(markers);
	if (ret)
		return ret;
	ret = hg_load_sync(path, flags, &s, &buf, &len);
	if (ret)
		return ret;
	if (!hgsync_guest_known(&s, guest)) {
		hg_err("%s: no guest %" PRIu64 " in this file", path, guest);
		ret = HGCLOCK_EXIT_BAD_INPUT;
		goto out;
	}
	if (markers) {
		ret = add_markers(&s, (uint32_t)guest, markers);
		if (ret)
			goto out;
	}
	{
		char note[512];

		if (hgsync_identity_note(&s, (uint32_t)guest, note, sizeof(note)))
			hg_err("%s: guest %" PRIu64 ": %s", path, guest, note);
	}
	if (optind < argc) {
		for (int i = optind; i < argc; i++) {
			parse_u64(argv[i], UINT64_MAX, &value);
			print_one(&s, (uint32_t)guest, (int)vcpu, clock, value, method, json);
		}
	} else {
		/* The arguments' strictness, on lines of any length (vcpu_lines.h). */
		struct hg_line_reader lr = { .in = stdin };
		uint64_t v, x;

		while ((ret = hg_read_vcpu_value(&lr, HGCOR_MAX_VCPU_ID - 1, &v, &x)) > 0)
			print_one(&s, (uint32_t)guest, (int)v, clock, x, method, json);
		hg_line_reader_free(&lr);
		if (ret == -EINVAL) {
			hg_err("stdin line %lu: want \"VCPU VALUE\" (unsigned decimal, VCPU at most "
			       "%d, nothing else)", lr.lineno, HGCOR_MAX_VCPU_ID - 1);
			ret = HGCLOCK_EXIT_BAD_INPUT;
			goto out;
		} else if (ret < 0) {
			hg_err("standard input: %s", strerror(-ret));
			ret = HGCLOCK_EXIT_FAILURE;
			goto out;
		}
	}
	ret = HGCLOCK_EXIT_OK;
out:
	hgsync_free(&s);
	hg_unmap_file(buf, len);
	return ret;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock merge CORR [HOST.dat [GUEST.dat...]] [--host F] [--guest [ID=]F]...
 *               [-o TEXT] [--json FILE] [--no-text] [--method M] [--recompute]
 *               [--progress|--no-progress] [--quiet]
 *
 * One timeline from a host's and its guests' trace.dat files: every guest
 * event in host time through the correlation file's mapping, tagged with
 * its vCPU, the host CPU and thread that ran it and the mapping's bound.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "libhgclock.h"
#include "merge.h"

static void merge_usage(FILE *out)
{
	fprintf(out,
		"usage: hgclock merge CORR [HOST.dat [GUEST.dat...]] [--host FILE]\n"
		"                     [--guest [ID=]FILE]... [-o FILE] [--json FILE] [--no-text]\n"
		"                     [--method auto|kvm-exact|probe] [--recompute]\n"
		"                     [--progress|--no-progress] [--quiet]\n"
		"Merges trace-cmd trace.dat files of a host and its guests into one timeline\n"
		"in the host's clock, with the mapping in the correlation file CORR (from\n"
		"hgclock record).  After CORR: the host's file, then guest 0's, guest 1's...\n"
		"  --host FILE         the host's trace.dat\n"
		"  --guest [ID=]FILE   guest ID's trace.dat (ID: its number in CORR; default\n"
		"                      the next one)\n"
		"  -o, --output FILE   the text timeline (default: standard output)\n"
		"  --json FILE         a Chrome/Perfetto JSON trace (ui.perfetto.dev)\n"
		"  --no-text           no text timeline\n"
		"  --method M          auto (default: the best), kvm-exact or probe only\n"
		"  --recompute         ignore the mapping stored in CORR, compute it again\n"
		"  --progress          a progress line on standard error (default on a tty)\n"
		"  --quiet             no summary on standard error\n"
		"Guest lines carry \"gG vV hHHH\" (guest, vCPU, host CPU) and, at the end,\n"
		"{tid T, +-B ns, METHOD}: the vCPU's host thread, the error bound, the method.\n"
		"Events no mapping covers are kept and marked UNMAPPED.\n");
}

static int add_guest(struct hgm *m, const char *spec, int *next_id, char *err, size_t len)
{
	const char *eq = strchr(spec, '=');
	uint64_t id = (uint64_t)*next_id;

	if (eq) {
		char num[16];
		size_t n = (size_t)(eq - spec);

		if (n == 0 || n >= sizeof(num)) {
			snprintf(err, len, "--guest %s: want [ID=]FILE", spec);
			return -1;
		}
		memcpy(num, spec, n);
		num[n] = '\0';
		if (parse_u64(num, HGSYNC_MAX_GUESTS - 1, &id))
			spec = eq + 1;
		else
			id = (uint64_t)*next_id;	/* a file name with '=' in it */
	}
	*next_id = (int)id + 1;
	return hgm_add_input(m, spec, (int)id, err, len);
}

int cmd_merge(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "host", required_argument, NULL, 'H' },
		{ "guest", required_argument, NULL, 'g' },
		{ "output", required_argument, NULL, 'o' },
		{ "json", required_argument, NULL, 'j' },
		{ "no-text", no_argument, NULL, 'T' },
		{ "method", required_argument, NULL, 'm' },
		{ "recompute", no_argument, NULL, 'r' },
		{ "progress", no_argument, NULL, 'p' },
		{ "no-progress", no_argument, NULL, 'P' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	struct hgm m = { 0 };
	struct hgm_options mo = { 0 };
	struct hgm_text text = { 0 };
	struct hgm_json json;
	struct hgm_outputs outs = { 0 };
	struct hgsync s;
	const char *out_path = "-", *json_path = NULL, *corr;
	const char *host_path = NULL;
	const char *guest_specs[HGSYNC_MAX_GUESTS];
	int nr_guest_specs = 0, next_guest = 0, progress = -1, c, ret;
	bool no_text = false, quiet = false, recompute = false;
	FILE *tout = NULL, *jout = NULL;
	const void *buf = NULL;
	size_t len = 0, pos = 0;
	char err[512];

	while ((c = getopt_long(argc, argv, "o:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'H':
			host_path = optarg;
			break;
		case 'g':
			if (nr_guest_specs == HGSYNC_MAX_GUESTS) {
				hg_err("too many guests");
				return HGCLOCK_EXIT_USAGE;
			}
			guest_specs[nr_guest_specs++] = optarg;
			break;
		case 'o':
			out_path = optarg;
			break;
		case 'j':
			json_path = optarg;
			break;
		case 'T':
			no_text = true;
			break;
		case 'm':
			if (!strcmp(optarg, "auto")) {
				mo.method = 0;
			} else if (!strcmp(optarg, "kvm-exact")) {
				mo.method = HGCOR_METHOD_KVM_EXACT;
			} else if (!strcmp(optarg, "probe")) {
				mo.method = HGCOR_METHOD_PROBE;
			} else {
				hg_err("--method: auto, kvm-exact or probe, not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'r':
			recompute = true;
			break;
		case 'p':
			progress = 1;
			break;
		case 'P':
			progress = 0;
			break;
		case 'q':
			quiet = true;
			break;
		case 'h':
			merge_usage(stdout);
			return HGCLOCK_EXIT_OK;
		default:
			merge_usage(stderr);
			return HGCLOCK_EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		merge_usage(stderr);
		return HGCLOCK_EXIT_USAGE;
	}
	corr = argv[optind++];
	if (optind < argc && !host_path)
		host_path = argv[optind++];
	if (!host_path && !nr_guest_specs && optind >= argc) {
		hg_err("no trace.dat to merge: give the host's and the guests' files");
		return HGCLOCK_EXIT_USAGE;
	}
	if (no_text && !json_path) {
		hg_err("--no-text without --json: nothing to write");
		return HGCLOCK_EXIT_USAGE;
	}

	/* The correlation file first: its errors are the cheapest to find. */
	ret = hg_map_file(corr, &buf, &len);
	if (ret)
		return ret;
	ret = hgsync_load(&s, buf, len, recompute ? HGSYNC_IGNORE_SEGMENTS : 0, &pos);
	if (ret) {
		hg_err("%s: %s (at byte %zu)", corr,
		       ret == -ENOMEM ? strerror(ENOMEM) : hgcor_strerror(ret), pos);
		hg_unmap_file(buf, len);
		return ret == -ENOMEM ? HGCLOCK_EXIT_FAILURE : HGCLOCK_EXIT_BAD_INPUT;
	}
	if (!s.has_file_segments && hgsync_build(&s)) {
		hg_err("out of memory");
		ret = HGCLOCK_EXIT_FAILURE;
		goto out_sync;
	}

	ret = HGCLOCK_EXIT_BAD_INPUT;
	if (host_path && hgm_add_input(&m, host_path, -1, err, sizeof(err)))
		goto fail;
	for (; optind < argc; optind++)
		if (hgm_add_input(&m, argv[optind], next_guest++, err, sizeof(err)))
			goto fail;
	for (int i = 0; i < nr_guest_specs; i++)
		if (add_guest(&m, guest_specs[i], &next_guest, err, sizeof(err)))
			goto fail;
	mo.progress = progress < 0 ? isatty(STDERR_FILENO) : progress;
	if (hgm_start(&m, &s, &mo, err, sizeof(err)))
		goto fail;

	ret = HGCLOCK_EXIT_FAILURE;
	if (!no_text) {
		tout = strcmp(out_path, "-") ? fopen(out_path, "w") : stdout;
		if (!tout) {
			hg_err("%s: %s", out_path, strerror(errno));
			goto out;
		}
		setvbuf(tout, NULL, _IOFBF, 1 << 20);
		if (hgm_text_init(&text, tout)) {
			hg_err("out of memory");
			goto out;
		}
		outs.text = &text;
	}
	if (json_path) {
		jout = strcmp(json_path, "-") ? fopen(json_path, "w") : stdout;
		if (!jout) {
			hg_err("%s: %s", json_path, strerror(errno));
			goto out;
		}
		setvbuf(jout, NULL, _IOFBF, 1 << 20);
		if (hgm_json_begin(&json, jout, &m)) {
			hg_err("out of memory");
			goto out;
		}
		outs.json = &json;
	}
	if (hgm_run(&m, hgm_outputs_event, &outs) || (outs.json && hgm_json_end(&json))) {
		hg_err("writing the output: %s", strerror(errno));
		goto out;
	}
	outs.json = NULL;
	if ((tout && fflush(tout)) || (jout && fflush(jout))) {
		hg_err("writing the output: %s", strerror(errno));
		goto out;
	}
	if (!quiet) {
		fprintf(stderr, "hgclock merge: %" PRIu64 " events", m.nr_events);
		for (int i = 0; i < m.nr_in; i++) {
			const struct hgm_input *in = &m.in[i];

			if (in->guest < 0)
				fprintf(stderr, "; host %" PRIu64, in->nr_events);
			else
				fprintf(stderr, "; guest %d %" PRIu64 " (%" PRIu64 " unmapped, %" PRIu64
					" without host CPU)", in->guest, in->nr_events, in->nr_unmapped,
					in->nr_no_cpu);
			if (in->nr_dropped)
				fprintf(stderr, " [%" PRIu64 " dropped by ftrace]", in->nr_dropped);
		}
		fprintf(stderr, "; mapped by kvm-exact %" PRIu64 ", probe %" PRIu64,
			m.by_method[HGCOR_METHOD_KVM_EXACT], m.by_method[HGCOR_METHOD_PROBE]);
		if (m.by_method[HGCOR_METHOD_KVM_EXACT] || m.by_method[HGCOR_METHOD_PROBE])
			fprintf(stderr, "; max bound %" PRIu64 " ns", m.max_bound_ns);
		fprintf(stderr, "\n");
	}
	ret = HGCLOCK_EXIT_OK;
	goto out;
fail:
	hg_err("%s", err);
out:
	if (outs.json)
		hgm_json_end(&json);
	hgm_text_free(&text);
	if (tout && tout != stdout && fclose(tout) && ret == HGCLOCK_EXIT_OK) {
		hg_err("%s: %s", out_path, strerror(errno));
		ret = HGCLOCK_EXIT_FAILURE;
	}
	if (jout && jout != stdout && fclose(jout) && ret == HGCLOCK_EXIT_OK) {
		hg_err("%s: %s", json_path, strerror(errno));
		ret = HGCLOCK_EXIT_FAILURE;
	}
	hgm_close(&m);
out_sync:
	hgsync_free(&s);
	hg_unmap_file(buf, len);
	return ret;
}

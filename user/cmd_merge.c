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
		"                     [--method auto|kvm-exact|exit|probe] [--recompute] [--threads N]\n"
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
		"  --threads N         decode and format on N threads (default: the CPUs, <= 8)\n"
		"  --progress          a progress line on standard error (default on a tty)\n"
		"  --quiet             no summary on standard error\n"
		"Guest lines carry \"gG vV hHHH\" (guest, vCPU, host CPU) and, at the end,\n"
		"{tid T, +-B ns, METHOD}: the vCPU's host thread, the error bound, the method.\n"
		"Events no mapping covers are kept and marked UNMAPPED.\n");
}

/* "[ID=]FILE": the guest's id in the correlation (default: the next one). */
static void guest_spec(const char *spec, int *next_id, struct hgm_input_spec *in)
{
	const char *eq = strchr(spec, '=');
	uint64_t id = (uint64_t)*next_id;
	char num[16];

	in->path = spec;
	if (eq && (size_t)(eq - spec) < sizeof(num) && eq > spec) {
		memcpy(num, spec, (size_t)(eq - spec));
		num[eq - spec] = '\0';
		/* Not a number: a file name with '=' in it. */
		if (parse_u64(num, HGSYNC_MAX_GUESTS - 1, &id))
			in->path = eq + 1;
		else
			id = (uint64_t)*next_id;
	}
	in->guest = (int)id;
	*next_id = (int)id + 1;
}

static void summary(const struct hgm_par_result *r)
{
	fprintf(stderr, "hgclock merge: %" PRIu64 " events", r->nr_events);
	for (int i = 0; i < r->nr_in; i++) {
		if (r->in[i].guest < 0)
			fprintf(stderr, "; host %" PRIu64, r->in[i].nr_events);
		else
			fprintf(stderr, "; guest %d %" PRIu64 " (%" PRIu64 " unmapped, %" PRIu64
				" without host CPU)", r->in[i].guest, r->in[i].nr_events,
				r->in[i].nr_unmapped, r->in[i].nr_no_cpu);
		if (r->in[i].nr_dropped)
			fprintf(stderr, " [%" PRIu64 " dropped by ftrace]", r->in[i].nr_dropped);
	}
	fprintf(stderr, "; mapped by kvm-exact %" PRIu64 ", exit %" PRIu64 ", probe %" PRIu64,
		r->by_method[HGCOR_METHOD_KVM_EXACT], r->by_method[HGCOR_METHOD_EXIT],
		r->by_method[HGCOR_METHOD_PROBE]);
	if (r->by_method[HGCOR_METHOD_KVM_EXACT] || r->by_method[HGCOR_METHOD_PROBE] ||
	    r->by_method[HGCOR_METHOD_EXIT])
		fprintf(stderr, "; max bound %" PRIu64 " ns", r->max_bound_ns);
	fprintf(stderr, "\n");
}

/* One thread: the engine and the outputs directly. */
static int merge_one_thread(const struct hgm_par *par, struct hgm_par_result *res, char *err,
			    size_t err_len)
{
	struct hgm m = { 0 };
	struct hgm_text text = { 0 };
	struct hgm_json json;
	struct hgm_outputs outs = { 0 };
	struct hgm_options opt = par->opt;
	int ret = HGM_E_SYSTEM;

	opt.progress = par->progress;
	for (int i = 0; i < par->nr_inputs; i++) {
		ret = hgm_add_input(&m, par->inputs[i].path, par->inputs[i].guest, err, err_len);
		if (ret)
			goto out;
	}
	ret = hgm_start(&m, par->sync, &opt, err, err_len);
	if (ret)
		goto out;
	ret = HGM_E_SYSTEM;
	if (par->text) {
		if (hgm_text_init(&text, par->text))
			goto nomem;
		outs.text = &text;
	}
	if (par->json) {
		if (hgm_json_begin(&json, par->json, &m))
			goto nomem;
		outs.json = &json;
	}
	if (hgm_run(&m, hgm_outputs_event, &outs) || (outs.json && hgm_json_end(&json))) {
		outs.json = NULL;
		snprintf(err, err_len, "writing the output: %s", strerror(errno));
		goto out;
	}
	outs.json = NULL;
	memset(res, 0, sizeof(*res));
	res->nr_events = m.nr_events;
	memcpy(res->by_method, m.by_method, sizeof(res->by_method));
	res->max_bound_ns = m.max_bound_ns;
	res->nr_in = m.nr_in;
	for (int i = 0; i < m.nr_in; i++) {
		res->in[i].guest = m.in[i].guest;
		res->in[i].nr_events = m.in[i].nr_events;
		res->in[i].nr_unmapped = m.in[i].nr_unmapped;
		res->in[i].nr_no_cpu = m.in[i].nr_no_cpu;
		res->in[i].nr_dropped = m.in[i].nr_dropped;
	}
	ret = 0;
	goto out;
nomem:
	snprintf(err, err_len, "out of memory");
out:
	if (outs.json)
		hgm_json_end(&json);
	hgm_text_free(&text);
	hgm_close(&m);
	return ret;
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
		{ "threads", required_argument, NULL, 't' },
		{ "progress", no_argument, NULL, 'p' },
		{ "no-progress", no_argument, NULL, 'P' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	struct hgm_input_spec inputs[HGM_MAX_INPUTS];
	const char *guest_specs[HGSYNC_MAX_GUESTS];
	struct hgm_par par = { 0 };
	struct hgm_par_result res;
	struct hgsync s;
	const char *out_path = "-", *json_path = NULL, *corr, *host_path = NULL;
	int nr_guest_specs = 0, next_guest = 0, progress = -1, c, ret, rc;
	bool no_text = false, quiet = false, recompute = false;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t threads = ncpu > 8 ? 8 : ncpu > 0 ? (uint64_t)ncpu : 1;
	FILE *tout = NULL, *jout = NULL;
	const void *buf = NULL;
	size_t len = 0;
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
			if (hgsync_method_parse(optarg) < 0) {
				hg_err("--method: auto, kvm-exact, exit or probe, not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			par.opt.method = (uint32_t)hgsync_method_parse(optarg);
			break;
		case 'r':
			recompute = true;
			break;
		case 't':
			if (!parse_u64(optarg, 256, &threads) || !threads) {
				hg_err("--threads: 1 to 256, not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
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
	if (host_path)
		inputs[par.nr_inputs++] = (struct hgm_input_spec){ host_path, -1 };
	for (; optind < argc; optind++) {
		if (par.nr_inputs == HGM_MAX_INPUTS) {
			hg_err("too many inputs");
			return HGCLOCK_EXIT_USAGE;
		}
		inputs[par.nr_inputs++] = (struct hgm_input_spec){ argv[optind], next_guest++ };
	}
	for (int i = 0; i < nr_guest_specs; i++) {
		if (par.nr_inputs == HGM_MAX_INPUTS) {
			hg_err("too many inputs");
			return HGCLOCK_EXIT_USAGE;
		}
		guest_spec(guest_specs[i], &next_guest, &inputs[par.nr_inputs++]);
	}
	if (!par.nr_inputs) {
		hg_err("no trace.dat to merge: give the host's and the guests' files");
		return HGCLOCK_EXIT_USAGE;
	}
	if (no_text && !json_path) {
		hg_err("--no-text without --json: nothing to write");
		return HGCLOCK_EXIT_USAGE;
	}

	/* The correlation file first: its errors are the cheapest to find. */
	ret = hg_load_sync(corr, recompute ? HGSYNC_IGNORE_SEGMENTS : 0, &s, &buf, &len);
	if (ret)
		return ret;
	ret = HGCLOCK_EXIT_FAILURE;
	/* Inputs are checked before any output file is created. */
	for (int i = 0; i < par.nr_inputs; i++)
		if (access(inputs[i].path, R_OK)) {
			hg_err("%s: %s", inputs[i].path, strerror(errno));
			ret = HGCLOCK_EXIT_BAD_INPUT;
			goto out;
		}
	if (!no_text) {
		tout = strcmp(out_path, "-") ? fopen(out_path, "w") : stdout;
		if (!tout) {
			hg_err("%s: %s", out_path, strerror(errno));
			goto out;
		}
		setvbuf(tout, NULL, _IOFBF, 1 << 20);
	}
	if (json_path) {
		jout = strcmp(json_path, "-") ? fopen(json_path, "w") : stdout;
		if (!jout) {
			hg_err("%s: %s", json_path, strerror(errno));
			goto out;
		}
		setvbuf(jout, NULL, _IOFBF, 1 << 20);
	}
	par.sync = &s;
	par.inputs = inputs;
	par.nr_threads = (int)threads;
	par.text = tout;
	par.json = jout;
	par.progress = progress < 0 ? isatty(STDERR_FILENO) : progress;
	rc = threads > 1 ? hgm_par_run(&par, &res, err, sizeof(err)) :
			   merge_one_thread(&par, &res, err, sizeof(err));
	if (rc) {
		hg_err("%s", err);
		/* Unreadable inputs are the user's; memory and failed writes ours. */
		ret = rc == HGM_E_SYSTEM ? HGCLOCK_EXIT_FAILURE : HGCLOCK_EXIT_BAD_INPUT;
		goto out;
	}
	if ((tout && fflush(tout)) || (jout && fflush(jout))) {
		hg_err("writing the output: %s", strerror(errno));
		goto out;
	}
	if (!quiet)
		summary(&res);
	ret = HGCLOCK_EXIT_OK;
out:
	if (tout && tout != stdout && fclose(tout) && ret == HGCLOCK_EXIT_OK) {
		hg_err("%s: %s", out_path, strerror(errno));
		ret = HGCLOCK_EXIT_FAILURE;
	}
	if (jout && jout != stdout && fclose(jout) && ret == HGCLOCK_EXIT_OK) {
		hg_err("%s: %s", json_path, strerror(errno));
		ret = HGCLOCK_EXIT_FAILURE;
	}
	hgsync_free(&s);
	hg_unmap_file(buf, len);
	return ret;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock merge CORR [HOST.dat [GUEST.dat...]] [--host F] [--guest [ID=]F]...
 *               [-o TEXT] [--json FILE] [--no-text] [--method M] [--recompute]
 *               [--progress|--no-progress] [--quiet] [--force]
 *
 * One timeline from a host's and its guests' trace.dat files: every guest
 * event in host time through the correlation file's mapping, tagged with
 * its vCPU, the host CPU and thread that ran it and the mapping's bound.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <trace-cmd.h>

#include "cmd.h"
#include "appev.h"
#include "corr.h"
#include "libhgclock.h"
#include "markpair.h"
#include "analyze.h"
#include "merge.h"
#include "trace_pool.h"
#include "output.h"
#include "perf_in.h"
#include "tracecmd_priv.h"
#include "claims.h"

/*
 * Marker pairings (`hgclock pairmark` in the guest: sync.rst, "Guests
 * without the module") from guest trace @in joined with the host's
 * EXIT_HOST records of its VM, added to @s as the "marker" method.  Then,
 * for a guest recorded without an agent, what has no mapping is said:
 * local/perf without markers.  0, or an exit status (said).
 */
static int add_marker_pairs(struct hgsync *s, const char *corr,
			    const struct hgm_input_spec *in, bool quiet)
{
	const struct hgsync_guest *g = &s->guests[in->guest];
	struct hg_markpair_opts opts = {
		.vm_pid = g->vm.vm_pid > 0 ? g->vm.vm_pid : -1, .key = -1,
		.cpu_vcpu = g->nr_cpu_vcpu ? g->cpu_vcpu : NULL, .nr_cpu_vcpu = g->nr_cpu_vcpu,
	};
	struct hg_markpair_stats st;
	struct tracecmd_input *h;
	struct hg_markpair *pairs = NULL;
	size_t nr = 0;
	char err[300];
	int ret;

	h = hg_markpair_open(in->path, err, sizeof(err));
	if (!h) {
		hg_err("%s", err);
		return HGCLOCK_EXIT_BAD_INPUT;
	}
	ret = hg_markpair_collect(h, s, &opts, &pairs, &nr, &st);
	hg_trace_keep(h);	/* the merge reads it again */
	if (ret == -EINVAL)		/* a clock merge refuses itself, later */
		return 0;
	if (!ret && nr)
		ret = hgsync_add_markpairs(s, (uint32_t)in->guest, pairs, nr);
	free(pairs);
	if (ret) {
		hg_err("%s: marker pairings: %s", in->path, strerror(-ret));
		return ret == -ENOMEM ? HGCLOCK_EXIT_FAILURE : HGCLOCK_EXIT_BAD_INPUT;
	}
	if (st.markers && !quiet)
		fprintf(stderr, "hgclock merge: %s: guest %d: %llu marker pairings from %llu "
			"markers (%llu without their host exit, %llu malformed, %llu dropped "
			"otherwise)\n", in->path, in->guest, (unsigned long long)st.pairs,
			(unsigned long long)st.markers, (unsigned long long)st.no_exit,
			(unsigned long long)st.malformed,
			(unsigned long long)(st.out_of_range + st.duplicate + st.no_begin +
					     st.no_end + st.cross_cpu + st.reversed + st.too_wide +
					     st.ambiguous_exit + st.bad_exit + st.vcpu_mismatch));
	if (g->agentless && st.guest_clock != HGSYNC_CLOCK_TSC && !g->nr_mpairs) {
		char why[300];

		hg_err("%s: %s: its events stay unmapped", corr,
		       hgsync_no_map_reason(s, (uint32_t)in->guest, st.guest_clock, why,
					    sizeof(why)));
	}
	return 0;
}

static void merge_usage(FILE *out)
{
	fprintf(out,
		"usage: hgclock merge CORR [HOST.dat [GUEST.dat...]] [--host FILE]\n"
		"                     [--guest [ID=]FILE]... [--app FILE]... [--guest-app [ID=]FILE]...\n"
		"                     [--perf FILE]... [--guest-perf [ID=]FILE]... [--report FILE]\n"
		"                     [--sort KEYS] [--analyze FILE] [--analyze-json FILE]\n"
		"                     [--analyze-slice BEGIN,END] [--analyze-svg FILE]\n"
		"                     [-o FILE] [--json FILE] [--dat FILE] [--perfetto FILE]\n"
		"                     [--no-text]\n"
		"                     [--method auto|kvm-exact|exit|probe|marker] [--recompute]\n"
		"                     [--threads N] [--from TIME] [--to TIME] [--guests LIST]\n"
		"                     [--vcpus LIST] [--events LIST]...\n"
		"                     [--progress|--no-progress] [--quiet] [--force]\n"
		"Merges trace-cmd trace.dat files of a host and its guests into one timeline\n"
		"in the host's clock, with the mapping in the correlation file CORR (from\n"
		"hgclock record).  After CORR: the host's file, then guest 0's, guest 1's...\n"
		"  --host FILE         the host's trace.dat\n"
		"  --guest [ID=]FILE   guest ID's trace.dat (ID: its number in CORR; default\n"
		"                      the next one)\n"
		"  --app FILE          a host application's events (hgclock_events_open(3))\n"
		"  --guest-app [ID=]FILE  an application's events in guest ID (default 0)\n"
		"  --perf FILE         the host's perf record samples (perf.data, or perf script\n"
		"                      -F comm,tid,cpu,time,event,ip,sym,dso --ns output)\n"
		"  --guest-perf [ID=]FILE  guest ID's perf samples (best: that perf script output,\n"
		"                      made in the guest, where its symbols are)\n"
		"  --report FILE       the perf samples counted by --sort's keys into FILE\n"
		"  --sort KEYS         of guest,pcpu,vcpu,comm,sym,dso (default\n"
		"                      guest,pcpu,vcpu,comm,sym); pcpu: the host CPU that ran\n"
		"                      the vCPU when a guest sample was taken\n"
		"  --analyze FILE      where each guest thread's and vCPU's time went (guest\n"
		"                      mode, exits by reason, preempted on the host and by\n"
		"                      whom, halted) into FILE; --analyze-json FILE: as JSON;\n"
		"                      with --guest-app files, each begin/end request too\n"
		"                      (the slowest, percentiles per component)\n"
		"  --analyze-svg FILE  the same as a picture (SVG): a stacked bar per guest\n"
		"                      thread, the 20 that ran longest; and per request\n"
		"  --analyze-slice BEGIN,END  requests from two guest trace events too\n"
		"                      ([system:]name, e.g. raw_syscalls:sys_enter,\n"
		"                      raw_syscalls:sys_exit), on the event's thread\n"
		"  -o, --output FILE   the text timeline (default: standard output)\n"
		"  --json FILE         a Chrome/Perfetto JSON trace (ui.perfetto.dev)\n"
		"  --no-text           no text timeline\n"
		"  --dat FILE          trace.dat files for trace-cmd report and KernelShark:\n"
		"                      FILE for the host, STEM-gG.dat for guest G, guest\n"
		"                      events stamped in host time\n"
		"  --perfetto FILE     a Perfetto trace (protobuf): a machine per VM, vCPU runs\n"
		"                      on the host CPUs, guest events nested under them; with\n"
		"                      --analyze*, a track per guest thread with its exits and\n"
		"                      host preemptions (a flow to the task that ran instead)\n"
		"  --method M          auto (default: the best), kvm-exact, exit, probe or marker\n"
		"                      only (marker: 'hgclock pairmark' markers in a guest trace)\n"
		"  --recompute         ignore the mapping stored in CORR, compute it again\n"
		"  --threads N         decode and format on N threads (default: the CPUs, <= 8;\n"
		"                      1 without a trace.dat)\n"
		"  --progress          a progress line on standard error (default on a tty)\n"
		"  --quiet             no summary on standard error\n"
		"  --from TIME, --to TIME  only the events in this window of host time\n"
		"                      (SECONDS[.FRACTION] as the lines print it; a TSC count\n"
		"                      on x86-tsc); the merge stops reading after --to\n"
		"  --guests LIST       only these machines' events: guest numbers, ranges N-M\n"
		"                      and 'host' (e.g. host,0); the others are not read\n"
		"  --vcpus LIST        of the guests, only these CPUs (the V of \"vV\")\n"
		"  --events LIST       only these events, as trace-cmd record -e names them:\n"
		"                      SYSTEM, EVENT, SYSTEM:EVENT, globs, 'all'; app:NAME and\n"
		"                      perf:EVENT for application events and perf samples\n"
		"  --force             merge inputs that do not look like they belong together\n"
		"                      (a host trace recorded elsewhere, one file given twice,\n"
		"                      a guest trace recorded on another guest)\n"
		"Guest lines carry \"gG vV hHHH\" (guest, vCPU, host CPU) and, at the end,\n"
		"{tid T, +-B ns, METHOD}: the vCPU's host thread, the error bound, the method.\n"
		"Events no mapping covers are kept and marked UNMAPPED.  No output may be an\n"
		"input; each is written to a temporary file renamed into place at the end.\n");
}

/*
 * "[ID=]FILE": the guest's id in the correlation (default: the next one).
 * record --merge-guest reads its arguments with this too (merge.h).
 */
void hgm_guest_spec(const char *spec, int *next_id, struct hgm_input_spec *in)
{
	const char *eq = strchr(spec, '=');
	uint64_t id = (uint64_t)*next_id;
	char num[16];

	/* All of it: callers fill arrays on the stack (open_path was left unset). */
	memset(in, 0, sizeof(*in));
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
	if (r->filtered)
		fprintf(stderr, " shown (%" PRIu64 " more read and left out by the filter)",
			r->nr_filtered);
	for (int i = 0; i < r->nr_in; i++) {
		const char *what = r->in[i].perf ? "perf" : "app";

		if (r->in[i].app && r->in[i].guest < 0)
			fprintf(stderr, "; host %s %" PRIu64, what, r->in[i].nr_events);
		else if (r->in[i].app)
			fprintf(stderr, "; guest %d %s %" PRIu64 " (%" PRIu64 " unmapped, %" PRIu64
				" without host CPU)", r->in[i].guest, what, r->in[i].nr_events,
				r->in[i].nr_unmapped, r->in[i].nr_no_cpu);
		else if (r->in[i].guest < 0)
			fprintf(stderr, "; host%s%s %" PRIu64, r->in[i].buffer[0] ? " buffer " : "",
				r->in[i].buffer, r->in[i].nr_events);
		else
			fprintf(stderr, "; guest %d%s%s %" PRIu64 " (%" PRIu64 " unmapped, %" PRIu64
				" without host CPU)", r->in[i].guest,
				r->in[i].buffer[0] ? " buffer " : "", r->in[i].buffer,
				r->in[i].nr_events, r->in[i].nr_unmapped, r->in[i].nr_no_cpu);
		if (r->in[i].nr_dropped)
			fprintf(stderr, " [%" PRIu64 " dropped by ftrace]", r->in[i].nr_dropped);
	}
	fprintf(stderr, "; mapped by kvm-exact %" PRIu64 ", exit %" PRIu64 ", probe %" PRIu64,
		r->by_method[HGCOR_METHOD_KVM_EXACT], r->by_method[HGCOR_METHOD_EXIT],
		r->by_method[HGCOR_METHOD_PROBE]);
	if (r->by_method[HGSYNC_METHOD_MARKER])
		fprintf(stderr, ", marker %" PRIu64, r->by_method[HGSYNC_METHOD_MARKER]);
	if (r->by_method[HGCOR_METHOD_KVM_EXACT] || r->by_method[HGCOR_METHOD_PROBE] ||
	    r->by_method[HGCOR_METHOD_EXIT] || r->by_method[HGSYNC_METHOD_MARKER])
		fprintf(stderr, "; max bound %" PRIu64 " ns", r->max_bound_ns);
	fprintf(stderr, "\n");
}

/*
 * What --dat wrote, and the command that shows it.  Events it could not
 * write are said even with --quiet: they are missing from those files.
 */
static void dat_summary(const char *path, const struct hgm_dat_result *r, bool quiet)
{
	char name[PATH_MAX];

	if (r->nr_unmapped || r->nr_app)
		hg_err("warning: --dat: %" PRIu64 " unmapped guest events (no host time) and %"
		       PRIu64 " application events and perf samples (no event format) are "
		       "not in the trace.dat files; the text and JSON outputs have them",
		       r->nr_unmapped, r->nr_app);
	if (r->nr_marks_left)
		hg_err("warning: --dat: %" PRIu64 " disruption marks are not in the trace.dat "
		       "files (no host file, or its trace has no ftrace print event); the "
		       "text and JSON outputs have them", r->nr_marks_left);
	if (quiet)
		return;
	fprintf(stderr, "hgclock merge: trace.dat:");
	for (int i = 0; i < r->nr_files; i++) {
		hgm_dat_path(path, r->files[i].guest, name, sizeof(name));
		fprintf(stderr, "%s %s (%" PRIu64 " events", i ? "," : "", name,
			r->files[i].nr_events);
		if (r->files[i].guest < 0 && r->nr_marks)
			fprintf(stderr, ", %" PRIu64 " of them disruption marks", r->nr_marks);
		fprintf(stderr, ")");
	}
	fprintf(stderr, "\nhgclock merge: view with: trace-cmd report");
	for (int i = 0; i < r->nr_files; i++) {
		hgm_dat_path(path, r->files[i].guest, name, sizeof(name));
		fprintf(stderr, " -i %s", name);
	}
	fprintf(stderr, "\n");
}

/*
 * Each one opened, into place; a failure said.  An exit status; the
 * caller's exit path aborts what is left.
 */
static int analysis_commit(struct hg_output *text, struct hg_output *json, struct hg_output *svg)
{
	if ((text->path && hg_output_commit(text)) || (json->path && hg_output_commit(json)) ||
	    (svg->path && hg_output_commit(svg)))
		return HGCLOCK_EXIT_FAILURE;
	return HGCLOCK_EXIT_OK;
}

/* What --perfetto wrote; events it could not place are said even with --quiet. */
static void pf_summary(const char *path, const struct hgm_pf_result *r, bool quiet)
{
	if (r->nr_unmapped)
		hg_err("warning: --perfetto: %" PRIu64 " unmapped events (no host time) are not in "
		       "%s; the text and JSON outputs have them", r->nr_unmapped,
		       hg_output_name(path));
	if (r->nr_runs_clipped)
		hg_err("warning: --perfetto: %" PRIu64 " vCPU runs overlapped another on their "
		       "host CPU: cut where the earlier ends", r->nr_runs_clipped);
	if (r->nr_an_uncertain_drawn)
		hg_err("warning: --perfetto: %" PRIu64 " guest thread slices with unbounded ends "
		       "had their exits drawn before that was known: marked there, not attributed "
		       "in --analyze's report", r->nr_an_uncertain_drawn);
	if (r->nr_an_overlap)
		hg_err("warning: --perfetto: %" PRIu64 " guest thread slices overlapped the thread's "
		       "previous one (lost switches): not drawn", r->nr_an_overlap);
	if (quiet)
		return;
	fprintf(stderr, "hgclock merge: Perfetto trace: %s (%" PRIu64 " events, %" PRIu64
		" vCPU runs, %" PRIu64 " bytes); open it in ui.perfetto.dev\n",
		hg_output_name(path), r->nr_events, r->nr_runs, r->bytes);
	if (r->nr_an_slices || r->nr_an_uncertain)
		fprintf(stderr, "hgclock merge: Perfetto trace: guest threads on the host: %" PRIu64
			" slices with %" PRIu64 " exits, preemptions and host sleeps, %" PRIu64
			" uncertain (within their bounds)\n", r->nr_an_slices, r->nr_an_pieces,
			r->nr_an_uncertain);
}

/* One thread: the engine and the outputs directly. */
static int merge_one_thread(const struct hgm_par *par, struct hgm_par_result *res, char *err,
			    size_t err_len)
{
	struct hgm m = { 0 };
	struct hgm_text text = { 0 };
	struct hgm_json json;
	struct hgm_outputs outs = { 0 };
	struct hgm_marks marks = { 0 };
	struct hgm_options opt = par->opt;
	int ret = HGM_E_SYSTEM;

	opt.progress = par->progress;
	for (int i = 0; i < par->nr_inputs; i++) {
		ret = hgm_add_spec(&m, &par->inputs[i], err, err_len);
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
	if (hgm_marks_build(&marks, &m))
		goto nomem;
	outs.marks = &marks;
	if (hgm_run(&m, hgm_outputs_event, &outs) ||
	    hgm_marks_until(&marks, UINT64_MAX, par->text, par->json) ||
	    (outs.json && hgm_json_end(&json))) {
		outs.json = NULL;
		snprintf(err, err_len, "writing the output: %s", strerror(errno));
		goto out;
	}
	outs.json = NULL;
	ret = hgm_read_error(&m, err, err_len);
	if (ret)
		goto out;
	hgm_result(&m, res);
	ret = 0;
	goto out;
nomem:
	snprintf(err, err_len, "out of memory");
out:
	if (outs.json)
		hgm_json_end(&json);
	hgm_marks_free(&marks);
	hgm_text_free(&text);
	hgm_close(&m);
	return ret;
}

/*
 * Starts decoding the perf inputs (perf_in.c) into @perf (one per input,
 * inited for the others), before the correlation file is loaded, so that
 * perf script runs while it is.  A start that fails is said by
 * convert_perf(), after what is checked before it.
 */
static void start_perf(struct hgm_input_spec *in, int n, struct hg_perf *perf)
{
	const char *tmpdir = getenv("TMPDIR");

	if (!tmpdir || !*tmpdir)
		tmpdir = "/tmp";
	for (int i = 0; i < n; i++) {
		hg_perf_init(&perf[i]);
		if (in[i].perf)
			hg_perf_start(&perf[i], in[i].path, tmpdir);
	}
}

/*
 * The perf inputs' application event files, as start_perf() began them:
 * their paths go to the inputs (open while @perf holds them; the caller
 * ends them after the merge).  A perf.data's host name is checked as a
 * trace's uname is; a guest's perf.data decoded here has the symbols of
 * this machine, which is said.  HGCLOCK_EXIT_OK, or an exit status (said).
 */
static int convert_perf(struct hgm_input_spec *in, int n, struct hg_perf *perf,
			const char *corr_host, bool force, bool quiet)
{
	for (int i = 0; i < n; i++) {
		const struct hg_perf_stats *st = &perf[i].st;
		char err[600];

		if (!in[i].perf)
			continue;
		if (hg_perf_finish(&perf[i], err, sizeof(err))) {
			hg_err("%s", err);
			return HGCLOCK_EXIT_BAD_INPUT;
		}
		in[i].open_path = perf[i].path;
		if (st->host[0] && corr_host[0] &&
		    (in[i].guest < 0) != !strcmp(st->host, corr_host)) {
			if (in[i].guest < 0)
				hg_err("%s%s: perf recorded it on '%s', but the correlation file's host "
				       "is '%s'%s", force ? "warning: " : "", in[i].path, st->host,
				       corr_host, force ? "" : " (--force merges anyway)");
			else
				hg_err("%s%s: perf recorded it on the correlation file's host '%s', "
				       "not in guest %d%s", force ? "warning: " : "", in[i].path,
				       st->host, in[i].guest, force ? "" : " (--force merges anyway)");
			if (!force)
				return HGCLOCK_EXIT_BAD_INPUT;
		}
		if (in[i].guest >= 0 && st->decoded && !quiet)
			hg_err("%s: a guest's perf.data decoded on this machine: its symbols are this "
			       "machine's, not the guest's (run perf script -F comm,tid,cpu,time,event,"
			       "ip,sym,dso --ns in the guest and give its output instead)", in[i].path);
		if (st->nr_bad || st->nr_unordered)
			hg_err("warning: %s: %" PRIu64 " lines not perf samples (first: %s), %" PRIu64
			       " samples earlier than their CPU's previous one: left out", in[i].path,
			       st->nr_bad, st->nr_bad ? st->first_bad : "-", st->nr_unordered);
		if (!st->nr_samples && !quiet)
			hg_err("%s: no samples", in[i].path);
	}
	return HGCLOCK_EXIT_OK;
}

/* merge's long options without a letter */
enum { OPT_FROM = 1000, OPT_TO, OPT_GUESTS, OPT_VCPUS, OPT_EVENTS, OPT_DAT, OPT_PERFETTO,
       OPT_ANALYZE, OPT_ANALYZE_JSON, OPT_ANALYZE_SLICE, OPT_ANALYZE_SVG };

int cmd_merge(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "host", required_argument, NULL, 'H' },
		{ "guest", required_argument, NULL, 'g' },
		{ "app", required_argument, NULL, 'a' },
		{ "guest-app", required_argument, NULL, 'A' },
		{ "perf", required_argument, NULL, 'e' },
		{ "guest-perf", required_argument, NULL, 'E' },
		{ "report", required_argument, NULL, 'R' },
		{ "sort", required_argument, NULL, 's' },
		{ "analyze", required_argument, NULL, OPT_ANALYZE },
		{ "analyze-json", required_argument, NULL, OPT_ANALYZE_JSON },
		{ "analyze-slice", required_argument, NULL, OPT_ANALYZE_SLICE },
		{ "analyze-svg", required_argument, NULL, OPT_ANALYZE_SVG },
		{ "output", required_argument, NULL, 'o' },
		{ "json", required_argument, NULL, 'j' },
		{ "no-text", no_argument, NULL, 'T' },
		{ "method", required_argument, NULL, 'm' },
		{ "recompute", no_argument, NULL, 'r' },
		{ "threads", required_argument, NULL, 't' },
		{ "progress", no_argument, NULL, 'p' },
		{ "no-progress", no_argument, NULL, 'P' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "force", no_argument, NULL, 'F' },
		{ "from", required_argument, NULL, OPT_FROM },
		{ "to", required_argument, NULL, OPT_TO },
		{ "guests", required_argument, NULL, OPT_GUESTS },
		{ "vcpus", required_argument, NULL, OPT_VCPUS },
		{ "events", required_argument, NULL, OPT_EVENTS },
		{ "dat", required_argument, NULL, OPT_DAT },
		{ "perfetto", required_argument, NULL, OPT_PERFETTO },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	static struct hgm_filter filter;	/* 2 KiB of vCPU bits: not on the stack */
	bool filtering = false;
	struct hgm_input_spec inputs[HGM_MAX_INPUTS];
	const char *guest_specs[HGSYNC_MAX_GUESTS];
	struct hgm_input_spec app_specs[HGM_MAX_APPS];
	int nr_app_specs = 0;
	struct hg_perf *perf = NULL;
	struct hgm_par par = { 0 };
	struct hgm_par_result res;
	struct hgsync s;
	const char *out_path = "-", *json_path = NULL, *corr, *host_path = NULL;
	int nr_guest_specs = 0, next_guest = 0, progress = -1, c, ret, rc;
	bool no_text = false, quiet = false, recompute = false, force = false;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t threads = ncpu > 8 ? 8 : ncpu > 0 ? (uint64_t)ncpu : 1;
	bool threads_given = false;
	struct hg_output to = { 0 }, jo = { 0 }, po = { 0 };
	const char *ins[1 + HGM_MAX_INPUTS], **outs = NULL;
	const char *dat_path = NULL, *pf_path = NULL;
	struct hgm_pf_result pres;
	char (*dat_names)[PATH_MAX] = NULL;
	int nr_outs = 7;
	struct hgm_dat_result *dres = NULL;
	const char *report_path = NULL, *sort_spec = "guest,pcpu,vcpu,comm,sym";
	struct hg_output ro = { 0 }, ao = { 0 }, ajo = { 0 }, aso = { 0 };
	const char *analyze_path = NULL, *analyze_json_path = NULL, *analyze_slice = NULL;
	const char *analyze_svg_path = NULL;
	struct hga_reports reports = { 0 };
	bool analysis, analysis_counts;
	int sort_keys[6], nr_sort_keys = 0;
	FILE *tout = NULL, *jout = NULL;
	const void *buf = NULL;
	size_t len = 0;
	char err[512];

	hg_trace_pool_init();
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
		case 'a':
		case 'A':
		case 'e':
		case 'E':
			if (nr_app_specs == HGM_MAX_APPS) {
				hg_err("too many application event and perf files (at most %d)",
				       HGM_MAX_APPS);
				return HGCLOCK_EXIT_USAGE;
			}
			if (c == 'a' || c == 'e') {
				app_specs[nr_app_specs] = (struct hgm_input_spec){ .path = optarg,
										   .guest = -1 };
			} else {
				int first = 0;

				hgm_guest_spec(optarg, &first, &app_specs[nr_app_specs]);
			}
			app_specs[nr_app_specs].app = true;
			app_specs[nr_app_specs].perf = c == 'e' || c == 'E';
			nr_app_specs++;
			break;
		case 'R':
			report_path = optarg;
			break;
		case 's':
			sort_spec = optarg;
			break;
		case OPT_ANALYZE:
			analyze_path = optarg;
			break;
		case OPT_ANALYZE_JSON:
			analyze_json_path = optarg;
			break;
		case OPT_ANALYZE_SLICE:
			analyze_slice = optarg;
			break;
		case OPT_ANALYZE_SVG:
			analyze_svg_path = optarg;
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
				hg_err("--method: auto, kvm-exact, exit, probe or marker, not '%s'",
				       optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			par.opt.method = (uint32_t)hgsync_method_parse(optarg);
			break;
		case 'r':
			recompute = true;
			break;
		case 't':
			threads_given = true;
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
		case 'F':
			force = true;
			break;
		case OPT_FROM:
		case OPT_TO:
		case OPT_GUESTS:
		case OPT_VCPUS:
		case OPT_EVENTS:
			if ((c == OPT_FROM && hgm_filter_parse_time(optarg, &filter.from, err,
								      sizeof(err))) ||
			    (c == OPT_TO && hgm_filter_parse_time(optarg, &filter.to, err,
								    sizeof(err))) ||
			    (c == OPT_GUESTS && hgm_filter_parse_guests(&filter, optarg, err,
									sizeof(err))) ||
			    (c == OPT_VCPUS && hgm_filter_parse_vcpus(&filter, optarg, err,
								      sizeof(err))) ||
			    (c == OPT_EVENTS && hgm_filter_parse_events(&filter, optarg, err,
									sizeof(err)))) {
				hg_err("%s", err);
				return HGCLOCK_EXIT_USAGE;
			}
			filtering = true;
			break;
		case OPT_PERFETTO:
			pf_path = optarg;
			break;
		case OPT_DAT:
			dat_path = optarg;
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
		inputs[par.nr_inputs++] = (struct hgm_input_spec){ .path = host_path, .guest = -1 };
	for (; optind < argc; optind++) {
		if (par.nr_inputs == HGM_MAX_INPUTS) {
			hg_err("too many inputs");
			return HGCLOCK_EXIT_USAGE;
		}
		inputs[par.nr_inputs++] = (struct hgm_input_spec){ .path = argv[optind], .guest = next_guest++ };
	}
	for (int i = 0; i < nr_guest_specs; i++) {
		if (par.nr_inputs == HGM_MAX_INPUTS) {
			hg_err("too many inputs");
			return HGCLOCK_EXIT_USAGE;
		}
		hgm_guest_spec(guest_specs[i], &next_guest, &inputs[par.nr_inputs++]);
	}
	/* The applications after the traces: ties in time go to the traces. */
	for (int i = 0; i < nr_app_specs; i++) {
		if (par.nr_inputs == HGM_MAX_INPUTS) {
			hg_err("too many inputs");
			return HGCLOCK_EXIT_USAGE;
		}
		inputs[par.nr_inputs++] = app_specs[i];
	}
	if (!par.nr_inputs) {
		hg_err("no trace.dat to merge: give the host's and the guests' files");
		return HGCLOCK_EXIT_USAGE;
	}
	if (hgm_report_parse_sort(sort_spec, sort_keys, &nr_sort_keys, err, sizeof(err))) {
		hg_err("%s", err);
		return HGCLOCK_EXIT_USAGE;
	}
	if (report_path && !nr_app_specs) {
		hg_err("--report counts perf samples: give --perf or --guest-perf");
		return HGCLOCK_EXIT_USAGE;
	}
	analysis = analyze_path || analyze_json_path || analyze_svg_path;
	if (analyze_slice && !analyze_path && !analyze_json_path) {
		hg_err("--analyze-slice is for --analyze or --analyze-json");
		return HGCLOCK_EXIT_USAGE;
	}
	if (analyze_slice && (!strchr(analyze_slice, ',') || analyze_slice[0] == ',' ||
			      !strchr(analyze_slice, ',')[1])) {
		hg_err("--analyze-slice: not BEGIN,END (two guest trace events): %s", analyze_slice);
		return HGCLOCK_EXIT_USAGE;
	}
	if (no_text && !json_path && !report_path && !dat_path && !pf_path && !analyze_path &&
	    !analyze_json_path && !analyze_svg_path) {
		hg_err("--no-text without --json, --dat or --perfetto: nothing to write");
		return HGCLOCK_EXIT_USAGE;
	}

	/*
	 * No output may be an input, nor two outputs one file: before
	 * anything is opened.  --dat writes a file per machine with a trace.
	 */
	ins[0] = corr;
	for (int i = 0; i < par.nr_inputs; i++)
		ins[1 + i] = inputs[i].path;
	outs = calloc(7 + (size_t)par.nr_inputs, sizeof(*outs));
	dat_names = dat_path ? calloc((size_t)par.nr_inputs, sizeof(*dat_names)) : NULL;
	dres = dat_path ? malloc(sizeof(*dres)) : NULL;
	if (!outs || (dat_path && (!dat_names || !dres))) {
		hg_err("out of memory");
		ret = HGCLOCK_EXIT_FAILURE;
		goto out_args;
	}
	outs[0] = no_text ? NULL : out_path;
	outs[1] = json_path;
	outs[2] = report_path;
	outs[3] = pf_path;
	outs[4] = analyze_path;
	outs[5] = analyze_json_path;
	outs[6] = analyze_svg_path;
	for (int i = 0; dat_path && i < par.nr_inputs; i++)
		if (!inputs[i].app) {
			hgm_dat_path(dat_path, inputs[i].guest, dat_names[i], sizeof(dat_names[i]));
			outs[nr_outs++] = dat_names[i];
		}
	ret = hg_check_outputs(ins, 1 + par.nr_inputs, outs, nr_outs);
	if (ret)
		goto out_args;
	/* Missing or unreadable inputs, directories, FIFOs: exit 1, before any work. */
	for (int i = 0; i < par.nr_inputs; i++) {
		ret = hg_check_input(inputs[i].path);
		if (ret)
			goto out_args;
	}
	/*
	 * perf script, the longest part of a merge with perf samples, runs
	 * while the correlation file is loaded and the traces checked.
	 */
	if (nr_app_specs) {
		perf = calloc((size_t)par.nr_inputs, sizeof(*perf));
		if (!perf) {
			hg_err("out of memory");
			ret = HGCLOCK_EXIT_FAILURE;
			goto out_args;
		}
		start_perf(inputs, par.nr_inputs, perf);
	}
	/* The correlation file first: its errors are the cheapest to find. */
	ret = hg_load_sync(corr, recompute ? HGSYNC_IGNORE_SEGMENTS : 0, &s, &buf, &len);
	if (ret)
		goto out_args;
	/* With --force, what does not fit is a warning. */
	ret = check_claims(&s, buf, len, inputs, par.nr_inputs, force, quiet, corr);
	if (ret)
		goto out;
	if (nr_app_specs) {
		char host[256];

		corr_host_name(buf, len, host, sizeof(host));
		ret = convert_perf(inputs, par.nr_inputs, perf, host, force, quiet);
		if (ret)
			goto out;
	}
	/*
	 * Which vCPU thread and host CPU a guest CPU's events get depends on
	 * the vCPU identity (sync.rst): a doubtful one is said even with -q,
	 * an assumed one unless -q.
	 */
	for (int i = 0; i < par.nr_inputs; i++) {
		char note[512];
		int g = inputs[i].guest, say;

		if (g < 0 || (unsigned int)g >= s.nr_guests || inputs[i].app)
			continue;
		say = hgsync_identity_note(&s, (uint32_t)g, note, sizeof(note));
		if (say == 2 || (say && !quiet))
			hg_err("%s: guest %d: %s", corr, g, note);
	}
	for (int i = 0; i < par.nr_inputs; i++) {
		if (inputs[i].guest < 0 || inputs[i].app ||
		    !hgsync_guest_known(&s, (uint32_t)inputs[i].guest))
			continue;
		ret = add_marker_pairs(&s, corr, &inputs[i], quiet);
		if (ret)
			goto out;
	}
	ret = HGCLOCK_EXIT_FAILURE;
	if (!no_text) {
		if (hg_output_open(&to, out_path))
			goto out;
		tout = to.f;
		setvbuf(tout, NULL, _IOFBF, 1 << 20);
	}
	if (json_path) {
		if (hg_output_open(&jo, json_path))
			goto out;
		jout = jo.f;
		setvbuf(jout, NULL, _IOFBF, 1 << 20);
	}
	/*
	 * Without a trace.dat every input is an application or perf file,
	 * whose records cost little to decode: the workers' setup and the
	 * merging of their queues then cost more than they share out (merge
	 * --perf of 10k samples: 7.5 ms on one thread, 14 ms on two; of 100k:
	 * 0.13 s and 0.16 s).  The output is the same with any number.
	 */
	if (!threads_given) {
		bool traces = false;

		for (int i = 0; i < par.nr_inputs; i++)
			traces |= !inputs[i].app;
		if (!traces)
			threads = 1;
	}
	par.sync = &s;
	par.inputs = inputs;
	par.nr_threads = (int)threads;
	par.text = tout;
	par.json = jout;
	par.progress = progress < 0 ? isatty(STDERR_FILENO) : progress;
	par.opt.filter = filtering ? &filter : NULL;
	/*
	 * Only trace.dat or Perfetto (and a report): their own pass is the
	 * merge.  Only the analysis: its pass gives the summary's counts
	 * where they are the same (hga_reports).
	 */
	analysis_counts = analysis && !tout && !jout && !dat_path && !pf_path && !filtering;
	for (int i = 0; i < par.nr_inputs; i++)
		analysis_counts &= !inputs[i].perf;
	if (!tout && !jout && (dat_path || pf_path || analysis_counts))
		rc = 0;
	else
		rc = threads > 1 ? hgm_par_run(&par, &res, err, sizeof(err)) :
				   merge_one_thread(&par, &res, err, sizeof(err));
	res.filtered = filtering;
	if (rc) {
		/* A failed write: the output is named, and the old file stays. */
		if (tout && ferror(tout))
			hg_err("%s: %s", hg_output_name(out_path), err);
		else if (jout && ferror(jout))
			hg_err("%s: %s", hg_output_name(json_path), err);
		else
			hg_err("%s", err);
		/* Unreadable inputs are the user's; memory and failed writes ours. */
		ret = rc == HGM_E_SYSTEM ? HGCLOCK_EXIT_FAILURE : HGCLOCK_EXIT_BAD_INPUT;
		goto out;
	}
	if (report_path) {
		if (hg_output_open(&ro, report_path))
			goto out;
		rc = hgm_report_run(&par, sort_keys, nr_sort_keys, ro.f, err, sizeof(err));
		if (rc) {
			hg_err("%s", err);
			hg_output_abort(&ro);
			ret = rc == HGM_E_SYSTEM ? HGCLOCK_EXIT_FAILURE : HGCLOCK_EXIT_BAD_INPUT;
			goto out;
		}
	}
	/*
	 * The analysis is one pass of its engine: on its own here, or, with
	 * --perfetto, the pass that draws it there, which writes these
	 * reports too (committed after the Perfetto trace).
	 */
	if (analysis) {
		/* an output that does not open has said why */
		if ((analyze_path && hg_output_open(&ao, analyze_path)) ||
		    (analyze_json_path && hg_output_open(&ajo, analyze_json_path)) ||
		    (analyze_svg_path && hg_output_open(&aso, analyze_svg_path)))
			goto out;
		reports = (struct hga_reports){ .text = ao.f, .json = ajo.f, .svg = aso.f,
						.slice = analyze_slice,
						.counts = analysis_counts ? &res : NULL };
	}
	if (analysis && !pf_path) {
		rc = hga_merge_run(&par, &reports, err, sizeof(err));
		res.filtered = filtering;
		if (rc) {
			hg_err("%s", err);
			ret = rc == HGM_E_INPUT ? HGCLOCK_EXIT_BAD_INPUT : HGCLOCK_EXIT_FAILURE;
			goto out;
		}
		if (analysis_commit(&ao, &ajo, &aso))
			goto out;
	}
	if (dat_path) {
		rc = hgm_dat_run(&par, dat_path, dres, !tout && !jout ? &res : NULL, err,
				 sizeof(err));
		res.filtered = filtering;
		if (rc) {
			hg_err("--dat: %s", err);
			ret = rc == HGM_E_SYSTEM ? HGCLOCK_EXIT_FAILURE : HGCLOCK_EXIT_BAD_INPUT;
			goto out;
		}
	}
	if (pf_path) {
		if (hg_output_open(&po, pf_path))
			goto out;
		setvbuf(po.f, NULL, _IOFBF, 1 << 20);
		rc = hgm_pf_run(&par, po.f, &pres, !tout && !jout && !dat_path ? &res : NULL,
				analysis ? &reports : NULL, err, sizeof(err));
		res.filtered = filtering;
		if (rc) {
			hg_err("--perfetto: %s: %s", hg_output_name(pf_path), err);
			hg_output_abort(&po);
			ret = rc == HGM_E_SYSTEM ? HGCLOCK_EXIT_FAILURE : HGCLOCK_EXIT_BAD_INPUT;
			goto out;
		}
		ret = hg_output_commit(&po);
		if (ret)
			goto out;
		ret = HGCLOCK_EXIT_FAILURE;
		if (analysis && analysis_commit(&ao, &ajo, &aso))
			goto out;
	}
	ret = tout ? hg_output_commit(&to) : HGCLOCK_EXIT_OK;
	tout = NULL;
	if (!ret && report_path)
		ret = hg_output_commit(&ro);
	if (!ret && jout)
		ret = hg_output_commit(&jo);
	jout = NULL;
	/* A loss is said even with --quiet. */
	for (int i = 0; i < res.nr_in; i++)
		if (!ret && res.in[i].app_tail_bytes)
			hg_err("warning: %s: its last %" PRIu64 " bytes are a record cut short "
			       "(the application did not close the file): not merged",
			       res.in[i].app_path ? res.in[i].app_path : "?",
			       res.in[i].app_tail_bytes);
	if (!ret && dat_path)
		dat_summary(dat_path, dres, quiet);
	if (!ret && pf_path)
		pf_summary(pf_path, &pres, quiet);
	if (!ret && !quiet)
		summary(&res);
out:
	hg_trace_pool_close();
	if (tout)
		hg_output_abort(&to);
	if (jout)
		hg_output_abort(&jo);
	/* every failure's path: no-ops on what was committed or never opened */
	hg_output_abort(&ro);
	hg_output_abort(&ao);
	hg_output_abort(&ajo);
	hg_output_abort(&aso);
	hgsync_free(&s);
	hg_unmap_file(buf, len);
out_args:
	/* After the last reader of their files; a perf script still running is killed, reaped. */
	for (int i = 0; perf && i < par.nr_inputs; i++)
		hg_perf_end(&perf[i]);
	free(perf);
	free(outs);
	free(dat_names);
	free(dres);
	return ret;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock plot CORR [--guest ID] [--clock local|perf|x86-tsc] [-o FILE.svg]
 *
 * Pictures of a correlation file, as one SVG: per vCPU, the guest-to-host
 * offset over host time (the mapping, its error bound, and the probes'
 * round-trip brackets around it); then where each vCPU ran: a lane per
 * host CPU with the vCPU threads' runs.  No plotting library: the SVG is
 * written directly, a few hundred elements per panel whatever the
 * recording's length (points are thinned to the panel's width).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "libhgclock.h"
#include "plot_axis.h"
#include "output.h"
#include "proto.h"
#include "sync.h"

#define W		1000	/* picture width */
#define ML		90	/* left margin (axis labels) */
#define MR		20
#define PH		220	/* offset panel height */
#define LANE		22	/* host CPU lane height */
#define MAX_POINTS	2000	/* per series, after thinning */

static const char *const colors[] = {
	"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
};

struct plot {
	FILE *out;
	const struct hgsync *s;
	uint32_t guest;
	uint32_t clock;
	double t0, t1;		/* host time span, seconds */
	int y;			/* next panel's top */
	/* The machine's incarnations (sync.rst, "Migration and restore"), root first. */
	uint32_t chain[64];
	unsigned int nchain;
};

/* A probe's guest and host values in the plotted clock; false: it has none. */
static bool probe_values(const struct plot *p, const struct hgcor_probe *pr, uint64_t *x,
			 uint64_t *lo, uint64_t *hi)
{
	if (p->clock == HGSYNC_CLOCK_TSC) {
		*x = pr->guest_tsc;
		*lo = pr->host_tsc_send;
		*hi = pr->host_tsc_recv;
	} else if (p->clock == HGSYNC_CLOCK_LOCAL) {
		/* perf: the host's local_clock at the probe's TSC reads. */
		if (!(pr->flags & HGP_PROBE_HAS_LOCAL))
			return false;
		*x = pr->guest_local_ns;
		if (hgsync_host_from_tsc(p->s, pr->host_cpu_send, p->clock, pr->host_tsc_send, lo))
			*lo = pr->host_ns_send;
		if (hgsync_host_from_tsc(p->s, pr->host_cpu_recv, p->clock, pr->host_tsc_recv, hi))
			*hi = pr->host_ns_recv;
	} else {
		*x = pr->guest_sched_ns;
		*lo = pr->host_ns_send;
		*hi = pr->host_ns_recv;
	}
	return true;
}

/* Plotted-clock units to ns (TSC counts through tsc_khz). */
static double to_ns(const struct plot *p, double v)
{
	if (p->clock == HGSYNC_CLOCK_TSC && p->s->host_info.tsc_khz)
		return v * 1e6 / (double)p->s->host_info.tsc_khz;
	return v;
}

static double host_secs(const struct plot *p, uint64_t host_value)
{
	return to_ns(p, (double)host_value) / 1e9;
}

static double px_x(const struct plot *p, double secs)
{
	double span = p->t1 > p->t0 ? p->t1 - p->t0 : 1;

	return ML + (secs - p->t0) / span * (W - ML - MR);
}

static void axis_x(const struct plot *p, int y_bottom)
{
	double ticks[HG_AXIS_MAX_TICKS];
	size_t n = hg_axis_ticks(p->t0, p->t1, ticks, HG_AXIS_MAX_TICKS);

	fprintf(p->out, "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='#444'/>\n", ML, y_bottom,
		W - MR, y_bottom);
	for (size_t i = 0; i < n; i++) {
		double t = ticks[i], x = px_x(p, t);

		fprintf(p->out, "<line x1='%.1f' y1='%d' x2='%.1f' y2='%d' stroke='#444'/>"
			"<text x='%.1f' y='%d' font-size='11' text-anchor='middle'>%.3g</text>\n",
			x, y_bottom, x, y_bottom + 4, x, y_bottom + 16, t);
	}
}

/* Whether VM process @pid ran one of the plotted machine's incarnations. */
static bool chain_vm(const struct plot *p, int32_t pid)
{
	for (unsigned int i = 0; i < p->nchain; i++)
		if (pid > 0 && p->s->guests[p->chain[i]].vm.vm_pid == pid)
			return true;
	return false;
}

/*
 * The machine's disruptions, across a panel from @top to @bottom: a band
 * from the old VM's last exit from the guest to the new VM's first entry
 * (a line when one end is unknown), and what kind it was.
 */
static void disr_bands(const struct plot *p, double top, double bottom)
{
	const struct hgsync *s = p->s;

	for (size_t i = 0; i < s->nr_disr; i++) {
		const struct hgcor_disruption *d = &s->disr[i];
		struct hgsync_disr_facts f;
		uint64_t a_tsc, b_tsc, a, b;
		bool ours = false;
		double x0, x1;

		for (unsigned int k = 0; k < p->nchain; k++)
			ours |= d->guest_id == p->chain[k];
		if (!ours || hgsync_disruption_facts(s, i, &f))
			continue;
		a_tsc = f.has_old_run ? f.old_last_run_tsc : d->host_tsc_lost;
		b_tsc = f.has_new_run ? f.new_first_run_tsc : d->host_tsc_back ? d->host_tsc_back :
			a_tsc;
		if (hgsync_host_from_tsc(s, 0, p->clock, a_tsc, &a) ||
		    hgsync_host_from_tsc(s, 0, p->clock, b_tsc, &b))
			continue;
		x0 = px_x(p, host_secs(p, a));
		x1 = px_x(p, host_secs(p, b));
		if (x1 < ML || x0 > W - MR)
			continue;
		x0 = x0 < ML ? ML : x0;
		x1 = x1 > W - MR ? W - MR : x1 < x0 + 1 ? x0 + 1 : x1;
		fprintf(p->out, "<rect x='%.1f' y='%.0f' width='%.1f' height='%.0f' fill='#f7cccc'/>"
			"<text x='%.1f' y='%.0f' font-size='10' fill='#d62728'>"
			"%s</text>\n", x0, top, x1 - x0, bottom - top, x1 + 2, top + 10,
			hgsync_disruption_name(d->kind));
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/*
 * One vCPU's offset panel: host - guest (us), minus its median so that
 * microseconds show even when the offset is days of uptime.
 */
static void offset_panel(struct plot *p, int vcpu)
{
	const struct hgsync_guest *g = &p->s->guests[p->guest];
	double *off, *sorted, ref, lo_y = 0, hi_y = 0, top = p->y + 24, bottom = p->y + PH;
	size_t n = 0, stride;
	uint64_t maxb = 0;
	uint32_t methods = 0;

	off = calloc(g->nr_probes + 1, sizeof(*off) * 5);
	if (!off)
		return;
	sorted = off + 4 * (g->nr_probes + 1);
	/* Per probe: time, bracket low/high offsets, mapped offset, bound. */
	for (size_t i = 0; i < g->nr_probes; i++) {
		const struct hgcor_probe *pr = &g->probes[i];
		struct hgsync_result r;
		uint64_t x, lo, hi;
		double *o = &off[4 * n];

		if (pr->guest_cpu != vcpu || !probe_values(p, pr, &x, &lo, &hi))
			continue;
		o[0] = host_secs(p, lo / 2 + hi / 2);
		o[1] = to_ns(p, (double)lo - (double)x) / 1e3;
		o[2] = to_ns(p, (double)hi - (double)x) / 1e3;
		if (!hgsync_to_host(p->s, p->guest, vcpu, p->clock, x, &r)) {
			o[3] = to_ns(p, (double)r.host_value - (double)x) / 1e3;
			if (r.bound_ns != HGSYNC_NO_BOUND && r.bound_ns > maxb)
				maxb = r.bound_ns;
			methods |= 1u << r.method;
		} else {
			o[3] = NAN;
		}
		sorted[n] = (o[1] + o[2]) / 2;
		n++;
	}
	if (p->nchain > 1)
		fprintf(p->out, "<text x='%d' y='%d' font-size='14' font-weight='bold'>guest %u "
			"(session %u, VM %d) vCPU %d: host - guest (%s clock), us, around its "
			"median</text>\n", ML, p->y + 14, p->chain[0], p->guest, g->vm.vm_pid, vcpu,
			hgsync_clock_name(p->clock));
	else
		fprintf(p->out, "<text x='%d' y='%d' font-size='14' font-weight='bold'>guest %u "
			"vCPU %d: host - guest (%s clock), us, around its median</text>\n", ML,
			p->y + 14, p->guest, vcpu, hgsync_clock_name(p->clock));
	if (!n) {
		fprintf(p->out, "<text x='%d' y='%d' font-size='12'>no probes on this vCPU</text>\n",
			ML, p->y + 40);
		p->y += 60;
		free(off);
		return;
	}
	qsort(sorted, n, sizeof(*sorted), cmp_double);
	ref = sorted[n / 2];
	/*
	 * The y range: three times the median bracket's reach, so that the
	 * typical round trip and the mapping are readable; longer round
	 * trips (a loaded host) are clipped at the panel's edge.
	 */
	for (size_t i = 0; i < n; i++) {
		double a = off[4 * i + 1] - ref, b = off[4 * i + 2] - ref;

		sorted[i] = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
	}
	qsort(sorted, n, sizeof(*sorted), cmp_double);
	hi_y = 3 * sorted[n / 2];
	if (hi_y < 1)
		hi_y = 1;
	lo_y = -hi_y;
#define PY(v) (bottom - ((v) - lo_y) / (hi_y - lo_y) * (bottom - top))
#define CLAMP(v) ((v) < lo_y ? lo_y : (v) > hi_y ? hi_y : (v))
	fprintf(p->out, "<rect x='%d' y='%.0f' width='%d' height='%.0f' fill='none' stroke='#ccc'/>\n",
		ML, top, W - ML - MR, bottom - top);
	for (int k = -2; k <= 2; k++) {
		double v = hi_y * k / 2;

		fprintf(p->out, "<text x='%d' y='%.1f' font-size='11' text-anchor='end'>%+.1f</text>"
			"<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='#eee'/>\n", ML - 4,
			PY(v) + 4, v, ML, PY(v), W - MR, PY(v));
	}
	disr_bands(p, top, bottom);
	/* Probe brackets: a vertical bar from send to receive. */
	stride = n > MAX_POINTS ? n / MAX_POINTS : 1;
	for (size_t i = 0; i < n; i += stride) {
		const double *o = &off[4 * i];

		fprintf(p->out, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#999' "
			"stroke-width='1'/>\n", px_x(p, o[0]), PY(CLAMP(o[1] - ref)), px_x(p, o[0]),
			PY(CLAMP(o[2] - ref)));
	}
	/* The mapping at each probe's guest value: a line. */
	fprintf(p->out, "<polyline fill='none' stroke='%s' stroke-width='2' points='",
		colors[vcpu % 8]);
	for (size_t i = 0; i < n; i += stride)
		if (!isnan(off[4 * i + 3]))
			fprintf(p->out, "%.1f,%.1f ", px_x(p, off[4 * i]),
				PY(CLAMP(off[4 * i + 3] - ref)));
	fprintf(p->out, "'/>\n");
	fprintf(p->out, "<text x='%d' y='%d' font-size='11'>grey: probe round trips (the host "
		"value lies inside each); line: the mapping (%s%s%s%s), error bound up to %" PRIu64
		" ns</text>\n", ML, (int)bottom + 14,
		methods & (1u << HGCOR_METHOD_KVM_EXACT) ? "kvm-exact " : "",
		methods & (1u << HGCOR_METHOD_EXIT) ? "exit " : "",
		methods & (1u << HGCOR_METHOD_PROBE) ? "probe " : "",
		methods ? "" : "none", maxb);
#undef PY
#undef CLAMP
	p->y = (int)bottom + 24;
	free(off);
}

static void bar(struct plot *p, int top, int cpu, int sub, double x0, double x1, int vcpu)
{
	fprintf(p->out, "<rect x='%.1f' y='%d' width='%.1f' height='4' fill='%s'/>\n", x0,
		top + cpu * LANE + 2 + sub * 4, x1 - x0 < 0.5 ? 0.5 : x1 - x0, colors[vcpu % 8]);
}

/* Where each vCPU of the guest ran: a lane per host CPU. */
static void where_panel(struct plot *p)
{
	const struct hgsync *s = p->s;
	int top = p->y + 24, ncpu = (int)s->nr_host_cpus;

	fprintf(p->out, "<text x='%d' y='%d' font-size='14' font-weight='bold'>where guest %u's "
		"vCPUs ran: host CPU lanes</text>\n", ML, p->y + 14, p->chain[0]);
	for (int c = 0; c < ncpu; c++)
		fprintf(p->out, "<text x='%d' y='%d' font-size='11' text-anchor='end'>CPU %d</text>"
			"<rect x='%d' y='%d' width='%d' height='%d' fill='#f6f6f6'/>\n", ML - 4,
			top + c * LANE + 15, c, ML, top + c * LANE, W - ML - MR, LANE - 2);
	/* Under the runs: a band says where none can be. */
	disr_bands(p, top, top + ncpu * LANE);
	for (size_t i = 0; i < s->nr_vcpus; i++) {
		const struct hgsync_vcpu *v = &s->vcpus[i];
		int sub = v->vcpu_id % 4, run_cpu = -1;
		double run_x0 = 0, run_x1 = -1;

		if (!chain_vm(p, v->vm_pid) || v->vcpu_id < 0)
			continue;
		/*
		 * Runs closer than a pixel on the same lane become one bar:
		 * the picture's size follows its width, not the run count.
		 */
		for (size_t k = 0; k <= v->nr_where; k++) {
			const struct hgsync_where *a = &v->where[k < v->nr_where ? k : 0];
			uint64_t t0, t1;
			double x0, x1;

			if (k == v->nr_where) {
				if (run_cpu >= 0)
					bar(p, top, run_cpu, sub, run_x0, run_x1, v->vcpu_id);
				break;
			}
			if (!a->running || a->host_cpu < 0 || a->host_cpu >= ncpu)
				continue;
			if (hgsync_host_from_tsc(s, a->host_cpu, p->clock, a->host_tsc, &t0))
				continue;
			if (k + 1 >= v->nr_where ||
			    hgsync_host_from_tsc(s, a->host_cpu, p->clock, v->where[k + 1].host_tsc, &t1))
				t1 = t0;
			x0 = px_x(p, host_secs(p, t0));
			x1 = px_x(p, host_secs(p, t1));
			if (x1 < ML || x0 > W - MR)
				continue;
			if (x0 < ML)
				x0 = ML;
			if (x1 > W - MR)
				x1 = W - MR;
			if (a->host_cpu == run_cpu && x0 <= run_x1 + 1) {
				if (x1 > run_x1)
					run_x1 = x1;
				continue;
			}
			if (run_cpu >= 0)
				bar(p, top, run_cpu, sub, run_x0, run_x1, v->vcpu_id);
			run_cpu = a->host_cpu;
			run_x0 = x0;
			run_x1 = x1;
		}
	}
	p->y = top + ncpu * LANE + 4;
	for (size_t i = 0, k = 0; i < s->nr_vcpus; i++) {
		const struct hgsync_vcpu *v = &s->vcpus[i];

		if (!chain_vm(p, v->vm_pid) || v->vcpu_id < 0)
			continue;
		if (k && !(k % 3))
			p->y += 14;
		fprintf(p->out, "<rect x='%d' y='%d' width='12' height='8' fill='%s'/>"
			"<text x='%d' y='%d' font-size='11'>vCPU %d (host thread %d, %" PRIu64
			" migrations)</text>\n", ML + (int)(k % 3) * 260, p->y + 4,
			colors[v->vcpu_id % 8], ML + (int)(k % 3) * 260 + 16, p->y + 12, v->vcpu_id,
			v->tid, v->migrations);
		k++;
	}
	p->y += 20;
	axis_x(p, p->y);
	fprintf(p->out, "<text x='%d' y='%d' font-size='11' text-anchor='middle'>host time (%s "
		"clock), s</text>\n", W / 2, p->y + 30, hgsync_clock_name(p->clock));
	p->y += 40;
}

static void plot_usage(FILE *out)
{
	fprintf(out,
		"usage: hgclock plot CORR [--guest ID] [--clock local|perf|x86-tsc] [-o FILE]\n"
		"Draws the mapping of guest ID (default 0) in the correlation file CORR as\n"
		"an SVG picture (to FILE, default standard output): per vCPU, host - guest\n"
		"over host time with the probes' round trips and the mapping's bound, then\n"
		"which host CPU ran each vCPU when.\n"
		"  --guest ID          the guest (default 0)\n"
		"  --clock CLOCK       local (ftrace's default, the default), perf or x86-tsc\n"
		"  -o, --output FILE   where to write the SVG (default: standard output)\n");
}

int cmd_plot(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "guest", required_argument, NULL, 'g' },
		{ "clock", required_argument, NULL, 'c' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	struct plot p = { .clock = HGSYNC_CLOCK_SCHED };
	const char *path, *out_path = "-";
	const void *buf;
	size_t len;
	struct hgsync s;
	uint64_t guest = 0, tmin = UINT64_MAX, tmax = 0;
	int c, ret, height;
	char *svg = NULL;
	size_t svg_len = 0;
	struct hg_output o;
	FILE *mem, *out;

	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'g':
			if (!parse_u64(optarg, HGSYNC_MAX_GUESTS - 1, &guest)) {
				hg_err("--guest: a guest number, not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'c':
			if (hgclock_clock_parse(optarg, &p.clock)) {
				hg_err("--clock wants " HGCLOCK_CLOCK_NAMES ", not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'o':
			out_path = optarg;
			break;
		case 'h':
			plot_usage(stdout);
			return HGCLOCK_EXIT_OK;
		default:
			plot_usage(stderr);
			return HGCLOCK_EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		plot_usage(stderr);
		return HGCLOCK_EXIT_USAGE;
	}
	path = argv[optind];
	ret = hg_check_outputs(&path, 1, &out_path, 1);
	if (ret)
		return ret;
	ret = hg_load_sync(path, 0, &s, &buf, &len);
	if (ret)
		return ret;
	ret = HGCLOCK_EXIT_BAD_INPUT;
	if (guest >= s.nr_guests || !s.guests[guest].present) {
		hg_err("%s: no guest %" PRIu64 " in this file", path, guest);
		goto out;
	}
	p.s = &s;
	/* The whole machine: each incarnation's panels, one time axis. */
	for (uint32_t id = hgsync_guest_root(&s, (uint32_t)guest); p.nchain < 64;
	     id = s.guests[id].next_id) {
		p.chain[p.nchain++] = id;
		if (!s.guests[id].has_next)
			break;
	}
	/* The time span: the probes' (the whole pairing). */
	for (unsigned int k = 0; k < p.nchain; k++) {
		const struct hgsync_guest *gk = &s.guests[p.chain[k]];

		for (size_t i = 0; i < gk->nr_probes; i++) {
			uint64_t x, lo, hi;

			if (!probe_values(&p, &gk->probes[i], &x, &lo, &hi))
				continue;
			if (lo < tmin)
				tmin = lo;
			if (hi > tmax)
				tmax = hi;
		}
	}
	if (tmin >= tmax) {
		hg_err("%s: guest %" PRIu64 " has no clock probes in the %s clock: nothing to plot",
		       path, guest, hgsync_clock_name(p.clock));
		goto out;
	}
	p.t0 = host_secs(&p, tmin);
	p.t1 = host_secs(&p, tmax);

	/* The body first, into memory: the height is known at its end. */
	mem = open_memstream(&svg, &svg_len);
	if (!mem) {
		hg_err("out of memory");
		ret = HGCLOCK_EXIT_FAILURE;
		goto out;
	}
	p.out = mem;
	p.y = 10;
	for (unsigned int k = 0; k < p.nchain; k++) {
		p.guest = p.chain[k];
		for (unsigned int v = 0; v < s.guests[p.guest].nr_cpus && v < 64; v++)
			offset_panel(&p, (int)v);
	}
	where_panel(&p);
	height = p.y;
	if (fclose(mem)) {
		hg_err("out of memory");
		ret = HGCLOCK_EXIT_FAILURE;
		goto out;
	}
	ret = hg_output_open(&o, out_path);
	if (ret)
		goto out;
	out = o.f;
	fprintf(out, "<?xml version='1.0' encoding='UTF-8'?>\n"
		"<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' "
		"viewBox='0 0 %d %d' font-family='sans-serif'>\n"
		"<rect width='100%%' height='100%%' fill='white'/>\n", W, height, W, height);
	fwrite(svg, 1, svg_len, out);
	fprintf(out, "</svg>\n");
	ret = hg_output_commit(&o);
out:
	free(svg);
	hgsync_free(&s);
	hg_unmap_file(buf, len);
	return ret;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * merge --analyze-svg: the analysis as a picture, one stacked bar per
 * guest thread (Documentation/analyze.rst).  Each bar is the thread's
 * certain slices split by component, in host ns, to one scale for all
 * bars; its uncertain slices (within the mapping's bound at their ends,
 * not split) are a grey bar of their own after it, so the picture never
 * attributes what the report does not.  With requests (analyze_req.h),
 * a second section: one bar per slowest request, split by the request
 * layer's components, to a scale of its own (uncertain requests are not
 * among the slowest: never split, never drawn).
 *
 * Everything drawn comes from the engine's totals after hga_finish() and
 * the request layer's slowest after hgr_finish(); no state of its own.  Names come from traces (a guest's thread names are
 * the guest's to choose): every one is escaped for XML.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "analyze_req.h"

#define SVG_WIDTH	1100
#define SVG_LABEL_W	260	/* the thread's name, left of its bar */
#define SVG_BAR_W	520	/* the longest bar */
#define SVG_ROW_H	26
#define SVG_BAR_H	16
#define SVG_TOP		70	/* title and legend */

/* One colour per component, in enum hga_comp's order. */
static const char *const comp_fill[HGA_NR_COMP] = {
	[HGA_C_GUEST]		= "#2ca02c",
	[HGA_C_EXIT]		= "#ff7f0e",
	[HGA_C_PREEMPTED]	= "#d62728",
	[HGA_C_HOST_BLOCKED]	= "#9467bd",
	[HGA_C_HALTED]		= "#1f77b4",
	[HGA_C_DISRUPTED]	= "#8c564b",
	[HGA_C_UNKNOWN]		= "#bcbd22",
};
#define UNCERTAIN_FILL	"#bbbbbb"

/* The requests' components (enum hgr_comp): the engine's colours where they mean the same. */
static const char *const req_fill[HGR_NR_COMP] = {
	[HGR_C_RUNNING]		= "#2ca02c",
	[HGR_C_RUNQ]		= "#17becf",
	[HGR_C_PREEMPTED]	= "#d62728",
	[HGR_C_EXIT]		= "#ff7f0e",
	[HGR_C_HALTED]		= "#1f77b4",
	[HGR_C_BLOCKED]		= "#7f7f7f",
	[HGR_C_HOST_BLOCKED]	= "#9467bd",
	[HGR_C_DISRUPTED]	= "#8c564b",
	[HGR_C_UNKNOWN]		= "#bcbd22",
	[HGR_C_UNSPLIT]		= "#e377c2",
};

/* Writes @s escaped for XML text or a quoted attribute; non-printables as '?'. */
static void xml_text(FILE *out, const char *s, size_t max)
{
	size_t i;

	for (i = 0; i < max && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];

		switch (c) {
		case '&':
			fputs("&amp;", out);
			break;
		case '<':
			fputs("&lt;", out);
			break;
		case '>':
			fputs("&gt;", out);
			break;
		case '\'':
			fputs("&apos;", out);
			break;
		case '"':
			fputs("&quot;", out);
			break;
		default:
			fputc(c >= 0x20 && c < 0x7f ? c : '?', out);
		}
	}
}

static uint64_t total_ns(const struct hga_total *t)
{
	uint64_t sum = t->uncertain_ns;
	int c;

	for (c = 0; c < HGA_NR_COMP; c++)
		sum += t->split.ns[c];
	return sum;
}

/* Threads by their time, longest first; ties by guest and tid, so the order is stable. */
static int cmp_total(const void *x, const void *y)
{
	const struct hga_total *a = *(const struct hga_total *const *)x;
	const struct hga_total *b = *(const struct hga_total *const *)y;
	uint64_t ta = total_ns(a), tb = total_ns(b);

	if (ta != tb)
		return ta < tb ? 1 : -1;
	if (a->guest != b->guest)
		return a->guest < b->guest ? -1 : 1;
	return (a->tid > b->tid) - (a->tid < b->tid);
}

static const char *thread_comp(int c)
{
	return hga_comp_name((enum hga_comp)c);
}

static const char *req_comp(int c)
{
	return hgr_comp_name((enum hgr_comp)c);
}

/* A legend of @n components at @y, from x 10; returns the x past it. */
static int legend_row(FILE *out, int y, int n, const char *const *fill,
		      const char *(*name)(int))
{
	int c, x = 10;

	for (c = 0; c < n; c++) {
		fprintf(out, "<rect x='%d' y='%d' width='12' height='12' fill='%s'/>"
			"<text x='%d' y='%d' font-size='12'>%s</text>\n",
			x, y, fill[c], x + 16, y + 11, name(c));
		x += 16 + 8 * (int)strlen(name(c)) + 14;
	}
	return x;
}

static void legend(FILE *out)
{
	int x = legend_row(out, 38, HGA_NR_COMP, comp_fill, thread_comp);

	fprintf(out, "<rect x='%d' y='38' width='12' height='12' fill='%s'/>"
		"<text x='%d' y='49' font-size='12'>uncertain (not split)</text>\n",
		x, UNCERTAIN_FILL, x + 16);
}

/* A bar's parts from @x at @y: @n components' @ns to @scale_ns; returns the x past them. */
static double bar_parts(FILE *out, double x, int y, int n, const uint64_t *ns,
			const char *const *fill, const char *(*name)(int), uint64_t scale_ns)
{
	double w;
	int c;

	for (c = 0; c < n; c++) {
		if (!ns[c])
			continue;
		w = (double)SVG_BAR_W * (double)ns[c] / (double)scale_ns;
		fprintf(out, "<rect x='%.2f' y='%d' width='%.2f' height='%d' fill='%s'>"
			"<title>%s %" PRIu64 " ns</title></rect>\n",
			x, y, w, SVG_BAR_H, fill[c], name(c), ns[c]);
		x += w;
	}
	return x;
}

/* A bar's end text's "; preempted N ms, most by LABEL". */
static void most_by(const struct hga *a, FILE *out, uint64_t preempted_ns, uint64_t key)
{
	char label[64];

	fprintf(out, "; preempted %.3f ms, most by ", (double)preempted_ns / 1e6);
	hga_offender_label(a, key, label, sizeof(label));
	xml_text(out, label, sizeof(label));
}

/* The host task or interrupt that took the most of @t's preempted time, or NULL. */
static const struct hga_bucket *top_offender(const struct hga_total *t)
{
	const struct hga_bucket *best = NULL;
	uint32_t i;

	for (i = 0; i < t->split.offenders.n; i++)
		if (!best || t->split.offenders.v[i].ns > best->ns)
			best = &t->split.offenders.v[i];
	return best;
}

static void row(const struct hga *a, FILE *out, const struct hga_total *t, int y,
		uint64_t scale_ns)
{
	const struct hga_bucket *off = top_offender(t);
	double x = SVG_LABEL_W, w;

	fprintf(out, "<text x='%d' y='%d' font-size='12' text-anchor='end'>guest %d: ",
		SVG_LABEL_W - 8, y + SVG_BAR_H - 3, t->guest);
	xml_text(out, t->comm[0] ? t->comm : "?", sizeof(t->comm));
	fprintf(out, " (%d)</text>\n", t->tid);
	x = bar_parts(out, x, y, HGA_NR_COMP, t->split.ns, comp_fill, thread_comp, scale_ns);
	if (t->uncertain_ns) {
		w = (double)SVG_BAR_W * (double)t->uncertain_ns / (double)scale_ns;
		fprintf(out, "<rect x='%.2f' y='%d' width='%.2f' height='%d' fill='%s'>"
			"<title>%" PRIu64 " uncertain slices, %" PRIu64 " ns</title></rect>\n",
			x, y, w, SVG_BAR_H, UNCERTAIN_FILL, t->nr_uncertain, t->uncertain_ns);
		x += w;
	}
	fprintf(out, "<text x='%.0f' y='%d' font-size='11'>%.3f ms", x + 6, y + SVG_BAR_H - 3,
		(double)total_ns(t) / 1e6);
	if (off && t->split.ns[HGA_C_PREEMPTED]) {
		most_by(a, out, t->split.ns[HGA_C_PREEMPTED], off->key);
		fprintf(out, " (%.3f ms)", (double)off->ns / 1e6);
	}
	fputs("</text>\n", out);
}

/* A request's bar at @y: its split, to @scale_ns. */
static void req_row(const struct hgr *r, FILE *out, const struct hgr_request *q, int y,
		    uint64_t scale_ns)
{
	double x = SVG_LABEL_W;

	fprintf(out, "<text x='%d' y='%d' font-size='12' text-anchor='end'>guest %d: ",
		SVG_LABEL_W - 8, y + SVG_BAR_H - 3, q->guest);
	xml_text(out, q->name[0] ? q->name : "?", 40);
	fprintf(out, " (%d)</text>\n", q->tid);
	x = bar_parts(out, x, y, HGR_NR_COMP, q->split.ns, req_fill, req_comp, scale_ns);
	fprintf(out, "<text x='%.0f' y='%d' font-size='11'>%.3f ms", x + 6, y + SVG_BAR_H - 3,
		(double)q->wall_ns / 1e6);
	if (q->split.ns[HGR_C_PREEMPTED] && q->top_key[0] != HGR_NO_KEY)
		most_by(&r->a, out, q->split.ns[HGR_C_PREEMPTED], q->top_key[0]);
	if (q->split.ns[HGR_C_RUNQ] && q->top_key[2] != HGR_NO_KEY) {
		char label[64];

		fprintf(out, "; queued %.3f ms, most behind ", (double)q->split.ns[HGR_C_RUNQ] / 1e6);
		hgr_runq_label(r, q->top_key[2], label, sizeof(label));
		xml_text(out, label, sizeof(label));
	}
	fputs("</text>\n", out);
}

/* The picture: the threads, then @r's slowest requests (@r NULL: none). */
static int report_svg(const struct hga *a, const struct hgr *r, FILE *out, unsigned int top)
{
	const struct hga_total **order;
	uint64_t scale_ns = 1, req_scale_ns = 1;
	uint32_t i, n = 0, nr_ran, nr_req = r ? r->nr_slow : 0;
	int height, req_y;

	order = calloc(a->nr_threads ? a->nr_threads : 1, sizeof(*order));
	if (!order)
		return -1;
	for (i = 0; i < a->nr_threads; i++)
		if (a->threads[i].tid > 0 && total_ns(&a->threads[i]))
			order[n++] = &a->threads[i];
	qsort(order, n, sizeof(*order), cmp_total);
	nr_ran = n;
	if (top && n > top)
		n = top;
	for (i = 0; i < n; i++)
		if (total_ns(order[i]) > scale_ns)
			scale_ns = total_ns(order[i]);
	if (top && nr_req > top)
		nr_req = top;
	/* the slowest first: the first is the scale */
	if (nr_req && r->slow[0].wall_ns > req_scale_ns)
		req_scale_ns = r->slow[0].wall_ns;

	height = SVG_TOP + (int)n * SVG_ROW_H + 40;
	req_y = height + 30;
	if (nr_req)
		height = req_y + 50 + (int)nr_req * SVG_ROW_H + 30;
	fprintf(out, "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' "
		"font-family='sans-serif'>\n<rect width='100%%' height='100%%' fill='white'/>\n",
		SVG_WIDTH, height);
	fprintf(out, "<text x='10' y='22' font-size='15' font-weight='bold'>Where each guest "
		"thread's time went, in host time (hgclock merge --analyze)</text>\n");
	legend(out);
	fputs("<g id='threads'>\n", out);
	for (i = 0; i < n; i++)
		row(a, out, order[i], SVG_TOP + (int)i * SVG_ROW_H, scale_ns);
	fputs("</g>\n", out);
	if (!n)
		fprintf(out, "<text x='10' y='%d' font-size='12'>no guest thread ran in the "
			"traces (guest sched_switch missing?)</text>\n", SVG_TOP + 12);
	fprintf(out, "<text x='10' y='%d' font-size='11'>one scale for all bars: the longest "
		"is %.3f ms; %u of %u threads, longest first</text>\n",
		SVG_TOP + (int)n * SVG_ROW_H + 26, (double)scale_ns / 1e6, n, nr_ran);
	if (nr_req) {
		fprintf(out, "<text x='10' y='%d' font-size='15' font-weight='bold'>The slowest "
			"requests, each split (its own scale)</text>\n", req_y);
		legend_row(out, req_y + 14, HGR_NR_COMP, req_fill, req_comp);
		fputs("<g id='requests'>\n", out);
		for (i = 0; i < nr_req; i++)
			req_row(r, out, &r->slow[i], req_y + 50 + (int)i * SVG_ROW_H,
				req_scale_ns);
		fputs("</g>\n", out);
		fprintf(out, "<text x='10' y='%d' font-size='11'>one scale for these bars: the "
			"slowest is %.3f ms; %u of %" PRIu64 " split requests, slowest first</text>\n",
			height - 14, (double)req_scale_ns / 1e6, nr_req, r->nr_requests);
	}
	fputs("</svg>\n", out);
	free(order);
	return ferror(out) ? -1 : 0;
}

int hga_report_svg(const struct hga *a, FILE *out, unsigned int top)
{
	return report_svg(a, NULL, out, top);
}

int hgr_report_svg(const struct hgr *r, FILE *out, unsigned int top)
{
	return report_svg(&r->a, r, out, top);
}

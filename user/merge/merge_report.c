// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock merge --report: perf samples counted by the keys of --sort
 * (perf report's spirit), among them the one perf cannot give: the host
 * CPU that ran the vCPU when a guest sample was taken ("pcpu").  Reads
 * the perf inputs once more through the merge engine (one thread, the
 * same mapping as the timeline's), so the counts are those of the
 * merged events.
 *
 * Memory: one entry per distinct key, in a hash table that doubles.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "appev.h"
#include "merge.h"

enum { K_GUEST, K_PCPU, K_VCPU, K_COMM, K_SYM, K_DSO, K_NR };

static const char *const key_names[K_NR] = { "guest", "pcpu", "vcpu", "comm", "sym", "dso" };
static const char *const key_heads[K_NR] = { "Guest", "PCPU", "VCPU", "Command", "Symbol",
					    "Shared Object" };

struct entry {
	char *key;		/* the fields, '\t'-separated */
	uint64_t count;
};

struct report {
	int keys[K_NR], nr_keys;
	struct entry *tab;
	size_t cap, used;
	uint64_t total, host, guest, unplaced;
};

int hgm_report_parse_sort(const char *spec, int *keys, int *nr, char *err, size_t err_len)
{
	const char *p = spec;

	*nr = 0;
	while (*p) {
		size_t n = strcspn(p, ",");
		int k;

		for (k = 0; k < K_NR; k++)
			if (strlen(key_names[k]) == n && !strncmp(p, key_names[k], n))
				break;
		if (k == K_NR || *nr == K_NR) {
			snprintf(err, err_len, "--sort: '%.*s' is not one of guest, pcpu, vcpu, comm, "
				 "sym, dso (each once)", (int)n, p);
			return -1;
		}
		for (int i = 0; i < *nr; i++)
			if (keys[i] == k) {
				snprintf(err, err_len, "--sort: '%s' twice", key_names[k]);
				return -1;
			}
		keys[(*nr)++] = k;
		p += n;
		if (*p == ',')
			p++;
	}
	if (!*nr) {
		snprintf(err, err_len, "--sort: no key");
		return -1;
	}
	return 0;
}

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static int grow(struct report *r)
{
	size_t cap = r->cap ? r->cap * 2 : 1024;
	struct entry *t = calloc(cap, sizeof(*t));

	if (!t)
		return -1;
	for (size_t i = 0; i < r->cap; i++) {
		size_t j;

		if (!r->tab[i].key)
			continue;
		for (j = hash(r->tab[i].key) & (cap - 1); t[j].key; j = (j + 1) & (cap - 1))
			;
		t[j] = r->tab[i];
	}
	free(r->tab);
	r->tab = t;
	r->cap = cap;
	return 0;
}

static int count(struct report *r, const char *key)
{
	size_t j;

	if ((r->used + 1) * 2 > r->cap && grow(r))
		return -1;
	for (j = hash(key) & (r->cap - 1); r->tab[j].key; j = (j + 1) & (r->cap - 1))
		if (!strcmp(r->tab[j].key, key)) {
			r->tab[j].count++;
			return 0;
		}
	r->tab[j].key = strdup(key);
	if (!r->tab[j].key)
		return -1;
	r->tab[j].count = 1;
	r->used++;
	return 0;
}

/* A sample's text is "EVENT IP SYM (DSO)" (perf_in.c): its symbol and object. */
static void split_where(const char *text, char *sym, size_t sym_len, char *dso, size_t dso_len)
{
	const char *p = strchr(text, ' '), *q, *open;
	size_t n;

	snprintf(sym, sym_len, "[unknown]");
	snprintf(dso, dso_len, "[unknown]");
	if (!p || !(q = strchr(p + 1, ' ')))
		return;
	q++;
	open = strrchr(q, '(');
	n = open && open > q ? (size_t)(open - q - 1) : strlen(q);
	snprintf(sym, sym_len, "%.*s", (int)n, q);
	if (open) {
		const char *close = strrchr(open, ')');

		n = close ? (size_t)(close - open - 1) : strlen(open + 1);
		snprintf(dso, dso_len, "%.*s", (int)n, open + 1);
	}
}

static int report_emit(void *ctx, const struct hgm_event *ev)
{
	struct report *r = ctx;
	char key[1024], sym[512], dso[256], f[K_NR][512];
	size_t len = 0;

	if (!ev->app || !ev->in->perf)
		return 0;
	r->total++;
	if (ev->in->guest < 0)
		r->host++;
	else
		r->guest++;
	if (ev->in->guest >= 0 && ev->host_cpu < 0)
		r->unplaced++;
	split_where(ev->app->text, sym, sizeof(sym), dso, sizeof(dso));
	if (ev->in->guest < 0)
		snprintf(f[K_GUEST], sizeof(f[K_GUEST]), "host");
	else
		snprintf(f[K_GUEST], sizeof(f[K_GUEST]), "%d", ev->in->guest);
	if (ev->host_cpu >= 0)
		snprintf(f[K_PCPU], sizeof(f[K_PCPU]), "%d", ev->host_cpu);
	else
		snprintf(f[K_PCPU], sizeof(f[K_PCPU]), "?");
	if (ev->in->guest < 0)
		snprintf(f[K_VCPU], sizeof(f[K_VCPU]), "-");
	else
		snprintf(f[K_VCPU], sizeof(f[K_VCPU]), "%d", ev->cpu);
	snprintf(f[K_COMM], sizeof(f[K_COMM]), "%s", ev->app->name);
	snprintf(f[K_SYM], sizeof(f[K_SYM]), "%s", sym);
	snprintf(f[K_DSO], sizeof(f[K_DSO]), "%s", dso);
	key[0] = '\0';
	for (int i = 0; i < r->nr_keys; i++) {
		int n = snprintf(key + len, sizeof(key) - len, "%s%s", i ? "\t" : "", f[r->keys[i]]);

		if (n < 0 || (size_t)n >= sizeof(key) - len)
			break;
		len += (size_t)n;
	}
	return count(r, key);
}

struct row {
	const char *key;
	uint64_t count, group;	/* group: the samples with the same first field */
};

static size_t first_len(const char *k)
{
	return strcspn(k, "\t");
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp(((const struct row *)a)->key, ((const struct row *)b)->key);
}

/* By the first field's group total, then that field, then count, then key: the same every run. */
static int cmp_row(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	size_t nx = first_len(x->key), ny = first_len(y->key);
	int c;

	if (x->group != y->group)
		return x->group > y->group ? -1 : 1;
	c = strncmp(x->key, y->key, nx < ny ? nx : ny);
	if (c || nx != ny)
		return c ? c : nx < ny ? -1 : 1;
	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return strcmp(x->key, y->key);
}

static int print_report(const struct report *r, FILE *out)
{
	struct row *rows = calloc(r->used ? r->used : 1, sizeof(*rows));
	size_t n = 0;

	if (!rows)
		return -1;
	for (size_t i = 0; i < r->cap; i++)
		if (r->tab[i].key)
			rows[n++] = (struct row){ r->tab[i].key, r->tab[i].count, 0 };
	/* Keys sharing a first field are contiguous in key order: sum each run. */
	qsort(rows, n, sizeof(*rows), cmp_key);
	for (size_t i = 0, j; i < n; i = j) {
		size_t len = first_len(rows[i].key);
		uint64_t sum = 0;

		for (j = i; j < n && first_len(rows[j].key) == len &&
			    !strncmp(rows[j].key, rows[i].key, len); j++)
			sum += rows[j].count;
		for (size_t k = i; k < j; k++)
			rows[k].group = sum;
	}
	qsort(rows, n, sizeof(*rows), cmp_row);
	fprintf(out, "# hgclock merge --report: %" PRIu64 " perf samples (host %" PRIu64
		", guests %" PRIu64 ", %" PRIu64 " guest samples without a host CPU)\n",
		r->total, r->host, r->guest, r->unplaced);
	fprintf(out, "# Overhead: of all samples; Of %s: of the samples of the same %s\n#\n",
		key_names[r->keys[0]], key_names[r->keys[0]]);
	fprintf(out, "# %8s  %9s  %8s", "Overhead", "Samples", "Of first");
	for (int i = 0; i < r->nr_keys; i++)
		fprintf(out, "  %s", key_heads[r->keys[i]]);
	fprintf(out, "\n");
	for (size_t i = 0; i < n; i++) {
		const char *k = rows[i].key;

		fprintf(out, "  %7.2f%%  %9" PRIu64 "  %7.2f%%",
			100.0 * (double)rows[i].count / (double)r->total, rows[i].count,
			100.0 * (double)rows[i].count / (double)rows[i].group);
		while (*k) {
			size_t m = strcspn(k, "\t");

			fprintf(out, "  %.*s", (int)m, k);
			k += m;
			if (*k)
				k++;
		}
		fprintf(out, "\n");
	}
	free(rows);
	return ferror(out) ? -1 : 0;
}

int hgm_report_run(const struct hgm_par *par, const int *keys, int nr_keys, FILE *out,
		   char *err, size_t err_len)
{
	struct report r = { .nr_keys = nr_keys };
	struct hgm m = { 0 };
	struct hgm_options opt = par->opt;
	int ret = 0;

	memcpy(r.keys, keys, (size_t)nr_keys * sizeof(*keys));
	opt.progress = false;
	opt.shard = opt.nr_shards = 0;
	/* The perf inputs alone: the mapping needs only the correlation. */
	for (int i = 0; i < par->nr_inputs && !ret; i++)
		if (par->inputs[i].perf)
			ret = hgm_add_spec(&m, &par->inputs[i], err, err_len);
	if (!ret && !m.nr_in) {
		snprintf(err, err_len, "--report: no perf input (--perf, --guest-perf)");
		ret = HGM_E_INPUT;
	}
	if (!ret)
		ret = hgm_start(&m, par->sync, &opt, err, err_len);
	if (!ret && hgm_run(&m, report_emit, &r)) {
		snprintf(err, err_len, "--report: out of memory");
		ret = HGM_E_SYSTEM;
	}
	if (!ret)
		ret = hgm_read_error(&m, err, err_len);
	if (!ret && print_report(&r, out)) {
		snprintf(err, err_len, "writing the report: %s", strerror(errno));
		ret = HGM_E_SYSTEM;
	}
	hgm_close(&m);
	for (size_t i = 0; i < r.cap; i++)
		free(r.tab[i].key);
	free(r.tab);
	return ret;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * What of a merge to show (merge --from/--to/--guests/--vcpus/--events):
 * the options parsed into a struct hgm_filter, and the event-name match.
 * merge.c applies the filter: machines and vCPUs left out get no streams
 * at all, events outside the window or not named are read, not formatted,
 * and the merge stops once every stream is past --to.
 */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "merge.h"

static int ferr(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return -1;
}

/* A decimal number of at most 19 digits (no sign), or -1. */
static int take_decimal(const char **s, uint64_t *v, int *digits)
{
	const char *p = *s;
	uint64_t x = 0;
	int n = 0;

	while (isdigit((unsigned char)*p)) {
		if (++n > 19)
			return -1;
		x = x * 10 + (uint64_t)(*p++ - '0');
	}
	if (!n)
		return -1;
	*s = p;
	*v = x;
	*digits = n;
	return 0;
}

int hgm_filter_parse_time(const char *s, struct hgm_filter_time *t, char *err, size_t err_len)
{
	const char *p = s;
	uint64_t frac = 0;
	int digits;

	memset(t, 0, sizeof(*t));
	if (take_decimal(&p, &t->whole, &digits))
		goto bad;
	if (*p == '.') {
		p++;
		if (take_decimal(&p, &frac, &digits) || digits > 9)
			goto bad;
		while (digits++ < 9)
			frac *= 10;
		t->frac_ns = (uint32_t)frac;
		t->has_frac = true;
	}
	if (*p)
		goto bad;
	t->set = true;
	return 0;
bad:
	return ferr(err, err_len, "'%s' is not a time of the merged timeline: SECONDS[.FRACTION] "
		    "as its lines print it (at most 9 decimals), or a TSC count on x86-tsc", s);
}

/*
 * @t in the timeline's clock: nanoseconds, or TSC counts for x86-tsc
 * (whole counts only).  0, or -1 with @err.
 */
int hgm_filter_resolve_time(const struct hgm_filter_time *t, uint32_t clock, uint64_t *out,
			    const char *opt, char *err, size_t err_len)
{
	if (clock == HGSYNC_CLOCK_TSC) {
		if (t->has_frac)
			return ferr(err, err_len, "%s: the timeline is on x86-tsc, whose times are "
				    "TSC counts: give a whole count", opt);
		*out = t->whole;
		return 0;
	}
	if (t->whole > (UINT64_MAX - t->frac_ns) / 1000000000ULL)
		return ferr(err, err_len, "%s: %" PRIu64 " s is beyond the clock's range", opt,
			    t->whole);
	*out = t->whole * 1000000000ULL + t->frac_ns;
	return 0;
}

/* "N", "N-M", comma-separated; calls @set for each number, below @limit. */
static int parse_list(const char *list, unsigned int limit, const char *what,
		      int (*set)(struct hgm_filter *, const char *, unsigned int),
		      struct hgm_filter *f, char *err, size_t err_len)
{
	const char *p = list;

	if (!*p)
		return ferr(err, err_len, "empty %s list", what);
	while (*p) {
		const char *item = p;
		uint64_t a, b;
		int digits;

		if (set && !strncmp(p, "host", 4) && (p[4] == ',' || !p[4])) {
			if (set(f, "host", 0))
				return ferr(err, err_len, "'host' is not a %s", what);
			p += 4;
		} else {
			if (take_decimal(&p, &a, &digits))
				goto bad;
			b = a;
			if (*p == '-') {
				p++;
				if (take_decimal(&p, &b, &digits))
					goto bad;
			}
			if (b < a || b >= limit)
				return ferr(err, err_len, "%s '%.*s': %s numbers are 0 to %u", what,
					    (int)strcspn(item, ","), item, what, limit - 1);
			for (uint64_t i = a; i <= b; i++)
				set(f, NULL, (unsigned int)i);
		}
		if (*p == ',' && p[1])
			p++;
		else if (*p)
			goto bad;
		continue;
bad:
		return ferr(err, err_len, "%s list '%s': expected numbers or ranges N-M, "
			    "comma-separated%s", what, list, !strcmp(what, "guest") ?
			    ", and 'host'" : "");
	}
	return 0;
}

static int set_guest(struct hgm_filter *f, const char *word, unsigned int id)
{
	if (word)
		f->host = true;
	else
		f->guest_bits[id / 64] |= 1ULL << (id % 64);
	return 0;
}

static int set_vcpu(struct hgm_filter *f, const char *word, unsigned int id)
{
	if (word)
		return -1;
	f->vcpu_bits[id / 64] |= 1ULL << (id % 64);
	return 0;
}

int hgm_filter_parse_guests(struct hgm_filter *f, const char *list, char *err, size_t err_len)
{
	f->guests_set = true;
	return parse_list(list, HGSYNC_MAX_GUESTS, "guest", set_guest, f, err, err_len);
}

int hgm_filter_parse_vcpus(struct hgm_filter *f, const char *list, char *err, size_t err_len)
{
	f->vcpus_set = true;
	return parse_list(list, HGM_FILTER_MAX_VCPUS, "vCPU", set_vcpu, f, err, err_len);
}

int hgm_filter_parse_events(struct hgm_filter *f, const char *list, char *err, size_t err_len)
{
	const char *p = list;

	if (!*p)
		return ferr(err, err_len, "empty --events list");
	while (*p) {
		size_t n = strcspn(p, ",");
		char *pat, *sep;

		if (!n || n >= HGM_FILTER_EVENT_LEN)
			return ferr(err, err_len, "--events '%s': an empty name, or one longer "
				    "than %d", list, HGM_FILTER_EVENT_LEN - 1);
		if (f->nr_events == HGM_FILTER_MAX_EVENTS)
			return ferr(err, err_len, "--events: at most %d names",
				    HGM_FILTER_MAX_EVENTS);
		pat = f->events[f->nr_events];
		memcpy(pat, p, n);
		pat[n] = '\0';
		/* trace-cmd takes SYSTEM/EVENT as SYSTEM:EVENT too. */
		sep = strchr(pat, '/');
		if (sep && !strchr(pat, ':'))
			*sep = ':';
		if (strchr(pat, ':') != strrchr(pat, ':') || strchr(pat, '/'))
			return ferr(err, err_len, "--events '%s': SYSTEM:EVENT has one separator",
				    pat);
		f->nr_events++;
		p += n;
		if (*p)
			p++;
	}
	return 0;
}

/*
 * trace-cmd record -e's rules: "all"; SYSTEM:EVENT (globs in both);
 * a word alone names a system or, failing that, an event of any system.
 */
bool hgm_filter_name(const struct hgm_filter *f, const char *system, const char *name)
{
	if (!f->nr_events)
		return true;
	for (int i = 0; i < f->nr_events; i++) {
		const char *pat = f->events[i];
		const char *colon = strchr(pat, ':');

		if (!strcmp(pat, "all"))
			return true;
		if (colon) {
			char sys[HGM_FILTER_EVENT_LEN];

			snprintf(sys, sizeof(sys), "%.*s", (int)(colon - pat), pat);
			if (!fnmatch(sys, system, 0) && !fnmatch(colon + 1, name, 0))
				return true;
		} else if (!fnmatch(pat, system, 0) || !fnmatch(pat, name, 0)) {
			return true;
		}
	}
	return false;
}

bool hgm_filter_machine(const struct hgm_filter *f, int guest)
{
	if (!f || !f->guests_set)
		return true;
	if (guest < 0)
		return f->host;
	return guest < HGSYNC_MAX_GUESTS && (f->guest_bits[guest / 64] >> (guest % 64) & 1);
}

bool hgm_filter_vcpu(const struct hgm_filter *f, int vcpu)
{
	if (!f || !f->vcpus_set)
		return true;
	return vcpu >= 0 && vcpu < HGM_FILTER_MAX_VCPUS &&
	       (f->vcpu_bits[vcpu / 64] >> (vcpu % 64) & 1);
}

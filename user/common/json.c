// SPDX-License-Identifier: GPL-2.0
/*
 * Streaming JSON writer.  Keys are passed as NULL inside arrays and at
 * the top level.
 *
 * Bytes go through the writer's buffer, not one stdio call each: a
 * merge's JSON is a quarter of a gigabyte per million events, and
 * fputc() per character (a lock taken each time: the merge has threads)
 * was a third of its time.
 */
#include <string.h>

#include "json.h"

void json_init(struct json_writer *w, FILE *out, bool pretty)
{
	int i;

	w->out = out;
	w->depth = 0;
	w->pretty = pretty;
	w->hold = false;
	w->len = 0;
	for (i = 0; i < JSON_MAX_DEPTH; i++)
		w->need_comma[i] = false;
}

static void flush(struct json_writer *w)
{
	/* A failed write shows in ferror(w->out), which callers check. */
	if (w->len)
		fwrite(w->buf, 1, w->len, w->out);
	w->len = 0;
}

static void put(struct json_writer *w, const char *s, size_t n)
{
	if (n > sizeof(w->buf) - w->len) {
		flush(w);
		if (n > sizeof(w->buf)) {
			fwrite(s, 1, n, w->out);
			return;
		}
	}
	memcpy(w->buf + w->len, s, n);
	w->len += n;
}

static void put_c(struct json_writer *w, char c)
{
	if (w->len == sizeof(w->buf))
		flush(w);
	w->buf[w->len++] = c;
}

static void put_s(struct json_writer *w, const char *s)
{
	put(w, s, strlen(s));
}

/* The end of a public call: its bytes are in the FILE unless held. */
static void done(struct json_writer *w)
{
	if (!w->hold)
		flush(w);
}

/* Bytes a JSON string carries as they are (all others are escaped). */
static bool plain(unsigned char c)
{
	return c >= 0x20 && c != '"' && c != '\\';
}

static void json_escaped(struct json_writer *w, const char *s)
{
	static const char hex[] = "0123456789abcdef";

	put_c(w, '"');
	while (*s) {
		const char *run = s;
		unsigned char c;

		/* Most strings need no escape at all: copied a run at a time. */
		while (plain((unsigned char)*s))
			s++;
		put(w, run, (size_t)(s - run));
		c = (unsigned char)*s;
		if (!c)
			break;
		s++;
		switch (c) {
		case '"':
			put(w, "\\\"", 2);
			break;
		case '\\':
			put(w, "\\\\", 2);
			break;
		case '\n':
			put(w, "\\n", 2);
			break;
		case '\r':
			put(w, "\\r", 2);
			break;
		case '\t':
			put(w, "\\t", 2);
			break;
		default: {
			char u[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };

			put(w, u, sizeof(u));
		}
		}
	}
	put_c(w, '"');
}

/* @v in decimal, at least @min digits (zeros first). */
static void put_u64(struct json_writer *w, uint64_t v, int min)
{
	char d[24];
	int n = 0;

	do {
		d[sizeof(d) - 1 - n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v || n < min);
	put(w, d + sizeof(d) - n, (size_t)n);
}

/* Comma, newline and indentation before a value, then its key. */
static void json_prefix(struct json_writer *w, const char *key)
{
	int i;

	if (w->need_comma[w->depth])
		put_c(w, ',');
	w->need_comma[w->depth] = true;
	if (w->pretty && w->depth > 0) {
		put_c(w, '\n');
		for (i = 0; i < w->depth; i++)
			put(w, "  ", 2);
	}
	if (key) {
		json_escaped(w, key);
		if (w->pretty)
			put(w, ": ", 2);
		else
			put_c(w, ':');
	}
}

static void json_open(struct json_writer *w, const char *key, char c)
{
	json_prefix(w, key);
	put_c(w, c);
	if (w->depth + 1 < JSON_MAX_DEPTH)
		w->depth++;
	w->need_comma[w->depth] = false;
	done(w);
}

static void json_close(struct json_writer *w, char c)
{
	bool had_items = w->need_comma[w->depth];
	int i;

	if (w->depth > 0)
		w->depth--;
	if (w->pretty && had_items) {
		put_c(w, '\n');
		for (i = 0; i < w->depth; i++)
			put(w, "  ", 2);
	}
	put_c(w, c);
	done(w);
}

void json_begin_object(struct json_writer *w, const char *key)
{
	json_open(w, key, '{');
}

void json_end_object(struct json_writer *w)
{
	json_close(w, '}');
}

void json_begin_array(struct json_writer *w, const char *key)
{
	json_open(w, key, '[');
}

void json_end_array(struct json_writer *w)
{
	json_close(w, ']');
}

void json_string(struct json_writer *w, const char *key, const char *value)
{
	json_prefix(w, key);
	json_escaped(w, value);
	done(w);
}

void json_u64(struct json_writer *w, const char *key, uint64_t value)
{
	json_prefix(w, key);
	put_u64(w, value, 1);
	done(w);
}

void json_null(struct json_writer *w, const char *key)
{
	json_prefix(w, key);
	put(w, "null", 4);
	done(w);
}

void json_fixed3(struct json_writer *w, const char *key, uint64_t thousandths)
{
	json_prefix(w, key);
	put_u64(w, thousandths / 1000, 1);
	put_c(w, '.');
	put_u64(w, thousandths % 1000, 3);
	done(w);
}

void json_i64(struct json_writer *w, const char *key, int64_t value)
{
	json_prefix(w, key);
	if (value < 0)
		put_c(w, '-');
	/* The magnitude in unsigned arithmetic: INT64_MIN has no positive twin. */
	put_u64(w, value < 0 ? 0 - (uint64_t)value : (uint64_t)value, 1);
	done(w);
}

void json_bool(struct json_writer *w, const char *key, bool value)
{
	json_prefix(w, key);
	put_s(w, value ? "true" : "false");
	done(w);
}

void json_raw(struct json_writer *w, const char *s)
{
	put_s(w, s);
	done(w);
}

void json_hold(struct json_writer *w)
{
	w->hold = true;
}

int json_release(struct json_writer *w)
{
	w->hold = false;
	flush(w);
	return ferror(w->out) ? -1 : 0;
}

void json_finish(struct json_writer *w)
{
	/* A new top-level value may follow (JSON Lines): no comma before it. */
	if (w->depth == 0)
		w->need_comma[0] = false;
	put_c(w, '\n');
	w->hold = false;
	flush(w);
	fflush(w->out);
}

// SPDX-License-Identifier: GPL-2.0
/*
 * Streaming JSON writer.  Keys are passed as NULL inside arrays and at
 * the top level.
 */
#include <inttypes.h>

#include "json.h"

void json_init(struct json_writer *w, FILE *out, bool pretty)
{
	int i;

	w->out = out;
	w->depth = 0;
	w->pretty = pretty;
	for (i = 0; i < JSON_MAX_DEPTH; i++)
		w->need_comma[i] = false;
}

static void json_escaped(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		switch (c) {
		case '"':
			fputs("\\\"", out);
			break;
		case '\\':
			fputs("\\\\", out);
			break;
		case '\n':
			fputs("\\n", out);
			break;
		case '\r':
			fputs("\\r", out);
			break;
		case '\t':
			fputs("\\t", out);
			break;
		default:
			if (c < 0x20)
				fprintf(out, "\\u%04x", c);
			else
				fputc(c, out);
		}
	}
	fputc('"', out);
}

/* Comma, newline and indentation before a value, then its key. */
static void json_prefix(struct json_writer *w, const char *key)
{
	int i;

	if (w->need_comma[w->depth])
		fputc(',', w->out);
	w->need_comma[w->depth] = true;
	if (w->pretty && w->depth > 0) {
		fputc('\n', w->out);
		for (i = 0; i < w->depth; i++)
			fputs("  ", w->out);
	}
	if (key) {
		json_escaped(w->out, key);
		fputs(w->pretty ? ": " : ":", w->out);
	}
}

static void json_open(struct json_writer *w, const char *key, char c)
{
	json_prefix(w, key);
	fputc(c, w->out);
	if (w->depth + 1 < JSON_MAX_DEPTH)
		w->depth++;
	w->need_comma[w->depth] = false;
}

static void json_close(struct json_writer *w, char c)
{
	bool had_items = w->need_comma[w->depth];
	int i;

	if (w->depth > 0)
		w->depth--;
	if (w->pretty && had_items) {
		fputc('\n', w->out);
		for (i = 0; i < w->depth; i++)
			fputs("  ", w->out);
	}
	fputc(c, w->out);
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
	json_escaped(w->out, value);
}

void json_u64(struct json_writer *w, const char *key, uint64_t value)
{
	json_prefix(w, key);
	fprintf(w->out, "%" PRIu64, value);
}

void json_null(struct json_writer *w, const char *key)
{
	json_prefix(w, key);
	fputs("null", w->out);
}

void json_fixed3(struct json_writer *w, const char *key, uint64_t thousandths)
{
	json_prefix(w, key);
	fprintf(w->out, "%" PRIu64 ".%03u", thousandths / 1000, (unsigned int)(thousandths % 1000));
}

void json_i64(struct json_writer *w, const char *key, int64_t value)
{
	json_prefix(w, key);
	fprintf(w->out, "%" PRId64, value);
}

void json_bool(struct json_writer *w, const char *key, bool value)
{
	json_prefix(w, key);
	fputs(value ? "true" : "false", w->out);
}

void json_finish(struct json_writer *w)
{
	/* A new top-level value may follow (JSON Lines): no comma before it. */
	if (w->depth == 0)
		w->need_comma[0] = false;
	fputc('\n', w->out);
	fflush(w->out);
}

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A small streaming JSON writer: objects, arrays, strings (escaped) and
 * integers, with commas placed by the writer.  Enough for the tool's
 * --json outputs; no allocation.
 */
#ifndef HGCLOCK_JSON_H
#define HGCLOCK_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 16

struct json_writer {
	FILE *out;
	int depth;
	bool need_comma[JSON_MAX_DEPTH];
	bool pretty;
};

void json_init(struct json_writer *w, FILE *out, bool pretty);
void json_begin_object(struct json_writer *w, const char *key);
void json_end_object(struct json_writer *w);
void json_begin_array(struct json_writer *w, const char *key);
void json_end_array(struct json_writer *w);
void json_string(struct json_writer *w, const char *key, const char *value);
void json_u64(struct json_writer *w, const char *key, uint64_t value);
void json_i64(struct json_writer *w, const char *key, int64_t value);
/* @thousandths / 1000 as a decimal number with three decimals (us from ns). */
void json_fixed3(struct json_writer *w, const char *key, uint64_t thousandths);
void json_bool(struct json_writer *w, const char *key, bool value);
void json_null(struct json_writer *w, const char *key);
/* Ends a top-level value with a newline; another may follow (JSON Lines). */
void json_finish(struct json_writer *w);

#endif /* HGCLOCK_JSON_H */

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A small streaming JSON writer: objects, arrays, strings (escaped) and
 * integers, with commas placed by the writer.  Enough for the tool's
 * --json outputs; no allocation.
 *
 * Each call formats into the writer's own buffer and hands it to the
 * FILE with one fwrite() when it returns, so the FILE holds everything
 * written so far.  Between json_hold() and json_release() the bytes stay
 * in the buffer (written when it fills), for one fwrite() per merged
 * event: the caller must not write to the FILE itself in between.
 */
#ifndef HGCLOCK_JSON_H
#define HGCLOCK_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 16
#define JSON_BUF_SIZE 4096

struct json_writer {
	FILE *out;
	int depth;
	bool need_comma[JSON_MAX_DEPTH];
	bool pretty;
	bool hold;
	size_t len;			/* bytes of buf not yet given to out */
	char buf[JSON_BUF_SIZE];
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
/* @s as it is, outside the JSON's structure (a newline between values). */
void json_raw(struct json_writer *w, const char *s);
/* Keep what follows in the buffer until json_release(). */
void json_hold(struct json_writer *w);
/* Write what was held; 0, or -1 when the FILE has had an error. */
int json_release(struct json_writer *w);
/* Ends a top-level value with a newline; another may follow (JSON Lines). */
void json_finish(struct json_writer *w);

#endif /* HGCLOCK_JSON_H */

// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of the JSON writer: exact output for nesting, commas,
 * escaping and integer extremes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kselftest_harness.h"
#include "json.h"

struct capture {
	char *buf;
	size_t len;
	FILE *f;
};

static void cap_open(struct capture *c)
{
	c->buf = NULL;
	c->len = 0;
	c->f = open_memstream(&c->buf, &c->len);
}

static const char *cap_close(struct capture *c)
{
	fclose(c->f);
	return c->buf;
}

TEST(compact_nesting)
{
	struct json_writer w;
	struct capture c;

	cap_open(&c);
	json_init(&w, c.f, false);
	json_begin_object(&w, NULL);
	json_u64(&w, "a", 1);
	json_begin_array(&w, "b");
	json_u64(&w, NULL, 2);
	json_begin_object(&w, NULL);
	json_end_object(&w);
	json_bool(&w, NULL, true);
	json_end_array(&w);
	json_i64(&w, "c", -3);
	json_end_object(&w);
	json_finish(&w);
	EXPECT_STREQ("{\"a\":1,\"b\":[2,{},true],\"c\":-3}\n", cap_close(&c));
	free(c.buf);
}

TEST(escaping)
{
	struct json_writer w;
	struct capture c;

	cap_open(&c);
	json_init(&w, c.f, false);
	json_string(&w, NULL, "q\"b\\n\n\t\x01");
	json_finish(&w);
	EXPECT_STREQ("\"q\\\"b\\\\n\\n\\t\\u0001\"\n", cap_close(&c));
	free(c.buf);
}

TEST(integer_extremes)
{
	struct json_writer w;
	struct capture c;

	cap_open(&c);
	json_init(&w, c.f, false);
	json_begin_array(&w, NULL);
	json_u64(&w, NULL, 18446744073709551615ULL);
	json_i64(&w, NULL, -9223372036854775807LL - 1);
	json_end_array(&w);
	json_finish(&w);
	EXPECT_STREQ("[18446744073709551615,-9223372036854775808]\n", cap_close(&c));
	free(c.buf);
}

TEST(pretty)
{
	struct json_writer w;
	struct capture c;

	cap_open(&c);
	json_init(&w, c.f, true);
	json_begin_object(&w, NULL);
	json_u64(&w, "a", 1);
	json_begin_array(&w, "e");
	json_end_array(&w);
	json_end_object(&w);
	json_finish(&w);
	EXPECT_STREQ("{\n  \"a\": 1,\n  \"e\": []\n}\n", cap_close(&c));
	free(c.buf);
}

TEST(json_lines)
{
	struct json_writer w;
	struct capture c;

	cap_open(&c);
	json_init(&w, c.f, false);
	json_begin_object(&w, NULL);
	json_u64(&w, "a", 1);
	json_end_object(&w);
	json_finish(&w);
	json_begin_object(&w, NULL);
	json_u64(&w, "a", 2);
	json_end_object(&w);
	json_finish(&w);
	EXPECT_STREQ("{\"a\":1}\n{\"a\":2}\n", cap_close(&c));
	free(c.buf);
}

TEST_HARNESS_MAIN

// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of libhgclock's pure helpers and the tool's parsing helpers.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#include <string.h>

#include "kselftest_harness.h"
#include "libhgclock.h"
#include "cmd.h"
#include "plot_axis.h"
#include "proto.h"
#include "vcpu_lines.h"

TEST(role_names)
{
	EXPECT_STREQ("bare", hgclock_role_name(HGCLOCK_ROLE_BARE));
	EXPECT_STREQ("guest", hgclock_role_name(HGCLOCK_ROLE_GUEST));
	EXPECT_STREQ("host", hgclock_role_name(HGCLOCK_ROLE_HOST));
	EXPECT_STREQ("nested", hgclock_role_name(HGCLOCK_ROLE_NESTED));
	EXPECT_STREQ("unknown", hgclock_role_name(99));
}

TEST(clock_flags)
{
	char buf[128];

	EXPECT_STREQ("", hgclock_clock_flags_str(0, buf, sizeof(buf)));
	EXPECT_STREQ("tsc_unstable,constant_tsc",
		     hgclock_clock_flags_str(HGCLOCK_CLK_TSC_UNSTABLE |
					     HGCLOCK_CLK_CONSTANT_TSC, buf, sizeof(buf)));
	/* Unknown bits are shown, not dropped. */
	EXPECT_STREQ("sched_clock_stable,0x80000000",
		     hgclock_clock_flags_str(HGCLOCK_CLK_SCHED_CLOCK_STABLE |
					     0x80000000u, buf, sizeof(buf)));
	/* Truncation stays NUL terminated within the buffer. */
	hgclock_clock_flags_str(0x3f, buf, 8);
	EXPECT_GT(8, strlen(buf));
}

TEST(open_errors)
{
	EXPECT_EQ(HGCLOCK_EXIT_NO_DEVICE, hgclock_open_exit(-ENOENT));
	EXPECT_EQ(HGCLOCK_EXIT_PERM, hgclock_open_exit(-EACCES));
	EXPECT_EQ(HGCLOCK_EXIT_FAILURE, hgclock_open_exit(-EIO));
	EXPECT_NE(NULL, strstr(hgclock_open_hint(-ENOENT), "load the module"));
	EXPECT_EQ(-ENOENT, hgclock_open("/nonexistent/hgclock"));
}

TEST(parse_decimal)
{
	uint64_t v;

	EXPECT_TRUE(parse_u64("0", 10, &v));
	EXPECT_EQ(0, v);
	EXPECT_TRUE(parse_u64("18446744073709551615", UINT64_MAX, &v));
	EXPECT_EQ(UINT64_MAX, v);
	EXPECT_FALSE(parse_u64("18446744073709551616", UINT64_MAX, &v));
	EXPECT_FALSE(parse_u64("11", 10, &v));
	EXPECT_FALSE(parse_u64("-1", 10, &v));
	EXPECT_FALSE(parse_u64(" 1", 10, &v));
	EXPECT_FALSE(parse_u64("1x", 10, &v));
	EXPECT_FALSE(parse_u64("", 10, &v));
	EXPECT_FALSE(parse_u64(NULL, 10, &v));
}

TEST(proto_header_checks)
{
	struct hgp_header h = { .magic = HGP_MAGIC, .type = HGP_RECORDS, .length = 64 };

	EXPECT_EQ(0, hgp_check_header(&h));
	h.length = HGP_MAX_PAYLOAD + 1;
	EXPECT_EQ(-EPROTO, hgp_check_header(&h));
	h.length = 0;
	h.magic = 0x12345678;
	EXPECT_EQ(-EPROTO, hgp_check_header(&h));
	h.magic = HGP_MAGIC;
	h.type = 0;
	EXPECT_EQ(-EPROTO, hgp_check_header(&h));
	h.type = HGP_TYPE_MAX + 1;
	EXPECT_EQ(-EPROTO, hgp_check_header(&h));
	h.type = HGP_BYE;
	h.flags = 1;
	EXPECT_EQ(-EPROTO, hgp_check_header(&h));
	h.flags = 0;
	h.reserved = 1;
	EXPECT_EQ(-EPROTO, hgp_check_header(&h));
}

/* Framing over a socket pair: what is sent is what is received. */
TEST(proto_round_trip)
{
	static uint8_t buf[HGP_MAX_PAYLOAD];
	struct hgp_header h;
	int sv[2];

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	ASSERT_EQ(0, hgp_send(sv[0], HGP_ERROR, "boom", 4));
	ASSERT_EQ(0, hgp_recv(sv[1], &h, buf));
	EXPECT_EQ(HGP_ERROR, h.type);
	EXPECT_EQ(4, h.length);
	EXPECT_EQ(0, memcmp(buf, "boom", 4));
	EXPECT_EQ(-EMSGSIZE, hgp_send(sv[0], HGP_RECORDS, buf, HGP_MAX_PAYLOAD + 1));
	/* A peer that closes mid-message. */
	ASSERT_EQ(8, write(sv[0], "HGCPxxxx", 8));
	close(sv[0]);
	EXPECT_EQ(-ECONNRESET, hgp_recv(sv[1], &h, buf));
	close(sv[1]);
}

TEST(proto_connect_specs)
{
	char err[300];

	EXPECT_EQ(-EINVAL, hgp_connect("nonsense", 1, err, sizeof(err)));
	EXPECT_NE(NULL, strstr(err, "vsock:CID"));
	EXPECT_EQ(-EINVAL, hgp_connect("vsock:", 1, err, sizeof(err)));
	EXPECT_EQ(-EINVAL, hgp_connect("vsock:3:x", 1, err, sizeof(err)));
	EXPECT_EQ(-EINVAL, hgp_connect("tcp:nohostport", 1, err, sizeof(err)));
}

/* ---- convert's standard input: "VCPU VALUE" lines ---- */

TEST(vcpu_value_lines_strict)
{
	static const char *const bad[] = {
		"", " ", "5", "0 -5", "-1 5", "+1 5", "0 18446744073709551616",
		"0 99999999999999999999999", "4096 5", "0 5 6", "0 5x", "0x10 5", "0 0x10",
		"0\t5 #", "a b", "0 5\n",
	};
	uint64_t v, x;

	ASSERT_TRUE(hg_parse_vcpu_value("3 18446744073709551615", 22, 4095, &v, &x));
	EXPECT_EQ(3, v);
	EXPECT_EQ(UINT64_MAX, x);
	ASSERT_TRUE(hg_parse_vcpu_value(" 4095\t 7 \r", 10, 4095, &v, &x));
	EXPECT_EQ(4095, v);
	EXPECT_EQ(7, x);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		EXPECT_FALSE(hg_parse_vcpu_value(bad[i], strlen(bad[i]), 4095, &v, &x))
			TH_LOG("'%s' accepted", bad[i]);
	}
	/* A NUL inside the line is junk too. */
	EXPECT_FALSE(hg_parse_vcpu_value("0 5\0" "7", 5, 4095, &v, &x));
}

/* Reads @text as standard input: the values read, until the first error. */
static int read_lines(const char *text, uint64_t *vals, size_t max, size_t *n,
		      unsigned long *lineno)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	struct hg_line_reader lr = { .in = f };
	uint64_t v, x;
	int ret;

	*n = 0;
	if (!f)
		return -ENOMEM;
	while ((ret = hg_read_vcpu_value(&lr, 4095, &v, &x)) > 0)
		if (*n < max)
			vals[(*n)++] = x;
	*lineno = lr.lineno;
	hg_line_reader_free(&lr);
	fclose(f);
	return ret;
}

TEST(vcpu_value_stdin)
{
	uint64_t vals[4];
	unsigned long lineno;
	char *longline;
	size_t n;

	ASSERT_EQ(0, read_lines("0 5\n1 6\n1 7", vals, 4, &n, &lineno));
	EXPECT_EQ(3, n);
	EXPECT_EQ(7, vals[2]);
	/* -5 was read as 18446744073709551611, an overlong number as UINT64_MAX. */
	EXPECT_EQ(-EINVAL, read_lines("0 5\n0 -5\n", vals, 4, &n, &lineno));
	EXPECT_EQ(1, n);
	EXPECT_EQ(2, lineno);
	EXPECT_EQ(-EINVAL, read_lines("0 184467440737095516160\n", vals, 4, &n, &lineno));
	EXPECT_EQ(0, n);
	EXPECT_EQ(1, lineno);
	/*
	 * A line over 255 characters was split in two: its tail read as a
	 * second line, converting a wrong value.  Now it is one bad line.
	 */
	longline = malloc(400);
	ASSERT_NE(NULL, longline);
	memset(longline, ' ', 399);
	longline[399] = '\0';
	memcpy(longline, "0", 1);
	memcpy(longline + 250, "12345678", 8);	/* splits at 255: "0    ...  12345" */
	memcpy(longline + 300, "x 5\n", 4);
	EXPECT_EQ(-EINVAL, read_lines(longline, vals, 4, &n, &lineno));
	EXPECT_EQ(0, n);
	EXPECT_EQ(1, lineno);
	/* Long but well-formed: one line, one value. */
	memset(longline, ' ', 399);
	memcpy(longline, "1", 1);
	memcpy(longline + 380, "42\n", 3);
	longline[383] = '\0';
	ASSERT_EQ(0, read_lines(longline, vals, 4, &n, &lineno));
	EXPECT_EQ(1, n);
	EXPECT_EQ(42, vals[0]);
	free(longline);
}

/* ---- plot's axes ---- */

TEST(plot_axis_ticks)
{
	double t[HG_AXIS_MAX_TICKS];
	size_t n = hg_axis_ticks(0.3, 9.7, t, HG_AXIS_MAX_TICKS);

	ASSERT_EQ(9, n);
	EXPECT_EQ(1.0, t[0]);
	EXPECT_EQ(9.0, t[8]);
	EXPECT_EQ(0, hg_axis_ticks(5, 1, t, HG_AXIS_MAX_TICKS));
	EXPECT_EQ(0, hg_axis_ticks(0, 1.0 / 0.0, t, HG_AXIS_MAX_TICKS));
}

/*
 * Probe times near 2^64 ns: a step below the doubles' resolution there
 * stopped moving `t += step`, and plot looped forever, its output
 * growing.  Now a bounded number of distinct ticks.
 */
TEST(plot_axis_near_2_64)
{
	double top = 18446744073.709551615;	/* 2^64 ns in seconds */
	double t[HG_AXIS_MAX_TICKS];
	size_t n;

	n = hg_axis_ticks(top - 1e-7, top, t, HG_AXIS_MAX_TICKS);
	EXPECT_GE(HG_AXIS_MAX_TICKS, n);
	for (size_t i = 1; i < n; i++)
		EXPECT_LT(t[i - 1], t[i]);
	n = hg_axis_ticks(top, top, t, HG_AXIS_MAX_TICKS);
	EXPECT_GE(1, n);
	n = hg_axis_ticks(0, top, t, HG_AXIS_MAX_TICKS);
	EXPECT_LT(0, n);
	EXPECT_GE(HG_AXIS_MAX_TICKS, n);
}

TEST_HARNESS_MAIN

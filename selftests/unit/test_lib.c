// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of libhgclock's pure helpers and the tool's parsing helpers.
 */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>
#include <string.h>

#include "kselftest_harness.h"
#include "libhgclock.h"
#include "cmd.h"
#include "proto.h"

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

	EXPECT_EQ(-EINVAL, hgp_connect("nonsense", err, sizeof(err)));
	EXPECT_NE(NULL, strstr(err, "vsock:CID"));
	EXPECT_EQ(-EINVAL, hgp_connect("vsock:", err, sizeof(err)));
	EXPECT_EQ(-EINVAL, hgp_connect("vsock:3:x", err, sizeof(err)));
	EXPECT_EQ(-EINVAL, hgp_connect("tcp:nohostport", err, sizeof(err)));
}

TEST_HARNESS_MAIN

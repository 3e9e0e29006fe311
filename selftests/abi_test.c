// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock kselftests: the structs' size-based extensibility
 * (Documentation/uapi.rst, "Extending the structures").  For every ioctl
 * that takes a struct: a size below the first published one is EINVAL;
 * the published size works; a larger size works when the unknown tail is
 * zero and is E2BIG when it is not; the kernel writes back its own size
 * in the size field and never a byte past its struct; the ioctl numbers
 * carry the first published size.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "../user/lib/libhgclock.h"
#include "test_util.h"

#define BUF_SIZE	8192
#define POISON		0xcc

struct sized_ioctl {
	const char *name;
	unsigned long cmd;
	size_t ver0;
	/* Fills a valid request (size aside) into @buf. */
	void (*fill)(void *buf);
	int ok_errno;	/* errno that still means "accepted": 0 or e.g. ENOENT */
};

static void fill_read_clock(void *buf) { (void)buf; }
static void fill_ring_config(void *buf) { (void)buf; }
static void fill_snapshot(void *buf) { (void)buf; }

static void fill_produce(void *buf)
{
	struct hgclock_produce *p = buf;

	p->count = 1;
}

static void fill_track(void *buf)
{
	struct hgclock_track *t = buf;

	/* Not tracked: ENOENT once the argument is accepted. */
	t->flags = HGCLOCK_TRACK_REMOVE;
	t->tid = getpid();
}

static void fill_list_vcpus(void *buf) { (void)buf; }

static void fill_exit_pair(void *buf) { (void)buf; }

static const struct sized_ioctl ioctls[] = {
	{ "READ_CLOCK", HGCLOCK_IOC_READ_CLOCK, HGCLOCK_READ_CLOCK_SIZE_VER0, fill_read_clock, 0 },
	{ "RING_CONFIG", HGCLOCK_IOC_RING_CONFIG, HGCLOCK_RING_CONFIG_SIZE_VER0,
	  fill_ring_config, 0 },
	{ "SNAPSHOT", HGCLOCK_IOC_SNAPSHOT, HGCLOCK_SNAPSHOT_SIZE_VER0, fill_snapshot, 0 },
	{ "PRODUCE", HGCLOCK_IOC_PRODUCE, HGCLOCK_PRODUCE_SIZE_VER0, fill_produce, 0 },
	{ "TRACK", HGCLOCK_IOC_TRACK, HGCLOCK_TRACK_SIZE_VER0, fill_track, ENOENT },
	{ "LIST_VCPUS", HGCLOCK_IOC_LIST_VCPUS, HGCLOCK_LIST_VCPUS_SIZE_VER0,
	  fill_list_vcpus, ENOSPC },
	/* ENODEV without a hypervisor: the size was accepted first. */
	{ "EXIT_PAIR", HGCLOCK_IOC_EXIT_PAIR, HGCLOCK_EXIT_PAIR_SIZE_VER0, fill_exit_pair, ENODEV },
};

/* Builds a request of @usize bytes; @tail_byte fills [ver0, usize). */
static void build(unsigned char *buf, const struct sized_ioctl *io, size_t usize,
		  unsigned char tail_byte)
{
	uint32_t size32 = (uint32_t)usize;

	memset(buf, POISON, BUF_SIZE);
	memset(buf, 0, io->ver0);
	io->fill(buf);
	memcpy(buf, &size32, sizeof(size32));
	if (usize > io->ver0)
		memset(buf + io->ver0, tail_byte, usize - io->ver0);
}

static int call(int fd, const struct sized_ioctl *io, unsigned char *buf)
{
	if (!ioctl(fd, io->cmd, buf))
		return 0;
	return errno == io->ok_errno ? 0 : errno;
}

FIXTURE(abi) {
	int fd;
	unsigned char *buf;
};

FIXTURE_SETUP(abi)
{
	self->fd = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);
	if (self->fd < 0 && errno == ENOENT)
		SKIP(return, HGCLOCK_DEV_PATH " missing: module not loaded");
	ASSERT_LE(0, self->fd);
	self->buf = malloc(BUF_SIZE);
	ASSERT_NE(NULL, self->buf);
}

FIXTURE_TEARDOWN(abi)
{
	free(self->buf);
	if (self->fd >= 0)
		close(self->fd);
}

/* The number keeps the first published size, whatever sizeof() says. */
TEST_F(abi, numbers_carry_first_size)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(ioctls); i++) {
		EXPECT_EQ(ioctls[i].ver0, _IOC_SIZE(ioctls[i].cmd)) TH_LOG("%s", ioctls[i].name);
		EXPECT_EQ(HGCLOCK_IOC_MAGIC, _IOC_TYPE(ioctls[i].cmd));
	}
	EXPECT_EQ(HGCLOCK_INFO_SIZE_VER0, _IOC_SIZE(HGCLOCK_IOC_GET_INFO));
}

TEST_F(abi, smaller_than_first_size_refused)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(ioctls); i++) {
		build(self->buf, &ioctls[i], ioctls[i].ver0 - 8, 0);
		EXPECT_EQ(EINVAL, call(self->fd, &ioctls[i], self->buf)) TH_LOG("%s", ioctls[i].name);
		build(self->buf, &ioctls[i], 0, 0);
		EXPECT_EQ(EINVAL, call(self->fd, &ioctls[i], self->buf)) TH_LOG("%s", ioctls[i].name);
	}
}

TEST_F(abi, first_size_accepted)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(ioctls); i++) {
		uint32_t size;

		build(self->buf, &ioctls[i], ioctls[i].ver0, 0);
		EXPECT_EQ(0, call(self->fd, &ioctls[i], self->buf)) TH_LOG("%s", ioctls[i].name);
		memcpy(&size, self->buf, sizeof(size));
		EXPECT_EQ(ioctls[i].ver0, size) TH_LOG("%s", ioctls[i].name);
		/* Nothing written past the struct. */
		EXPECT_EQ(POISON, self->buf[ioctls[i].ver0]) TH_LOG("%s", ioctls[i].name);
	}
}

/* A newer caller's larger struct: a zero tail is accepted and left alone. */
TEST_F(abi, larger_with_zero_tail_accepted)
{
	static const size_t extra[] = { 8, 64, 4096 - 256 };
	size_t i, j, k;

	for (i = 0; i < ARRAY_SIZE(ioctls); i++) {
		for (j = 0; j < ARRAY_SIZE(extra); j++) {
			size_t usize = ioctls[i].ver0 + extra[j];
			uint32_t size;
			int untouched = 1;

			build(self->buf, &ioctls[i], usize, 0);
			EXPECT_EQ(0, call(self->fd, &ioctls[i], self->buf))
				TH_LOG("%s with %zu bytes", ioctls[i].name, usize);
			/* The size says what the kernel wrote: its own (TRACK writes nothing). */
			memcpy(&size, self->buf, sizeof(size));
			EXPECT_EQ(ioctls[i].cmd == HGCLOCK_IOC_TRACK ? usize : ioctls[i].ver0, size)
				TH_LOG("%s", ioctls[i].name);
			for (k = ioctls[i].ver0; k < usize; k++)
				untouched &= self->buf[k] == 0;
			for (k = usize; k < usize + 64; k++)
				untouched &= self->buf[k] == POISON;
			EXPECT_TRUE(untouched) TH_LOG("%s: bytes past the struct written", ioctls[i].name);
		}
	}
}

/* A larger struct with fields this kernel does not know: E2BIG. */
TEST_F(abi, larger_with_unknown_fields_refused)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(ioctls); i++) {
		build(self->buf, &ioctls[i], ioctls[i].ver0 + 16, 0);
		self->buf[ioctls[i].ver0 + 15] = 1;
		EXPECT_EQ(E2BIG, call(self->fd, &ioctls[i], self->buf)) TH_LOG("%s", ioctls[i].name);
		/* More than a page: refused whatever it holds. */
		build(self->buf, &ioctls[i], 4097 + 8, 0);
		EXPECT_EQ(E2BIG, call(self->fd, &ioctls[i], self->buf)) TH_LOG("%s", ioctls[i].name);
	}
}

/* GET_INFO: output only; the kernel writes min(caller's, its own) bytes. */
TEST_F(abi, get_info_sizes)
{
	struct hgclock_info *info = (void *)self->buf;
	size_t k;
	int untouched = 1;

	memset(self->buf, POISON, BUF_SIZE);
	info->size = HGCLOCK_INFO_SIZE_VER0 - 8;
	info->flags = 0;
	EXPECT_EQ(-1, ioctl(self->fd, HGCLOCK_IOC_GET_INFO, info));
	EXPECT_EQ(EINVAL, errno);
	info->size = 1024;
	info->flags = 0;
	ASSERT_EQ(0, ioctl(self->fd, HGCLOCK_IOC_GET_INFO, info));
	EXPECT_EQ(sizeof(struct hgclock_info), info->size);
	EXPECT_EQ(HGCLOCK_ABI_MAJOR, info->abi_major);
	EXPECT_EQ(HGCLOCK_ABI_MINOR, info->abi_minor);
	for (k = sizeof(struct hgclock_info); k < 1024 + 64; k++)
		untouched &= self->buf[k] == POISON;
	EXPECT_TRUE(untouched);
}

TEST_HARNESS_MAIN

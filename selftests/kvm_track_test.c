// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock kselftests: tracking real KVM vCPU threads, with a tiny guest
 * made through the KVM API in the test VM (kvm_amd or kvm_intel on the
 * emulated CPU).  Skips where there is no /dev/kvm.
 *
 *  - a thread TRACK_ADD followed before its first VM entry gets its vCPU
 *    id (and KVM's flags) at that entry (issue 30 item 9);
 *  - TRACK_ADD and TRACK_REMOVE racing a vCPU's entries never make a
 *    false "table full" UNTRACKED record (issue 30 item 10).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/kvm.h>

#include "kselftest_harness.h"
#include "../user/lib/libhgclock.h"
#include "test_util.h"

static int track(int fd, pid_t tid, unsigned int flags)
{
	struct hgclock_track req = {
		.size = sizeof(req), .flags = flags, .tid = tid,
	};

	return ioctl(fd, HGCLOCK_IOC_TRACK, &req) ? -errno : 0;
}

/* @tid's LIST_VCPUS entry into @out; false when it is not listed. */
static bool list_one(int fd, pid_t tid, struct hgclock_vcpu_info *out)
{
	struct hgclock_vcpu_info *infos = NULL;
	unsigned int nr = 0, i;
	bool found = false;

	if (hgclock_list_vcpus(fd, &infos, &nr))
		return false;
	for (i = 0; i < nr; i++) {
		if (infos[i].tid == tid) {
			*out = infos[i];
			found = true;
		}
	}
	free(infos);
	return found;
}

/* What the rings said about one thread. */
struct kvm_recs {
	pid_t tid;
	int nr_seen, nr_seen_vcpu0, nr_untracked;
	int nr_seen_kvm;	/* VCPU_SEEN with HGCLOCK_VCPU_KVM */
	int nr_run_vcpu0;	/* VCPU_RUN/STOP carrying vCPU 0 */
};

static int kvm_recs_fn(const struct hgclock_rec_header *h, void *arg)
{
	struct kvm_recs *c = arg;
	const struct hgclock_rec_vcpu *v = (const void *)h;
	const struct hgclock_rec_vcpu_seen *s = (const void *)h;

	switch (h->type) {
	case HGCLOCK_REC_VCPU_SEEN:
		if (s->tid != c->tid)
			break;
		c->nr_seen++;
		c->nr_seen_vcpu0 += s->vcpu_id == 0;
		c->nr_seen_kvm += !!(s->flags & HGCLOCK_VCPU_KVM);
		break;
	case HGCLOCK_REC_VCPU_RUN:
	case HGCLOCK_REC_VCPU_STOP:
		if (v->tid == c->tid && v->vcpu_id == 0)
			c->nr_run_vcpu0++;
		break;
	case HGCLOCK_REC_UNTRACKED:
		if (v->tid == c->tid)
			c->nr_untracked++;
		break;
	}
	return 0;
}

static void drain(struct __test_metadata *_metadata, struct hgclock_map *map,
		  struct kvm_recs *c)
{
	unsigned int cpu;

	for (cpu = 0; cpu < map->meta->nr_cpus; cpu++)
		ASSERT_LE(0, hgclock_ring_consume(map, cpu, kvm_recs_fn, c));
}

/*
 * The guest: real mode at address 0, "out 0x10, al; jmp 0" (every
 * iteration an exit to user space and a new entry) or "hlt" (one entry).
 */
static const unsigned char guest_out_loop[] = { 0xe6, 0x10, 0xeb, 0xfc };
static const unsigned char guest_hlt[] = { 0xf4 };

struct tiny_vm {
	int kvm, vm, vcpu;
	struct kvm_run *run;
};

/* 0, or 1 when no vCPU could be made, 2 when it cannot be set up. */
static int tiny_vm_create(struct tiny_vm *t, const unsigned char *code, size_t len)
{
	struct kvm_userspace_memory_region region;
	struct kvm_sregs sregs;
	struct kvm_regs regs;
	unsigned char *mem;
	int size;

	t->kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (t->kvm < 0)
		return 1;
	t->vm = ioctl(t->kvm, KVM_CREATE_VM, 0);
	if (t->vm < 0)
		return 1;
	mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return 1;
	memcpy(mem, code, len);
	memset(&region, 0, sizeof(region));
	region.memory_size = 4096;
	region.userspace_addr = (uintptr_t)mem;
	if (ioctl(t->vm, KVM_SET_USER_MEMORY_REGION, &region))
		return 1;
	t->vcpu = ioctl(t->vm, KVM_CREATE_VCPU, 0);
	if (t->vcpu < 0)
		return 1;
	size = ioctl(t->kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (size <= 0)
		return 2;
	t->run = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, t->vcpu, 0);
	if (t->run == MAP_FAILED)
		return 2;
	if (ioctl(t->vcpu, KVM_GET_SREGS, &sregs))
		return 2;
	sregs.cs.base = 0;
	sregs.cs.selector = 0;
	if (ioctl(t->vcpu, KVM_SET_SREGS, &sregs))
		return 2;
	memset(&regs, 0, sizeof(regs));
	regs.rflags = 2;
	if (ioctl(t->vcpu, KVM_SET_REGS, &regs))
		return 2;
	return 0;
}

/* Child and parent talk over two pipes, one byte at a time. */
struct chan {
	int to_parent[2], to_child[2];
};

static int say(int fd, char c)
{
	return write(fd, &c, 1) == 1 ? 0 : -1;
}

static char hear(int fd)
{
	char c;

	return read(fd, &c, 1) == 1 ? c : 0;
}

FIXTURE(kvm) {
	int fd;
	bool loaded;	/* we loaded kvm: unload it after */
	bool no_kvm;
	struct hgclock_map map;
	struct chan ch;
	pid_t child;
	long coalesce_old;	/* coalesce_stop_us to restore, -1: untouched */
};

FIXTURE_SETUP(kvm)
{
	struct hgclock_info info;
	int ret;

	self->child = -1;
	self->fd = -1;
	self->coalesce_old = -1;
	if (access("/dev/kvm", R_OK | W_OK)) {
		self->loaded = true;
		ret = system("modprobe kvm_amd >/dev/null 2>&1 || modprobe kvm_intel >/dev/null 2>&1");
		if (access("/dev/kvm", R_OK | W_OK)) {
			/* The harness runs the test after a setup's SKIP. */
			self->no_kvm = true;
			TH_LOG("modprobe kvm_amd/kvm_intel: %d", ret);
			return;
		}
	}
	self->fd = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd);
	/* kvm.ko's arrival attached the module to its tracepoints. */
	ASSERT_EQ(0, hgclock_get_info(self->fd, &info));
	ASSERT_TRUE(info.features & HGCLOCK_FEAT_KVM_TRACK);
	ASSERT_EQ(0, hgclock_map_open(self->fd, HGCLOCK_MAP_CONSUMER, &self->map));
	hgclock_ring_skip_all(&self->map);
	ASSERT_EQ(0, pipe(self->ch.to_parent));
	ASSERT_EQ(0, pipe(self->ch.to_child));
}

FIXTURE_TEARDOWN(kvm)
{
	int status;

	if (self->child > 0) {
		kill(self->child, SIGKILL);
		waitpid(self->child, &status, 0);
	}
	restore_coalesce(self->coalesce_old);
	if (self->fd >= 0) {
		hgclock_map_close(&self->map);
		close(self->fd);
	}
	if (self->loaded && system("modprobe -r kvm_amd >/dev/null 2>&1; modprobe -r kvm_intel >/dev/null 2>&1; modprobe -r kvm >/dev/null 2>&1"))
		TH_LOG("kvm modules stay loaded");
}

/*
 * The child of vcpu_id_filled: makes the VM and its vCPU, says 'r' (or
 * 'n': no vCPU), waits for 'g', runs the guest to its HLT, says 'h' (or
 * 'x': it did not get there), then waits to be killed.
 */
static void hlt_child(struct chan *ch)
{
	struct tiny_vm t;
	bool ok;

	if (tiny_vm_create(&t, guest_hlt, sizeof(guest_hlt))) {
		say(ch->to_parent[1], 'n');
		_exit(1);
	}
	say(ch->to_parent[1], 'r');
	if (hear(ch->to_child[0]) != 'g')
		_exit(2);
	/* Emulated SVM under TCG: give it time, but not forever. */
	alarm(60);
	ok = !ioctl(t.vcpu, KVM_RUN, 0) && t.run->exit_reason == KVM_EXIT_HLT;
	alarm(0);
	say(ch->to_parent[1], ok ? 'h' : 'x');
	pause();
	_exit(0);
}

/*
 * A vCPU thread TRACK_ADD follows before it ever entered the guest has
 * no vCPU id yet; its first entry gives it one: LIST_VCPUS shows vCPU 0
 * with KVM's flags, a VCPU_SEEN says so, and its RUN/STOP records carry
 * the id from then on.
 */
TEST_F_TIMEOUT(kvm, vcpu_id_filled, 180)
{
	struct hgclock_vcpu_info info;
	struct kvm_recs c = { 0 };
	char said;

	if (self->no_kvm)
		SKIP(return, "no KVM in this VM");
	/* Every switch recorded: the child's last stop, in pause(), too. */
	self->coalesce_old = set_coalesce(0);
	self->child = fork();
	ASSERT_LE(0, self->child);
	if (self->child == 0)
		hlt_child(&self->ch);
	said = hear(self->ch.to_parent[0]);
	if (said == 'n')
		SKIP(return, "KVM present but no vCPU could be created");
	ASSERT_EQ('r', said);

	ASSERT_EQ(0, track(self->fd, self->child, HGCLOCK_TRACK_ADD));
	ASSERT_TRUE(list_one(self->fd, self->child, &info));
	EXPECT_EQ(-1, info.vcpu_id);
	EXPECT_EQ(0, info.flags & HGCLOCK_VCPU_KVM);

	ASSERT_EQ(0, say(self->ch.to_child[1], 'g'));
	said = hear(self->ch.to_parent[0]);
	if (said == 'x')
		SKIP(return, "the tiny guest did not reach its HLT");
	ASSERT_EQ('h', said);

	ASSERT_TRUE(list_one(self->fd, self->child, &info));
	EXPECT_EQ(0, info.vcpu_id);
	EXPECT_TRUE(info.flags & HGCLOCK_VCPU_KVM);
	EXPECT_TRUE(info.flags & HGCLOCK_VCPU_MANUAL);
	EXPECT_TRUE(info.flags & HGCLOCK_VCPU_TSC_KNOWN);
	EXPECT_EQ(self->child, info.vm_pid);

	/* The child sleeps in pause(): a switch out and back in after it. */
	usleep(50000);
	c.tid = self->child;
	drain(_metadata, &self->map, &c);
	TH_LOG("VCPU_SEEN %d (vCPU 0: %d, KVM: %d), RUN/STOP with vCPU 0: %d",
	       c.nr_seen, c.nr_seen_vcpu0, c.nr_seen_kvm, c.nr_run_vcpu0);
	/* One from TRACK_ADD (vCPU -1), one from the first entry. */
	EXPECT_LE(2, c.nr_seen);
	EXPECT_LE(1, c.nr_seen_vcpu0);
	EXPECT_LE(1, c.nr_seen_kvm);
	EXPECT_LE(1, c.nr_run_vcpu0);
	EXPECT_EQ(0, c.nr_untracked);
}

/*
 * The child of entries_race_track: a guest that exits to user space at
 * every iteration, run for @ms milliseconds of entries, then 'd'.
 */
static void loop_child(struct chan *ch, int ms)
{
	struct timespec t0, t;
	struct tiny_vm t_vm;
	bool ok = true;

	if (tiny_vm_create(&t_vm, guest_out_loop, sizeof(guest_out_loop))) {
		say(ch->to_parent[1], 'n');
		_exit(1);
	}
	say(ch->to_parent[1], 'r');
	alarm(120);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		if (ioctl(t_vm.vcpu, KVM_RUN, 0) || t_vm.run->exit_reason != KVM_EXIT_IO) {
			ok = false;
			break;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
	say(ch->to_parent[1], ok ? 'd' : 'x');
	pause();
	_exit(0);
}

/*
 * TRACK_ADD and TRACK_REMOVE of a vCPU thread while it enters the guest
 * again and again: when the ioctl claims the slot between the entry's
 * bitmap test and its own claim, the entry finds the thread tracked
 * (-EEXIST).  The table is far from full: no UNTRACKED record, no count
 * in GET_INFO, and the thread is never left out of the table.
 */
TEST_F_TIMEOUT(kvm, entries_race_track, 180)
{
	struct hgclock_info before, after;
	struct kvm_recs c = { 0 };
	int nr_add = 0, nr_exist = 0, nr_other = 0;
	char said;

	if (self->no_kvm)
		SKIP(return, "no KVM in this VM");
	ASSERT_EQ(0, hgclock_get_info(self->fd, &before));
	self->child = fork();
	ASSERT_LE(0, self->child);
	if (self->child == 0)
		loop_child(&self->ch, 8000);
	said = hear(self->ch.to_parent[0]);
	if (said == 'n')
		SKIP(return, "KVM present but no vCPU could be created");
	ASSERT_EQ('r', said);
	ASSERT_EQ(0, fcntl(self->ch.to_parent[0], F_SETFL, O_NONBLOCK));

	/* Until the child says it is done. */
	c.tid = self->child;
	for (;;) {
		int ret = track(self->fd, self->child, HGCLOCK_TRACK_ADD);

		if (!ret)
			nr_add++;
		else if (ret == -EEXIST)
			nr_exist++;
		else
			nr_other++;
		track(self->fd, self->child, HGCLOCK_TRACK_REMOVE);
		drain(_metadata, &self->map, &c);
		said = hear(self->ch.to_parent[0]);
		if (said)
			break;
	}
	ASSERT_EQ('d', said);
	drain(_metadata, &self->map, &c);
	ASSERT_EQ(0, hgclock_get_info(self->fd, &after));
	TH_LOG("TRACK_ADD: %d added, %d already tracked by an entry; %d SEEN",
	       nr_add, nr_exist, c.nr_seen);
	EXPECT_EQ(0, nr_other);
	EXPECT_EQ(0, c.nr_untracked);
	EXPECT_EQ(before.nr_untracked, after.nr_untracked);
	track(self->fd, self->child, HGCLOCK_TRACK_REMOVE);
}

int main(int argc, char **argv)
{
	int fd = open(HGCLOCK_DEV_PATH, O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		printf("TAP version 13\n1..1\nok 1 kvm_track_test # SKIP %s: %s\n",
		       HGCLOCK_DEV_PATH, strerror(errno));
		return KSFT_SKIP;
	}
	close(fd);
	return test_harness_run(argc, argv);
}

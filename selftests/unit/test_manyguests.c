// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of struct hgsync's guests (user/lib/sync.h), allocated as a file
 * names them: a file with one guest, one with HGSYNC_MAX_GUESTS (1024),
 * one whose only guest has the largest id, and files naming guest 1024
 * or beyond (refused as HGCOR_E_CONTENT, "a section's content is
 * malformed", with nothing left to free; under ASan each test asks
 * LeakSanitizer).  The load, the mapping and the
 * conversions of every guest also run on a thread with a 256 KiB stack,
 * with the struct hgsync on that stack as the commands hold it: when the
 * guests were an array inside it (475 KB) this overflowed.
 *
 * Each guest g runs vCPU 0 in VM 10000 + g on host CPU g % 2, its TSC
 * offset guest_offset(g); two guests in three have an agent (GUEST_INFO,
 * a guest conversion of their own), every third is agentless (GUEST_VM
 * alone).  x86-tsc values map KVM-exact: host TSC = guest TSC - offset.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/hgclock.h>

#include "kselftest_harness.h"
#include "libhgclock.h"
#include "corr.h"
#include "merge.h"
#include "sync.h"
#include "gen.h"

#define KHZ		2500000u
#define T0		5000000000000ull	/* host TSC where the recording starts */
#define VM_PID_BASE	10000
#define TID_BASE	20000
#define SMALL_STACK	(256 * 1024)

static const struct hgclock_conversion hconv = {
	.tsc_base = 0, .offset_ns = (uint64_t)-500000000000ll, .mult = 858993459, .shift = 31,
	.pre_shift = 0, .local_offset_ns = 4321,
	.flags = HGCLOCK_CONV_VALID | HGCLOCK_CONV_EXACT | HGCLOCK_CONV_LOCAL_OFFSET,
};

/* A native guest sched_clock (cyc2ns of its own TSC), 0.4 ns per count. */
static const struct hgclock_conversion gconv = {
	.tsc_base = 0, .offset_ns = (uint64_t)-1000000000ll, .mult = 858993459, .shift = 31,
	.pre_shift = 0, .local_offset_ns = 777,
	.flags = HGCLOCK_CONV_VALID | HGCLOCK_CONV_EXACT | HGCLOCK_CONV_LOCAL_OFFSET,
};

/* Each guest's TSC offset: distinct, some "negative" as on a real host. */
static uint64_t guest_offset(uint32_t g)
{
	return (uint64_t)-4000000000000ll + (uint64_t)g * 1000003ull;
}

static int has_agent(uint32_t g)
{
	return g % 3 != 2;
}

/* Guest @g's vCPU 0 found (its TSC offset) and running on host CPU g % 2. */
static void put_vcpu(struct buf *b, uint32_t g)
{
	uint64_t tsc = T0 + 10 * (uint64_t)g;
	struct hgclock_rec_vcpu_seen s;
	struct hgclock_rec_vcpu r;

	gen_rec(&s, sizeof(s), HGCLOCK_REC_VCPU_SEEN, g % 2, tsc, hgclock_conv_apply(&hconv, tsc));
	s.tid = TID_BASE + (int32_t)g;
	s.vm_pid = VM_PID_BASE + (int32_t)g;
	s.vcpu_id = 0;
	s.flags = HGCLOCK_VCPU_KVM | HGCLOCK_VCPU_TSC_KNOWN;
	snprintf(s.vm_name, sizeof(s.vm_name), "%d-%u", VM_PID_BASE + (int)g, g);
	s.tsc_offset = guest_offset(g);
	s.tsc_scaling_ratio = 1ull << 32;
	s.tsc_frac_bits = 32;
	s.host_cpu = g % 2;
	put(b, &s, sizeof(s));

	gen_rec(&r, sizeof(r), HGCLOCK_REC_VCPU_RUN, g % 2, tsc + 5,
		hgclock_conv_apply(&hconv, tsc + 5));
	r.tid = TID_BASE + (int32_t)g;
	r.vm_pid = VM_PID_BASE + (int32_t)g;
	r.vcpu_id = 0;
	put(b, &r, sizeof(r));
}

/* How a file names its guests. */
struct gen {
	uint32_t first, last;	/* guests first..last, each as above */
	int vm_only_last;	/* the last guest: a GUEST_VM and nothing else */
	int64_t seg_guest;	/* >= 0: a SEGMENTS section with this guest_id too */
	uint64_t bad_end;	/* out: the file offset after the first section naming guest >= 1024 */
};

/* Writes the file into @file (malloc()ed).  0 or -errno. */
static int gen_file(struct gen *gn, struct buf *file)
{
	char path[] = "/tmp/hgclock-manyguests-XXXXXX";
	struct hgclock_info hinfo, ginfo;
	struct buf host = { 0 };
	struct hgcor_writer w;
	int ret;

	gen_info(&hinfo, HGCLOCK_ROLE_HOST, 2, KHZ);
	gen_info(&ginfo, HGCLOCK_ROLE_GUEST, 1, KHZ);

	gen_cyc2ns(&host, 0, T0 - 1000, &hconv, KHZ, 1);
	gen_cyc2ns(&host, 1, T0 - 900, &hconv, KHZ, 1);
	for (uint32_t g = gn->first; g <= gn->last; g++)
		put_vcpu(&host, g);

	gn->bad_end = 0;
	ret = gen_tmpfile(path);
	if (ret) {
		free(host.p);
		return ret;
	}
	ret = hgcor_create(&w, path);
	ret = ret ?: hgcor_write_section(&w, HGCOR_SEC_HOST_INFO, 0, &hinfo, sizeof(hinfo));
	ret = ret ?: hgcor_write_section(&w, HGCOR_SEC_HOST_RECORDS, 0, host.p, host.len);
	for (uint32_t g = gn->first; g <= gn->last && !ret; g++) {
		uint32_t prefix[2] = { g, 0 };
		struct hgcor_guest_vm vm;
		struct buf grec = { 0 };

		memset(&vm, 0, sizeof(vm));
		vm.guest_id = g;
		vm.vm_pid = VM_PID_BASE + (int32_t)g;
		vm.how = HGCOR_VM_BY_OPTION;
		snprintf(vm.spec, sizeof(vm.spec), "vm=%d", vm.vm_pid);
		if (has_agent(g) && !(gn->vm_only_last && g == gn->last)) {
			gen_cyc2ns(&grec, 0, T0 + guest_offset(g), &gconv, KHZ, 1);
			ret = hgcor_write_section2(&w, HGCOR_SEC_GUEST_INFO, 0, prefix,
						   sizeof(prefix), &ginfo, sizeof(ginfo));
			if (!ret && g >= HGSYNC_MAX_GUESTS && !gn->bad_end)
				gn->bad_end = w.bytes;
			ret = ret ?: hgcor_write_section2(&w, HGCOR_SEC_GUEST_RECORDS, 0, prefix,
							  sizeof(prefix), grec.p, grec.len);
		}
		ret = ret ?: hgcor_write_section(&w, HGCOR_SEC_GUEST_VM, 0, &vm, sizeof(vm));
		if (!ret && g >= HGSYNC_MAX_GUESTS && !gn->bad_end)
			gn->bad_end = w.bytes;
		free(grec.p);
	}
	if (!ret && gn->seg_guest >= 0) {
		struct hgcor_segment seg;

		memset(&seg, 0, sizeof(seg));
		seg.guest_id = (uint32_t)gn->seg_guest;
		seg.method = HGCOR_METHOD_KVM_EXACT;
		seg.clock = HGCOR_CLOCK_TSC;
		seg.host_tsc_end = UINT64_MAX;
		seg.guest_end = UINT64_MAX;
		seg.tsc_offset = guest_offset(0);
		seg.tsc_ratio = 1ull << 32;
		seg.tsc_frac_bits = 32;
		ret = hgcor_write_section(&w, HGCOR_SEC_SEGMENTS, HGCOR_SEC_OPTIONAL, &seg,
					  sizeof(seg));
		if (!ret && seg.guest_id >= HGSYNC_MAX_GUESTS && !gn->bad_end)
			gn->bad_end = w.bytes;
	}
	ret = ret ?: hgcor_close(&w);
	free(host.p);
	memset(file, 0, sizeof(*file));
	if (!ret) {
		file->p = gen_slurp(path, &file->len);
		file->cap = file->len;
		if (!file->p) {
			file->len = file->cap = 0;
			ret = -EIO;
		}
	}
	unlink(path);
	return ret;
}

/*
 * Every guest of @s from @first to @last, as gen_file() wrote them: the
 * model, and x86-tsc (both kinds) and sched_clock (agents) conversions.
 * Returns the number of failed checks, with the first one in @why: it
 * runs on small-stack threads too, where the harness's asserts cannot.
 */
static unsigned int check_guests(const struct hgsync *s, uint32_t first, uint32_t last,
				 char *why, size_t len)
{
	unsigned int bad = 0;

#define BAD(...) do { if (!bad++) snprintf(why, len, __VA_ARGS__); } while (0)
	if (s->nr_guests != last + 1)
		BAD("nr_guests %u, want %u", s->nr_guests, last + 1);
	if (s->cap_guests < s->nr_guests || s->cap_guests > HGSYNC_MAX_GUESTS)
		BAD("cap_guests %u for %u guests", s->cap_guests, s->nr_guests);
	for (uint32_t g = 0; g < first && g < s->nr_guests; g++)
		if (hgsync_guest_known(s, g) || s->guests[g].vm.vm_pid != -1 ||
		    s->guests[g].id != g)
			BAD("guest %u, never named, is known (vm_pid %d)", g,
			    s->guests[g].vm.vm_pid);
	for (uint32_t g = first; g <= last && g < s->nr_guests; g++) {
		const struct hgsync_guest *sg = &s->guests[g];
		uint64_t host_tsc = T0 + 1000000 + (uint64_t)g * 7919;
		uint64_t guest_tsc = host_tsc + guest_offset(g);
		uint64_t truth_ns = hgclock_conv_apply(&hconv, host_tsc), err_ns;
		struct hgsync_result r;
		struct hgsync_place p;
		int ret;

		if (!hgsync_guest_known(s, g) || sg->id != g ||
		    sg->vm.vm_pid != VM_PID_BASE + (int32_t)g ||
		    sg->present != has_agent(g) || sg->agentless == has_agent(g)) {
			BAD("guest %u: known %d id %u vm_pid %d present %d agentless %d", g,
			    hgsync_guest_known(s, g), sg->id, sg->vm.vm_pid, sg->present,
			    sg->agentless);
			continue;
		}
		ret = hgsync_to_host(s, g, 0, HGSYNC_CLOCK_TSC, guest_tsc, &r);
		if (ret || r.method != HGCOR_METHOD_KVM_EXACT || r.host_value != host_tsc ||
		    r.host_cpu != (int32_t)(g % 2))
			BAD("guest %u x86-tsc: ret %d method %u host %llu (want %llu) cpu %d", g,
			    ret, r.method, (unsigned long long)r.host_value,
			    (unsigned long long)host_tsc, r.host_cpu);
		ret = hgsync_vcpu_place(s, g, 0, host_tsc, &p);
		if (ret || p.tid != TID_BASE + (int32_t)g || p.host_cpu != (int32_t)(g % 2) ||
		    !p.running)
			BAD("guest %u place: ret %d tid %d cpu %d running %d", g, ret, p.tid,
			    p.host_cpu, p.running);
		ret = hgsync_to_host(s, g, 0, HGSYNC_CLOCK_SCHED,
				     hgclock_conv_apply(&gconv, guest_tsc), &r);
		if (!has_agent(g)) {
			/* No guest conversion, no markers: local has no mapping. */
			if (!ret)
				BAD("guest %u (no agent): sched_clock mapped", g);
			continue;
		}
		err_ns = r.host_value > truth_ns ? r.host_value - truth_ns : truth_ns - r.host_value;
		if (ret || r.method != HGCOR_METHOD_KVM_EXACT || err_ns > 2)
			BAD("guest %u sched_clock: ret %d method %u host %llu truth %llu", g, ret,
			    r.method, (unsigned long long)r.host_value,
			    (unsigned long long)truth_ns);
	}
	/* Beyond the file's guests, and beyond the limit: refused, never read. */
	if (hgsync_guest_known(s, last + 1) || hgsync_guest_known(s, HGSYNC_MAX_GUESTS) ||
	    hgsync_to_host(s, last + 1, 0, HGSYNC_CLOCK_TSC, T0, &(struct hgsync_result){ 0 }) !=
	    -EINVAL)
		BAD("guest %u (not in the file) is known", last + 1);
#undef BAD
	return bad;
}

/* Loads @file into @s (on the caller's stack) and builds the mapping. */
static int load_build(struct hgsync *s, const struct buf *file, size_t *pos)
{
	int ret = hgsync_load(s, file->p, file->len, 0, pos);

	if (!ret) {
		ret = hgsync_build(s);
		if (ret)
			hgsync_free(s);
	}
	return ret;
}

TEST(struct_sizes_small)
{
	/* What a command or a worker thread holds on its stack. */
	EXPECT_GT(4096, sizeof(struct hgsync)) TH_LOG("struct hgsync: %zu bytes",
						      sizeof(struct hgsync));
	EXPECT_GT(4096, sizeof(struct hgm)) TH_LOG("struct hgm: %zu bytes", sizeof(struct hgm));
}

TEST(one_guest)
{
	struct gen gn = { .first = 0, .last = 0, .seg_guest = -1 };
	struct buf file;
	struct hgsync s;
	char why[256] = "";
	size_t pos = 0;

	ASSERT_EQ(0, gen_file(&gn, &file));
	ASSERT_EQ(0, load_build(&s, &file, &pos));
	EXPECT_EQ(file.len, pos);
	EXPECT_EQ(1, s.complete);
	EXPECT_EQ(0, check_guests(&s, 0, 0, why, sizeof(why))) TH_LOG("%s", why);
	/* Memory for the guests the file has, not for the limit. */
	EXPECT_GE(4, s.cap_guests);
	hgsync_free(&s);
	EXPECT_EQ(NULL, s.guests);
	EXPECT_EQ(0, s.nr_guests);
	EXPECT_EQ(0, s.cap_guests);
	hgsync_free(&s);	/* a freed one: nothing left, no double free */
	free(file.p);
	EXPECT_EQ(0, gen_leaked());
}

TEST(max_guests)
{
	struct gen gn = { .first = 0, .last = HGSYNC_MAX_GUESTS - 1, .seg_guest = -1 };
	struct buf file;
	struct hgsync s;
	char why[256] = "";
	size_t pos = 0;

	ASSERT_EQ(0, gen_file(&gn, &file));
	ASSERT_EQ(0, load_build(&s, &file, &pos));
	EXPECT_EQ(file.len, pos);
	EXPECT_EQ(HGSYNC_MAX_GUESTS, s.nr_guests);
	EXPECT_EQ(HGSYNC_MAX_GUESTS, s.cap_guests);
	EXPECT_EQ(HGSYNC_MAX_GUESTS, s.nr_vcpus);
	EXPECT_EQ(0, check_guests(&s, 0, HGSYNC_MAX_GUESTS - 1, why, sizeof(why)))
		TH_LOG("%s", why);
	hgsync_free(&s);
	free(file.p);
	EXPECT_EQ(0, gen_leaked());
}

/* Only the largest id: every id below it exists, unknown. */
TEST(largest_id_alone)
{
	struct gen gn = { .first = HGSYNC_MAX_GUESTS - 1, .last = HGSYNC_MAX_GUESTS - 1,
			  .seg_guest = -1 };
	struct buf file;
	struct hgsync s;
	char why[256] = "";
	size_t pos = 0;

	ASSERT_EQ(0, gen_file(&gn, &file));
	ASSERT_EQ(0, load_build(&s, &file, &pos));
	EXPECT_EQ(HGSYNC_MAX_GUESTS, s.nr_guests);
	EXPECT_EQ(0, check_guests(&s, HGSYNC_MAX_GUESTS - 1, HGSYNC_MAX_GUESTS - 1, why,
				  sizeof(why))) TH_LOG("%s", why);
	hgsync_free(&s);
	free(file.p);
	EXPECT_EQ(0, gen_leaked());
}

/*
 * Guest 1024, the 1025th, named by GUEST_INFO, by a GUEST_VM alone or by a
 * segment, and an id of 2^32 - 1: the file is refused as before the guests
 * were allocated (HGCOR_E_CONTENT where that section ends), and @s holds
 * nothing (ASan's leak check sees the rest).
 */
static void check_refused(struct __test_metadata *_metadata, struct gen *gn)
{
	struct hgsync s;
	struct buf file;
	size_t pos = 0;

	ASSERT_EQ(0, gen_file(gn, &file));
	ASSERT_LT(0, gn->bad_end);
	memset(&s, 0xa5, sizeof(s));	/* whatever it held is not freed */
	EXPECT_EQ(HGCOR_E_CONTENT, hgsync_load(&s, file.p, file.len, 0, &pos));
	EXPECT_EQ(gn->bad_end, pos);
	EXPECT_STREQ("a section's content is malformed", hgcor_strerror(HGCOR_E_CONTENT));
	EXPECT_EQ(NULL, s.guests);
	EXPECT_EQ(0, s.nr_guests);
	EXPECT_EQ(NULL, s.vcpus);
	hgsync_free(&s);
	free(file.p);
	EXPECT_EQ(0, gen_leaked());
}

TEST(guest_1025_refused)
{
	struct gen gn = { .first = 0, .last = HGSYNC_MAX_GUESTS, .seg_guest = -1 };

	ASSERT_TRUE(has_agent(HGSYNC_MAX_GUESTS));
	check_refused(_metadata, &gn);
}

TEST(guest_1025_vm_only_refused)
{
	struct gen gn = { .first = 0, .last = HGSYNC_MAX_GUESTS, .vm_only_last = 1,
			  .seg_guest = -1 };

	check_refused(_metadata, &gn);
}

TEST(segment_of_guest_1024_refused)
{
	struct gen gn = { .first = 0, .last = 3, .seg_guest = HGSYNC_MAX_GUESTS };

	check_refused(_metadata, &gn);
}

TEST(guest_id_max_refused)
{
	struct gen gn = { .first = 0, .last = 0, .seg_guest = UINT32_MAX };

	check_refused(_metadata, &gn);
}

/* ---- on a small stack ---- */

struct small_job {
	const struct buf *file;
	uint32_t first, last;
	int expect;		/* hgsync_load()'s result */
	int ret;
	unsigned int bad;
	char why[256];
};

static void *small_main(void *arg)
{
	struct small_job *j = arg;
	struct hgsync s;	/* on this thread's 256 KiB stack, as a command holds it */
	size_t pos;

	j->ret = load_build(&s, j->file, &pos);
	if (j->ret)
		return NULL;
	j->bad = check_guests(&s, j->first, j->last, j->why, sizeof(j->why));
	hgsync_free(&s);
	return NULL;
}

static void run_small(struct __test_metadata *_metadata, struct small_job *j)
{
	pthread_attr_t attr;
	pthread_t t;

	ASSERT_EQ(0, pthread_attr_init(&attr));
	ASSERT_EQ(0, pthread_attr_setstacksize(&attr, SMALL_STACK));
	ASSERT_EQ(0, pthread_create(&t, &attr, small_main, j));
	ASSERT_EQ(0, pthread_join(t, NULL));
	pthread_attr_destroy(&attr);
	EXPECT_EQ(j->expect, j->ret);
	EXPECT_EQ(0, j->bad) TH_LOG("%s", j->why);
	EXPECT_EQ(0, gen_leaked());
}

TEST(small_stack_max_guests)
{
	struct gen gn = { .first = 0, .last = HGSYNC_MAX_GUESTS - 1, .seg_guest = -1 };
	struct buf file;
	struct small_job j = { .file = &file, .first = 0, .last = HGSYNC_MAX_GUESTS - 1 };

	ASSERT_EQ(0, gen_file(&gn, &file));
	run_small(_metadata, &j);
	free(file.p);
}

TEST(small_stack_one_guest)
{
	struct gen gn = { .first = 0, .last = 0, .seg_guest = -1 };
	struct buf file;
	struct small_job j = { .file = &file, .first = 0, .last = 0 };

	ASSERT_EQ(0, gen_file(&gn, &file));
	run_small(_metadata, &j);
	free(file.p);
}

TEST(small_stack_1025_refused)
{
	struct gen gn = { .first = 0, .last = HGSYNC_MAX_GUESTS, .seg_guest = -1 };
	struct buf file;
	struct small_job j = { .file = &file, .expect = HGCOR_E_CONTENT };

	ASSERT_EQ(0, gen_file(&gn, &file));
	run_small(_metadata, &j);
	free(file.p);
}

TEST_HARNESS_MAIN

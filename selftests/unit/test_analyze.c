// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of the attribution engine (user/merge/analyze.c): generated
 * event sequences, in host ns, with every component's answer worked out
 * by hand in the comments; and a random sequence where each slice and
 * each vCPU must add up to its wall time exactly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kselftest_harness.h"
#include "analyze_req.h"

#define VMX_CPUID	10
#define VMX_EXTINT	1
#define VMX_HLT		12
#define VMX_IO		30

#define MAX_SLICES	4096
#define MAX_KEYS	16

struct cap_slice {
	int32_t guest, vcpu, tid;
	char comm[HGA_COMM_LEN];
	uint64_t start_ns, end_ns, wall_ns, sum_ns;
	uint32_t flags;
	uint64_t ns[HGA_NR_COMP];
	struct hga_bucket exits[MAX_KEYS], offenders[MAX_KEYS];
	uint32_t nr_exits, nr_offenders;
	uint64_t exits_ns, offenders_ns;	/* the buckets' ns added */
};

struct cap {
	struct cap_slice s[MAX_SLICES];
	int n;
	int nr_bad_sums;	/* slices whose split is not their wall time */
	uint64_t nr_charges, charges_hash;	/* hash_charge(): their sequence */
};

/* Each charge into a running hash (FNV-1a over its fields): their order counts. */
static int hash_charge(void *ctx, const struct hga_charge *ch)
{
	struct cap *c = ctx;
	uint64_t f[] = { (uint64_t)ch->guest, (uint64_t)ch->vcpu, (uint64_t)ch->tid, ch->t0, ch->t1,
			 (uint64_t)ch->comp, ch->key, ch->count, ch->slice_ns };

	c->charges_hash = c->charges_hash ? c->charges_hash : 14695981039346656037ULL;
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		for (int b = 0; b < 64; b += 8)
			c->charges_hash = (c->charges_hash ^ ((f[i] >> b) & 0xff)) * 1099511628211ULL;
	c->nr_charges++;
	return 0;
}

static int cap_slice(void *ctx, const struct hga_slice *s)
{
	struct cap *c = ctx;
	struct cap_slice *o;
	uint32_t i;
	int k;

	if (c->n == MAX_SLICES)
		return 0;
	o = &c->s[c->n++];
	memset(o, 0, sizeof(*o));
	o->guest = s->guest;
	o->vcpu = s->vcpu;
	o->tid = s->tid;
	memcpy(o->comm, s->comm, sizeof(o->comm));
	o->start_ns = s->start_ns;
	o->end_ns = s->end_ns;
	o->wall_ns = s->wall_ns;
	o->flags = s->flags;
	for (k = 0; k < HGA_NR_COMP; k++) {
		o->ns[k] = s->split->ns[k];
		o->sum_ns += s->split->ns[k];
	}
	for (i = 0; i < s->split->exits.n; i++) {
		if (i < MAX_KEYS)
			o->exits[o->nr_exits++] = s->split->exits.v[i];
		o->exits_ns += s->split->exits.v[i].ns;
	}
	for (i = 0; i < s->split->offenders.n; i++) {
		if (i < MAX_KEYS)
			o->offenders[o->nr_offenders++] = s->split->offenders.v[i];
		o->offenders_ns += s->split->offenders.v[i].ns;
	}
	if (o->sum_ns != o->wall_ns || o->exits_ns != o->ns[HGA_C_EXIT] ||
	    o->offenders_ns != o->ns[HGA_C_PREEMPTED])
		c->nr_bad_sums++;
	return 0;
}

static uint64_t bucket_ns(const struct hga_bucket *b, uint32_t n, uint64_t key)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		if (b[i].key == key)
			return b[i].ns;
	return 0;
}

static uint64_t bucket_count(const struct hga_bucket *b, uint32_t n, uint64_t key)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		if (b[i].key == key)
			return b[i].count;
	return 0;
}

static uint64_t exit_key(uint32_t reason)
{
	return (uint64_t)HGA_ISA_VMX << 32 | reason;
}

/* ---- events ---- */

static int kvm(struct hga *a, uint64_t t, bool entry, int guest, int vcpu, int cpu, int tid,
	       uint32_t reason)
{
	struct hga_event ev = {
		.kind = entry ? HGA_EV_KVM_ENTRY : HGA_EV_KVM_EXIT, .host_ns = t,
		.guest = guest, .vcpu = vcpu, .host_cpu = cpu, .host_tid = tid,
		.exit_isa = HGA_ISA_VMX, .exit_reason = reason,
	};

	return hga_event(a, &ev);
}

static int hsw(struct hga *a, uint64_t t, int cpu, int prev, bool runnable, const char *pcomm,
	       int next, const char *ncomm)
{
	struct hga_event ev = {
		.kind = HGA_EV_HOST_SWITCH, .host_ns = t, .host_cpu = cpu,
		.prev_tid = prev, .next_tid = next, .prev_runnable = runnable,
	};

	snprintf(ev.prev_comm, sizeof(ev.prev_comm), "%s", pcomm);
	snprintf(ev.next_comm, sizeof(ev.next_comm), "%s", ncomm);
	return hga_event(a, &ev);
}

static int gsw(struct hga *a, uint64_t t, int guest, int vcpu, int prev, int next,
	       const char *ncomm, uint64_t bound_ns)
{
	struct hga_event ev = {
		.kind = HGA_EV_GUEST_SWITCH, .host_ns = t, .guest = guest, .vcpu = vcpu,
		.prev_tid = prev, .next_tid = next, .bound_ns = bound_ns,
	};

	snprintf(ev.next_comm, sizeof(ev.next_comm), "%s", ncomm);
	return hga_event(a, &ev);
}

/* The same, mapped by @method (HGA_METHOD_*). */
static int gswm(struct hga *a, uint64_t t, int guest, int vcpu, int prev, int next,
		const char *ncomm, uint64_t bound_ns, uint32_t method)
{
	struct hga_event ev = {
		.kind = HGA_EV_GUEST_SWITCH, .host_ns = t, .guest = guest, .vcpu = vcpu,
		.prev_tid = prev, .next_tid = next, .bound_ns = bound_ns, .method = method,
	};

	snprintf(ev.next_comm, sizeof(ev.next_comm), "%s", ncomm);
	return hga_event(a, &ev);
}

static int disrupt(struct hga *a, uint64_t t, int guest, bool begin)
{
	struct hga_event ev = {
		.kind = begin ? HGA_EV_DISRUPT_BEGIN : HGA_EV_DISRUPT_END,
		.host_ns = t, .guest = guest,
	};

	return hga_event(a, &ev);
}

static int irq_ev(struct hga *a, uint64_t t, uint32_t kind, int cpu, int irq, const char *name)
{
	struct hga_event ev = { .kind = kind, .host_ns = t, .host_cpu = cpu, .irq = irq };

	snprintf(ev.irq_name, sizeof(ev.irq_name), "%s", name);
	return hga_event(a, &ev);
}

/*
 * Guest 0, vCPU 0, its thread host tid 1000.  A slice of guest thread 42
 * [100, 900) with a CPUID exit, an external interrupt whose handling is
 * preempted by "hog" (2000) then "kworker" (3000) on host CPU 0, and the
 * vCPU thread migrating to host CPU 1 in the middle of it; then the
 * idle task's slice [900, 1200) with a halt (the thread asleep part of
 * it); then 42 again, never switched out, cut at 1300.
 */
static int scenario_main(struct hga *a)
{
	int r = 0;

	r |= hsw(a, 0, 0, 0, true, "swapper/0", 1000, "CPU 0/KVM");
	r |= kvm(a, 0, true, 0, 0, 0, 1000, 0);
	r |= gsw(a, 100, 0, 0, 0, 42, "work", 0);
	r |= kvm(a, 300, false, 0, 0, 0, 1000, VMX_CPUID);
	r |= kvm(a, 350, true, 0, 0, 0, 1000, 0);
	r |= kvm(a, 500, false, 0, 0, 0, 1000, VMX_EXTINT);
	r |= hsw(a, 520, 0, 1000, true, "CPU 0/KVM", 2000, "hog");
	r |= hsw(a, 700, 0, 2000, true, "hog", 3000, "kworker/0:1");
	/* host CPU 1's own switch in: the vCPU thread migrates */
	r |= hsw(a, 750, 1, 4000, true, "other", 1000, "CPU 0/KVM");
	r |= kvm(a, 760, true, 0, 0, 1, 1000, 0);
	r |= gsw(a, 900, 0, 0, 42, 0, "swapper/0", 0);
	r |= kvm(a, 950, false, 0, 0, 1, 1000, VMX_HLT);
	r |= hsw(a, 980, 1, 1000, false, "CPU 0/KVM", 0, "swapper/1");
	r |= hsw(a, 1100, 1, 0, true, "swapper/1", 1000, "CPU 0/KVM");
	r |= kvm(a, 1110, true, 0, 0, 1, 1000, 0);
	r |= gsw(a, 1200, 0, 0, 0, 42, "work", 0);
	return r;
}

TEST(components_and_migration)
{
	struct cap *c = calloc(1, sizeof(*c));
	struct hga_options opt = { .slice_cb = cap_slice, .ctx = c };
	struct hga a;
	struct cap_slice *s;

	ASSERT_NE(NULL, c);
	ASSERT_EQ(0, hga_init(&a, &opt));
	ASSERT_EQ(0, scenario_main(&a));
	ASSERT_EQ(0, hga_finish(&a, 1300));
	ASSERT_EQ(3, c->n);
	EXPECT_EQ(0, c->nr_bad_sums);

	/* 42 [100, 900): guest 200 + 150 + 140, exits 50 + 20 + 10, preempted 180 + 50 */
	s = &c->s[0];
	EXPECT_EQ(42, s->tid);
	EXPECT_STREQ("work", s->comm);
	EXPECT_EQ(800, s->wall_ns);
	EXPECT_EQ(0, s->flags);
	EXPECT_EQ(490, s->ns[HGA_C_GUEST]);
	EXPECT_EQ(80, s->ns[HGA_C_EXIT]);
	EXPECT_EQ(50, bucket_ns(s->exits, s->nr_exits, exit_key(VMX_CPUID)));
	EXPECT_EQ(30, bucket_ns(s->exits, s->nr_exits, exit_key(VMX_EXTINT)));
	EXPECT_EQ(1, bucket_count(s->exits, s->nr_exits, exit_key(VMX_CPUID)));
	EXPECT_EQ(1, bucket_count(s->exits, s->nr_exits, exit_key(VMX_EXTINT)));
	EXPECT_EQ(230, s->ns[HGA_C_PREEMPTED]);
	EXPECT_EQ(180, bucket_ns(s->offenders, s->nr_offenders, 2000));
	EXPECT_EQ(50, bucket_ns(s->offenders, s->nr_offenders, 3000));
	EXPECT_EQ(1, bucket_count(s->offenders, s->nr_offenders, 2000));
	EXPECT_EQ(0, s->ns[HGA_C_HALTED]);
	EXPECT_EQ(0, s->ns[HGA_C_UNKNOWN]);

	/* idle [900, 1200): guest 50 + 90, halted 950..1110 (asleep on the host inside) */
	s = &c->s[1];
	EXPECT_EQ(0, s->tid);
	EXPECT_EQ(300, s->wall_ns);
	EXPECT_EQ(140, s->ns[HGA_C_GUEST]);
	EXPECT_EQ(160, s->ns[HGA_C_HALTED]);
	EXPECT_EQ(0, s->ns[HGA_C_HOST_BLOCKED]);

	/* 42 [1200, 1300): never ended */
	s = &c->s[2];
	EXPECT_EQ(HGA_SL_OPEN_END, s->flags);
	EXPECT_EQ(100, s->ns[HGA_C_GUEST]);
	EXPECT_EQ(1, a.nr_open_end);

	/* the vCPU over [0, 1300): the slices plus [0, 100) in guest mode */
	ASSERT_EQ(1, a.nr_vcpus);
	EXPECT_EQ(830, hga_vcpu_split(&a, 0, 0)->ns[HGA_C_GUEST]);
	EXPECT_EQ(80, hga_vcpu_split(&a, 0, 0)->ns[HGA_C_EXIT]);
	EXPECT_EQ(230, hga_vcpu_split(&a, 0, 0)->ns[HGA_C_PREEMPTED]);
	EXPECT_EQ(160, hga_vcpu_split(&a, 0, 0)->ns[HGA_C_HALTED]);

	hga_free(&a);
	free(c);
}

TEST(thread_totals_and_report)
{
	struct hga a;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	uint32_t i;
	const struct hga_total *t42 = NULL;

	ASSERT_EQ(0, hga_init(&a, NULL));
	ASSERT_EQ(0, scenario_main(&a));
	ASSERT_EQ(0, hga_finish(&a, 1300));
	for (i = 0; i < a.nr_threads; i++)
		if (a.threads[i].tid == 42)
			t42 = &a.threads[i];
	ASSERT_NE(NULL, t42);
	EXPECT_EQ(2, t42->nr_slices);
	EXPECT_EQ(900, t42->wall_ns);
	EXPECT_EQ(590, t42->split.ns[HGA_C_GUEST]);
	EXPECT_EQ(230, t42->split.ns[HGA_C_PREEMPTED]);

	f = open_memstream(&buf, &len);
	ASSERT_EQ(0, hga_report_text(&a, f, 5));
	fclose(f);
	EXPECT_NE(NULL, strstr(buf, "guest 0: 1300 ns"));
	EXPECT_NE(NULL, strstr(buf, "hog-2000"));
	EXPECT_NE(NULL, strstr(buf, "CPUID"));
	EXPECT_NE(NULL, strstr(buf, "thread 42 (work): 2 slices, 900 ns"));
	EXPECT_EQ(NULL, strstr(buf, "cannot split"));
	free(buf);

	buf = NULL;
	f = open_memstream(&buf, &len);
	ASSERT_EQ(0, hga_report_json(&a, f));
	fclose(f);
	EXPECT_NE(NULL, strstr(buf, "\"all\":{\"guest\":830,\"exits\":80,\"preempted\":230,"
				 "\"host_blocked\":0,\"halted\":160,\"disrupted\":0,\"unknown\":0"));
	EXPECT_NE(NULL, strstr(buf, "{\"tid\":2000,\"comm\":\"hog\",\"ns\":180,\"count\":1}"));
	EXPECT_NE(NULL, strstr(buf, "\"cannot_split\":[]"));
	free(buf);
	hga_free(&a);
}

/*
 * merge --analyze-svg: a bar per thread whose parts are the thread's
 * split, and names from the traces (a guest's to choose) escaped.
 */
TEST(svg_bars_and_hostile_names)
{
	struct hga a;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	ASSERT_EQ(0, hga_init(&a, NULL));
	ASSERT_EQ(0, scenario_main(&a));
	/* 42 gives way to a thread whose name is markup */
	ASSERT_EQ(0, gsw(&a, 1250, 0, 0, 42, 43, "<x&'\"\x01y", 0));
	ASSERT_EQ(0, hga_finish(&a, 1300));

	f = open_memstream(&buf, &len);
	ASSERT_NE(NULL, f);
	ASSERT_EQ(0, hga_report_svg(&a, f, 0));
	ASSERT_EQ(0, fclose(f));
	EXPECT_EQ(0, strncmp(buf, "<svg ", 5));
	EXPECT_NE(NULL, strstr(buf, "</svg>\n"));
	/* thread 42: 2 slices, 850 ns; its preemption by hog and kworker */
	EXPECT_NE(NULL, strstr(buf, "guest 0: work (42)"));
	EXPECT_NE(NULL, strstr(buf, "<title>preempted 230 ns</title>"));
	EXPECT_NE(NULL, strstr(buf, "<title>exits 80 ns</title>"));
	EXPECT_NE(NULL, strstr(buf, "most by hog"));
	/* thread 43's 50 ns, its name escaped, the control byte replaced */
	EXPECT_NE(NULL, strstr(buf, "guest 0: &lt;x&amp;&apos;&quot;?y (43)"));
	EXPECT_NE(NULL, strstr(buf, "<title>guest 50 ns</title>"));
	EXPECT_EQ(NULL, strstr(buf, "<x&"));
	/* the idle task (tid 0) is no thread's bar */
	EXPECT_EQ(NULL, strstr(buf, "(0)</text>"));
	free(buf);

	/* top 1: only the longest, 42 */
	buf = NULL;
	f = open_memstream(&buf, &len);
	ASSERT_NE(NULL, f);
	ASSERT_EQ(0, hga_report_svg(&a, f, 1));
	ASSERT_EQ(0, fclose(f));
	EXPECT_NE(NULL, strstr(buf, "(42)"));
	EXPECT_EQ(NULL, strstr(buf, "(43)"));
	EXPECT_NE(NULL, strstr(buf, "1 of 2 threads, longest first"));
	free(buf);
	hga_free(&a);
}

TEST(window_from_to)
{
	struct cap *c = calloc(1, sizeof(*c));
	struct hga_options opt = { .from_ns = 200, .to_ns = 800, .slice_cb = cap_slice, .ctx = c };
	struct hga a;
	struct cap_slice *s;

	ASSERT_NE(NULL, c);
	ASSERT_EQ(0, hga_init(&a, &opt));
	ASSERT_EQ(0, scenario_main(&a));
	ASSERT_EQ(0, hga_finish(&a, 1300));
	/* only 42's first slice meets [200, 800): the others are not handed out */
	ASSERT_EQ(1, c->n);
	EXPECT_EQ(0, c->nr_bad_sums);
	s = &c->s[0];
	EXPECT_EQ(600, s->wall_ns);
	EXPECT_EQ(HGA_SL_CLIPPED, s->flags);
	EXPECT_EQ(100 + 150 + 40, s->ns[HGA_C_GUEST]);
	EXPECT_EQ(80, s->ns[HGA_C_EXIT]);
	EXPECT_EQ(230, s->ns[HGA_C_PREEMPTED]);
	EXPECT_EQ(600, hga_vcpu_split(&a, 0, 0)->ns[HGA_C_GUEST] + hga_vcpu_split(&a, 0, 0)->ns[HGA_C_EXIT] +
		       hga_vcpu_split(&a, 0, 0)->ns[HGA_C_PREEMPTED]);
	hga_free(&a);
	free(c);
}

/*
 * A migration (disruption) inside a slice: guest 0 stops at 110, its new
 * VM's first entry at 500 on a new thread (5000, host CPU 1).  The old
 * thread's exit on host CPU 0 afterwards is no preemption of the vCPU.
 */
TEST(disruption_inside_slice)
{
	struct cap *c = calloc(1, sizeof(*c));
	struct hga_options opt = { .slice_cb = cap_slice, .ctx = c };
	struct hga a;
	struct cap_slice *s;

	ASSERT_NE(NULL, c);
	ASSERT_EQ(0, hga_init(&a, &opt));
	ASSERT_EQ(0, kvm(&a, 0, true, 0, 0, 0, 1000, 0));
	ASSERT_EQ(0, gsw(&a, 10, 0, 0, 0, 42, "work", 0));
	ASSERT_EQ(0, kvm(&a, 100, false, 0, 0, 0, 1000, VMX_IO));
	ASSERT_EQ(0, disrupt(&a, 110, 0, true));
	ASSERT_EQ(0, disrupt(&a, 500, 0, false));
	ASSERT_EQ(0, kvm(&a, 500, true, 0, 0, 1, 5000, 0));
	ASSERT_EQ(0, hsw(&a, 550, 0, 1000, true, "CPU 0/KVM", 0, "swapper/0"));
	ASSERT_EQ(0, gsw(&a, 600, 0, 0, 42, 0, "swapper/0", 0));
	ASSERT_EQ(0, hga_finish(&a, 600));
	ASSERT_EQ(1, c->n);
	EXPECT_EQ(0, c->nr_bad_sums);
	s = &c->s[0];
	EXPECT_EQ(590, s->wall_ns);
	EXPECT_EQ(90 + 100, s->ns[HGA_C_GUEST]);
	EXPECT_EQ(10, s->ns[HGA_C_EXIT]);
	EXPECT_EQ(10, bucket_ns(s->exits, s->nr_exits, exit_key(VMX_IO)));
	EXPECT_EQ(390, s->ns[HGA_C_DISRUPTED]);
	EXPECT_EQ(0, s->ns[HGA_C_PREEMPTED]);
	hga_free(&a);
	free(c);
}

/*
 * A vCPU halted across a slice's end: the guest's switch to idle maps
 * (within its bound) into the HLT exit [100, 300), which splits 50 / 150.
 */
TEST(halt_across_slice_end)
{
	struct cap *c = calloc(1, sizeof(*c));
	struct hga_options opt = { .slice_cb = cap_slice, .ctx = c };
	struct hga a;

	ASSERT_NE(NULL, c);
	ASSERT_EQ(0, hga_init(&a, &opt));
	ASSERT_EQ(0, kvm(&a, 0, true, 0, 0, 0, 1000, 0));
	ASSERT_EQ(0, gsw(&a, 10, 0, 0, 0, 42, "work", 5));
	ASSERT_EQ(0, kvm(&a, 100, false, 0, 0, 0, 1000, VMX_HLT));
	ASSERT_EQ(0, gsw(&a, 150, 0, 0, 42, 0, "swapper/0", 5));
	ASSERT_EQ(0, kvm(&a, 300, true, 0, 0, 0, 1000, 0));
	ASSERT_EQ(0, gsw(&a, 400, 0, 0, 0, 42, "work", 5));
	ASSERT_EQ(0, gsw(&a, 500, 0, 0, 42, 0, "swapper/0", 5));
	ASSERT_EQ(0, hga_finish(&a, 500));
	ASSERT_EQ(3, c->n);
	EXPECT_EQ(0, c->nr_bad_sums);
	EXPECT_EQ(140, c->s[0].wall_ns);
	EXPECT_EQ(90, c->s[0].ns[HGA_C_GUEST]);
	EXPECT_EQ(50, c->s[0].ns[HGA_C_HALTED]);
	EXPECT_EQ(250, c->s[1].wall_ns);
	EXPECT_EQ(150, c->s[1].ns[HGA_C_HALTED]);
	EXPECT_EQ(100, c->s[1].ns[HGA_C_GUEST]);
	EXPECT_EQ(0, c->s[1].flags);
	/* no halt counted as an exit */
	EXPECT_EQ(0, c->s[0].ns[HGA_C_EXIT]);
	EXPECT_EQ(0, c->s[0].nr_exits);
	hga_free(&a);
	free(c);
}

/* A slice no longer than its ends' bounds is handed out marked, and kept out of the totals. */
TEST(uncertain_slice)
{
	struct cap *c = calloc(1, sizeof(*c));
	struct hga_options opt = { .slice_cb = cap_slice, .ctx = c };
	struct hga a;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	uint32_t i;

	ASSERT_NE(NULL, c);
	ASSERT_EQ(0, hga_init(&a, &opt));
	ASSERT_EQ(0, kvm(&a, 0, true, 0, 0, 0, 1000, 0));
	/* mapped by probes (bound 100) but one, exact; a method past the known: none */
	ASSERT_EQ(0, gswm(&a, 10, 0, 0, 0, 42, "work", 100, HGA_METHOD_PROBE));
	ASSERT_EQ(0, gswm(&a, 150, 0, 0, 42, 7, "short", 100, HGA_METHOD_PROBE)); /* 140 <= 200 */
	ASSERT_EQ(0, gswm(&a, 1000, 0, 0, 7, 42, "work", 100, HGA_METHOD_KVM_EXACT)); /* 850 */
	ASSERT_EQ(0, gswm(&a, 1000, 0, 1, 0, 0, "swapper/1", 0, 99));
	ASSERT_EQ(0, hga_finish(&a, 1000));
	ASSERT_EQ(2, c->n);	/* 42's last slice: no time at all, not handed out */
	f = open_memstream(&buf, &len);
	ASSERT_EQ(0, hga_report_text(&a, f, 3));
	ASSERT_EQ(0, hga_report_json(&a, f));
	fclose(f);
	EXPECT_NE(NULL, strstr(buf, "guest 0: 1000 ns (its events mapped within +-100 ns)"));
	EXPECT_NE(NULL, strstr(buf, "\n  its switches mapped by: none 1, kvm-exact 1, probe 2\n"
			       "  # not all by KVM's exact relation"));
	EXPECT_NE(NULL, strstr(buf, "\"switches_by_method\":{\"kvm-exact\":1,\"probe\":2}"));
	EXPECT_NE(NULL, strstr(buf, "\"switches_by_method\":{\"none\":1}"));
	EXPECT_NE(NULL, strstr(buf, "1 uncertain slices (140 ns, within the mapping's bound"));
	free(buf);
	EXPECT_EQ(HGA_SL_UNCERTAIN, c->s[0].flags);
	EXPECT_EQ(0, c->s[1].flags);
	EXPECT_EQ(0, c->nr_bad_sums);
	for (i = 0; i < a.nr_threads; i++) {
		if (a.threads[i].tid == 42) {
			EXPECT_EQ(0, a.threads[i].nr_slices);
			EXPECT_EQ(1, a.threads[i].nr_uncertain);
			EXPECT_EQ(140, a.threads[i].uncertain_ns);
			EXPECT_EQ(0, a.threads[i].split.ns[HGA_C_GUEST]);
		}
		if (a.threads[i].tid == 7)
			EXPECT_EQ(850, a.threads[i].split.ns[HGA_C_GUEST]);
	}
	hga_free(&a);
	free(c);
}

/* Without the host's events: everything unknown, said so; no component made up. */
TEST(missing_host_events)
{
	struct cap *c = calloc(1, sizeof(*c));
	struct hga_options opt = { .slice_cb = cap_slice, .ctx = c };
	struct hga a;
	char msg[512];

	ASSERT_NE(NULL, c);
	ASSERT_EQ(0, hga_init(&a, &opt));
	ASSERT_EQ(0, gsw(&a, 10, 0, 0, 0, 42, "work", 0));
	ASSERT_EQ(0, gsw(&a, 110, 0, 0, 42, 0, "swapper/0", 0));
	ASSERT_EQ(0, hga_finish(&a, 200));
	ASSERT_EQ(2, c->n);
	EXPECT_EQ(100, c->s[0].ns[HGA_C_UNKNOWN]);
	EXPECT_EQ(100, c->s[0].wall_ns);
	hga_missing(&a, msg, sizeof(msg));
	EXPECT_NE(NULL, strstr(msg, "no kvm_entry/kvm_exit on the host"));
	EXPECT_NE(NULL, strstr(msg, "no sched_switch on the host"));
	EXPECT_EQ(NULL, strstr(msg, "in the guests"));
	hga_free(&a);
	free(c);
}

/* kvm_* but no host sched_switch: preemption cannot be told from the exit it interrupts. */
TEST(missing_host_sched_switch)
{
	struct hga a;
	char msg[512];

	ASSERT_EQ(0, hga_init(&a, NULL));
	ASSERT_EQ(0, kvm(&a, 0, true, 0, 0, 0, 1000, 0));
	ASSERT_EQ(0, kvm(&a, 100, false, 0, 0, 0, 1000, VMX_EXTINT));
	ASSERT_EQ(0, kvm(&a, 400, true, 0, 0, 0, 1000, 0));
	ASSERT_EQ(0, hga_finish(&a, 500));
	EXPECT_EQ(200, hga_vcpu_split(&a, 0, 0)->ns[HGA_C_GUEST]);
	EXPECT_EQ(300, hga_vcpu_split(&a, 0, 0)->ns[HGA_C_EXIT]);
	hga_missing(&a, msg, sizeof(msg));
	EXPECT_NE(NULL, strstr(msg, "no sched_switch on the host"));
	EXPECT_NE(NULL, strstr(msg, "no sched_switch in the guests"));
	EXPECT_EQ(NULL, strstr(msg, "kvm_entry"));
	hga_free(&a);
}

/* Hostile input: refused with a count and a message, state unchanged, no crash. */
TEST(bad_input)
{
	struct cap *c = calloc(1, sizeof(*c));
	struct hga_options opt = { .slice_cb = cap_slice, .ctx = c };
	struct hga_event ev = { 0 };
	struct hga a;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	ASSERT_NE(NULL, c);
	ASSERT_EQ(0, hga_init(&a, &opt));
	ASSERT_EQ(0, kvm(&a, 100, true, 0, 0, 0, 1000, 0));
	ASSERT_EQ(0, gsw(&a, 110, 0, 0, 0, 42, "work", 0));
	/* time regression */
	EXPECT_EQ(1, kvm(&a, 50, false, 0, 0, 0, 1000, VMX_CPUID));
	EXPECT_EQ(1, a.nr_regressions);
	EXPECT_NE(NULL, strstr(a.first_err, "kvm_exit at 50 ns: before"));
	/* out of range */
	EXPECT_EQ(1, kvm(&a, 120, false, -1, 0, 0, 1000, VMX_CPUID));
	EXPECT_EQ(1, kvm(&a, 120, false, 0, HGA_MAX_VCPUS, 0, 1000, VMX_CPUID));
	EXPECT_EQ(1, kvm(&a, 120, false, 0, 0, HGA_MAX_HOST_CPUS, 1000, VMX_CPUID));
	EXPECT_EQ(1, kvm(&a, 120, false, 0, 0, 0, 0, VMX_CPUID));
	EXPECT_EQ(1, kvm(&a, 120, false, HGA_MAX_GUESTS, 0, 0, 1000, VMX_CPUID));
	EXPECT_EQ(1, hsw(&a, 120, -5, 1, true, "a", 2, "b"));
	EXPECT_EQ(1, hsw(&a, 120, 0, -1, true, "a", 2, "b"));
	EXPECT_EQ(1, gsw(&a, 120, 0, -3, 42, 0, "x", 0));
	EXPECT_EQ(1, disrupt(&a, 120, -1, true));
	ev.kind = 0;
	ev.host_ns = 120;
	EXPECT_EQ(1, hga_event(&a, &ev));
	ev.kind = 99;
	EXPECT_EQ(1, hga_event(&a, &ev));
	EXPECT_EQ(1, hga_event(&a, NULL));
	EXPECT_EQ(12, a.nr_bad);
	EXPECT_EQ(1, a.nr_vcpus);
	/* comm not NUL-ended */
	ev = (struct hga_event){ .kind = HGA_EV_GUEST_SWITCH, .host_ns = 130, .prev_tid = 99,
				 .next_tid = 43 };
	memset(ev.next_comm, 'x', sizeof(ev.next_comm));
	/* a switch from a thread that is not the one running: events were lost */
	EXPECT_EQ(0, hga_event(&a, &ev));
	EXPECT_EQ(1, a.nr_lost_switch);
	ASSERT_EQ(1, c->n);
	EXPECT_EQ(HGA_SL_LOST_SWITCH, c->s[0].flags);
	EXPECT_EQ(20, c->s[0].ns[HGA_C_GUEST]);
	/* never switched out: cut at the end */
	ASSERT_EQ(0, hga_finish(&a, 200));
	ASSERT_EQ(2, c->n);
	EXPECT_EQ(HGA_SL_OPEN_END, c->s[1].flags);
	EXPECT_EQ(70, c->s[1].ns[HGA_C_GUEST]);
	EXPECT_EQ(15, strlen(c->s[1].comm));
	EXPECT_EQ(1, hga_event(&a, &ev));	/* after the end */
	EXPECT_EQ(0, c->nr_bad_sums);

	f = open_memstream(&buf, &len);
	ASSERT_EQ(0, hga_report_text(&a, f, 3));
	fclose(f);
	EXPECT_NE(NULL, strstr(buf, "# refused: 1 out of host-time order, 13 malformed"));
	EXPECT_NE(NULL, strstr(buf, "1 guest sched_switch from a thread not running there"));
	EXPECT_NE(NULL, strstr(buf, "1 slices never ended"));
	free(buf);
	hga_free(&a);
	free(c);
	/* an empty window */
	opt.from_ns = 10;
	opt.to_ns = 10;
	EXPECT_EQ(-1, hga_init(&a, &opt));
}

/* Hostile exit reasons: past 4096 distinct ones, added up as "(others)", time kept. */
TEST(many_exit_reasons)
{
	struct hga a;
	const struct hga_split *s;
	uint64_t e = 0;
	uint32_t i;

	ASSERT_EQ(0, hga_init(&a, NULL));
	for (i = 0; i < 5000; i++) {
		ASSERT_EQ(0, kvm(&a, 10 * i, false, 0, 0, 0, 1000, 0x10000 + i));
		ASSERT_EQ(0, kvm(&a, 10 * i + 5, true, 0, 0, 0, 1000, 0));
	}
	ASSERT_EQ(0, hga_finish(&a, 50000));
	s = hga_vcpu_split(&a, 0, 0);
	ASSERT_NE(NULL, s);
	EXPECT_EQ(4097, s->exits.n);
	for (i = 0; i < s->exits.n; i++)
		e += s->exits.v[i].ns;
	EXPECT_EQ(25000, s->ns[HGA_C_EXIT]);
	EXPECT_EQ(25000, e);
	EXPECT_EQ(25000, s->ns[HGA_C_GUEST]);
	hga_free(&a);
}

/*
 * A random sequence over 2 guests x 2 vCPUs, 3 host CPUs and a few host
 * tasks: whatever the order of states, every slice and every vCPU adds
 * up to its wall time exactly, and every component's buckets to it.
 */
TEST(random_exactness)
{
	struct cap *c = calloc(1, sizeof(*c));
	struct hga_options opt = { .slice_cb = cap_slice, .ctx = c };
	static const uint32_t reasons[] = { VMX_CPUID, VMX_EXTINT, VMX_HLT, VMX_IO, 200 };
	uint64_t first[2][2] = { { 0 } }, seed = 12345, t = 1000, sum, nr_irq_keys = 0;
	int tid_of_cpu_vcpu[2][2] = { { 1000, 1001 }, { 2000, 2001 } };
	struct hga a;
	uint32_t i;
	int n, k;

	ASSERT_NE(NULL, c);
	ASSERT_EQ(0, hga_init(&a, &opt));
	for (n = 0; n < 20000; n++) {
		int g, v, cpu, kind, r;

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		r = (int)(seed >> 33);
		t += (uint64_t)(r % 97);
		g = r & 1;
		v = (r >> 1) & 1;
		cpu = (r >> 2) % 3;
		kind = (r >> 4) % 8;
		/* a vCPU's time begins at its first kvm_* or guest switch */
		if (!first[g][v] && kind != 2 && kind < 5)
			first[g][v] = t;
		switch (kind) {
		case 0:
		case 1:
			ASSERT_EQ(0, kvm(&a, t, kind == 0, g, v, cpu, tid_of_cpu_vcpu[g][v],
					 reasons[(r >> 8) % 5]));
			break;
		case 2:
			ASSERT_EQ(0, hsw(&a, t, cpu, (r >> 8) % 3 ? 3000 + (r >> 10) % 4 :
					 tid_of_cpu_vcpu[(r >> 12) & 1][(r >> 13) & 1],
					 (r >> 14) & 1, "p", (r >> 15) % 3 ? 3000 + (r >> 17) % 4 :
					 tid_of_cpu_vcpu[(r >> 19) & 1][(r >> 20) & 1], "n"));
			break;
		case 3:
		case 4:
			ASSERT_EQ(0, gsw(&a, t, g, v, (r >> 8) % 5, (r >> 11) % 5, "g",
					 (uint64_t)((r >> 14) % 50)));
			break;
		case 5:
			ASSERT_EQ(0, disrupt(&a, t, g, (r >> 8) & 1));
			break;
		default:	/* host interrupts, entries and exits in any order */
			ASSERT_EQ(0, irq_ev(&a, t, kind == 6 ?
					    ((r >> 8) & 1 ? HGA_EV_IRQ_ENTRY : HGA_EV_IRQ_EXIT) :
					    ((r >> 8) & 1 ? HGA_EV_SOFTIRQ_ENTRY : HGA_EV_SOFTIRQ_EXIT),
					    cpu, (r >> 9) % HGA_NR_SOFTIRQS, "i"));
		}
	}
	ASSERT_EQ(0, hga_finish(&a, t + 10));
	EXPECT_GT(c->n, 1000);
	EXPECT_EQ(0, c->nr_bad_sums);
	EXPECT_EQ(0, a.first_err[0]);
	ASSERT_EQ(4, a.nr_vcpus);
	for (i = 0; i < 4; i++) {
		const struct hga_split *s = hga_vcpu_split(&a, i >> 1, i & 1);
		uint64_t e = 0, o = 0;
		uint32_t j;

		ASSERT_NE(NULL, s);

		sum = 0;
		for (k = 0; k < HGA_NR_COMP; k++)
			sum += s->ns[k];
		EXPECT_EQ(t + 10 - first[i >> 1][i & 1], sum);
		for (j = 0; j < s->exits.n; j++)
			e += s->exits.v[j].ns;
		for (j = 0; j < s->offenders.n; j++) {
			o += s->offenders.v[j].ns;
			if (!hga_key_is_task(s->offenders.v[j].key) && s->offenders.v[j].ns)
				nr_irq_keys++;
		}
		EXPECT_EQ(s->ns[HGA_C_EXIT], e);
		EXPECT_EQ(s->ns[HGA_C_PREEMPTED], o);
	}
	/* the interrupts took time from some vCPU (their keys, not a task's) */
	EXPECT_GT(nr_irq_keys, 0);
	hga_free(&a);
	free(c);
}

/* Two splits the same: every component, and the buckets key for key, in order. */
static bool split_same(const struct hga_split *x, const struct hga_split *y)
{
	return !memcmp(x->ns, y->ns, sizeof(x->ns)) && x->exits.n == y->exits.n &&
	       x->offenders.n == y->offenders.n &&
	       (!x->exits.n || !memcmp(x->exits.v, y->exits.v, x->exits.n * sizeof(*x->exits.v))) &&
	       (!x->offenders.n ||
		!memcmp(x->offenders.v, y->offenders.v, x->offenders.n * sizeof(*x->offenders.v)));
}

/* No key twice in one split's buckets. */
static bool keys_unique(const struct hga_buckets *b)
{
	for (uint32_t i = 0; i < b->n; i++)
		for (uint32_t j = i + 1; j < b->n; j++)
			if (b->v[i].key == b->v[j].key)
				return false;
	return true;
}

/*
 * The engine finds the vCPUs an event concerns through per-CPU and
 * per-thread chains, and a split's buckets through an index once it has
 * more than a few keys.  The same random stream into an engine that looks
 * at every vCPU instead (opt.walk_all) must give the same slices, vCPU
 * splits and thread totals, to the byte and in the same order: 3 guests
 * x 6 vCPUs on 5 host CPUs, 40 host tasks (so the splits' offenders
 * pass the index's threshold and are reset at every slice), the third
 * guest's vCPU threads reusing the first's tids (two vCPUs per thread
 * chain), disruptions (threads forgotten) and interrupts.
 */
TEST(indexed_same_as_walk)
{
	struct cap *c[2] = { calloc(1, sizeof(struct cap)), calloc(1, sizeof(struct cap)) };
	struct hga a[2];
	uint64_t seed = 777, t = 1000;
	uint32_t i;
	int n, w;

	ASSERT_NE(NULL, c[0]);
	ASSERT_NE(NULL, c[1]);
	for (w = 0; w < 2; w++) {
		struct hga_options opt = { .slice_cb = cap_slice, .charge_cb = hash_charge,
					   .ctx = c[w], .walk_all = w };

		ASSERT_EQ(0, hga_init(&a[w], &opt));
	}
	for (n = 0; n < 30000; n++) {
		int g, v, cpu, kind, r, tid;

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		r = (int)(seed >> 33);
		t += (uint64_t)(r % 97);
		g = r % 3;
		v = (r >> 2) % 6;
		cpu = (r >> 5) % 5;
		kind = (r >> 8) % 10;
		tid = 1000 + (g == 2 ? 0 : g) * 100 + v;	/* guest 2 reuses guest 0's */
		for (w = 0; w < 2; w++) {
			switch (kind) {
			case 0:
			case 1:
			case 2:
				ASSERT_EQ(0, kvm(&a[w], t, kind == 0, g, v, cpu, tid,
						 (uint32_t[]){ VMX_CPUID, VMX_EXTINT, VMX_HLT, VMX_IO }
						 [(r >> 12) % 4]));
				break;
			case 3:
			case 4:
			case 5:
				ASSERT_EQ(0, hsw(&a[w], t, cpu, (r >> 12) % 2 ? 3000 + (r >> 13) % 40 : tid,
						 (r >> 19) & 1, "p",
						 (r >> 20) % 2 ? 3000 + (r >> 21) % 40 :
						 1000 + ((r >> 27) % 2) * 100 + (r >> 28) % 6, "n"));
				break;
			case 6:
			case 7:
				ASSERT_EQ(0, gsw(&a[w], t, g, v, (r >> 12) % 7, (r >> 15) % 7, "g",
						 (uint64_t)((r >> 18) % 30)));
				break;
			case 8:
				if ((r >> 12) % 20 == 0)
					ASSERT_EQ(0, disrupt(&a[w], t, g, (r >> 17) & 1));
				break;
			default:
				ASSERT_EQ(0, irq_ev(&a[w], t, (r >> 12) & 1 ? HGA_EV_IRQ_ENTRY :
						    HGA_EV_IRQ_EXIT, cpu, 24 + (r >> 13) % 3, "i"));
			}
		}
	}
	for (w = 0; w < 2; w++)
		ASSERT_EQ(0, hga_finish(&a[w], t + 10));
	EXPECT_GT(c[0]->n, 1000);
	ASSERT_EQ(c[0]->n, c[1]->n);
	EXPECT_EQ(0, memcmp(c[0]->s, c[1]->s, (size_t)c[0]->n * sizeof(c[0]->s[0])));
	/* the charges to open slices, one by one in the same order */
	EXPECT_GT(c[0]->nr_charges, 10000);
	EXPECT_EQ(c[0]->nr_charges, c[1]->nr_charges);
	EXPECT_EQ(c[0]->charges_hash, c[1]->charges_hash);
	EXPECT_EQ(0, c[0]->nr_bad_sums);
	ASSERT_EQ(18, a[0].nr_vcpus);
	ASSERT_EQ(a[0].nr_vcpus, a[1].nr_vcpus);
	for (i = 0; i < a[0].nr_vcpus; i++) {
		const struct hga_split *x = hga_vcpu_split(&a[0], (int)i / 6, (int)i % 6);
		const struct hga_split *y = hga_vcpu_split(&a[1], (int)i / 6, (int)i % 6);

		ASSERT_NE(NULL, x);
		ASSERT_NE(NULL, y);
		EXPECT_TRUE(split_same(x, y));
		EXPECT_TRUE(keys_unique(&x->offenders));
		EXPECT_TRUE(keys_unique(&x->exits));
	}
	/* more than the index's threshold (32) of offenders in some vCPU's split */
	EXPECT_GT(hga_vcpu_split(&a[0], 0, 0)->offenders.n, 32);
	ASSERT_EQ(a[0].nr_threads, a[1].nr_threads);
	for (i = 0; i < a[0].nr_threads; i++) {
		EXPECT_EQ(a[0].threads[i].tid, a[1].threads[i].tid);
		EXPECT_EQ(a[0].threads[i].wall_ns, a[1].threads[i].wall_ns);
		EXPECT_TRUE(split_same(&a[0].threads[i].split, &a[1].threads[i].split));
		EXPECT_TRUE(keys_unique(&a[0].threads[i].split.offenders));
	}
	for (w = 0; w < 2; w++) {
		hga_free(&a[w]);
		free(c[w]);
	}
}

/*
 * The host's interrupts as offenders: an IRQ and a softirq (with the
 * IRQ inside it) during an external-interrupt exit, an IRQ interrupting
 * the task that preempted the vCPU thread, a softirq whose exit is lost
 * (a context switch ends it), and an IRQ while the vCPU is halted (not
 * charged: the guest was idle).  Every ns once, the offenders by key.
 */
TEST(irq_offenders)
{
	struct cap *c = calloc(1, sizeof(*c));
	struct hga_options opt = { .slice_cb = cap_slice, .ctx = c };
	const uint64_t irq24 = HGA_KEY_IRQ | 24, irq1 = HGA_KEY_IRQ | 1;
	const uint64_t net_rx = HGA_KEY_SOFTIRQ | 3, timer = HGA_KEY_SOFTIRQ | 1;
	const struct hga_split *v;
	struct cap_slice *s;
	char *buf = NULL, label[64];
	size_t len = 0;
	struct hga a;
	FILE *f;

	ASSERT_NE(NULL, c);
	ASSERT_EQ(0, hga_init(&a, &opt));
	ASSERT_EQ(0, hsw(&a, 0, 0, 0, true, "swapper/0", 1000, "CPU 0/KVM"));
	ASSERT_EQ(0, kvm(&a, 0, true, 0, 0, 0, 1000, 0));
	ASSERT_EQ(0, gsw(&a, 100, 0, 0, 0, 42, "work", 0));
	ASSERT_EQ(0, kvm(&a, 200, false, 0, 0, 0, 1000, VMX_EXTINT));
	ASSERT_EQ(0, irq_ev(&a, 210, HGA_EV_IRQ_ENTRY, 0, 24, "virtio0"));
	ASSERT_EQ(0, irq_ev(&a, 250, HGA_EV_IRQ_EXIT, 0, 24, ""));
	ASSERT_EQ(0, irq_ev(&a, 250, HGA_EV_SOFTIRQ_ENTRY, 0, 3, ""));
	ASSERT_EQ(0, irq_ev(&a, 260, HGA_EV_IRQ_ENTRY, 0, 24, "virtio0"));
	ASSERT_EQ(0, irq_ev(&a, 270, HGA_EV_IRQ_EXIT, 0, 24, ""));
	ASSERT_EQ(0, irq_ev(&a, 300, HGA_EV_SOFTIRQ_EXIT, 0, 3, ""));
	/* another CPU's interrupt takes nothing from this vCPU */
	ASSERT_EQ(0, irq_ev(&a, 305, HGA_EV_IRQ_ENTRY, 1, 24, "virtio0"));
	ASSERT_EQ(0, kvm(&a, 310, true, 0, 0, 0, 1000, 0));
	ASSERT_EQ(0, kvm(&a, 400, false, 0, 0, 0, 1000, VMX_CPUID));
	ASSERT_EQ(0, hsw(&a, 420, 0, 1000, true, "CPU 0/KVM", 2000, "hog"));
	/* a handler's name longer than a task's (the kernel does not bound it) */
	ASSERT_EQ(0, irq_ev(&a, 450, HGA_EV_IRQ_ENTRY, 0, 1, "virtio0-requests"));
	ASSERT_EQ(0, irq_ev(&a, 470, HGA_EV_IRQ_EXIT, 0, 1, ""));
	ASSERT_EQ(0, irq_ev(&a, 480, HGA_EV_SOFTIRQ_ENTRY, 0, 1, ""));
	/* its softirq_exit lost: the switch back ends it */
	ASSERT_EQ(0, hsw(&a, 500, 0, 2000, true, "hog", 1000, "CPU 0/KVM"));
	ASSERT_EQ(0, kvm(&a, 510, true, 0, 0, 0, 1000, 0));
	ASSERT_EQ(0, gsw(&a, 600, 0, 0, 42, 0, "swapper/0", 0));
	ASSERT_EQ(0, kvm(&a, 620, false, 0, 0, 0, 1000, VMX_HLT));
	ASSERT_EQ(0, irq_ev(&a, 630, HGA_EV_IRQ_ENTRY, 0, 24, "virtio0"));
	ASSERT_EQ(0, irq_ev(&a, 640, HGA_EV_IRQ_EXIT, 0, 24, ""));
	/* hostile: a negative irq, a vector past RCU, a CPU out of range */
	EXPECT_EQ(1, irq_ev(&a, 650, HGA_EV_IRQ_ENTRY, 0, -1, "x"));
	EXPECT_EQ(1, irq_ev(&a, 650, HGA_EV_SOFTIRQ_ENTRY, 0, HGA_NR_SOFTIRQS, ""));
	EXPECT_EQ(1, irq_ev(&a, 650, HGA_EV_IRQ_EXIT, -1, 24, ""));
	EXPECT_EQ(3, a.nr_bad);
	ASSERT_EQ(0, hga_finish(&a, 700));
	ASSERT_EQ(2, c->n);
	EXPECT_EQ(0, c->nr_bad_sums);

	/*
	 * 42 [100, 600): guest 100 + 90 + 90; exits EXTINT 10 + 10, CPUID
	 * 20 + 10; preempted: irq 24 40 + 10, NET_RX 10 + 30, hog 30 + 10,
	 * irq 1 20, TIMER 20 (to the switch).
	 */
	s = &c->s[0];
	EXPECT_EQ(500, s->wall_ns);
	EXPECT_EQ(280, s->ns[HGA_C_GUEST]);
	EXPECT_EQ(50, s->ns[HGA_C_EXIT]);
	EXPECT_EQ(20, bucket_ns(s->exits, s->nr_exits, exit_key(VMX_EXTINT)));
	EXPECT_EQ(30, bucket_ns(s->exits, s->nr_exits, exit_key(VMX_CPUID)));
	EXPECT_EQ(170, s->ns[HGA_C_PREEMPTED]);
	EXPECT_EQ(50, bucket_ns(s->offenders, s->nr_offenders, irq24));
	EXPECT_EQ(2, bucket_count(s->offenders, s->nr_offenders, irq24));
	EXPECT_EQ(40, bucket_ns(s->offenders, s->nr_offenders, net_rx));
	EXPECT_EQ(1, bucket_count(s->offenders, s->nr_offenders, net_rx));
	EXPECT_EQ(40, bucket_ns(s->offenders, s->nr_offenders, 2000));
	EXPECT_EQ(1, bucket_count(s->offenders, s->nr_offenders, 2000));
	EXPECT_EQ(20, bucket_ns(s->offenders, s->nr_offenders, irq1));
	EXPECT_EQ(1, bucket_count(s->offenders, s->nr_offenders, irq1));
	EXPECT_EQ(20, bucket_ns(s->offenders, s->nr_offenders, timer));

	/* the vCPU: halted from 620 to the end, its IRQ not charged */
	v = hga_vcpu_split(&a, 0, 0);
	ASSERT_NE(NULL, v);
	EXPECT_EQ(170, v->ns[HGA_C_PREEMPTED]);
	EXPECT_EQ(80, v->ns[HGA_C_HALTED]);
	EXPECT_EQ(700, v->ns[HGA_C_GUEST] + v->ns[HGA_C_EXIT] + v->ns[HGA_C_PREEMPTED] +
			    v->ns[HGA_C_HALTED]);

	/* the names */
	EXPECT_FALSE(hga_key_is_task(irq24));
	EXPECT_TRUE(hga_key_is_task(2000));
	hga_offender_label(&a, irq24, label, sizeof(label));
	EXPECT_STREQ("irq 24 (virtio0)", label);
	hga_offender_label(&a, net_rx, label, sizeof(label));
	EXPECT_STREQ("softirq NET_RX", label);
	hga_offender_label(&a, HGA_KEY_IRQ | 1, label, sizeof(label));
	EXPECT_STREQ("irq 1 (virtio0-requests)", label);
	EXPECT_STREQ("virtio0-requests", hga_host_name(&a, HGA_KEY_IRQ | 1));
	hga_offender_label(&a, HGA_KEY_IRQ | 77, label, sizeof(label));
	EXPECT_STREQ("irq 77", label);
	hga_offender_label(&a, 2000, label, sizeof(label));
	EXPECT_STREQ("hog-2000", label);

	f = open_memstream(&buf, &len);
	ASSERT_EQ(0, hga_report_text(&a, f, 10));
	fclose(f);
	EXPECT_NE(NULL, strstr(buf, "irq 24 (virtio0)"));
	EXPECT_NE(NULL, strstr(buf, "softirq TIMER"));
	free(buf);
	buf = NULL;
	f = open_memstream(&buf, &len);
	ASSERT_EQ(0, hga_report_json(&a, f));
	fclose(f);
	EXPECT_NE(NULL, strstr(buf, "{\"tid\":null,\"irq\":24,\"comm\":\"virtio0\",\"ns\":50,\"count\":2}"));
	EXPECT_NE(NULL, strstr(buf, "{\"tid\":null,\"softirq\":3,\"comm\":\"NET_RX\",\"ns\":40,\"count\":1}"));
	free(buf);
	hga_free(&a);
	free(c);
}

/* ---- per request (analyze_req.h) ---- */

struct req_cap {
	int n, nr_bad_sums;
	uint64_t wall[64], ns[64][HGR_NR_COMP];
	uint32_t flags[64];
};

static int cap_req(void *ctx, const struct hgr_request *rq)
{
	struct req_cap *c = ctx;
	uint64_t sum = 0, e = 0, o = 0, q = 0;
	uint32_t i;
	int k;

	for (k = 0; k < HGR_NR_COMP; k++)
		sum += rq->split.ns[k];
	for (i = 0; i < rq->split.exits.n; i++)
		e += rq->split.exits.v[i].ns;
	for (i = 0; i < rq->split.offenders.n; i++)
		o += rq->split.offenders.v[i].ns;
	for (i = 0; i < rq->split.runq_by.n; i++)
		q += rq->split.runq_by.v[i].ns;
	if (sum != rq->wall_ns || e != rq->split.ns[HGR_C_EXIT] ||
	    o != rq->split.ns[HGR_C_PREEMPTED] || q != rq->split.ns[HGR_C_RUNQ])
		c->nr_bad_sums++;
	if (c->n < 64) {
		c->wall[c->n] = rq->wall_ns;
		c->flags[c->n] = rq->flags;
		memcpy(c->ns[c->n], rq->split.ns, sizeof(c->ns[0]));
	}
	c->n++;
	return 0;
}

static int rk(struct hgr *r, uint64_t t, bool entry, int guest, int vcpu, int cpu, int tid,
	      uint32_t reason)
{
	struct hga_event ev = {
		.kind = entry ? HGA_EV_KVM_ENTRY : HGA_EV_KVM_EXIT, .host_ns = t,
		.guest = guest, .vcpu = vcpu, .host_cpu = cpu, .host_tid = tid,
		.exit_isa = HGA_ISA_VMX, .exit_reason = reason,
	};

	return hgr_engine_event(r, &ev);
}

static int rh(struct hgr *r, uint64_t t, int cpu, int prev, bool runnable, const char *pcomm,
	      int next, const char *ncomm)
{
	struct hga_event ev = {
		.kind = HGA_EV_HOST_SWITCH, .host_ns = t, .host_cpu = cpu,
		.prev_tid = prev, .next_tid = next, .prev_runnable = runnable,
	};

	snprintf(ev.prev_comm, sizeof(ev.prev_comm), "%s", pcomm);
	snprintf(ev.next_comm, sizeof(ev.next_comm), "%s", ncomm);
	return hgr_engine_event(r, &ev);
}

/* A guest switch on @vcpu; @runnable: prev_state R (prev stays on the run queue). */
static int rg(struct hgr *r, uint64_t t, int guest, int vcpu, int prev, bool runnable, int next)
{
	struct hga_event ev = {
		.kind = HGA_EV_GUEST_SWITCH, .host_ns = t, .guest = guest, .vcpu = vcpu,
		.prev_tid = prev, .next_tid = next, .prev_runnable = runnable,
	};

	return hgr_engine_event(r, &ev);
}

/* The same, naming next (its comm in the guest). */
static int rgn(struct hgr *r, uint64_t t, int guest, int vcpu, int prev, bool runnable, int next,
	       const char *ncomm)
{
	struct hga_event ev = {
		.kind = HGA_EV_GUEST_SWITCH, .host_ns = t, .guest = guest, .vcpu = vcpu,
		.prev_tid = prev, .next_tid = next, .prev_runnable = runnable,
	};

	snprintf(ev.next_comm, sizeof(ev.next_comm), "%s", ncomm);
	return hgr_engine_event(r, &ev);
}

/* A guest sched_wakeup of @tid onto @vcpu's run queue (-1: target not known). */
static int rw(struct hgr *r, uint64_t t, int guest, int tid, int vcpu)
{
	struct hgr_event ev = {
		.kind = HGR_EV_WAKEUP, .host_ns = t, .guest = guest, .tid = tid, .vcpu = vcpu,
	};

	return hgr_event(r, &ev);
}

/* The bucket of @key in @b, or NULL. */
static const struct hga_bucket *bucket(const struct hga_buckets *b, uint64_t key)
{
	uint32_t i;

	for (i = 0; i < b->n; i++)
		if (b->v[i].key == key)
			return &b->v[i];
	return NULL;
}

static int rq(struct hgr *r, uint64_t t, uint32_t kind, int guest, int tid, uint64_t bound)
{
	struct hgr_event ev = {
		.kind = kind, .host_ns = t, .guest = guest, .tid = tid, .bound_ns = bound,
	};

	snprintf(ev.name, sizeof(ev.name), "req");
	return hgr_event(r, &ev);
}

/*
 * Guest 0, vCPU 0 (host thread 1000 on host CPU 0); guest thread 42's
 * request [150, 800):
 *   [150, 200) running 50, CPUID exit [200, 230) 30, running [230, 300) 70,
 *   preempted by hog (2000) [300, 380) 80, running [380, 400) 20;
 *   switched out runnable at 400 (43 runs): run queue [400, 500) 100;
 *   running [500, 550) 50; switched out asleep: blocked [550, 700) 150
 *   (the vCPU halts meanwhile: not the request's); woken at 700: run
 *   queue [700, 750) 50; running [750, 800) 50.
 * running 240, exits 30, preempted 80, runqueue 150, blocked 150 = 650.
 */
static int scenario_request(struct hgr *r)
{
	int e = 0;

	e |= rh(r, 0, 0, 0, true, "swapper/0", 1000, "CPU 0/KVM");
	e |= rk(r, 0, true, 0, 0, 0, 1000, 0);
	e |= rg(r, 100, 0, 0, 0, true, 42);
	e |= rq(r, 150, HGR_EV_BEGIN, 0, 42, 0);
	e |= rk(r, 200, false, 0, 0, 0, 1000, VMX_CPUID);
	e |= rk(r, 230, true, 0, 0, 0, 1000, 0);
	e |= rh(r, 300, 0, 1000, true, "CPU 0/KVM", 2000, "hog");
	e |= rh(r, 380, 0, 2000, true, "hog", 1000, "CPU 0/KVM");
	e |= rg(r, 400, 0, 0, 42, true, 43);
	e |= rg(r, 500, 0, 0, 43, false, 42);
	e |= rg(r, 550, 0, 0, 42, false, 0);
	e |= rk(r, 560, false, 0, 0, 0, 1000, VMX_HLT);
	e |= rq(r, 700, HGR_EV_WAKEUP, 0, 42, 0);
	e |= rk(r, 720, true, 0, 0, 0, 1000, 0);
	e |= rg(r, 750, 0, 0, 0, true, 42);
	e |= rq(r, 800, HGR_EV_END, 0, 42, 0);
	return e;
}

TEST(request_components)
{
	struct req_cap *c = calloc(1, sizeof(*c));
	struct hgr_options opt = { .req_cb = cap_req, .ctx = c };
	struct hgr *r = calloc(1, sizeof(*r));
	uint64_t v, key;

	ASSERT_NE(NULL, c);
	ASSERT_NE(NULL, r);
	ASSERT_EQ(0, hgr_init(r, 0, 0, &opt));
	ASSERT_EQ(0, scenario_request(r));
	ASSERT_EQ(0, hgr_finish(r, 900));
	ASSERT_EQ(1, c->n);
	EXPECT_EQ(0, c->nr_bad_sums);
	EXPECT_EQ(0, r->first_err[0]);
	EXPECT_EQ(650, c->wall[0]);
	EXPECT_EQ(240, c->ns[0][HGR_C_RUNNING]);
	EXPECT_EQ(30, c->ns[0][HGR_C_EXIT]);
	EXPECT_EQ(80, c->ns[0][HGR_C_PREEMPTED]);
	EXPECT_EQ(150, c->ns[0][HGR_C_RUNQ]);
	EXPECT_EQ(150, c->ns[0][HGR_C_BLOCKED]);
	EXPECT_EQ(0, c->ns[0][HGR_C_HALTED]);
	EXPECT_EQ(0, c->ns[0][HGR_C_UNSPLIT]);
	EXPECT_EQ(0, c->flags[0]);
	ASSERT_EQ(1, r->nr_slow);
	EXPECT_EQ(2000, r->slow[0].top_key[0]);
	EXPECT_EQ(exit_key(VMX_CPUID), r->slow[0].top_key[1]);
	EXPECT_EQ(1, r->slow[0].split.offenders.v[0].count);
	/* queued behind 43 (switched out runnable), then woken onto idle vCPU 0 */
	ASSERT_EQ(2, r->slow[0].split.runq_by.n);
	ASSERT_NE(NULL, bucket(&r->slow[0].split.runq_by, HGR_RQ_KEY(0, 43)));
	EXPECT_EQ(100, bucket(&r->slow[0].split.runq_by, HGR_RQ_KEY(0, 43))->ns);
	ASSERT_NE(NULL, bucket(&r->slow[0].split.runq_by, HGR_RQ_KEY(0, 0)));
	EXPECT_EQ(50, bucket(&r->slow[0].split.runq_by, HGR_RQ_KEY(0, 0))->ns);
	EXPECT_EQ(HGR_RQ_KEY(0, 43), r->slow[0].top_key[2]);
	ASSERT_EQ(0, hgr_percentile(r, HGR_C_PREEMPTED, 99, &v, &key));
	EXPECT_EQ(80, v);
	EXPECT_EQ(2000, key);
	ASSERT_EQ(0, hgr_percentile(r, HGR_NR_COMP, 50, &v, &key));
	EXPECT_EQ(650, v);
	hgr_free(r);
	free(r);
	free(c);
}

/*
 * Who ran instead while request [150, 800) of thread 42 (guest 0) waited
 * on the guest's run queue; no host events (its time on a vCPU is the
 * engine's "unknown"):
 *   on vCPU 0 from 100; switched out runnable at 200: behind worker (43)
 *   [200, 300) and kworker/0:1 (44) [300, 400); runs [400, 450); asleep
 *   at 450 (blocked [450, 500)); woken at 500 onto vCPU 1, which runs
 *   hog (45, since 350): behind it [500, 600), a request event of
 *   another thread at 550 in between (no second piece); runs on vCPU 1
 *   [600, 650); asleep (blocked [650, 700)); woken at 700 with no target
 *   CPU: behind (unknown) [700, 760); runs on vCPU 0 [760, 800).
 * runqueue 360 = 43: 100 + 44: 100 + 45: 100 + unknown 60, one piece each;
 * blocked 100; on a vCPU 190.  Without the run queue's vCPU kept, or the
 * waiters charged before a switch, the pieces go to the wrong threads.
 */
TEST(request_runqueue_by)
{
	struct req_cap *c = calloc(1, sizeof(*c));
	struct hgr_options opt = { .req_cb = cap_req, .ctx = c };
	struct hgr *r = calloc(1, sizeof(*r));
	const struct hga_buckets *b;
	char label[64], *buf = NULL;
	uint64_t v, key;
	size_t len = 0;
	FILE *f;
	int e = 0;

	ASSERT_NE(NULL, c);
	ASSERT_NE(NULL, r);
	ASSERT_EQ(0, hgr_init(r, 0, 0, &opt));
	e |= rgn(r, 100, 0, 0, 0, true, 42, "app");
	e |= rq(r, 150, HGR_EV_BEGIN, 0, 42, 0);
	e |= rgn(r, 200, 0, 0, 42, true, 43, "worker");
	e |= rgn(r, 300, 0, 0, 43, false, 44, "kworker/0:1");
	e |= rgn(r, 350, 0, 1, 0, true, 45, "hog");
	e |= rgn(r, 400, 0, 0, 44, false, 42, "app");
	e |= rgn(r, 450, 0, 0, 42, false, 0, "swapper/0");
	e |= rw(r, 500, 0, 42, 1);
	e |= rq(r, 550, HGR_EV_BEGIN, 0, 46, 0);
	e |= rgn(r, 600, 0, 1, 45, true, 42, "app");
	e |= rgn(r, 650, 0, 1, 42, false, 45, "hog");
	e |= rw(r, 700, 0, 42, -1);
	e |= rgn(r, 760, 0, 0, 0, true, 42, "app");
	e |= rq(r, 800, HGR_EV_END, 0, 42, 0);
	ASSERT_EQ(0, e);
	ASSERT_EQ(0, hgr_finish(r, 900));
	ASSERT_EQ(1, c->n);
	EXPECT_EQ(0, c->nr_bad_sums);
	EXPECT_EQ(0, r->first_err[0]);
	EXPECT_EQ(650, c->wall[0]);
	EXPECT_EQ(360, c->ns[0][HGR_C_RUNQ]);
	EXPECT_EQ(100, c->ns[0][HGR_C_BLOCKED]);
	EXPECT_EQ(190, c->ns[0][HGR_C_RUNNING] + c->ns[0][HGR_C_UNKNOWN]);
	ASSERT_EQ(1, r->nr_slow);
	b = &r->slow[0].split.runq_by;
	EXPECT_EQ(4, b->n);
	ASSERT_NE(NULL, bucket(b, HGR_RQ_KEY(0, 43)));
	EXPECT_EQ(100, bucket(b, HGR_RQ_KEY(0, 43))->ns);
	EXPECT_EQ(1, bucket(b, HGR_RQ_KEY(0, 43))->count);
	ASSERT_NE(NULL, bucket(b, HGR_RQ_KEY(0, 44)));
	EXPECT_EQ(100, bucket(b, HGR_RQ_KEY(0, 44))->ns);
	EXPECT_EQ(1, bucket(b, HGR_RQ_KEY(0, 44))->count);
	ASSERT_NE(NULL, bucket(b, HGR_RQ_KEY(0, 45)));
	EXPECT_EQ(100, bucket(b, HGR_RQ_KEY(0, 45))->ns);
	EXPECT_EQ(1, bucket(b, HGR_RQ_KEY(0, 45))->count);
	ASSERT_NE(NULL, bucket(b, HGR_RQ_UNKNOWN));
	EXPECT_EQ(60, bucket(b, HGR_RQ_UNKNOWN)->ns);
	hgr_runq_label(r, HGR_RQ_KEY(0, 44), label, sizeof(label));
	EXPECT_STREQ("0:kworker/0:1-44", label);
	hgr_runq_label(r, HGR_RQ_KEY(0, 0), label, sizeof(label));
	EXPECT_STREQ("0:(idle)", label);
	hgr_runq_label(r, HGR_RQ_UNKNOWN, label, sizeof(label));
	EXPECT_STREQ("(unknown)", label);
	ASSERT_EQ(0, hgr_percentile(r, HGR_C_RUNQ, 99, &v, &key));
	EXPECT_EQ(360, v);
	/* the first of the three equal ones, in the order they began */
	EXPECT_EQ(HGR_RQ_KEY(0, 43), key);
	f = open_memstream(&buf, &len);
	ASSERT_NE(NULL, f);
	ASSERT_EQ(0, hgr_report_text(r, f));
	ASSERT_EQ(0, hga_report_json(&r->a, f));
	fclose(f);
	EXPECT_NE(NULL, strstr(buf, "queued behind 0:worker-43"));
	EXPECT_NE(NULL, strstr(buf, "lost 360 ns to the guest's run queue, most by 0:worker-43"));
	EXPECT_NE(NULL, strstr(buf, "\"runqueue_by\":[{\"thread\":\"0:worker-43\",\"tid\":43,"
			       "\"ns\":100,\"count\":1}"));
	free(buf);
	hgr_free(r);
	free(r);
	free(c);
}

/*
 * 100 requests of thread 42, always on vCPU 0 in guest mode: request i
 * (1..100) is preempted i ns (by kworker/1:2, tid 3000, for i = 99; by
 * hog, 2000, otherwise) and runs 20.  Nearest rank: p50 50, p90 90,
 * p99 99 (kworker's), max 100.  One more, short and within its ends'
 * bounds: uncertain, left out.
 */
TEST(request_percentiles)
{
	struct hgr *r = calloc(1, sizeof(*r));
	struct hgr_options opt = { .top = 3 };
	uint64_t t = 100, v, key;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int i;

	ASSERT_NE(NULL, r);
	ASSERT_EQ(0, hgr_init(r, 0, 0, &opt));
	ASSERT_EQ(0, rh(r, 0, 0, 0, true, "swapper/0", 1000, "CPU 0/KVM"));
	ASSERT_EQ(0, rk(r, 0, true, 0, 0, 0, 1000, 0));
	ASSERT_EQ(0, rg(r, 10, 0, 0, 0, true, 42));
	for (i = 1; i <= 100; i++) {
		int hog = i == 99 ? 3000 : 2000;

		ASSERT_EQ(0, rq(r, t, HGR_EV_BEGIN, 0, 42, 0));
		ASSERT_EQ(0, rh(r, t + 10, 0, 1000, true, "CPU 0/KVM", hog,
				i == 99 ? "kworker/1:2" : "hog"));
		ASSERT_EQ(0, rh(r, t + 10 + i, 0, hog, true, i == 99 ? "kworker/1:2" : "hog", 1000,
				"CPU 0/KVM"));
		ASSERT_EQ(0, rq(r, t + 20 + i, HGR_EV_END, 0, 42, 0));
		t += 1000;
	}
	ASSERT_EQ(0, rq(r, t, HGR_EV_BEGIN, 0, 42, 10));
	ASSERT_EQ(0, rq(r, t + 15, HGR_EV_END, 0, 42, 10));
	ASSERT_EQ(0, hgr_finish(r, t + 100));
	EXPECT_EQ(0, r->first_err[0]);
	EXPECT_EQ(100, r->nr_requests);
	EXPECT_EQ(1, r->nr_uncertain);
	EXPECT_EQ(15, r->uncertain_ns);
	ASSERT_EQ(0, hgr_percentile(r, HGR_C_PREEMPTED, 50, &v, &key));
	EXPECT_EQ(50, v);
	EXPECT_EQ(2000, key);
	ASSERT_EQ(0, hgr_percentile(r, HGR_C_PREEMPTED, 90, &v, &key));
	EXPECT_EQ(90, v);
	ASSERT_EQ(0, hgr_percentile(r, HGR_C_PREEMPTED, 99, &v, &key));
	EXPECT_EQ(99, v);
	EXPECT_EQ(3000, key);
	ASSERT_EQ(0, hgr_percentile(r, HGR_C_PREEMPTED, 100, &v, &key));
	EXPECT_EQ(100, v);
	ASSERT_EQ(0, hgr_percentile(r, HGR_C_RUNNING, 99, &v, &key));
	EXPECT_EQ(20, v);
	ASSERT_EQ(0, hgr_percentile(r, HGR_NR_COMP, 100, &v, &key));
	EXPECT_EQ(120, v);
	/* the slowest three, slowest first */
	ASSERT_EQ(3, r->nr_slow);
	EXPECT_EQ(120, r->slow[0].wall_ns);
	EXPECT_EQ(119, r->slow[1].wall_ns);
	EXPECT_EQ(118, r->slow[2].wall_ns);
	f = open_memstream(&buf, &len);
	ASSERT_NE(NULL, f);
	ASSERT_EQ(0, hgr_report_text(r, f));
	fclose(f);
	EXPECT_NE(NULL, strstr(buf, "p99 requests lost 99 ns to host preemption, most by "
			  "kworker/1:2-3000"));
	EXPECT_NE(NULL, strstr(buf, "1 requests (15 ns) no longer than the mapping's bounds"));
	free(buf);
	hgr_free(r);
	free(r);
}

/*
 * Thread 42 moves between vCPUs inside its request [150, 500): on vCPU 0
 * [150, 200) running 50; switched out runnable: run queue [200, 260) 60;
 * on vCPU 1: running 40, an I/O exit [300, 340) 40, running 60, preempted
 * by 5000 on host CPU 1 [400, 450) 50, running 50.  With the window
 * [180, 480): running 20 + 40 + 60 + 30, the rest as before, wall 300.
 */
TEST(request_moves_between_vcpus_and_window)
{
	static const uint64_t win[2][2] = { { 0, 0 }, { 180, 480 } };
	static const uint64_t want[2][5] = { { 350, 200, 60, 40, 50 }, { 300, 150, 60, 40, 50 } };
	struct req_cap *c = calloc(1, sizeof(*c));
	struct hgr_options opt = { .req_cb = cap_req, .ctx = c };
	struct hgr *r = calloc(1, sizeof(*r));
	int i, e;

	ASSERT_NE(NULL, c);
	ASSERT_NE(NULL, r);
	for (i = 0; i < 2; i++) {
		memset(c, 0, sizeof(*c));
		ASSERT_EQ(0, hgr_init(r, win[i][0], win[i][1], &opt));
		e = rh(r, 0, 0, 0, true, "swapper/0", 1000, "CPU 0/KVM");
		e |= rh(r, 0, 1, 0, true, "swapper/1", 1001, "CPU 1/KVM");
		e |= rk(r, 0, true, 0, 0, 0, 1000, 0) | rk(r, 0, true, 0, 1, 1, 1001, 0);
		e |= rg(r, 100, 0, 0, 0, true, 42) | rq(r, 150, HGR_EV_BEGIN, 0, 42, 0);
		e |= rg(r, 200, 0, 0, 42, true, 43) | rg(r, 260, 0, 1, 0, true, 42);
		e |= rk(r, 300, false, 0, 1, 1, 1001, VMX_IO) | rk(r, 340, true, 0, 1, 1, 1001, 0);
		e |= rh(r, 400, 1, 1001, true, "CPU 1/KVM", 5000, "hog");
		e |= rh(r, 450, 1, 5000, true, "hog", 1001, "CPU 1/KVM");
		e |= rq(r, 500, HGR_EV_END, 0, 42, 0);
		ASSERT_EQ(0, e);
		ASSERT_EQ(0, hgr_finish(r, 600));
		ASSERT_EQ(1, c->n);
		EXPECT_EQ(0, c->nr_bad_sums);
		EXPECT_EQ(want[i][0], c->wall[0]);
		EXPECT_EQ(want[i][1], c->ns[0][HGR_C_RUNNING]);
		EXPECT_EQ(want[i][2], c->ns[0][HGR_C_RUNQ]);
		EXPECT_EQ(want[i][3], c->ns[0][HGR_C_EXIT]);
		EXPECT_EQ(want[i][4], c->ns[0][HGR_C_PREEMPTED]);
		EXPECT_EQ(i ? HGR_RQ_CLIPPED : 0, c->flags[0]);
		hgr_free(r);
	}
	free(r);
	free(c);
}

/*
 * Bad input, each counted and said, nothing made up: an end without a
 * begin, a nested begin (the outer request measured whole), a request
 * never ended, an event going back in time, fields out of range; and a
 * request of a thread the guest's scheduler never named: all "unsplit".
 */
TEST(request_bad_input)
{
	struct req_cap *c = calloc(1, sizeof(*c));
	struct hgr_options opt = { .req_cb = cap_req, .ctx = c };
	struct hgr *r = calloc(1, sizeof(*r));
	uint64_t v, key;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	ASSERT_NE(NULL, c);
	ASSERT_NE(NULL, r);
	ASSERT_EQ(0, hgr_init(r, 0, 0, &opt));
	EXPECT_EQ(-1, hgr_percentile(r, HGR_NR_COMP, 50, &v, &key));
	EXPECT_EQ(1, rq(r, 10, HGR_EV_END, 0, 42, 0));
	EXPECT_EQ(1, r->nr_end_alone);
	ASSERT_EQ(0, rq(r, 100, HGR_EV_BEGIN, 0, 42, 0));
	ASSERT_EQ(0, rq(r, 150, HGR_EV_BEGIN, 0, 42, 0));
	ASSERT_EQ(0, rq(r, 160, HGR_EV_END, 0, 42, 0));
	EXPECT_EQ(0, c->n);
	EXPECT_EQ(1, rq(r, 120, HGR_EV_END, 0, 42, 0));
	EXPECT_EQ(1, r->nr_regressions);
	EXPECT_EQ(1, rq(r, 200, HGR_EV_END, -1, 42, 0));
	EXPECT_EQ(1, rq(r, 200, HGR_EV_END, 0, 0, 0));
	EXPECT_EQ(1, rq(r, 200, 99, 0, 42, 0));
	EXPECT_EQ(3, r->nr_bad);
	ASSERT_EQ(0, rq(r, 300, HGR_EV_END, 0, 42, 0));
	ASSERT_EQ(1, c->n);
	EXPECT_EQ(200, c->wall[0]);
	EXPECT_EQ(200, c->ns[0][HGR_C_UNSPLIT]);
	EXPECT_EQ(1, r->nr_nested);
	ASSERT_EQ(0, rq(r, 400, HGR_EV_BEGIN, 0, 43, 0));
	ASSERT_EQ(0, hgr_finish(r, 500));
	EXPECT_EQ(1, r->nr_never_ended);
	EXPECT_EQ(1, r->nr_requests);
	EXPECT_EQ(0, c->nr_bad_sums);
	f = open_memstream(&buf, &len);
	ASSERT_NE(NULL, f);
	ASSERT_EQ(0, hgr_report_text(r, f));
	fclose(f);
	EXPECT_NE(NULL, strstr(buf, "1 ends without a begin"));
	EXPECT_NE(NULL, strstr(buf, "1 nested begins"));
	EXPECT_NE(NULL, strstr(buf, "1 requests never ended: not split"));
	EXPECT_NE(NULL, strstr(buf, "1 request events before the events already taken"));
	EXPECT_NE(NULL, strstr(buf, "no guest sched_switch"));
	free(buf);
	hgr_free(r);
	free(r);
	free(c);
}

/*
 * A random sequence of kvm_*, host and guest switches (with lost ones),
 * wakeups and requests on two guests' two vCPUs: every request adds up
 * to its wall time, its exits and offenders to their components.
 */
TEST(request_random_exactness)
{
	static const uint32_t reasons[] = { VMX_CPUID, VMX_EXTINT, VMX_HLT, VMX_IO };
	int tid_of[2][2] = { { 1000, 1001 }, { 2000, 2001 } };
	struct req_cap *c = calloc(1, sizeof(*c));
	struct hgr_options opt = { .req_cb = cap_req, .ctx = c };
	struct hgr *r = calloc(1, sizeof(*r));
	uint64_t seed = 777, t = 1000;
	int n;

	ASSERT_NE(NULL, c);
	ASSERT_NE(NULL, r);
	ASSERT_EQ(0, hgr_init(r, 5000, 900000, &opt));
	for (n = 0; n < 30000; n++) {
		int g, v, cpu, kind, x;

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		x = (int)(seed >> 33);
		t += (uint64_t)(x % 67);
		g = x & 1;
		v = (x >> 1) & 1;
		cpu = (x >> 2) % 3;
		kind = (x >> 4) % 8;
		switch (kind) {
		case 0:
		case 1:
			ASSERT_EQ(0, rk(r, t, kind == 0, g, v, cpu, tid_of[g][v],
					reasons[(x >> 8) % 4]));
			break;
		case 2:
			ASSERT_EQ(0, rh(r, t, cpu, (x >> 8) % 3 ? 3000 + (x >> 10) % 4 :
					tid_of[(x >> 12) & 1][(x >> 13) & 1], (x >> 14) & 1, "p",
					(x >> 15) % 3 ? 3000 + (x >> 17) % 4 :
					tid_of[(x >> 19) & 1][(x >> 20) & 1], "n"));
			break;
		case 3:
		case 4:
			ASSERT_EQ(0, rg(r, t, g, v, (x >> 8) % 5, (x >> 11) & 1, (x >> 12) % 5));
			break;
		case 5:
			ASSERT_EQ(0, rq(r, t, HGR_EV_WAKEUP, g, 1 + (x >> 8) % 4, 0));
			break;
		default:
			/* ends without begins and nested begins are refused or counted */
			ASSERT_LE(0, rq(r, t, (x >> 8) & 1 ? HGR_EV_BEGIN : HGR_EV_END, g,
					1 + (x >> 9) % 4, (uint64_t)((x >> 12) % 8)));
		}
	}
	ASSERT_EQ(0, hgr_finish(r, t + 10));
	EXPECT_GT(c->n, 100);
	EXPECT_EQ(0, c->nr_bad_sums);
	/* refusals are said there; an internal error would be too */
	EXPECT_EQ(NULL, strstr(r->first_err, "internal"));
	EXPECT_EQ(0, r->a.first_err[0]);
	EXPECT_GT(r->tot.ns[HGR_C_RUNQ], 0);
	EXPECT_GT(r->tot.ns[HGR_C_BLOCKED], 0);
	EXPECT_GT(r->tot.ns[HGR_C_PREEMPTED], 0);
	EXPECT_GT(r->tot.ns[HGR_C_EXIT], 0);
	hgr_free(r);
	free(r);
	free(c);
}

TEST_HARNESS_MAIN

// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of user/lib/markpair.c, exit pairing without the guest module:
 * the marker line's parser against valid and hostile lines, and the join
 * of markers with host exits on generated runs with a known truth (each
 * guest CPU's clock a different linear function of the host TSC, markers
 * stamped around each exit, everything shuffled): every pair produced
 * must bracket its exit's true guest time, and each damage (a missing
 * end, an end before its begin, markers on two CPUs, a wrong key, a
 * duplicate seq, a huge gap, out-of-range values, an exit from another
 * vCPU or VM) must drop exactly the pairs it touches, counted as such.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/hgclock.h>

#include "kselftest_harness.h"
#include "markpair.h"
#include "gen.h"

/* ---- 1. the marker line ---- */

static int parse(const char *s, uint32_t *key, uint32_t *seq, bool *is_end)
{
	return hg_marker_parse(s, strlen(s) + 1, key, seq, is_end);
}

TEST(marker_round_trip)
{
	static const uint32_t keys[] = { 0, 1, 9, 10, 4242, 65535 };
	static const uint32_t seqs[] = { 1, 9, 10, 100, 65536, UINT32_MAX };
	char line[HG_MARKPAIR_LINE_MAX];

	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		for (size_t s = 0; s < sizeof(seqs) / sizeof(seqs[0]); s++)
			for (int e = 0; e < 2; e++) {
				uint32_t key = ~0u, seq = 0;
				bool is_end = !e;
				int n = hg_marker_format(line, sizeof(line), e, keys[k], seqs[s]);

				ASSERT_GT(n, 0);
				ASSERT_EQ((size_t)n, strlen(line));
				ASSERT_EQ('\n', line[n - 1]);
				ASSERT_EQ(1, parse(line, &key, &seq, &is_end));
				EXPECT_EQ(keys[k], key);
				EXPECT_EQ(seqs[s], seq);
				EXPECT_EQ(!!e, is_end);
			}
	/* Out of range or too small a buffer: refused, not truncated. */
	EXPECT_EQ(-1, hg_marker_format(line, sizeof(line), false, 65536, 1));
	EXPECT_EQ(-1, hg_marker_format(line, sizeof(line), false, 1, 0));
	EXPECT_EQ(-1, hg_marker_format(line, 20, false, 1, 1));
}

TEST(marker_parse_hostile)
{
	static const char *const not_ours[] = {
		"", "hello", "hgclock_pair", "hgclock_pairs begin key=1 seq=1",
		" hgclock_pair begin key=1 seq=1", "HGCLOCK_PAIR begin key=1 seq=1",
	};
	static const char *const bad[] = {
		"hgclock_pair ", "hgclock_pair start key=1 seq=1",
		"hgclock_pair begin key=65536 seq=1", "hgclock_pair begin key=-1 seq=1",
		"hgclock_pair begin key=+1 seq=1", "hgclock_pair begin key=01 seq=1",
		"hgclock_pair begin key=1 seq=0", "hgclock_pair begin key=1 seq=007",
		"hgclock_pair begin key=1 seq=4294967296",
		"hgclock_pair begin key=1 seq=99999999999999999999999",
		"hgclock_pair begin key=1 seq=5 ", "hgclock_pair begin key=1 seq=5\n\n",
		"hgclock_pair begin key=1 seq=5x", "hgclock_pair begin key=1  seq=5",
		"hgclock_pair begin seq=5 key=1", "hgclock_pair begin key= seq=5",
		"hgclock_pair end key=1", "hgclock_pair begin key=1 seq=5\r\n",
	};
	static const char rec_nul[] = "hgclock_pair end key=3 seq=4\n\0\xff\xfejunk";
	const char *line = "hgclock_pair begin key=3 seq=45";
	uint32_t key = 7, seq = 7;
	bool is_end = false;
	char rec[40];

	for (size_t i = 0; i < sizeof(not_ours) / sizeof(not_ours[0]); i++) {
		EXPECT_EQ(0, parse(not_ours[i], &key, &seq, &is_end)) {
			TH_LOG("'%s'", not_ours[i]);
		}
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		EXPECT_EQ(-1, parse(bad[i], &key, &seq, &is_end)) {
			TH_LOG("'%s'", bad[i]);
		}
	}
	/* Nothing written by a refused line. */
	EXPECT_EQ(7u, key);
	EXPECT_EQ(7u, seq);
	EXPECT_EQ(0, hg_marker_parse(NULL, 10, &key, &seq, &is_end));

	/* The record's buf: the text, a NUL, then whatever the record holds. */
	EXPECT_EQ(1, hg_marker_parse(rec_nul, sizeof(rec_nul) - 1, &key, &seq, &is_end));
	EXPECT_EQ(3u, key);
	EXPECT_EQ(4u, seq);
	EXPECT_TRUE(is_end);

	/* No NUL within the length: only @len bytes are read. */
	memset(rec, 'Z', sizeof(rec));
	memcpy(rec, line, strlen(line));
	EXPECT_EQ(1, hg_marker_parse(rec, strlen(line), &key, &seq, &is_end));
	EXPECT_EQ(45u, seq);
	EXPECT_FALSE(is_end);
	/* Cut inside the number: a different, still valid, seq ... */
	EXPECT_EQ(1, hg_marker_parse(rec, strlen(line) - 1, &key, &seq, &is_end));
	EXPECT_EQ(4u, seq);
	/* ... or nothing left of it. */
	EXPECT_EQ(-1, hg_marker_parse(rec, strlen(line) - 2, &key, &seq, &is_end));
	/* The Zs beyond: junk. */
	EXPECT_EQ(-1, hg_marker_parse(rec, sizeof(rec), &key, &seq, &is_end));
}

/* ---- 2. generated runs ---- */

#define NR_CPUS		4
#define VM_PID		4321
#define OTHER_VM_PID	777
#define MAX_RUN		2048

/*
 * A run of pairings with its truth: guest CPU c's trace clock is
 * host_tsc / 3 + clock_off[c] ns (a 3 GHz TSC, a per-CPU offset as
 * sched_clock has); each exit at host TSC truth_host_tsc, bracketed by
 * markers stamped before and after its true guest time.
 */
struct run {
	struct hg_marker m[2 * MAX_RUN + 64];
	size_t nr_m;
	struct hgclock_rec_exit_host x[2 * MAX_RUN + 64];
	size_t nr_x;
	int64_t clock_off[NR_CPUS];
	int32_t cpu_vcpu[NR_CPUS];	/* vcpu ids the exits carry */
	uint32_t key;
	size_t nr_seq;
};

static uint64_t truth_guest_ts(const struct run *r, int cpu, uint64_t host_tsc)
{
	return (uint64_t)((int64_t)(host_tsc / 3) + r->clock_off[cpu]);
}

static void add_marker(struct run *r, int cpu, uint64_t ts, uint32_t key, uint32_t seq,
		       bool is_end)
{
	struct hg_marker *m = &r->m[r->nr_m++];

	memset(m, 0, sizeof(*m));
	m->guest_cpu = cpu;
	m->guest_ts = ts;
	m->key = key;
	m->seq = seq;
	m->is_end = is_end;
}

static void add_exit(struct run *r, int32_t vm_pid, int32_t vcpu_id, uint64_t host_tsc,
		     uint32_t key, uint32_t seq)
{
	struct hgclock_rec_exit_host *x = &r->x[r->nr_x++];

	/* On any host CPU: the join must not care which. */
	gen_rec(x, sizeof(*x), HGCLOCK_REC_EXIT_HOST, (uint32_t)rnd_range(0, 7), host_tsc,
		host_tsc / 3 + 5);
	x->tid = 1000 + vcpu_id;
	x->vm_pid = vm_pid;
	x->vcpu_id = vcpu_id;
	x->key = key;
	x->seq = seq;
}

/* pairmark's order: round after round, one pairing per CPU, seq from 1. */
static void gen_run(struct run *r, size_t nr_seq, const int32_t *cpu_vcpu, uint64_t seed)
{
	uint64_t host_tsc = 3000000000000ull;

	rng_seed(seed);
	memset(r, 0, sizeof(*r));
	r->key = (uint32_t)rnd_range(0, 0xffff);
	r->nr_seq = nr_seq;
	for (int c = 0; c < NR_CPUS; c++) {
		r->clock_off[c] = (int64_t)rnd_range(0, 2000000) - 1000000;
		r->cpu_vcpu[c] = cpu_vcpu ? cpu_vcpu[c] : c;
	}
	for (uint32_t seq = 1; seq <= nr_seq; seq++) {
		int cpu = (int)((seq - 1) % NR_CPUS);
		uint64_t t;

		host_tsc += rnd_range(30000, 3000000);	/* 10 us .. 1 ms */
		t = truth_guest_ts(r, cpu, host_tsc);
		add_marker(r, cpu, t - rnd_range(200, 30000), r->key, seq, false);
		add_marker(r, cpu, t + rnd_range(200, 30000), r->key, seq, true);
		add_exit(r, VM_PID, r->cpu_vcpu[cpu], host_tsc, r->key, seq);
	}
}

static void shuffle_run(struct run *r)
{
	for (size_t i = r->nr_m; i > 1; i--) {
		size_t j = rnd() % i;
		struct hg_marker t = r->m[i - 1];

		r->m[i - 1] = r->m[j];
		r->m[j] = t;
	}
	for (size_t i = r->nr_x; i > 1; i--) {
		size_t j = rnd() % i;
		struct hgclock_rec_exit_host t = r->x[i - 1];

		r->x[i - 1] = r->x[j];
		r->x[j] = t;
	}
}

static struct hg_marker *find_marker(struct run *r, uint32_t seq, bool is_end)
{
	for (size_t i = 0; i < r->nr_m; i++)
		if (r->m[i].key == r->key && r->m[i].seq == seq && r->m[i].is_end == is_end)
			return &r->m[i];
	return NULL;
}

static struct hgclock_rec_exit_host *find_exit(struct run *r, uint32_t seq)
{
	for (size_t i = 0; i < r->nr_x; i++)
		if (r->x[i].vm_pid == VM_PID && r->x[i].key == r->key && r->x[i].seq == seq)
			return &r->x[i];
	return NULL;
}

static struct hg_markpair_opts default_opts(void)
{
	struct hg_markpair_opts o = {
		.vm_pid = VM_PID,
		.key = -1,
		.max_gap = HG_MARKPAIR_MAX_GAP_NS,
		.guest_clock = 1,
	};

	return o;
}

/*
 * Runs the join and checks what holds for every pair whatever the
 * damage: it names a seq of the run whose exit is the one generated,
 * its markers bracket the exit's true guest time on its CPU, and the
 * output is sorted by CPU then begin.  Returns the pairs (free them).
 */
static struct hg_markpair *join(struct __test_metadata *_metadata, struct run *r,
				const struct hg_markpair_opts *o, size_t *nr,
				struct hg_markpair_stats *st)
{
	struct hg_markpair *p = NULL;

	memset(st, 0, sizeof(*st));
	shuffle_run(r);
	EXPECT_EQ(0, hg_markpair_match(r->m, r->nr_m, r->x, r->nr_x, o, &p, nr, st));
	EXPECT_EQ(*nr, st->pairs);
	for (size_t i = 0; i < *nr; i++) {
		uint64_t truth;
		int cpu = p[i].guest_cpu;

		ASSERT_GE(cpu, 0);
		ASSERT_LT(cpu, NR_CPUS);
		EXPECT_EQ(r->key, p[i].key);
		EXPECT_GE(p[i].seq, 1u);
		EXPECT_LE(p[i].seq, r->nr_seq);
		EXPECT_EQ(VM_PID, p[i].vm_pid);
		EXPECT_EQ(r->cpu_vcpu[cpu], p[i].vcpu_id);
		EXPECT_EQ(o->guest_clock, p[i].guest_clock);
		EXPECT_EQ(p[i].host_tsc / 3 + 5, p[i].host_ns);
		truth = truth_guest_ts(r, cpu, p[i].host_tsc);
		EXPECT_LE(p[i].guest_ts_begin, truth) {
			TH_LOG("seq %u: begin %llu after the exit's truth %llu", p[i].seq,
			       (unsigned long long)p[i].guest_ts_begin,
			       (unsigned long long)truth);
		}
		EXPECT_GE(p[i].guest_ts_end, truth) {
			TH_LOG("seq %u: end %llu before the exit's truth %llu", p[i].seq,
			       (unsigned long long)p[i].guest_ts_end, (unsigned long long)truth);
		}
		EXPECT_EQ(!o->cpu_vcpu, !!(p[i].flags & HG_MARKPAIR_VCPU_ASSUMED));
		if (i)
			EXPECT_TRUE(p[i - 1].guest_cpu < cpu ||
				    (p[i - 1].guest_cpu == cpu &&
				     p[i - 1].guest_ts_begin <= p[i].guest_ts_begin));
	}
	return p;
}

/* Total of the drop counters: every marker pair not produced is in one. */
static uint64_t dropped(const struct hg_markpair_stats *st)
{
	return st->duplicate + st->no_begin + st->no_end + st->cross_cpu + st->reversed +
	       st->too_wide + st->no_exit + st->ambiguous_exit + st->vcpu_mismatch;
}

static struct run run_buf;

TEST(normal)
{
	struct hg_markpair_opts o = default_opts();
	struct hg_markpair_stats st;
	struct run *r = &run_buf;
	struct hg_markpair *p;
	size_t nr;

	gen_run(r, MAX_RUN, NULL, 1);
	p = join(_metadata, r, &o, &nr, &st);
	EXPECT_EQ(MAX_RUN, nr);
	EXPECT_EQ(2 * MAX_RUN, st.markers);
	EXPECT_EQ(0, dropped(&st));
	EXPECT_EQ(1u, st.vcpu_assumed);
	/* Every seq once. */
	for (uint32_t seq = 1; seq <= MAX_RUN; seq++) {
		size_t hits = 0;

		for (size_t i = 0; i < nr; i++)
			hits += p[i].seq == seq;
		EXPECT_EQ(1u, hits) {
			TH_LOG("seq %u", seq);
		}
	}
	free(p);

	/* Nothing in, nothing out, no allocation. */
	memset(&st, 0, sizeof(st));
	p = (struct hg_markpair *)&st;
	EXPECT_EQ(0, hg_markpair_match(NULL, 0, NULL, 0, &o, &p, &nr, &st));
	EXPECT_EQ(NULL, p);
	EXPECT_EQ(0u, nr);
}

TEST(missing_end_and_begin)
{
	struct hg_markpair_opts o = default_opts();
	struct hg_markpair_stats st;
	struct run *r = &run_buf;
	struct hg_markpair *p;
	size_t nr;

	gen_run(r, 200, NULL, 2);
	/* Seq 10 and 11 lose their end, 20 its begin: moved out of the key. */
	find_marker(r, 10, true)->key = r->key ^ 1;
	find_marker(r, 11, true)->key = r->key ^ 1;
	find_marker(r, 20, false)->key = r->key ^ 1;
	p = join(_metadata, r, &o, &nr, &st);
	EXPECT_EQ(197u, nr);
	/*
	 * Under the run's key: 10 and 11 begins alone, 20 an end alone; the
	 * moved markers are alone under theirs: 10 and 11 ends, 20 a begin.
	 */
	EXPECT_EQ(3u, st.no_end);
	EXPECT_EQ(3u, st.no_begin);
	EXPECT_EQ(6u, dropped(&st));
	for (size_t i = 0; i < nr; i++)
		EXPECT_TRUE(p[i].seq != 10 && p[i].seq != 11 && p[i].seq != 20);
	free(p);
}

TEST(end_before_begin)
{
	struct hg_markpair_opts o = default_opts();
	struct hg_markpair_stats st;
	struct run *r = &run_buf;
	struct hg_markpair *p;
	struct hg_marker *b, *e;
	uint64_t t;
	size_t nr;

	gen_run(r, 100, NULL, 3);
	b = find_marker(r, 50, false);
	e = find_marker(r, 50, true);
	t = b->guest_ts;
	b->guest_ts = e->guest_ts;
	e->guest_ts = t;
	/* Equal stamps are a pair of zero width: kept (the clock's resolution). */
	b = find_marker(r, 60, false);
	e = find_marker(r, 60, true);
	t = truth_guest_ts(r, b->guest_cpu, find_exit(r, 60)->hdr.tsc);
	b->guest_ts = t;
	e->guest_ts = t;
	p = join(_metadata, r, &o, &nr, &st);
	EXPECT_EQ(99u, nr);
	EXPECT_EQ(1u, st.reversed);
	EXPECT_EQ(1u, dropped(&st));
	for (size_t i = 0; i < nr; i++) {
		EXPECT_NE(50u, p[i].seq);
		if (p[i].seq == 60)
			EXPECT_EQ(p[i].guest_ts_begin, p[i].guest_ts_end);
	}
	free(p);
}

TEST(different_cpus)
{
	struct hg_markpair_opts o = default_opts();
	struct hg_markpair_stats st;
	struct run *r = &run_buf;
	struct hg_markpair *p;
	size_t nr;

	gen_run(r, 100, NULL, 4);
	/* The thread moved between its markers: end on the next CPU. */
	for (uint32_t seq = 5; seq <= 8; seq++) {
		struct hg_marker *e = find_marker(r, seq, true);

		e->guest_cpu = (e->guest_cpu + 1) % NR_CPUS;
	}
	p = join(_metadata, r, &o, &nr, &st);
	EXPECT_EQ(96u, nr);
	EXPECT_EQ(4u, st.cross_cpu);
	EXPECT_EQ(4u, dropped(&st));
	free(p);
}

TEST(exit_on_other_vcpu)
{
	static const int32_t gaps[NR_CPUS] = { 0, 1, 2, 4 };	/* APIC IDs with a gap */
	struct hg_markpair_opts o = default_opts();
	struct hg_markpair_stats st;
	struct run *r = &run_buf;
	struct hg_markpair *p;
	size_t nr;

	/* Markers on CPU 1, the exit from vCPU 2: both markers agree, the exit does not. */
	gen_run(r, 100, NULL, 5);
	find_exit(r, 2)->vcpu_id = 2;	/* seq 2 ran on CPU 1 */
	p = join(_metadata, r, &o, &nr, &st);
	EXPECT_EQ(99u, nr);
	EXPECT_EQ(1u, st.vcpu_mismatch);
	free(p);

	/* vcpu_ids with a gap: right with the map, CPU 3's wrong without it. */
	gen_run(r, 100, gaps, 6);
	o.cpu_vcpu = gaps;
	o.nr_cpu_vcpu = NR_CPUS;
	p = join(_metadata, r, &o, &nr, &st);
	EXPECT_EQ(100u, nr);
	EXPECT_EQ(0u, st.vcpu_assumed);
	EXPECT_EQ(0, dropped(&st));
	free(p);
	o.cpu_vcpu = NULL;
	o.nr_cpu_vcpu = 0;
	memcpy(r->cpu_vcpu, (int32_t[NR_CPUS]){ 0, 1, 2, 3 }, sizeof(r->cpu_vcpu));
	p = join(_metadata, r, &o, &nr, &st);
	EXPECT_EQ(75u, nr);
	EXPECT_EQ(25u, st.vcpu_mismatch);
	EXPECT_EQ(1u, st.vcpu_assumed);
	for (size_t i = 0; i < nr; i++)
		EXPECT_NE(3, p[i].guest_cpu);
	free(p);

	/* A map that does not name CPU 3 (nr 3, or -1): CPU 3's pairs dropped. */
	memcpy(r->cpu_vcpu, gaps, sizeof(r->cpu_vcpu));
	o.cpu_vcpu = gaps;
	o.nr_cpu_vcpu = 3;
	p = join(_metadata, r, &o, &nr, &st);
	EXPECT_EQ(75u, nr);
	EXPECT_EQ(25u, st.vcpu_mismatch);
	free(p);
}

TEST(wrong_key)
{
	struct hg_markpair_opts o = default_opts();
	struct hg_markpair_stats st;
	struct run *r = &run_buf;
	struct hg_markpair *p;
	uint32_t other;
	size_t nr;

	gen_run(r, 100, NULL, 7);
	other = (r->key + 1) & 0xffff;
	/* Another run's markers with the same seqs, no exits of their own. */
	for (uint32_t seq = 1; seq <= 10; seq++) {
		add_marker(r, 0, 1000 + seq, other, seq, false);
		add_marker(r, 0, 2000 + seq, other, seq, true);
	}
	/* Any key: the intruders are joined with nothing. */
	p = join(_metadata, r, &o, &nr, &st);
	EXPECT_EQ(100u, nr);
	EXPECT_EQ(10u, st.no_exit);
	free(p);
	/* This run's key only: ignored before the join. */
	o.key = r->key;
	p = join(_metadata, r, &o, &nr, &st);
	EXPECT_EQ(100u, nr);
	EXPECT_EQ(20u, st.wrong_key);
	EXPECT_EQ(0, dropped(&st));
	free(p);
	/* Exits of another key do not stand in for this one's. */
	o.key = -1;
	gen_run(r, 100, NULL, 7);
	other = (r->key + 1) & 0xffff;
	for (uint32_t seq = 1; seq <= 10; seq++)
		find_exit(r, seq)->key = other;
	p = join(_metadata, r, &o, &nr, &st);
	EXPECT_EQ(90u, nr);
	EXPECT_EQ(10u, st.no_exit);
	EXPECT_EQ(0u, st.ambiguous_exit);
	free(p);
}

TEST(duplicate_seq)
{
	struct hg_markpair_opts o = default_opts();
	struct hg_markpair_stats st;
	struct run *r = &run_buf;
	struct hg_markpair *p;
	struct hgclock_rec_exit_host x;
	struct hg_marker b;
	size_t nr;

	gen_run(r, 100, NULL, 8);
	/* A second begin for seq 30 (a replayed marker), a second end for 31. */
	b = *find_marker(r, 30, false);
	add_marker(r, b.guest_cpu, b.guest_ts + 1, b.key, b.seq, false);
	b = *find_marker(r, 31, true);
	add_marker(r, b.guest_cpu, b.guest_ts + 1, b.key, b.seq, true);
	/* Two exits for seq 40: which one was ours cannot be told. */
	x = *find_exit(r, 40);
	add_exit(r, VM_PID, x.vcpu_id, x.hdr.tsc + 99999, x.key, x.seq);
	p = join(_metadata, r, &o, &nr, &st);
	EXPECT_EQ(97u, nr);
	EXPECT_EQ(2u, st.duplicate);
	EXPECT_EQ(1u, st.ambiguous_exit);
	for (size_t i = 0; i < nr; i++)
		EXPECT_TRUE(p[i].seq != 30 && p[i].seq != 31 && p[i].seq != 40);
	free(p);
}

TEST(other_vm)
{
	struct hg_markpair_opts o = default_opts();
	struct hg_markpair_stats st;
	struct run *r = &run_buf;
	struct hg_markpair *p;
	size_t nr;

	gen_run(r, 100, NULL, 9);
	/* Another VM's guest drew the same key: its exits carry the same (key, seq). */
	for (uint32_t seq = 1; seq <= 20; seq++) {
		struct hgclock_rec_exit_host x = *find_exit(r, seq);

		add_exit(r, OTHER_VM_PID, x.vcpu_id, x.hdr.tsc + 12345, x.key, x.seq);
	}
	p = join(_metadata, r, &o, &nr, &st);
	EXPECT_EQ(100u, nr);
	EXPECT_EQ(0, dropped(&st));
	free(p);
	/* Without the VM: refused where two VMs match, never guessed. */
	o.vm_pid = -1;
	p = join(_metadata, r, &o, &nr, &st);
	EXPECT_EQ(80u, nr);
	EXPECT_EQ(20u, st.ambiguous_exit);
	free(p);
}

TEST(huge_gaps)
{
	struct hg_markpair_opts o = default_opts();
	struct hg_markpair_stats st;
	struct run *r = &run_buf;
	struct hg_markpair *p;
	size_t nr;

	gen_run(r, 100, NULL, 10);
	/* Preempted between the markers: 1 ms + 1 and 1 s; exactly 1 ms is kept. */
	find_marker(r, 3, true)->guest_ts = find_marker(r, 3, false)->guest_ts +
		HG_MARKPAIR_MAX_GAP_NS + 1;
	find_marker(r, 4, true)->guest_ts += 1000000000ull;
	find_marker(r, 5, true)->guest_ts = find_marker(r, 5, false)->guest_ts +
		HG_MARKPAIR_MAX_GAP_NS;
	p = join(_metadata, r, &o, &nr, &st);
	EXPECT_EQ(98u, nr);
	EXPECT_EQ(2u, st.too_wide);
	for (size_t i = 0; i < nr; i++) {
		EXPECT_LE(p[i].guest_ts_end - p[i].guest_ts_begin, HG_MARKPAIR_MAX_GAP_NS);
		EXPECT_TRUE(p[i].seq != 3 && p[i].seq != 4);
	}
	free(p);
	/* No limit: all kept (the bound is the gap, however wide). */
	o.max_gap = 0;
	p = join(_metadata, r, &o, &nr, &st);
	EXPECT_EQ(100u, nr);
	free(p);
}

TEST(out_of_range)
{
	struct hg_markpair_opts o = default_opts();
	struct hg_markpair_stats st;
	struct run *r = &run_buf;
	struct hg_markpair *p;
	size_t nr;

	gen_run(r, 100, NULL, 11);
	find_marker(r, 1, false)->guest_cpu = -1;
	find_marker(r, 2, true)->guest_cpu = HG_MARKPAIR_MAX_CPU;
	find_marker(r, 3, false)->guest_ts = (uint64_t)INT64_MAX + 1;
	find_marker(r, 4, true)->guest_ts = UINT64_MAX;
	find_marker(r, 5, false)->key = 0x10000;
	find_marker(r, 6, true)->is_end = 7;
	add_marker(r, 0, 5, r->key, 0, false);		/* seq 0: never written */
	find_exit(r, 7)->vcpu_id = -5;
	find_exit(r, 8)->vcpu_id = HG_MARKPAIR_MAX_CPU;
	find_exit(r, 9)->hdr.cpu = UINT32_MAX;
	find_exit(r, 10)->key = 0x1ffff;
	p = join(_metadata, r, &o, &nr, &st);
	EXPECT_EQ(90u, nr);
	EXPECT_EQ(4u, st.out_of_range);
	EXPECT_EQ(3u, st.malformed);
	EXPECT_EQ(4u, st.bad_exit);
	/* Their partners are left alone; the bad exits' pairs have none. */
	EXPECT_EQ(3u, st.no_begin);	/* 1, 3, 5 lost their begin: ends alone */
	EXPECT_EQ(3u, st.no_end);	/* 2, 4, 6 lost their end */
	EXPECT_EQ(4u, st.no_exit);
	for (size_t i = 0; i < nr; i++)
		EXPECT_GT(p[i].seq, 10u);
	free(p);

	/* A VM pid of 0 or below is nobody's: refused even when asked for any. */
	gen_run(r, 10, NULL, 12);
	for (size_t i = 0; i < r->nr_x; i++)
		r->x[i].vm_pid = 0;
	o.vm_pid = -1;
	p = join(_metadata, r, &o, &nr, &st);
	EXPECT_EQ(0u, nr);
	EXPECT_EQ(NULL, p);
	EXPECT_EQ(10u, st.bad_exit);
	EXPECT_EQ(10u, st.no_exit);
}

/*
 * Many seeds, random damage of every kind at once: each (key, seq) gives
 * a pair or one drop count, and each pair is made of its own (key, seq)'s
 * one begin, one end and one exit, on one CPU and its vCPU, within the
 * gap limit.  (Damaged stamps may no longer bracket the truth: what a
 * lying guest could do, and no join can see.)
 */
TEST(random_damage)
{
	struct hg_markpair_opts o = default_opts();
	struct hg_markpair_stats st;
	struct run *r = &run_buf;

	for (uint64_t seed = 100; seed < 140; seed++) {
		struct hg_markpair *p;
		bool seen[601];
		uint64_t groups;
		size_t nr;

		gen_run(r, 500, NULL, seed);
		for (int k = 0; k < 60; k++) {
			uint32_t seq = (uint32_t)rnd_range(1, 500);
			struct hg_marker *m = find_marker(r, seq, rnd() & 1);

			if (!m)		/* moved to another seq before */
				continue;
			switch (rnd() % 6) {
			case 0:
				m->guest_ts += rnd_range(1, 5000000);
				break;
			case 1:
				m->guest_ts -= rnd_range(1, 5000000);
				break;
			case 2:
				m->guest_cpu = (int32_t)rnd_range(0, NR_CPUS - 1);
				break;
			case 3:
				m->seq = (uint32_t)rnd_range(1, 600);
				break;
			case 4:
				find_exit(r, seq)->hdr.tsc += rnd_range(1, 300000);
				break;
			default:
				find_exit(r, seq)->vcpu_id = (int32_t)rnd_range(0, NR_CPUS);
				break;
			}
		}
		memset(&st, 0, sizeof(st));
		shuffle_run(r);
		ASSERT_EQ(0, hg_markpair_match(r->m, r->nr_m, r->x, r->nr_x, &o, &p, &nr, &st));
		memset(seen, 0, sizeof(seen));
		groups = 0;
		for (size_t i = 0; i < r->nr_m; i++) {
			groups += !seen[r->m[i].seq];
			seen[r->m[i].seq] = true;
		}
		EXPECT_EQ(groups, nr + dropped(&st));
		EXPECT_GT(nr, 300u);
		for (size_t i = 0; i < nr; i++) {
			struct hg_marker *b = find_marker(r, p[i].seq, false);
			struct hg_marker *e = find_marker(r, p[i].seq, true);

			ASSERT_NE(NULL, b);
			ASSERT_NE(NULL, e);
			EXPECT_EQ(b->guest_cpu, p[i].guest_cpu);
			EXPECT_EQ(e->guest_cpu, p[i].guest_cpu);
			EXPECT_EQ(b->guest_ts, p[i].guest_ts_begin);
			EXPECT_EQ(e->guest_ts, p[i].guest_ts_end);
			EXPECT_LE(p[i].guest_ts_begin, p[i].guest_ts_end);
			EXPECT_LE(p[i].guest_ts_end - p[i].guest_ts_begin, o.max_gap);
			EXPECT_EQ(find_exit(r, p[i].seq)->hdr.tsc, p[i].host_tsc);
			EXPECT_EQ(p[i].guest_cpu, p[i].vcpu_id);
		}
		free(p);
	}
}

TEST_HARNESS_MAIN

// SPDX-License-Identifier: GPL-2.0
/*
 * bench_analyze - the attribution engine's cost per event (merge
 * --analyze, user/merge/analyze.c) on a small host and on a large one,
 * natively, no VM, no module.
 *
 *   bench_analyze [EVENTS]      (default 2000000 per host and round)
 *
 * Each host is a generated stream of the events merge --analyze feeds
 * the engine, in host-time order: vCPUs entering and leaving guest mode
 * (HLT and three other exit reasons), host context switches among host
 * tasks and vCPU threads (preemptions among them; each host task runs on
 * one CPU, each vCPU thread moves among four), guest context switches,
 * and host interrupts.  The small host has 2 CPUs, 4 vCPUs and
 * 50 host tasks; the large one 64 CPUs, 512 vCPUs (16 guests of 32),
 * 8000 host tasks and 4000 guest threads.  An engine whose per-event
 * work is O(1) in vCPUs, host tasks and guest threads costs about the
 * same per event on both; one that searches them linearly costs the
 * large host's size more.
 *
 * BENCH lines: analyze.small_ns_per_event, analyze.large_ns_per_event
 * (medians of 5 rounds) and analyze.large_over_small (their ratio).  A
 * "# checksum" line sums every vCPU's split: the same on every run of
 * the same engine semantics, so two builds can be compared for sameness.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analyze.h"
#include "bench_stats.h"

#define ROUNDS		5
#define VCPU_TID0	1000000
#define GUEST_TID0	10

struct host {
	const char *name;
	int nr_cpus, nr_vcpus, vcpus_per_guest, nr_tasks, nr_guest_threads;
};

struct gen {
	uint64_t rng, t;
	const struct host *h;
	int32_t *cpu_curr;	/* host tid running on each CPU */
	int32_t *vcpu_cpu;	/* each vCPU thread's CPU */
	int32_t *vcpu_guest_tid;	/* the guest thread each vCPU runs */
};

static uint32_t rnd(struct gen *g, uint32_t n)
{
	g->rng ^= g->rng << 13;
	g->rng ^= g->rng >> 7;
	g->rng ^= g->rng << 17;
	return (uint32_t)(g->rng % n);
}

static void next(struct gen *g, struct hga_event *e)
{
	const struct host *h = g->h;
	uint32_t r = rnd(g, 100);
	int32_t k, cpu;

	memset(e, 0, sizeof(*e));
	g->t += 1 + rnd(g, 2000);
	e->host_ns = g->t;
	k = (int32_t)rnd(g, (uint32_t)h->nr_vcpus);
	e->guest = k / h->vcpus_per_guest;
	e->vcpu = k % h->vcpus_per_guest;
	if (r < 40) {		/* a VM exit or entry of vCPU k where its thread is */
		e->kind = r < 20 ? HGA_EV_KVM_EXIT : HGA_EV_KVM_ENTRY;
		e->host_cpu = g->vcpu_cpu[k];
		e->host_tid = VCPU_TID0 + k;
		e->exit_isa = HGA_ISA_VMX;
		e->exit_reason = (uint32_t[]){ 1, 10, 12, 30 }[rnd(g, 4)];
		g->cpu_curr[e->host_cpu] = e->host_tid;
	} else if (r < 75) {	/* a host context switch: a task, or vCPU k moving here */
		cpu = (int32_t)rnd(g, (uint32_t)h->nr_cpus);
		e->kind = HGA_EV_HOST_SWITCH;
		e->host_cpu = cpu;
		e->prev_tid = g->cpu_curr[cpu];
		e->prev_runnable = rnd(g, 2);
		if (rnd(g, 2)) {
			/* vCPU k's thread moves among four CPUs near its own */
			cpu = (k + (int32_t)rnd(g, 4)) % h->nr_cpus;
			e->host_cpu = cpu;
			e->prev_tid = g->cpu_curr[cpu];
			e->next_tid = VCPU_TID0 + k;
			g->vcpu_cpu[k] = cpu;
		} else {
			/* a host task of this CPU's share (the scheduler keeps most near) */
			e->next_tid = 1 + cpu + h->nr_cpus *
				      (int32_t)rnd(g, (uint32_t)(h->nr_tasks / h->nr_cpus));
		}
		snprintf(e->prev_comm, sizeof(e->prev_comm), "t%d", e->prev_tid % 100000);
		snprintf(e->next_comm, sizeof(e->next_comm), "t%d", e->next_tid % 100000);
		g->cpu_curr[cpu] = e->next_tid;
	} else if (r < 92) {	/* a guest context switch on vCPU k */
		e->kind = HGA_EV_GUEST_SWITCH;
		e->prev_tid = g->vcpu_guest_tid[k];
		e->next_tid = GUEST_TID0 + (int32_t)rnd(g, (uint32_t)h->nr_guest_threads);
		snprintf(e->next_comm, sizeof(e->next_comm), "g%d", e->next_tid);
		e->bound_ns = 1;
		e->method = HGA_METHOD_KVM_EXACT;
		g->vcpu_guest_tid[k] = e->next_tid;
	} else {		/* a host interrupt */
		e->kind = r < 96 ? HGA_EV_IRQ_ENTRY : HGA_EV_IRQ_EXIT;
		e->host_cpu = (int32_t)rnd(g, (uint32_t)h->nr_cpus);
		e->irq = 24 + (int32_t)rnd(g, 8);
		snprintf(e->irq_name, sizeof(e->irq_name), "virtio%d", e->irq);
	}
}

/* One round: ns per event; *@sum the vCPUs' splits added (sameness). */
static double round_ns(const struct host *h, uint64_t nr_events, uint64_t *sum)
{
	struct gen g = { .rng = 0x9e3779b97f4a7c15ull, .t = 1000000, .h = h };
	struct timespec t0, t1;
	struct hga_event e;
	struct hga a;
	uint64_t i;

	g.cpu_curr = calloc((size_t)h->nr_cpus, sizeof(*g.cpu_curr));
	g.vcpu_cpu = calloc((size_t)h->nr_vcpus, sizeof(*g.vcpu_cpu));
	g.vcpu_guest_tid = calloc((size_t)h->nr_vcpus, sizeof(*g.vcpu_guest_tid));
	if (!g.cpu_curr || !g.vcpu_cpu || !g.vcpu_guest_tid || hga_init(&a, NULL)) {
		fprintf(stderr, "bench_analyze: out of memory\n");
		exit(1);
	}
	for (int k = 0; k < h->nr_vcpus; k++)
		g.vcpu_cpu[k] = k % h->nr_cpus;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < nr_events; i++) {
		next(&g, &e);
		if (hga_event(&a, &e) < 0) {
			fprintf(stderr, "bench_analyze: the engine failed (memory)\n");
			exit(1);
		}
	}
	if (hga_finish(&a, g.t + 1) < 0) {
		fprintf(stderr, "bench_analyze: the engine failed at the end\n");
		exit(1);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	*sum = 0;
	for (int k = 0; k < h->nr_vcpus; k++) {
		const struct hga_split *s = hga_vcpu_split(&a, k / h->vcpus_per_guest,
							   k % h->vcpus_per_guest);

		for (int c = 0; s && c < HGA_NR_COMP; c++)
			*sum += s->ns[c] * (uint64_t)(c + 1);
		for (uint32_t b = 0; s && b < s->offenders.n; b++)
			*sum += s->offenders.v[b].count * 7 + s->offenders.v[b].key;
	}
	hga_free(&a);
	free(g.cpu_curr);
	free(g.vcpu_cpu);
	free(g.vcpu_guest_tid);
	return ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / (double)nr_events;
}

int main(int argc, char **argv)
{
	static const struct host hosts[] = {
		{ "small", 2, 4, 2, 50, 40 },
		{ "large", 64, 512, 32, 8000, 4000 },
	};
	uint64_t nr_events = argc > 1 ? strtoull(argv[1], NULL, 0) : 2000000;
	double med[2], v[ROUNDS];
	char model[256];

	if (!nr_events) {
		fprintf(stderr, "usage: bench_analyze [EVENTS]\n");
		return 2;
	}
	cpu_model(model, sizeof(model));
	printf("# bench_analyze: %" PRIu64 " generated events per host and round, %d rounds, "
	       "natively on %s\n", nr_events, ROUNDS, model);
	for (int i = 0; i < 2; i++) {
		uint64_t sum = 0, first = 0;

		for (int r = 0; r < ROUNDS; r++) {
			v[r] = round_ns(&hosts[i], nr_events, &sum);
			if (r && sum != first) {
				fprintf(stderr, "bench_analyze: two rounds of one stream differ\n");
				return 1;
			}
			first = sum;
		}
		med[i] = median(v, ROUNDS);
		printf("# checksum %s %" PRIu64 "\n", hosts[i].name, sum);
		printf("BENCH analyze.%s_ns_per_event %.1f ns\n", hosts[i].name, med[i]);
	}
	printf("BENCH analyze.large_over_small %.2f ratio\n", med[1] / med[0]);
	return 0;
}

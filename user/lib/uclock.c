// SPDX-License-Identifier: LGPL-2.1
/*
 * libhgclock: the zero-syscall sched_clock / local_clock.
 *
 * The module publishes each CPU's TSC to sched_clock conversion in the meta
 * area under a sequence count.  We read the TSC together with the number of
 * the CPU that read it, take that CPU's conversion under its sequence count,
 * and apply it: the very value sched_clock() would have returned for that
 * TSC on that CPU.
 *
 * How the TSC and its CPU are read together (the method), best first
 * (Documentation/library.rst, "Reading the TSC and its CPU together"):
 *
 *   rdtscp  one instruction: the TSC and TSC_AUX, where Linux keeps the CPU.
 *   rseq    the thread's rseq area (registered by glibc >= 2.35): cpu_id and
 *           LFENCE; RDTSC inside one rseq critical section, which the kernel
 *           aborts if the thread is preempted, migrated or signalled in it.
 *   rdpid   RDPID; LFENCE; RDTSC; RDPID, retried until both RDPIDs agree
 *           (not proof against a move away and back between them: used only
 *           where rseq is not registered).
 *   none    -ENODATA, counted (hgclock_uclock_stats()); hgclock_now() then
 *           asks the kernel (READ_CLOCK).
 */
#include <cpuid.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

#if defined(__has_include)
#if __has_include(<sys/rseq.h>)
#include <sys/rseq.h>
#define HG_HAVE_RSEQ 1
#endif
#endif

#include "libhgclock.h"

/* Attempts of one reading: moves, rseq aborts and conversion rewrites. */
#define HG_UCLOCK_TRIES	100

uint64_t hgclock_conv_apply(const struct hgclock_conversion *conv, uint64_t tsc)
{
	uint64_t delta = tsc - conv->tsc_base;

	if (conv->pre_shift >= 0)
		delta <<= conv->pre_shift;
	else
		delta >>= -conv->pre_shift;
	return conv->offset_ns +
	       (uint64_t)(((unsigned __int128)delta * conv->mult) >> conv->shift);
}

/* Process-wide counts, relaxed: statistics, nothing is published with them. */
static uint64_t hg_stat_no_method;
static uint64_t hg_stat_retries;

void hgclock_uclock_stats(struct hgclock_uclock_stats *stats)
{
	stats->no_method = __atomic_load_n(&hg_stat_no_method, __ATOMIC_RELAXED);
	stats->retries = __atomic_load_n(&hg_stat_retries, __ATOMIC_RELAXED);
}

static inline uint64_t hg_rdtscp(unsigned int *tsc_aux)
{
	uint32_t lo, hi, c;

	__asm__ __volatile__("rdtscp" : "=a"(lo), "=d"(hi), "=c"(c));
	*tsc_aux = c;
	return ((uint64_t)hi << 32) | lo;
}

static inline unsigned int hg_rdpid(void)
{
	uint64_t tsc_aux;

	__asm__ __volatile__("rdpid %0" : "=r"(tsc_aux));
	return (unsigned int)tsc_aux;
}

/*
 * RDTSC ordered after every earlier instruction, as the kernel's
 * rdtsc_ordered() and the vDSO's clock_gettime() do it.  Intel documents
 * LFENCE as not completing until all prior instructions have completed
 * locally, and later ones (RDTSC) as not starting before it.  On AMD,
 * LFENCE is dispatch serializing when DE_CFG[1] (MSR C001_1029 bit 1) is
 * set, or always on CPUs reporting CPUID 0x80000021 EAX[2]: Linux sets the
 * bit at boot on every AMD CPU with SSE2 and then relies on LFENCE; RDTSC
 * itself (X86_FEATURE_LFENCE_RDTSC), so do we.  The memory clobber keeps
 * the compiler from moving loads and stores across it.
 */
static inline uint64_t hg_rdtsc_ordered(void)
{
	uint32_t lo, hi;

	__asm__ __volatile__("lfence\n\trdtsc" : "=a"(lo), "=d"(hi) : : "memory");
	return ((uint64_t)hi << 32) | lo;
}

#ifdef HG_HAVE_RSEQ
/* glibc registered the main thread's rseq area, with rseq_cs in it. */
static int hg_rseq_registered(void)
{
	return __rseq_size >= offsetof(struct rseq, rseq_cs) + sizeof(__u64);
}

static inline struct rseq *hg_rseq_area(void)
{
	return (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
}

/*
 * The TSC and the CPU it was read on, from the calling thread's rseq area.
 * 0; -EAGAIN when the kernel aborted the critical section (the thread was
 * preempted, migrated or took a signal inside it: read again); -ENODATA
 * when this thread has no rseq registration (cpu_id negative).
 *
 * The critical section [1, 2) holds the load of cpu_id and LFENCE; RDTSC.
 * Its descriptor (struct rseq_cs, 32-byte aligned: version 0, flags 0,
 * start_ip, post_commit_offset, abort_ip) goes to a data section, and the
 * abort handler, preceded by the signature glibc registered (RSEQ_SIG,
 * inside a UD1 as librseq writes it), to a section of its own.  Storing the
 * descriptor's address in rseq_cs arms it; the kernel reads rseq_cs only
 * on this thread's return to user space, so program order is all the
 * ordering needed.  When the kernel aborts, it clears rseq_cs and resumes
 * at 4; we clear it ourselves after 2 as well, so that it never points
 * into a library that may be unloaded.
 */
static inline int hg_rseq_tsc(uint64_t *tsc, unsigned int *cpu)
{
	struct rseq *rs = hg_rseq_area();
	uint32_t lo, hi, cpu_id, aborted;

	__asm__ __volatile__(
		".pushsection __rseq_cs, \"aw\"\n\t"
		".balign 32\n"
		"3:\n\t"
		".long 0, 0\n\t"
		".quad 1f, 2f - 1f, 4f\n\t"
		".popsection\n\t"
		".pushsection __rseq_failure, \"ax\"\n\t"
		".byte 0x0f, 0xb9, 0x3d\n\t"
		".long %c[sig]\n"
		"4:\n\t"
		"movl $1, %[aborted]\n\t"
		"jmp 2f\n\t"
		".popsection\n\t"
		"xorl %[aborted], %[aborted]\n\t"
		"leaq 3b(%%rip), %%rcx\n\t"
		"movq %%rcx, %c[cs_off](%[rs])\n"
		"1:\n\t"
		"movl %c[cpu_off](%[rs]), %[cpu_id]\n\t"
		"lfence\n\t"
		"rdtsc\n"
		"2:\n\t"
		"movq $0, %c[cs_off](%[rs])\n\t"
		: [aborted] "=&r"(aborted), [cpu_id] "=&r"(cpu_id), "=&a"(lo), "=&d"(hi)
		: [rs] "r"(rs), [sig] "i"(RSEQ_SIG),
		  [cs_off] "i"(offsetof(struct rseq, rseq_cs)),
		  [cpu_off] "i"(offsetof(struct rseq, cpu_id))
		: "rcx", "memory");
	if (aborted)
		return -EAGAIN;
	/* RSEQ_CPU_ID_UNINITIALIZED or _REGISTRATION_FAILED */
	if ((int32_t)cpu_id < 0)
		return -ENODATA;
	*cpu = cpu_id;
	*tsc = ((uint64_t)hi << 32) | lo;
	return 0;
}
#else
static int hg_rseq_registered(void)
{
	return 0;
}

static inline int hg_rseq_tsc(uint64_t *tsc, unsigned int *cpu)
{
	(void)tsc;
	(void)cpu;
	return -ENODATA;
}
#endif

/* hg_methods(): the choice, above the bits of what may be used. */
#define HG_METHOD_CHOSEN_SHIFT	8

/*
 * What this process may use (1 << HGCLOCK_UCLOCK_*) and, from bit
 * HG_METHOD_CHOSEN_SHIFT, the best of them in the order RDTSCP, RSEQ,
 * RDPID, NONE; asked once: neither the CPUID bits nor glibc's registration
 * can change.  RDTSCP: CPUID
 * 0x80000001 EDX bit 27; RDPID: CPUID 7.0 ECX bit 22.  Threads of an
 * application may race to ask first: they store the same value, atomically
 * (relaxed: nothing else is published with it).
 */
static int hg_methods(void)
{
	static int methods = -1;
	int v = __atomic_load_n(&methods, __ATOMIC_RELAXED);

	if (v < 0) {
		unsigned int eax, ebx, ecx, edx;

		v = 1 << HGCLOCK_UCLOCK_NONE;
		if (__get_cpuid(0x80000001, &eax, &ebx, &ecx, &edx) && (edx & (1U << 27)))
			v |= 1 << HGCLOCK_UCLOCK_RDTSCP;
		if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (ecx & (1U << 22)))
			v |= 1 << HGCLOCK_UCLOCK_RDPID;
		if (hg_rseq_registered())
			v |= 1 << HGCLOCK_UCLOCK_RSEQ;
		if (v & (1 << HGCLOCK_UCLOCK_RDTSCP))
			v |= HGCLOCK_UCLOCK_RDTSCP << HG_METHOD_CHOSEN_SHIFT;
		else if (v & (1 << HGCLOCK_UCLOCK_RSEQ))
			v |= HGCLOCK_UCLOCK_RSEQ << HG_METHOD_CHOSEN_SHIFT;
		else if (v & (1 << HGCLOCK_UCLOCK_RDPID))
			v |= HGCLOCK_UCLOCK_RDPID << HG_METHOD_CHOSEN_SHIFT;
		__atomic_store_n(&methods, v, __ATOMIC_RELAXED);
	}
	return v;
}

int hgclock_uclock_available(int method)
{
	return method >= 0 && method < HGCLOCK_UCLOCK_IOCTL && (hg_methods() & (1 << method));
}

int hgclock_uclock_method(void)
{
	return hg_methods() >> HG_METHOD_CHOSEN_SHIFT;
}

const char *hgclock_uclock_method_name(int method)
{
	switch (method) {
	case HGCLOCK_UCLOCK_NONE:
		return "none";
	case HGCLOCK_UCLOCK_RDTSCP:
		return "rdtscp";
	case HGCLOCK_UCLOCK_RSEQ:
		return "rseq";
	case HGCLOCK_UCLOCK_RDPID:
		return "rdpid";
	case HGCLOCK_UCLOCK_IOCTL:
		return "ioctl";
	default:
		return "?";
	}
}

/*
 * One TSC with the CPU it was read on, by @method (available).  0,
 * -EAGAIN (moved or aborted: read again) or -ENODATA (not on this thread).
 */
static inline int hg_tsc_cpu(int method, uint64_t *tsc, unsigned int *cpu)
{
	unsigned int tsc_aux, tsc_aux_after;

	switch (method) {
	case HGCLOCK_UCLOCK_RDTSCP:
		/* Linux keeps (node << 12) | cpu in TSC_AUX. */
		*tsc = hg_rdtscp(&tsc_aux);
		*cpu = tsc_aux & 0xfff;
		return 0;
	case HGCLOCK_UCLOCK_RSEQ:
		return hg_rseq_tsc(tsc, cpu);
	case HGCLOCK_UCLOCK_RDPID:
		/*
		 * The order the three execute in does not matter for the
		 * CPU: interrupts are precise, so the thread can change CPU
		 * only at an instruction boundary, and the two RDPIDs
		 * differ if it did so between them once.  A move away and
		 * back again is not seen (library.rst): hence rseq first.
		 */
		tsc_aux = hg_rdpid();
		*tsc = hg_rdtsc_ordered();
		tsc_aux_after = hg_rdpid();
		if (tsc_aux != tsc_aux_after)
			return -EAGAIN;
		*cpu = tsc_aux & 0xfff;
		return 0;
	default:
		return -ENODATA;
	}
}

int hgclock_now_user_method(const struct hgclock_map *map, struct hgclock_now *now,
			    int method)
{
	const struct hgclock_meta_cpu *slot;
	struct hgclock_conversion conv;
	unsigned int cpu, tries;
	uint32_t seq;
	uint64_t tsc;
	int ret;

	if (!hgclock_uclock_available(method))
		return -EOPNOTSUPP;
	/* Without a way to pair the TSC with its CPU: the kernel must read. */
	if (method == HGCLOCK_UCLOCK_NONE) {
		__atomic_fetch_add(&hg_stat_no_method, 1, __ATOMIC_RELAXED);
		return -ENODATA;
	}
	for (tries = 0; tries < HG_UCLOCK_TRIES; tries++) {
		ret = hg_tsc_cpu(method, &tsc, &cpu);
		if (ret == -EAGAIN) {
			__atomic_fetch_add(&hg_stat_retries, 1, __ATOMIC_RELAXED);
			continue;
		}
		if (ret) {
			/* A thread glibc did not register (rseq). */
			__atomic_fetch_add(&hg_stat_no_method, 1, __ATOMIC_RELAXED);
			return ret;
		}
		if (cpu >= map->meta->nr_cpus)
			return -ERANGE;
		slot = hgclock_map_slot(map, cpu);
		/* Pairs with the kernel's smp_wmb() after the odd count. */
		seq = __atomic_load_n(&slot->conv_seq, __ATOMIC_ACQUIRE);
		if (seq & 1)
			continue;
		memcpy(&conv, (const void *)&slot->conv, sizeof(conv));
		/* The copy completes before the count is read again. */
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&slot->conv_seq, __ATOMIC_RELAXED) != seq)
			continue;
		if (!(conv.flags & HGCLOCK_CONV_EXACT))
			return -ENODATA;
		now->tsc = tsc;
		now->tsc_after = tsc;
		now->cpu = cpu;
		now->conv_flags = conv.flags;
		now->method = method;
		now->sched_clock_ns = hgclock_conv_apply(&conv, tsc);
		now->has_local = !!(conv.flags & HGCLOCK_CONV_LOCAL_OFFSET);
		now->local_clock_ns = now->has_local ?
			now->sched_clock_ns + conv.local_offset_ns : 0;
		return 0;
	}
	return -EAGAIN;
}

int hgclock_now_user(const struct hgclock_map *map, struct hgclock_now *now)
{
	return hgclock_now_user_method(map, now, hgclock_uclock_method());
}

int hgclock_now(int fd, const struct hgclock_map *map, struct hgclock_now *now,
		int *used_ioctl)
{
	struct hgclock_clock_sample s;
	int ret;

	*used_ioctl = 0;
	if (map && map->meta) {
		ret = hgclock_now_user(map, now);
		if (ret != -ENODATA && ret != -EAGAIN)
			return ret;
	}
	ret = hgclock_read_clock(fd, -1, &s);
	if (ret)
		return ret;
	*used_ioctl = 1;
	memset(now, 0, sizeof(*now));
	now->tsc = s.tsc_before;
	now->tsc_after = s.tsc_after;
	now->sched_clock_ns = s.sched_clock_ns;
	now->local_clock_ns = s.local_clock_ns;
	now->has_local = 1;
	now->cpu = s.cpu;
	now->method = HGCLOCK_UCLOCK_IOCTL;
	return 0;
}

/* SPDX-License-Identifier: LGPL-2.1 */
/*
 * Internal to the guest-to-host mapping (user/lib/sync*.c): what its files
 * share.  Not installed and not part of any API: the mapping's interface
 * is sync.h.  The hgs_ prefix keeps these names apart from sync.h's
 * hgsync_ ones and out of the way of the tool's in libhgclock.a.  The
 * comments at the definitions say what each function assumes.
 */
#ifndef HGCLOCK_SYNC_INTERNAL_H
#define HGCLOCK_SYNC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sync.h"

typedef unsigned __int128 u128;
typedef __int128 s128;

/* ---- sync_core.c (the leaf): growing arrays, the segment index, the host's conversions ---- */

int hgs_grow(void **v, size_t *cap, size_t n, size_t size);

#define PUSH(arr, n, cap, val) ({						\
	int __r = hgs_grow((void **)&(arr), &(cap), (n), sizeof(*(arr)));	\
	if (!__r)								\
		(arr)[(n)++] = (val);						\
	__r;									\
})

int hgs_index_segs(struct hgsync_guest *g);
const struct hgcor_segment *hgs_find_seg_at(const struct hgsync_guest *g, uint32_t method,
					    uint32_t clock, int vcpu, uint64_t guest_value,
					    uint64_t host_tsc);
const struct hgcor_segment *hgs_find_seg(const struct hgsync_guest *g, uint32_t method,
					 uint32_t clock, int vcpu, uint64_t guest_value);
const struct hgclock_rec_cyc2ns *hgs_conv_at(const struct hgsync_convs *cv, uint64_t key,
					     bool by_ns);

/* ---- sync_vcpu.c: the host's vCPU threads and the guest CPUs they are ---- */

struct hgsync_vcpu *hgs_vcpu_for(struct hgsync *s, int32_t vm_pid, int32_t vcpu_id);
int32_t hgs_cpu_vcpu_id(const struct hgsync_guest *g, int cpu);
int hgs_vcpu_guest_cpu(const struct hgsync_guest *g, int32_t vcpu_id);
const struct hgsync_vcpu *hgs_guest_vcpu(const struct hgsync *s, const struct hgsync_guest *g,
					 int cpu);
int hgs_cpu_map_add(struct hgsync_guest *g, const uint8_t *p, uint64_t len);
int hgs_identity_setup(const struct hgsync *s, struct hgsync_guest *g);

/* ---- sync_kvm.c: the KVM-exact method and kvm-clock ---- */

int hgs_kvm_segments(struct hgsync_guest *g, const struct hgsync_vcpu *v, int guest_cpu);
void hgs_pv_setup(const struct hgsync *s, struct hgsync_guest *g);
int hgs_to_host_kvm(const struct hgsync *s, const struct hgsync_guest *g, int vcpu,
		    uint32_t clock, uint64_t guest_value, struct hgsync_result *r);

/* ---- sync_fit.c: pairings as brackets, the segment and sample indexes ---- */

int hgs_index(const struct hgsync *s, struct hgsync_guest *g);

struct hgsync_obs hgs_xpair_obs(const struct hgsync *s, const struct hgsync_guest *g,
				const struct hgsync_xpair *x, uint32_t clock);
struct hgsync_obs hgs_mpair_obs(const struct hgsync *s, const struct hgsync_guest *g,
				const struct hgsync_mpair *m);

/* ---- sync_bound.c: the samples and the fitted methods' values ---- */

int hgs_to_host_probe(const struct hgsync *s, const struct hgsync_guest *g, int vcpu,
		      uint32_t clock, uint64_t guest_value, uint32_t method,
		      struct hgsync_result *r);

#endif /* HGCLOCK_SYNC_INTERNAL_H */

/* SPDX-License-Identifier: LGPL-2.1 */
/*
 * Semantic checks of a correlation file's values, between the reader
 * (corr.c: framing, CRCs, sizes) and the mapping (sync*.c: arithmetic).
 * Every field the mapping computes with is range-checked here, once, when
 * its section is read: a value no kernel and no hgclock can write is a
 * damaged file (HGCOR_E_RANGE), as a checksum mismatch is.  The limits are
 * documented in Documentation/file-format.rst ("Value limits").
 */
#ifndef HGCLOCK_CORR_CHECK_H
#define HGCLOCK_CORR_CHECK_H

#include <stdbool.h>
#include <stdint.h>

/* CPU numbers (record hdr.cpu, host_cpu, probe CPUs): below Linux's NR_CPUS limit. */
#define HGCOR_MAX_CPUS		8192
/* KVM vcpu_id: below KVM_MAX_VCPU_IDS for KVM_MAX_VCPUS 4096 (x86: 4 ids per vCPU). */
#define HGCOR_MAX_VCPU_ID	16384
/* Guest ids: the reader's limit (HGSYNC_MAX_GUESTS), incarnations included. */
#define HGCOR_MAX_GUEST_ID	1024
/* Conversions: shift of the product (cyc2ns <= 32, kvm-clock 32). */
#define HGCOR_MAX_CONV_SHIFT	32
/* Conversions: the pre-shift of the TSC delta (kvm-clock's tsc_shift). */
#define HGCOR_MIN_PRE_SHIFT	(-32)
#define HGCOR_MAX_PRE_SHIFT	32
/* A derived conversion's error bound (the module's are tens of ns). */
#define HGCOR_MAX_BOUND_NS	(1ull << 40)
/* A fitted segment's rate_q48: the fit keeps rates within 0.1% of 1. */
#define HGCOR_MAX_RATE_Q48	281474976711ll

/*
 * Checks the values in the payload @p/@len of a section of type @type
 * whose header is at byte @offset of the file (its sizes already checked
 * by the reader).  HGCOR_OK, or HGCOR_E_RANGE with the reason in
 * hgcor_strerror(HGCOR_E_RANGE).
 */
int hgcor_check_values(uint32_t type, const uint8_t *p, uint64_t len, uint64_t offset);
/*
 * The same for the decompressed payload of a ZSTD section when
 * @compressed: the reason then gives an item's offset in that payload.
 */
int hgcor_check_values2(uint32_t type, const uint8_t *p, uint64_t len, uint64_t offset,
			bool compressed);

/* The last HGCOR_E_RANGE reason of this thread (hgcor_strerror() shows it). */
const char *hgcor_range_reason(void);

#endif /* HGCLOCK_CORR_CHECK_H */

// SPDX-License-Identifier: LGPL-2.1
/*
 * Semantic checks of a correlation file's values (corr_check.h).
 *
 * The reader (corr.c) proves a section is the one its writer wrote: its
 * CRCs match and its records are whole.  That says nothing about a file
 * built to hurt, or written by a broken recorder with valid checksums:
 * a conversion shift of 255 is undefined behaviour in the shift that
 * applies it, a probe whose reply precedes its send overflows the fit's
 * signed arithmetic, a CPU number of 4 billion sizes an array.  Every
 * value the mapping (sync*.c) computes with is checked here against what
 * the kernel and hgclock can produce, when the section is read, so the
 * arithmetic after it (hgclock_conv_apply() among it, which the live
 * clock calls on every reading) needs no checks of its own.
 *
 * Records shorter than their type's structure are not checked: the
 * mapping skips them too.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <linux/hgclock.h>

#include "corr.h"
#include "corr_check.h"

static _Thread_local char reason[256];

const char *hgcor_range_reason(void)
{
	return reason[0] ? reason : "a value is out of range: damaged file";
}

static const char *const section_names[] = {
	[HGCOR_SEC_HOST_INFO] = "host_info",
	[HGCOR_SEC_HOST_RECORDS] = "host_records",
	[HGCOR_SEC_GUEST_INFO] = "guest_info",
	[HGCOR_SEC_GUEST_RECORDS] = "guest_records",
	[HGCOR_SEC_NOTE] = "note",
	[HGCOR_SEC_END] = "end",
	[HGCOR_SEC_PROBES] = "probes",
	[HGCOR_SEC_GUEST_VM] = "guest_vm",
	[HGCOR_SEC_SEGMENTS] = "segments",
	[HGCOR_SEC_CPU_MAP] = "cpu_map",
	[HGCOR_SEC_GUEST_IDENTITY] = "guest_identity",
	[HGCOR_SEC_ZSTD] = "zstd",
	[HGCOR_SEC_DISRUPTION] = "disruption",
};

/*
 * Where the check is: the section, and the offset of the item in it: in
 * the file, or in the decompressed payload of a compressed section.
 */
struct where {
	uint32_t type;
	uint64_t section;	/* file offset of the section header */
	uint64_t payload;	/* file offset of the payload; 0 when compressed */
	bool compressed;	/* offsets are in the uncompressed payload */
};

static int bad(const struct where *w, uint64_t at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int bad(const struct where *w, uint64_t at, const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(reason, sizeof(reason),
		     "a value no recording can hold (damaged file): %s%s section at byte %llu, "
		     "item at byte %llu%s: ", w->compressed ? "compressed " : "",
		     w->type <= HGCOR_SEC_MAX && section_names[w->type] ?
		     section_names[w->type] : "unknown", (unsigned long long)w->section,
		     (unsigned long long)at,
		     w->compressed ? " of its uncompressed payload" : "");
	if (n < 0 || (size_t)n >= sizeof(reason))
		return HGCOR_E_RANGE;
	va_start(ap, fmt);
	vsnprintf(reason + n, sizeof(reason) - (size_t)n, fmt, ap);
	va_end(ap);
	return HGCOR_E_RANGE;
}

static bool cpu_ok(int64_t cpu, bool none_ok)
{
	return (cpu >= 0 || (none_ok && cpu == -1)) && cpu < HGCOR_MAX_CPUS;
}

static bool vcpu_ok(int64_t id, bool none_ok)
{
	return (id >= 0 || (none_ok && id == -1)) && id < HGCOR_MAX_VCPU_ID;
}

/* KVM's TSC scaling: Intel 16.48, AMD 8.32 fixed point, never 0. */
static bool ratio_ok(uint64_t ratio, uint32_t frac_bits)
{
	return (frac_bits == 32 || frac_bits == 48) && ratio;
}

static int check_conv(const struct where *w, uint64_t at, const struct hgclock_conversion *c)
{
	if (c->shift > HGCOR_MAX_CONV_SHIFT)
		return bad(w, at, "conversion shift %u (at most %d)", c->shift,
			   HGCOR_MAX_CONV_SHIFT);
	if (c->pre_shift < HGCOR_MIN_PRE_SHIFT || c->pre_shift > HGCOR_MAX_PRE_SHIFT)
		return bad(w, at, "conversion pre_shift %d (%d to %d)", c->pre_shift,
			   HGCOR_MIN_PRE_SHIFT, HGCOR_MAX_PRE_SHIFT);
	if ((c->flags & HGCLOCK_CONV_VALID) && !c->mult)
		return bad(w, at, "valid conversion with multiplier 0");
	if ((c->flags & HGCLOCK_CONV_DERIVED) && c->bound_ns > HGCOR_MAX_BOUND_NS)
		return bad(w, at, "derived conversion's bound %llu ns (at most %llu)",
			   (unsigned long long)c->bound_ns, (unsigned long long)HGCOR_MAX_BOUND_NS);
	return HGCOR_OK;
}

struct rec_ctx {
	const struct where *w;
	const uint8_t *base;	/* payload start: offsets are from it */
	uint64_t base_off;	/* its file offset */
};

static int check_rec(const void *rec, size_t size, void *ctx)
{
	const struct rec_ctx *rc = ctx;
	const struct where *w = rc->w;
	uint64_t at = rc->base_off + (uint64_t)((const uint8_t *)rec - rc->base);
	union {
		struct hgclock_rec_header h;
		struct hgclock_rec_cyc2ns cyc2ns;
		struct hgclock_rec_vcpu vcpu;
		struct hgclock_rec_vcpu_seen seen;
		struct hgclock_rec_vcpu_migrate mig;
		struct hgclock_rec_tsc_offset off;
		struct hgclock_rec_pvclock pv;
		struct hgclock_rec_exit_host xh;
	} r;
	size_t need;

	memcpy(&r.h, rec, sizeof(r.h));
	if (!cpu_ok(r.h.cpu, false))
		return bad(w, at, "record on CPU %u (CPUs are below %d)", r.h.cpu, HGCOR_MAX_CPUS);
	switch (r.h.type) {
	case HGCLOCK_REC_CYC2NS:
		need = sizeof(r.cyc2ns);
		break;
	case HGCLOCK_REC_VCPU_SEEN:
		need = sizeof(r.seen);
		break;
	case HGCLOCK_REC_VCPU_RUN:
	case HGCLOCK_REC_VCPU_STOP:
	case HGCLOCK_REC_VCPU_EXIT:
		need = sizeof(r.vcpu);
		break;
	case HGCLOCK_REC_VCPU_MIGRATE:
		need = sizeof(r.mig);
		break;
	case HGCLOCK_REC_TSC_OFFSET:
		need = sizeof(r.off);
		break;
	case HGCLOCK_REC_PVCLOCK:
		need = sizeof(r.pv);
		break;
	case HGCLOCK_REC_EXIT_HOST:
		need = sizeof(r.xh);
		break;
	default:
		return HGCOR_OK;
	}
	if (size < need)
		return HGCOR_OK;
	memcpy(&r, rec, need);
	switch (r.h.type) {
	case HGCLOCK_REC_CYC2NS:
		return check_conv(w, at, &r.cyc2ns.conv);
	case HGCLOCK_REC_VCPU_SEEN:
		if (!vcpu_ok(r.seen.vcpu_id, !(r.seen.flags & HGCLOCK_VCPU_KVM)))
			return bad(w, at, "vCPU id %d (0 to %d)", r.seen.vcpu_id,
				   HGCOR_MAX_VCPU_ID - 1);
		if (!cpu_ok(r.seen.host_cpu, true))
			return bad(w, at, "host CPU %d", r.seen.host_cpu);
		if ((r.seen.flags & HGCLOCK_VCPU_TSC_KNOWN) &&
		    !ratio_ok(r.seen.tsc_scaling_ratio, r.seen.tsc_frac_bits))
			return bad(w, at, "TSC scaling ratio %llu with %u fraction bits",
				   (unsigned long long)r.seen.tsc_scaling_ratio, r.seen.tsc_frac_bits);
		return HGCOR_OK;
	case HGCLOCK_REC_VCPU_RUN:
	case HGCLOCK_REC_VCPU_STOP:
	case HGCLOCK_REC_VCPU_EXIT:
		if (!vcpu_ok(r.vcpu.vcpu_id, true))
			return bad(w, at, "vCPU id %d", r.vcpu.vcpu_id);
		return HGCOR_OK;
	case HGCLOCK_REC_VCPU_MIGRATE:
		if (!vcpu_ok(r.mig.vcpu_id, true))
			return bad(w, at, "vCPU id %d", r.mig.vcpu_id);
		if (!cpu_ok(r.mig.from_cpu, true) || !cpu_ok(r.mig.to_cpu, true))
			return bad(w, at, "migration from CPU %d to %d", r.mig.from_cpu,
				   r.mig.to_cpu);
		return HGCOR_OK;
	case HGCLOCK_REC_TSC_OFFSET:
		if (!vcpu_ok(r.off.vcpu_id, false))
			return bad(w, at, "vCPU id %d (0 to %d)", r.off.vcpu_id,
				   HGCOR_MAX_VCPU_ID - 1);
		if ((r.off.flags & HGCLOCK_VCPU_TSC_KNOWN) &&
		    !ratio_ok(r.off.tsc_scaling_ratio, r.off.tsc_frac_bits))
			return bad(w, at, "TSC scaling ratio %llu with %u fraction bits",
				   (unsigned long long)r.off.tsc_scaling_ratio, r.off.tsc_frac_bits);
		return HGCOR_OK;
	case HGCLOCK_REC_PVCLOCK:
		if (!vcpu_ok(r.pv.vcpu_id, false))
			return bad(w, at, "vCPU id %d (0 to %d)", r.pv.vcpu_id,
				   HGCOR_MAX_VCPU_ID - 1);
		if (r.pv.tsc_shift < HGCOR_MIN_PRE_SHIFT || r.pv.tsc_shift > HGCOR_MAX_PRE_SHIFT)
			return bad(w, at, "kvm-clock tsc_shift %d (%d to %d)", r.pv.tsc_shift,
				   HGCOR_MIN_PRE_SHIFT, HGCOR_MAX_PRE_SHIFT);
		if (!r.pv.tsc_to_system_mul)
			return bad(w, at, "kvm-clock multiplier 0");
		return HGCOR_OK;
	case HGCLOCK_REC_EXIT_HOST:
		if (!vcpu_ok(r.xh.vcpu_id, true))
			return bad(w, at, "vCPU id %d", r.xh.vcpu_id);
		return HGCOR_OK;
	}
	return HGCOR_OK;
}

static int check_records(const struct where *w, const uint8_t *p, uint64_t len, uint64_t off)
{
	struct rec_ctx rc = { w, p, off };

	return hgcor_walk_records(p, len, check_rec, &rc);
}

static int check_probe(const struct where *w, uint64_t at, const struct hgcor_probe *pr)
{
	if (pr->host_tsc_recv < pr->host_tsc_send || pr->host_ns_recv < pr->host_ns_send)
		return bad(w, at, "probe whose reply precedes its send");
	if (!cpu_ok(pr->host_cpu_send, false) || !cpu_ok(pr->host_cpu_recv, false))
		return bad(w, at, "probe on host CPU %u/%u", pr->host_cpu_send, pr->host_cpu_recv);
	if (!cpu_ok(pr->guest_cpu, false))
		return bad(w, at, "probe on guest CPU %u", pr->guest_cpu);
	return HGCOR_OK;
}

static int check_segment(const struct where *w, uint64_t at, const struct hgcor_segment *s)
{
	bool fitted = s->method == HGCOR_METHOD_PROBE || s->method == HGCOR_METHOD_EXIT;

	if (s->method != HGCOR_METHOD_KVM_EXACT && !fitted)
		return bad(w, at, "segment method %u", s->method);
	if (s->clock != HGCOR_CLOCK_TSC && s->clock != HGCOR_CLOCK_SCHED)
		return bad(w, at, "segment clock %u", s->clock);
	if (!vcpu_ok(s->vcpu_id, true))
		return bad(w, at, "segment vCPU id %d", s->vcpu_id);
	if (s->host_tsc_end < s->host_tsc_start)
		return bad(w, at, "segment ends (host TSC %llu) before it starts (%llu)",
			   (unsigned long long)s->host_tsc_end,
			   (unsigned long long)s->host_tsc_start);
	if (s->method == HGCOR_METHOD_KVM_EXACT) {
		if (s->clock != HGCOR_CLOCK_TSC)
			return bad(w, at, "kvm-exact segment on clock %u", s->clock);
		if ((s->tsc_ratio || s->tsc_frac_bits) && !ratio_ok(s->tsc_ratio, s->tsc_frac_bits))
			return bad(w, at, "TSC scaling ratio %llu with %u fraction bits",
				   (unsigned long long)s->tsc_ratio, s->tsc_frac_bits);
		if (s->bound_ns)
			return bad(w, at, "kvm-exact segment with a bound of %llu ns",
				   (unsigned long long)s->bound_ns);
		return HGCOR_OK;
	}
	if (s->guest_end < s->guest_start)
		return bad(w, at, "segment ends (guest %llu) before it starts (%llu)",
			   (unsigned long long)s->guest_end, (unsigned long long)s->guest_start);
	if (s->rate_q48 > HGCOR_MAX_RATE_Q48 || s->rate_q48 < -HGCOR_MAX_RATE_Q48)
		return bad(w, at, "fitted rate %lld / 2^48 off 1 (at most 0.1%%)",
			   (long long)s->rate_q48);
	if (!s->bound_ns)
		return bad(w, at, "fitted segment with no error bound");
	return HGCOR_OK;
}

int hgcor_check_values(uint32_t type, const uint8_t *p, uint64_t len, uint64_t offset)
{
	return hgcor_check_values2(type, p, len, offset, false);
}

int hgcor_check_values2(uint32_t type, const uint8_t *p, uint64_t len, uint64_t offset,
			bool compressed)
{
	struct where w = { type, offset, compressed ? 0 : offset + sizeof(struct hgcor_section),
			   compressed };
	int ret;

	reason[0] = '\0';
	switch (type) {
	case HGCOR_SEC_HOST_RECORDS:
		return check_records(&w, p, len, w.payload);
	case HGCOR_SEC_GUEST_RECORDS:
		return check_records(&w, p + 8, len - 8, w.payload + 8);
	case HGCOR_SEC_PROBES:
		for (uint64_t i = 8; i + sizeof(struct hgcor_probe) <= len;
		     i += sizeof(struct hgcor_probe)) {
			struct hgcor_probe pr;

			memcpy(&pr, p + i, sizeof(pr));
			ret = check_probe(&w, w.payload + i, &pr);
			if (ret)
				return ret;
		}
		return HGCOR_OK;
	case HGCOR_SEC_GUEST_VM: {
		struct hgcor_guest_vm vm;

		memcpy(&vm, p, sizeof(vm));
		if (vm.how > HGCOR_VM_BY_OPTION)
			return bad(&w, w.payload, "guest_vm how %u", vm.how);
		if (vm.vm_pid < -1)
			return bad(&w, w.payload, "guest_vm pid %d", vm.vm_pid);
		if (!memchr(vm.spec, '\0', sizeof(vm.spec)))
			return bad(&w, w.payload, "guest_vm spec not NUL terminated");
		return HGCOR_OK;
	}
	case HGCOR_SEC_SEGMENTS:
		for (uint64_t i = 0; i + sizeof(struct hgcor_segment) <= len;
		     i += sizeof(struct hgcor_segment)) {
			struct hgcor_segment s;

			memcpy(&s, p + i, sizeof(s));
			ret = check_segment(&w, w.payload + i, &s);
			if (ret)
				return ret;
		}
		return HGCOR_OK;
	case HGCOR_SEC_CPU_MAP:
		/* The guest CPU and, as its APIC ID, KVM's vcpu_id: both index arrays. */
		for (uint64_t i = 8; i + sizeof(struct hgcor_cpu_apic) <= len;
		     i += sizeof(struct hgcor_cpu_apic)) {
			struct hgcor_cpu_apic e;

			memcpy(&e, p + i, sizeof(e));
			if (e.guest_cpu >= HGCOR_MAX_CPUS)
				return bad(&w, w.payload + i, "CPU map entry for guest CPU %u",
					   e.guest_cpu);
			if (e.apic_id >= HGCOR_MAX_VCPU_ID)
				return bad(&w, w.payload + i, "CPU map APIC ID %u (vCPU ids are "
					   "below %d)", e.apic_id, HGCOR_MAX_VCPU_ID);
		}
		return HGCOR_OK;
	case HGCOR_SEC_GUEST_IDENTITY: {
		/*
		 * Strings that are printed (also in JSON, unescaped) and compared:
		 * terminated, printable, no spaces, quotes or backslashes.
		 */
		struct hgcor_identity id;
		const struct {
			const char *f;
			size_t size, min, max;
			const char *name;
		} fs[] = {
			{ id.nodename, sizeof(id.nodename), 1, 64, "nodename" },
			{ id.machine_id, sizeof(id.machine_id), 0, 32, "machine id" },
			{ id.boot_id, sizeof(id.boot_id), 0, 36, "boot id" },
		};

		memcpy(&id, p + 8, sizeof(id));
		for (size_t i = 0; i < sizeof(fs) / sizeof(fs[0]); i++) {
			const char *nul = memchr(fs[i].f, '\0', fs[i].size);
			size_t n = nul ? (size_t)(nul - fs[i].f) : 0;

			if (!nul || n < fs[i].min || n > fs[i].max)
				return bad(&w, w.payload + 8, "guest identity %s not a string "
					   "of %zu to %zu characters", fs[i].name, fs[i].min,
					   fs[i].max);
			for (size_t c = 0; c < n; c++)
				if (fs[i].f[c] <= ' ' || fs[i].f[c] > '~' || fs[i].f[c] == '"' ||
				    fs[i].f[c] == '\\')
					return bad(&w, w.payload + 8, "guest identity %s has a "
						   "character 0x%02x", fs[i].name,
						   (unsigned char)fs[i].f[c]);
		}
		return HGCOR_OK;
	}
	case HGCOR_SEC_DISRUPTION: {
		/*
		 * Ids index the reader's guests, and a later incarnation has a
		 * larger id: a chain of them can never loop.
		 */
		struct hgcor_disruption d;
		bool gone;

		memcpy(&d, p, sizeof(d));
		gone = d.kind == HGCOR_DISRUPT_GONE;
		if (d.kind < HGCOR_DISRUPT_RECONNECT || d.kind > HGCOR_DISRUPT_KIND_MAX)
			return bad(&w, w.payload, "disruption kind %u", d.kind);
		if (d.guest_id >= HGCOR_MAX_GUEST_ID)
			return bad(&w, w.payload, "disruption of guest %u", d.guest_id);
		if (gone ? d.next_guest_id != HGCOR_NO_GUEST :
			   d.next_guest_id <= d.guest_id || d.next_guest_id >= HGCOR_MAX_GUEST_ID)
			return bad(&w, w.payload, "disruption of guest %u followed by guest %u (%s)",
				   d.guest_id, d.next_guest_id, gone ? "gone" : "not a later id");
		if (d.old_vm_pid < -1 || d.new_vm_pid < -1 || (gone && d.new_vm_pid != -1))
			return bad(&w, w.payload, "disruption VM pids %d -> %d", d.old_vm_pid,
				   d.new_vm_pid);
		if (d.flags & ~HGCOR_DISRUPT_JUMP_KNOWN || d.reserved)
			return bad(&w, w.payload, "disruption flags 0x%x", d.flags);
		if (gone ? d.host_tsc_back || d.host_local_ns_back :
			   d.host_tsc_back < d.host_tsc_lost)
			return bad(&w, w.payload, "disruption back at host TSC %llu, lost at %llu",
				   (unsigned long long)d.host_tsc_back,
				   (unsigned long long)d.host_tsc_lost);
		if (!(d.flags & HGCOR_DISRUPT_JUMP_KNOWN) &&
		    (d.guest_tsc_jump || d.guest_local_jump_ns || d.jump_bound_ns))
			return bad(&w, w.payload, "disruption jump without JUMP_KNOWN");
		return HGCOR_OK;
	}
	default:
		return HGCOR_OK;
	}
}

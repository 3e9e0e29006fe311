// SPDX-License-Identifier: GPL-2.0
/*
 * Printing one ring record as a text line or a JSON object (one per line):
 * shared by `hgclock records` (live rings) and `hgclock dump` (files).
 */
#include <inttypes.h>
#include <stdio.h>

#include "cmd.h"
#include "libhgclock.h"

/* The fields every record has, then the type's own. */
void hg_print_record(const struct hgclock_rec_header *h, bool json, const char *prefix)
{
	const char *sep = json ? ", " : " ";
	const char *q = json ? "\"" : "";

	if (json)
		printf("{%s\"type\": \"%s\", \"cpu\": %u, \"tsc\": %" PRIu64
		       ", \"sched_clock_ns\": %" PRIu64, prefix ? prefix : "",
		       hgclock_rec_name(h->type), h->cpu, (uint64_t)h->tsc,
		       (uint64_t)h->sched_clock_ns);
	else
		printf("%s%-12s cpu %u tsc %" PRIu64 " sched_clock %" PRIu64,
		       prefix ? prefix : "", hgclock_rec_name(h->type), h->cpu,
		       (uint64_t)h->tsc, (uint64_t)h->sched_clock_ns);

#define F(name, fmt, val) printf("%s%s%s%s%s" fmt, sep, q, name, q, json ? ": " : "=", val)
	/* From a damaged file: its fields are not there to print. */
	if (h->size < hgclock_rec_min_size(h->type)) {
		F("size", "%u", h->size);
		F("malformed", "%s", json ? "true" : "short");
		printf(json ? "}\n" : "\n");
		return;
	}
	switch (h->type) {
	case HGCLOCK_REC_LOST: {
		const struct hgclock_rec_lost *r = (const void *)h;

		F("nr_lost", "%" PRIu64, (uint64_t)r->nr_lost);
		F("total_lost", "%" PRIu64, (uint64_t)r->total_lost);
		break;
	}
	case HGCLOCK_REC_CYC2NS: {
		const struct hgclock_rec_cyc2ns *r = (const void *)h;

		F("reason", "%u", r->reason);
		F("tsc_after", "%" PRIu64, (uint64_t)r->tsc_after);
		F("local_clock_ns", "%" PRIu64, (uint64_t)r->local_clock_ns);
		F("mult", "%u", r->conv.mult);
		F("shift", "%u", r->conv.shift);
		F("offset_ns", "%" PRId64, (int64_t)r->conv.offset_ns);
		F("tsc_base", "%" PRIu64, (uint64_t)r->conv.tsc_base);
		F("pre_shift", "%d", r->conv.pre_shift);
		F("conv_flags", "%u", r->conv.flags);
		F("local_offset_ns", "%" PRId64, (int64_t)r->conv.local_offset_ns);
		F("bound_ns", "%" PRIu64, (uint64_t)r->conv.bound_ns);
		break;
	}
	case HGCLOCK_REC_VCPU_SEEN: {
		const struct hgclock_rec_vcpu_seen *r = (const void *)h;

		F("tid", "%d", r->tid);
		F("vm_pid", "%d", r->vm_pid);
		F("vcpu_id", "%d", r->vcpu_id);
		F("flags", "%u", r->flags);
		if (json)
			printf(", \"vm\": \"%.16s\"", r->vm_name);
		else
			printf(" vm=%.16s", r->vm_name[0] ? r->vm_name : "-");
		F("tsc_offset", "%" PRIu64, (uint64_t)r->tsc_offset);
		F("tsc_scaling_ratio", "%" PRIu64, (uint64_t)r->tsc_scaling_ratio);
		F("tsc_frac_bits", "%u", r->tsc_frac_bits);
		F("host_cpu", "%d", r->host_cpu);
		break;
	}
	case HGCLOCK_REC_VCPU_RUN:
	case HGCLOCK_REC_VCPU_STOP:
	case HGCLOCK_REC_VCPU_EXIT:
	case HGCLOCK_REC_UNTRACKED: {
		const struct hgclock_rec_vcpu *r = (const void *)h;

		F("tid", "%d", r->tid);
		F("vm_pid", "%d", r->vm_pid);
		F("vcpu_id", "%d", r->vcpu_id);
		/* Stops the module counted, not recorded (ABI 1.4); 0 before. */
		if (r->nr_coalesced)
			F("coalesced", "%u", r->nr_coalesced);
		break;
	}
	case HGCLOCK_REC_VCPU_MIGRATE: {
		const struct hgclock_rec_vcpu_migrate *r = (const void *)h;

		F("tid", "%d", r->tid);
		F("vm_pid", "%d", r->vm_pid);
		F("vcpu_id", "%d", r->vcpu_id);
		F("from_cpu", "%d", r->from_cpu);
		F("to_cpu", "%d", r->to_cpu);
		break;
	}
	case HGCLOCK_REC_TSC_OFFSET: {
		const struct hgclock_rec_tsc_offset *r = (const void *)h;

		F("tid", "%d", r->tid);
		F("vm_pid", "%d", r->vm_pid);
		F("vcpu_id", "%d", r->vcpu_id);
		F("flags", "%u", r->flags);
		F("previous_offset", "%" PRIu64, (uint64_t)r->previous_offset);
		F("next_offset", "%" PRIu64, (uint64_t)r->next_offset);
		F("tsc_scaling_ratio", "%" PRIu64, (uint64_t)r->tsc_scaling_ratio);
		F("tsc_frac_bits", "%u", r->tsc_frac_bits);
		break;
	}
	case HGCLOCK_REC_EXIT_PAIR: {
		const struct hgclock_rec_exit_pair *r = (const void *)h;

		F("seq", "%u", r->seq);
		F("key", "%u", r->key);
		F("tsc_before", "%" PRIu64, (uint64_t)r->tsc_before);
		F("sched_clock_before_ns", "%" PRIu64, (uint64_t)r->sched_clock_before_ns);
		F("sched_clock_after_ns", "%" PRIu64, (uint64_t)r->sched_clock_after_ns);
		F("tsc_after", "%" PRIu64, (uint64_t)r->tsc_after);
		break;
	}
	case HGCLOCK_REC_EXIT_HOST: {
		const struct hgclock_rec_exit_host *r = (const void *)h;

		F("tid", "%d", r->tid);
		F("vm_pid", "%d", r->vm_pid);
		F("vcpu_id", "%d", r->vcpu_id);
		F("seq", "%u", r->seq);
		F("key", "%u", r->key);
		break;
	}
	case HGCLOCK_REC_PVCLOCK: {
		const struct hgclock_rec_pvclock *r = (const void *)h;

		F("tid", "%d", r->tid);
		F("vm_pid", "%d", r->vm_pid);
		F("vcpu_id", "%d", r->vcpu_id);
		F("version", "%u", r->version);
		F("tsc_timestamp", "%" PRIu64, (uint64_t)r->tsc_timestamp);
		F("system_time", "%" PRIu64, (uint64_t)r->system_time);
		F("tsc_to_system_mul", "%u", r->tsc_to_system_mul);
		F("tsc_shift", "%d", r->tsc_shift);
		F("pvclock_flags", "%u", r->flags);
		break;
	}
	case HGCLOCK_REC_EXIT_SUPPRESSED: {
		const struct hgclock_rec_exit_suppressed *r = (const void *)h;

		F("tid", "%d", r->tid);
		F("vm_pid", "%d", r->vm_pid);
		F("vcpu_id", "%d", r->vcpu_id);
		F("nr_suppressed", "%" PRIu64, (uint64_t)r->nr_suppressed);
		break;
	}
	default:
		F("size", "%u", h->size);
		break;
	}
#undef F
	printf(json ? "}\n" : "\n");
}

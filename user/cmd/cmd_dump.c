// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock dump FILE [--json] [--summary]: prints a correlation file.
 * A truncated, damaged or newer-version file is reported with the offset
 * where reading stopped and exit status 6; what came before is printed.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "corr.h"
#include "libhgclock.h"
#include "output.h"
#include "sync.h"

static const char *section_name(uint32_t type)
{
	switch (type) {
	case HGCOR_SEC_HOST_INFO:
		return "host_info";
	case HGCOR_SEC_HOST_RECORDS:
		return "host_records";
	case HGCOR_SEC_GUEST_INFO:
		return "guest_info";
	case HGCOR_SEC_GUEST_RECORDS:
		return "guest_records";
	case HGCOR_SEC_NOTE:
		return "note";
	case HGCOR_SEC_END:
		return "end";
	case HGCOR_SEC_PROBES:
		return "probes";
	case HGCOR_SEC_GUEST_VM:
		return "guest_vm";
	case HGCOR_SEC_SEGMENTS:
		return "segments";
	case HGCOR_SEC_CPU_MAP:
		return "cpu_map";
	case HGCOR_SEC_GUEST_IDENTITY:
		return "guest_identity";
	case HGCOR_SEC_DISRUPTION:
		return "disruption";
	default:
		return "unknown";
	}
}

struct dump_ctx {
	bool json;
	bool summary;
	const char *prefix;
	uint64_t nr_records;
	/* Compressed sections: how many, their payloads stored and uncompressed. */
	uint64_t nr_zstd, zstd_stored, zstd_raw;
	uint64_t nr_disruptions;
};

static int dump_rec(const void *rec, size_t size, void *arg)
{
	struct dump_ctx *ctx = arg;

	(void)size;
	ctx->nr_records++;
	if (!ctx->summary)
		hg_print_record(rec, ctx->json, ctx->prefix);
	return 0;
}

static void print_info(const struct hgclock_info *info, bool json, const char *who)
{
	char flags[256];

	hgclock_clock_flags_str(info->clock_flags, flags, sizeof(flags));
	if (json)
		printf("{\"section\": \"%s_info\", \"abi\": \"%u.%u\", \"nr_cpu_ids\": %u,"
		       " \"tsc_khz\": %u, \"clock_flags\": \"%s\", \"clocksource\": \"%.32s\","
		       " \"role\": \"%s\"}\n", who, info->abi_major, info->abi_minor,
		       info->nr_cpu_ids, info->tsc_khz, flags, info->clocksource,
		       hgclock_role_name(info->role));
	else
		printf("%s: abi %u.%u, %u CPUs, tsc_khz %u, %s, clocksource %.32s, role %s\n",
		       who, info->abi_major, info->abi_minor, info->nr_cpu_ids,
		       info->tsc_khz, flags, info->clocksource, hgclock_role_name(info->role));
}

static void print_probes(const uint8_t *p, uint64_t len, const struct dump_ctx *ctx)
{
	uint32_t id;

	memcpy(&id, p, 4);
	for (uint64_t off = 8; off + sizeof(struct hgcor_probe) <= len;
	     off += sizeof(struct hgcor_probe)) {
		struct hgcor_probe q;

		memcpy(&q, p + off, sizeof(q));
		if (ctx->json)
			printf("{\"section\": \"probe\", \"guest\": %u, \"host_tsc_send\": %" PRIu64
			       ", \"host_ns_send\": %" PRIu64 ", \"host_tsc_recv\": %" PRIu64
			       ", \"host_ns_recv\": %" PRIu64 ", \"guest_tsc\": %" PRIu64
			       ", \"guest_sched_ns\": %" PRIu64 ", \"guest_local_ns\": %" PRIu64
			       ", \"host_cpu_send\": %u, \"host_cpu_recv\": %u, \"guest_cpu\": %u"
			       ", \"flags\": %u}\n", id, q.host_tsc_send, q.host_ns_send,
			       q.host_tsc_recv, q.host_ns_recv, q.guest_tsc, q.guest_sched_ns,
			       q.guest_local_ns, q.host_cpu_send, q.host_cpu_recv, q.guest_cpu,
			       q.flags);
		else
			printf("probe guest%u cpu %u: host ns [%" PRIu64 ", %" PRIu64 "] (rtt %" PRIu64
			       ") guest ns %" PRIu64 " tsc %" PRIu64 "\n", id, q.guest_cpu,
			       q.host_ns_send, q.host_ns_recv, q.host_ns_recv - q.host_ns_send,
			       q.guest_sched_ns, q.guest_tsc);
	}
}

static void print_segment(const struct hgcor_segment *sg, bool json)
{
	if (json) {
		printf("{\"section\": \"segment\", \"guest\": %u, \"vcpu\": %d, \"method\": \"%s\""
		       ", \"clock\": \"%s\", \"host_tsc_start\": %" PRIu64 ", \"host_tsc_end\": %" PRIu64
		       ", \"guest_start\": %" PRIu64 ", \"guest_end\": %" PRIu64, sg->guest_id,
		       sg->vcpu_id, hgsync_method_name(sg->method), hgsync_clock_name(sg->clock),
		       sg->host_tsc_start, sg->host_tsc_end, sg->guest_start, sg->guest_end);
		if (sg->method == HGCOR_METHOD_KVM_EXACT)
			printf(", \"tsc_offset\": %" PRIu64 ", \"tsc_ratio\": %" PRIu64
			       ", \"tsc_frac_bits\": %u", sg->tsc_offset, sg->tsc_ratio,
			       sg->tsc_frac_bits);
		else
			printf(", \"ref_guest\": %" PRIu64 ", \"ref_host\": %" PRIu64
			       ", \"rate_q48\": %" PRId64, sg->ref_guest, sg->ref_host, sg->rate_q48);
		printf(", \"bound_ns\": %" PRIu64 ", \"nr_samples\": %u}\n", sg->bound_ns,
		       sg->nr_samples);
		return;
	}
	printf("segment guest%u vcpu %d %-9s %-7s host tsc [%" PRIu64 ", %" PRIu64 ") ",
	       sg->guest_id, sg->vcpu_id, hgsync_method_name(sg->method),
	       hgsync_clock_name(sg->clock), sg->host_tsc_start, sg->host_tsc_end);
	if (sg->method == HGCOR_METHOD_KVM_EXACT)
		printf("offset %" PRId64 " ratio %" PRIu64 "/2^%u, %u probes agree\n",
		       (int64_t)sg->tsc_offset, sg->tsc_ratio, sg->tsc_frac_bits, sg->nr_samples);
	else
		printf("guest [%" PRIu64 ", %" PRIu64 ") offset %" PRId64 " rate %+.3f ppm, "
		       "bound %" PRIu64 " ns from %u %s\n", sg->guest_start, sg->guest_end,
		       (int64_t)(sg->ref_host - sg->ref_guest), sg->rate_q48 / 281474976710656.0 * 1e6,
		       sg->bound_ns, sg->nr_samples,
		       sg->method == HGCOR_METHOD_EXIT ? "pairings" : "probes");
}

/* One DISRUPTION section as the recorder wrote it (values checked by the reader). */
static void print_disruption(const struct hgcor_disruption *d, bool json)
{
	bool jump = d->flags & HGCOR_DISRUPT_JUMP_KNOWN;

	if (json) {
		printf("{\"section\": \"disruption\", \"guest\": %u, \"next_guest\": %d, "
		       "\"kind\": \"%s\", \"old_vm_pid\": %d, \"new_vm_pid\": %d, "
		       "\"old_cid\": %u, \"new_cid\": %u, \"host_tsc_lost\": %" PRIu64
		       ", \"host_local_ns_lost\": %" PRIu64 ", \"host_tsc_back\": %" PRIu64
		       ", \"host_local_ns_back\": %" PRIu64, d->guest_id,
		       d->next_guest_id == HGCOR_NO_GUEST ? -1 : (int)d->next_guest_id,
		       hgsync_disruption_name(d->kind), d->old_vm_pid, d->new_vm_pid, d->old_cid,
		       d->new_cid, d->host_tsc_lost, d->host_local_ns_lost, d->host_tsc_back,
		       d->host_local_ns_back);
		if (jump)
			printf(", \"probe_tsc_jump\": %" PRId64 ", \"probe_local_jump_ns\": %" PRId64
			       ", \"probe_jump_bound_ns\": %" PRIu64, d->guest_tsc_jump,
			       d->guest_local_jump_ns, d->jump_bound_ns);
		printf("}\n");
		return;
	}
	if (d->kind == HGCOR_DISRUPT_GONE) {
		printf("disruption: guest%u (VM %d, CID %u) lost at host_tsc %" PRIu64
		       " host_local_ns %" PRIu64 " and never came back\n", d->guest_id,
		       d->old_vm_pid, d->old_cid, d->host_tsc_lost, d->host_local_ns_lost);
		return;
	}
	printf("disruption: guest%u -> guest%u, %s: VM %d (CID %u) -> VM %d (CID %u); session "
	       "lost at host_tsc %" PRIu64 " (host_local_ns %" PRIu64 "), back at host_tsc %"
	       PRIu64 " (%" PRIu64 ")", d->guest_id, d->next_guest_id,
	       hgsync_disruption_name(d->kind), d->old_vm_pid, d->old_cid, d->new_vm_pid, d->new_cid,
	       d->host_tsc_lost, d->host_local_ns_lost, d->host_tsc_back, d->host_local_ns_back);
	if (jump)
		printf("; guest clock jump by probes: tsc %+" PRId64 " counts, local %+" PRId64
		       " ns (+-%" PRIu64 " ns)", d->guest_tsc_jump, d->guest_local_jump_ns,
		       d->jump_bound_ns);
	printf("\n");
}

/*
 * What the host's records say of each disruption (hgsync_disruption_facts()):
 * the blackout on each side and the exact TSC jump.
 */
static void print_disruption_facts(const void *buf, size_t len, bool json)
{
	struct hgsync s;
	uint32_t khz;

	if (hgsync_load(&s, buf, len, HGSYNC_ALLOW_OPEN, NULL))
		return;	/* the section loop said what is wrong */
	khz = s.host_info.tsc_khz;
	for (size_t i = 0; i < s.nr_disr; i++) {
		const struct hgcor_disruption *d = &s.disr[i];
		struct hgsync_disr_facts f;
		bool both;
		int64_t host_ns = 0, jump_ns = 0;

		if (hgsync_disruption_facts(&s, i, &f) || d->kind == HGCOR_DISRUPT_GONE)
			continue;
		both = f.has_old_run && f.has_new_run && khz;
		if (both)
			host_ns = (int64_t)((f.new_first_run_tsc - f.old_last_run_tsc) * 1000000.0L / khz);
		if (f.has_kvm_jump && khz)
			jump_ns = (int64_t)(f.kvm_jump_tsc * 1000000.0L / khz);
		if (json) {
			printf("{\"section\": \"disruption_facts\", \"guest\": %u, "
			       "\"next_guest\": %u", d->guest_id, d->next_guest_id);
			if (f.has_old_run)
				printf(", \"old_last_run_tsc\": %" PRIu64, f.old_last_run_tsc);
			if (f.has_new_run)
				printf(", \"new_first_run_tsc\": %" PRIu64, f.new_first_run_tsc);
			if (both)
				printf(", \"host_blackout_ns\": %" PRId64, host_ns);
			if (f.has_kvm_jump)
				printf(", \"kvm_tsc_jump\": %" PRId64, f.kvm_jump_tsc);
			if (both && f.has_kvm_jump)
				printf(", \"guest_blackout_ns\": %" PRId64, host_ns + jump_ns);
			printf("}\n");
			continue;
		}
		printf("disruption guest%u -> guest%u (%s), from the host's records:", d->guest_id,
		       d->next_guest_id, hgsync_disruption_name(d->kind));
		if (both)
			printf(" last seen running in the old VM at host_tsc %" PRIu64 ", first run "
			       "in the new one at %" PRIu64 ": at most %.3f ms without it",
			       f.old_last_run_tsc, f.new_first_run_tsc, host_ns / 1e6);
		else
			printf(" %s VM's vCPUs not seen", f.has_new_run ? "the old" : "the new");
		if (f.has_kvm_jump && khz)
			printf("; KVM's offsets: the guest TSC jumped %+" PRId64 " counts (%+.3f ms, "
			       "exact)", f.kvm_jump_tsc, jump_ns / 1e6);
		else if (f.has_kvm_jump)
			printf("; KVM's offsets: the guest TSC jumped %+" PRId64 " counts (exact)",
			       f.kvm_jump_tsc);
		if (both && f.has_kvm_jump)
			printf("; the guest saw at most %.3f ms pass", (host_ns + jump_ns) / 1e6);
		printf("\n");
	}
	hgsync_free(&s);
}

static void dump_usage(FILE *out)
{
	fprintf(out, "usage: hgclock dump FILE [--json] [--summary]\n"
		"Prints a correlation file written by 'hgclock record': its sections\n"
		"and every record in them (--summary: counts only, and for a compressed\n"
		"section its bytes stored and uncompressed).  --json prints one\n"
		"JSON object per line.  Exit status 6 for a damaged or unsupported file.\n");
}

int cmd_dump(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "summary", no_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const char *const stdout_path = "-";
	struct dump_ctx ctx = { 0 };
	struct hgcor_reader r;
	struct hgcor_view v;
	const void *buf;
	size_t len;
	int c, ret;

	while ((c = getopt_long(argc, argv, "jsh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			ctx.json = true;
			break;
		case 's':
			ctx.summary = true;
			break;
		case 'h':
			dump_usage(stdout);
			return HGCLOCK_EXIT_OK;
		default:
			dump_usage(stderr);
			return HGCLOCK_EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		dump_usage(stderr);
		return HGCLOCK_EXIT_USAGE;
	}
	ret = hg_check_outputs((const char *const *)&argv[optind], 1, &stdout_path, 1);
	if (ret)
		return ret;
	ret = hg_map_file(argv[optind], &buf, &len);
	if (ret)
		return ret;
	ret = hgcor_open(&r, buf, len);
	if (ret) {
		hg_err("%s: %s", argv[optind], hgcor_strerror(ret));
		goto out;
	}
	if (!ctx.json)
		printf("%s: hgclock correlation file, format %u.%u, %zu bytes\n",
		       argv[optind], r.hdr.version_major, r.hdr.version_minor, len);
	while ((ret = hgcor_next(&r, &v)) > 0) {
		uint64_t before = ctx.nr_records;

		switch (v.type) {
		case HGCOR_SEC_HOST_INFO:
			print_info((const void *)v.payload, ctx.json, "host");
			break;
		case HGCOR_SEC_GUEST_INFO:
			print_info((const void *)(v.payload + 8), ctx.json, "guest");
			break;
		case HGCOR_SEC_HOST_RECORDS:
			ctx.prefix = ctx.json ? "\"from\": \"host\", " : "host  ";
			hgcor_walk_records(v.payload, v.length, dump_rec, &ctx);
			break;
		case HGCOR_SEC_GUEST_RECORDS: {
			uint32_t id;
			char prefix[48];

			memcpy(&id, v.payload, 4);
			snprintf(prefix, sizeof(prefix), ctx.json ?
				 "\"from\": \"guest\", \"guest\": %u, " : "guest%u ", id);
			ctx.prefix = prefix;
			hgcor_walk_records(v.payload + 8, v.length - 8, dump_rec, &ctx);
			break;
		}
		case HGCOR_SEC_NOTE:
			if (ctx.json)
				printf("{\"section\": \"note\", \"bytes\": %" PRIu64 "}\n", v.length);
			else
				printf("note: %.*s\n", (int)v.length, (const char *)v.payload);
			break;
		case HGCOR_SEC_END:
			break;
		case HGCOR_SEC_PROBES:
			ctx.nr_records += (v.length - 8) / sizeof(struct hgcor_probe);
			if (!ctx.summary)
				print_probes(v.payload, v.length, &ctx);
			break;
		case HGCOR_SEC_GUEST_VM: {
			struct hgcor_guest_vm vm;

			memcpy(&vm, v.payload, sizeof(vm));
			if (ctx.json)
				printf("{\"section\": \"guest_vm\", \"guest\": %u, \"vm_pid\": %d,"
				       " \"how\": %u, \"cid\": %u}\n", vm.guest_id, vm.vm_pid, vm.how,
				       vm.cid);
			else
				printf("guest%u: %.16s, VM process %d (%s)\n", vm.guest_id, vm.spec,
				       vm.vm_pid, vm.how == HGCOR_VM_BY_CID ? "found by vsock CID" :
				       vm.how == HGCOR_VM_BY_OPTION ? "given" : "unknown");
			break;
		}
		case HGCOR_SEC_SEGMENTS:
			for (uint64_t off = 0; off + sizeof(struct hgcor_segment) <= v.length;
			     off += sizeof(struct hgcor_segment)) {
				struct hgcor_segment sg;

				memcpy(&sg, v.payload + off, sizeof(sg));
				ctx.nr_records++;
				if (!ctx.summary)
					print_segment(&sg, ctx.json);
			}
			break;
		case HGCOR_SEC_CPU_MAP: {
			uint32_t gid;

			memcpy(&gid, v.payload, sizeof(gid));
			for (uint64_t off = 8; off + sizeof(struct hgcor_cpu_apic) <= v.length;
			     off += sizeof(struct hgcor_cpu_apic)) {
				struct hgcor_cpu_apic e;

				memcpy(&e, v.payload + off, sizeof(e));
				ctx.nr_records++;
				if (ctx.summary)
					continue;
				if (ctx.json)
					printf("{\"section\": \"cpu_map\", \"guest\": %u, "
					       "\"cpu\": %u, \"apic_id\": %u, \"flags\": %u}\n",
					       gid, e.guest_cpu, e.apic_id, e.flags);
				else
					printf("guest%u cpu %u: APIC ID %u (KVM vcpu_id)\n", gid,
					       e.guest_cpu, e.apic_id);
			}
			break;
		}
		case HGCOR_SEC_GUEST_IDENTITY: {
			/* The strings are checked (corr_check.c): no quote, no backslash. */
			struct hgcor_identity id;
			uint32_t gid;

			memcpy(&gid, v.payload, sizeof(gid));
			memcpy(&id, v.payload + 8, sizeof(id));
			if (ctx.json)
				printf("{\"section\": \"guest_identity\", \"guest\": %u, "
				       "\"nodename\": \"%s\", \"machine_id\": \"%s\", "
				       "\"boot_id\": \"%s\"}\n", gid, id.nodename, id.machine_id,
				       id.boot_id);
			else
				printf("guest%u: host name '%s', machine id %s, boot id %s\n", gid,
				       id.nodename, id.machine_id[0] ? id.machine_id : "(unknown)",
				       id.boot_id[0] ? id.boot_id : "(unknown)");
			break;
		}
		case HGCOR_SEC_DISRUPTION: {
			struct hgcor_disruption d;

			memcpy(&d, v.payload, sizeof(d));
			ctx.nr_disruptions++;
			if (!ctx.summary)
				print_disruption(&d, ctx.json);
			break;
		}
		default:
			if (!ctx.json)
				printf("skipped optional section type %u (%" PRIu64 " bytes)\n",
				       v.type, v.length);
		}
		if (v.encoding == HGCOR_ENC_ZSTD) {
			ctx.nr_zstd++;
			ctx.zstd_stored += v.stored_length;
			ctx.zstd_raw += v.length;
		}
		/*
		 * "bytes": what the section takes in the file (its payload as
		 * stored), so that offsets add up; a compressed one also says
		 * its size uncompressed.
		 */
		if (ctx.summary && ctx.json)
			printf("{\"section\": \"%s\", \"offset\": %" PRIu64 ", \"bytes\": %" PRIu64
			       ", \"uncompressed\": %" PRIu64 ", \"compression\": \"%s\""
			       ", \"records\": %" PRIu64 "}\n", section_name(v.type), v.offset,
			       v.stored_length, v.length,
			       v.encoding == HGCOR_ENC_ZSTD ? "zstd" : "none",
			       ctx.nr_records - before);
		else if (ctx.summary && v.encoding == HGCOR_ENC_ZSTD)
			printf("section %-13s at %8" PRIu64 ": %8" PRIu64 " bytes, %" PRIu64
			       " records, zstd: %" PRIu64 " bytes uncompressed\n",
			       section_name(v.type), v.offset, v.stored_length,
			       ctx.nr_records - before, v.length);
		else if (ctx.summary)
			printf("section %-13s at %8" PRIu64 ": %8" PRIu64 " bytes, %" PRIu64 " records\n",
			       section_name(v.type), v.offset, v.length, ctx.nr_records - before);
	}
	if (ctx.summary && !ctx.json && ctx.nr_zstd)
		printf("%" PRIu64 " compressed sections: %" PRIu64 " bytes stored for %" PRIu64
		       " (%.2fx)\n", ctx.nr_zstd, ctx.zstd_stored, ctx.zstd_raw,
		       ctx.zstd_stored ? (double)ctx.zstd_raw / (double)ctx.zstd_stored : 0.0);
	if (ret < 0) {
		hg_err("%s: %s (at byte %zu, after %" PRIu64 " sections)", argv[optind],
		       hgcor_strerror(ret), r.pos, r.nr_sections);
	} else if (!ctx.json) {
		printf("%" PRIu64 " sections, %" PRIu64 " records, complete\n",
		       r.nr_sections, ctx.nr_records);
	}
	if (ret >= 0 && ctx.nr_disruptions && !ctx.summary)
		print_disruption_facts(buf, len, ctx.json);
out:
	hgcor_release(&r);
	hg_unmap_file(buf, len);
	return ret < 0 ? HGCLOCK_EXIT_BAD_INPUT : HGCLOCK_EXIT_OK;
}

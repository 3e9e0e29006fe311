// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock mark [--count N] [--first SEQ] [--interval MS] [--json]
 *
 * In a guest: reads this vCPU's TSC and trace clocks, then at once runs
 * CPUID with leaf HG_MARK_LEAF and the marker's sequence number as
 * subleaf.  CPUID always exits to the hypervisor (KVM intercepts it on
 * Intel and AMD, at any privilege level), so a host tracing kvm:kvm_cpuid
 * sees each marker with its own timestamp: a guest reading converted to
 * host time must come before its marker's host event, by no more than the
 * exit's latency.  That checks a merged timeline independently of how it
 * was computed.  No privilege is needed beyond reading /dev/hgclock.
 *
 * Without an exact conversion (kvm-clock lacking the stable bit) the
 * reading comes from the READ_CLOCK ioctl, between two TSC reads (tsc,
 * tsc_after), and a CYC2NS snapshot of this CPU goes into the ring right
 * before it: the kvm-clock parameters the reading was taken under, for a
 * checker to place it on the TSC.
 */
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <cpuid.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "libhgclock.h"

/* "HCMK": outside every range a CPU or KVM defines (KVM answers 0s). */
#define HG_MARK_LEAF	0x48434d4bu

static void mark_usage(FILE *out)
{
	fprintf(out,
		"usage: hgclock mark [--count N] [--first SEQ] [--interval MS] [--json]\n"
		"In a guest: reads this vCPU's TSC and clocks and at once exits to the\n"
		"hypervisor with CPUID leaf 0x%x, subleaf SEQ (default from 0), N times\n"
		"(default 1), MS apart (default 10): a host tracing kvm:kvm_cpuid sees\n"
		"each one.  Prints seq, cpu, tsc, sched_clock_ns and local_clock_ns.\n",
		HG_MARK_LEAF);
}

int cmd_mark(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "count", required_argument, NULL, 'n' },
		{ "interval", required_argument, NULL, 'i' },
		{ "first", required_argument, NULL, 'f' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t count = 1, interval_ms = 10, first = 0;
	struct hgclock_map map;
	bool json = false, mapped;
	int c, fd, status = HGCLOCK_EXIT_OK, snap_first = 1;

	while ((c = getopt_long(argc, argv, "n:i:f:jh", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (!parse_u64(optarg, 0xffff, &first)) {
				hg_err("--first wants a sequence number (0..65535), not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'n':
			if (!parse_u64(optarg, 65536, &count) || !count) {
				hg_err("--count wants 1..65536, not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'i':
			if (!parse_u64(optarg, 60000, &interval_ms)) {
				hg_err("--interval wants milliseconds, not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			mark_usage(stdout);
			return HGCLOCK_EXIT_OK;
		default:
			mark_usage(stderr);
			return HGCLOCK_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		mark_usage(stderr);
		return HGCLOCK_EXIT_USAGE;
	}
	fd = hg_open_device();
	if (fd < 0)
		return -fd;
	mapped = !hgclock_map_open(fd, 0, &map);
	for (uint64_t i = first; i < first + count; i++) {
		struct hgclock_now now;
		int used_ioctl, ret;

		if (snap_first)
			hgclock_snapshot(fd, sched_getcpu());
		ret = hgclock_now(fd, mapped ? &map : NULL, &now, &used_ioctl);
		snap_first = used_ioctl;
		/* Nothing between the reading and the exit but this CPUID. */
		if (!ret) {
			unsigned int a, b, cx, d;

			__cpuid_count(HG_MARK_LEAF, (unsigned int)i, a, b, cx, d);
			(void)a, (void)b, (void)cx, (void)d;
		}
		if (ret) {
			hg_err("reading the clock: %s", strerror(-ret));
			status = HGCLOCK_EXIT_FAILURE;
			break;
		}
		if (json)
			printf("{\"seq\": %llu, \"cpu\": %u, \"tsc\": %llu, \"tsc_after\": %llu,"
			       " \"sched_clock_ns\": %llu, \"local_clock_ns\": %llu, \"exact\": %s}\n",
			       (unsigned long long)i, now.cpu, (unsigned long long)now.tsc,
			       (unsigned long long)now.tsc_after,
			       (unsigned long long)now.sched_clock_ns,
			       (unsigned long long)now.local_clock_ns, used_ioctl ? "false" : "true");
		else
			printf("mark %llu cpu %u tsc %llu sched_clock_ns %llu local_clock_ns %llu\n",
			       (unsigned long long)i, now.cpu, (unsigned long long)now.tsc,
			       (unsigned long long)now.sched_clock_ns,
			       (unsigned long long)now.local_clock_ns);
		fflush(stdout);
		if (interval_ms && i + 1 < first + count) {
			struct timespec ts = { (time_t)(interval_ms / 1000),
					       (long)(interval_ms % 1000) * 1000000 };

			nanosleep(&ts, NULL);
		}
	}
	if (mapped)
		hgclock_map_close(&map);
	close(fd);
	return status;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock: exact host/guest trace clock correlation, the command line.
 *
 * A table of subcommands; each lives in cmd_<name>.c.
 */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "libhgclock.h"

#ifndef HGCLOCK_VERSION
#define HGCLOCK_VERSION "0.1"
#endif

static const struct hgclock_cmd commands[] = {
	{ "info", cmd_info, "show the module's clock setup and ABI" },
	{ "now", cmd_now, "read the kernel's trace clocks (ftrace local/perf, TSC, POSIX)" },
	{ "agent", cmd_agent, "serve this guest's clock data to 'record --guest' (vsock/TCP)" },
	{ "record", cmd_record, "record this host's clock data into a correlation file" },
	{ "dump", cmd_dump, "print a correlation file (--json)" },
	{ "merge", cmd_merge, "merge host and guest trace.dat files into one timeline in host time" },
	{ "plot", cmd_plot, "draw a correlation file's mapping and vCPU placement as SVG" },
	{ "convert", cmd_convert, "convert guest clock values to host time with a correlation file" },
	{ "mark", cmd_mark, "guest: read the clocks, then exit to the host (CPUID) where it is traced" },
	{ "records", cmd_records, "print every record from the rings (tracking, snapshots)" },
	{ "vcpus", cmd_vcpus, "list tracked vCPU threads: VM, vcpu_id, host CPU, TSC offset" },
	{ "snapshots", cmd_snapshots, "print per-CPU TSC->sched_clock snapshots from the ring" },
};

static void usage(FILE *out)
{
	size_t i;

	fprintf(out, "usage: hgclock <command> [options]\n\ncommands:\n");
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(out,
		"\n'hgclock <command> --help' describes a command.\n"
		"exit status: 0 ok, 1 failure, 2 usage, 3 no /dev/hgclock (module not loaded),\n"
		"             4 permission denied, 5 ABI mismatch, 6 bad input file\n");
}

int main(int argc, char **argv)
{
	size_t i;

	if (argc < 2) {
		usage(stderr);
		return HGCLOCK_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout);
		return HGCLOCK_EXIT_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("hgclock %s (ABI %d.%d)\n", HGCLOCK_VERSION,
		       HGCLOCK_ABI_MAJOR, HGCLOCK_ABI_MINOR);
		return HGCLOCK_EXIT_OK;
	}
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	}
	hg_err("unknown command '%s'", argv[1]);
	usage(stderr);
	return HGCLOCK_EXIT_USAGE;
}

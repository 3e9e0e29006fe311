// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock: exact host/guest trace clock correlation, the command line.
 *
 * A table of subcommands; each lives in cmd_<name>.c.  hg_dispatch()
 * (util.c) runs them, for hgclock-guest (guest_main.c) too.
 */
#include "cmd.h"
#include "libhgclock.h"
#include "output.h"

#ifndef HGCLOCK_VERSION
#define HGCLOCK_VERSION "0.1"
#endif

static const struct hgclock_cmd commands[] = {
	HGCLOCK_CMD_INFO,
	HGCLOCK_CMD_NOW,
	HGCLOCK_CMD_AGENT,
	{ "record", cmd_record, "record this host's clock data into a correlation file" },
	{ "recover", cmd_recover, "make a valid file of a recording that did not finish" },
	{ "dump", cmd_dump, "print a correlation file (--json)" },
	{ "merge", cmd_merge, "merge host and guest trace.dat files into one timeline in host time" },
	{ "plot", cmd_plot, "draw a correlation file's mapping and vCPU placement as SVG" },
	{ "convert", cmd_convert, "convert guest clock values to host time with a correlation file" },
	HGCLOCK_CMD_MARK,
	HGCLOCK_CMD_PAIRMARK,
	{ "records", cmd_records, "print every record from the rings (tracking, snapshots)" },
	{ "vcpus", cmd_vcpus, "list tracked vCPU threads: VM, vcpu_id, host CPU, TSC offset" },
	{ "snapshots", cmd_snapshots, "print per-CPU TSC->sched_clock snapshots from the ring" },
};

static const struct hgclock_cli hgclock_cli = {
	.prog = "hgclock",
	.version = HGCLOCK_VERSION,
	.cmds = commands,
	.nr_cmds = sizeof(commands) / sizeof(commands[0]),
};

int main(int argc, char **argv)
{
	/* Whatever a command printed must have reached its destination. */
	return hg_close_stdout(hg_dispatch(&hgclock_cli, argc, argv));
}

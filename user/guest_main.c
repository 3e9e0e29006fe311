// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock-guest: the hgclock command line reduced to what a guest runs
 * (info, now, agent, mark, pairmark), without `merge` and therefore without
 * libtracecmd/libtraceevent.  Each command is the same code as in
 * `hgclock` (user/cmd/cmd_<name>.c), with the same options and exit statuses:
 * `hgclock-guest agent` is `hgclock agent`.  Packaged as hgclock-guest,
 * whose hgclock-agent.service runs it (Documentation/install.rst).  Help,
 * usage, errors and exit statuses are hgclock's: hg_dispatch() (util.c).
 *
 * HGCLOCK_VERSION comes from the Makefile, which reads it from
 * user/hgclock.c: the version stays defined in one place.
 */
#include "cmd.h"
#include "libhgclock.h"
#include "output.h"

#ifndef HGCLOCK_VERSION
#error "HGCLOCK_VERSION must come from the Makefile (HGCLOCK_VERSION in user/hgclock.c)"
#endif

static const struct hgclock_cmd guest_commands[] = {
	HGCLOCK_CMD_INFO,
	HGCLOCK_CMD_NOW,
	HGCLOCK_CMD_AGENT,
	HGCLOCK_CMD_MARK,
	HGCLOCK_CMD_PAIRMARK,
};

static const struct hgclock_cli guest_cli = {
	.prog = "hgclock-guest",
	.version = HGCLOCK_VERSION,
	.cmds = guest_commands,
	.nr_cmds = sizeof(guest_commands) / sizeof(guest_commands[0]),
	.about = "The guest-side commands of hgclock(1), without libtracecmd; the others\n"
		 "(record, merge, ...) are in the hgclock package.\n",
	/* A command hgclock has but this binary does not: say where it is. */
	.unknown_hint = "hgclock-guest has only the guest-side commands; "
			"the hgclock package has all",
};

int main(int argc, char **argv)
{
	/* Whatever a command printed must have reached its destination. */
	return hg_close_stdout(hg_dispatch(&guest_cli, argc, argv));
}

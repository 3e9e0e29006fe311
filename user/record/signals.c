// SPDX-License-Identifier: GPL-2.0
/*
 * How a recording ends: SIGINT, SIGTERM and SIGHUP set @stop for the main
 * loop (setup_signals()), SIGPIPE is ignored; with a COMMAND, record runs
 * it (run_command()) and its exit status is the shell's
 * (command_status()).  The handlers saved here are put back before the
 * merge at the end (merge_end.c).
 */
#include "record.h"

/*
 * Ending: SIGINT, SIGTERM and SIGHUP set @stop (and count in
 * @nr_signals); the main loop ends the recording cleanly, END and the
 * rename included.  A SIGHUP ignored when record started (nohup) stays
 * ignored.  With a command (@child_pid), see run_command().
 */
volatile sig_atomic_t stop, nr_signals;
volatile pid_t child_pid;
const int stop_sigs[] = { SIGINT, SIGTERM, SIGHUP };
struct sigaction saved_sigs[3], saved_pipe;

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	int saved_errno = errno;

	(void)uc;
	stop = 1;
	if (nr_signals < 1000)
		nr_signals++;
	/*
	 * The terminal sends Ctrl-C (and a hangup) to its whole foreground
	 * process group: the command has it already.  A signal sent to
	 * record alone by a process (kill PID, timeout) is passed on, so
	 * that the command ends too and record after it.
	 */
	if (child_pid > 0 && si && si->si_code <= 0 && si->si_pid != child_pid)
		kill(child_pid, sig);
	errno = saved_errno;
}

/* Wakes poll() when the command exits; waitpid() tells the rest. */
static void on_child(int sig)
{
	(void)sig;
}

void setup_signals(void)
{
	struct sigaction sa = { .sa_sigaction = on_signal, .sa_flags = SA_SIGINFO };
	struct sigaction ign = { .sa_handler = SIG_IGN };
	struct sigaction chld = { .sa_handler = on_child, .sa_flags = SA_NOCLDSTOP };

	/* No SA_RESTART: a signal interrupts poll() at once. */
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(stop_sigs) / sizeof(stop_sigs[0]); i++) {
		sigaction(stop_sigs[i], NULL, &saved_sigs[i]);
		if (stop_sigs[i] == SIGHUP && saved_sigs[i].sa_handler == SIG_IGN)
			continue;
		sigaction(stop_sigs[i], &sa, NULL);
	}
	/* A closed pipe or socket is a failed write, checked where it happens. */
	sigaction(SIGPIPE, &ign, &saved_pipe);
	sigemptyset(&chld.sa_mask);
	sigaction(SIGCHLD, &chld, NULL);
}

/*
 * Runs COMMAND (@cmd, NULL terminated) as record's child, in record's
 * process group: Ctrl-C at the terminal reaches both, the command (e.g.
 * trace-cmd) finishes its own file, and record records until it has
 * exited, then ends its recording.  The command gets the signal
 * dispositions record was started with (a nohup stays a nohup).  Its
 * pid, or -1 (said) when it cannot be started.
 */
pid_t run_command(char **cmd)
{
	pid_t pid;

	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		hg_err("cannot start %s: %s", cmd[0], strerror(errno));
		return -1;
	}
	if (pid > 0)
		return pid;
	for (size_t i = 0; i < sizeof(stop_sigs) / sizeof(stop_sigs[0]); i++)
		sigaction(stop_sigs[i], &saved_sigs[i], NULL);
	sigaction(SIGPIPE, &saved_pipe, NULL);
	signal(SIGCHLD, SIG_DFL);
	execvp(cmd[0], cmd);
	/* As a shell says it: 127 not found, 126 found but not runnable. */
	fprintf(stderr, "hgclock record: cannot run %s: %s\n", cmd[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

/* The exit status of a command's wait status, as a shell gives it. */
int command_status(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return HGCLOCK_EXIT_FAILURE;
}

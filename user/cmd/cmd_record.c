// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock record -o FILE [--duration SEC] [--period MS]: records this
 * host's clock data into a correlation file: the module's INFO, then every
 * record of every CPU's ring (CYC2NS snapshots, vCPU tracking, KVM TSC
 * offset changes, losses) as it arrives, until the duration ends or
 * SIGINT/SIGTERM.  Then it drains what is left, writes the END section and
 * closes.  It writes to FILE.tmp-XXXXXX next to FILE (valid up to its
 * last section at any time) and renames that to FILE after a clean stop
 * only (user/common/output.h).  A status line is shown on a terminal.
 *
 * With --guest, each guest's agent streams its own ring into the file,
 * and the host probes its clocks continuously (bursts of bracketed
 * exchanges, see proto.h).  At the end the mapping is computed from all of
 * it (sync*.c: KVM's exact TSC relation where the guest's VM is known and
 * agrees with the probes, fitted probes otherwise) and written as the
 * SEGMENTS section before END.
 *
 * A guest whose session breaks, stalls or ends early is followed: looked
 * for until --follow-timeout (a live migration or a restore moves it to
 * another VM process), and found again it goes on under a new guest id,
 * with a DISRUPTION section between (guest_ended(), record/disrupt.c).
 * One that cannot be reached at the start or does not come back is
 * written down as lost (a NOTE, file-format.rst) and the others go on;
 * --require-all makes that fatal.  SIGINT, SIGTERM and SIGHUP end the
 * recording cleanly; SIGPIPE is ignored (every write is
 * checked instead).  With a COMMAND after the options, record runs it
 * and records for its life: see run_command() (record/signals.c); with
 * --merge OUT it then merges the traces COMMAND wrote (merge_at_end(),
 * record/merge_end.c).
 *
 * This file is the command: its options and the main loop.  The
 * recorder's parts it calls are in user/record/ (record.h: which file
 * does what, and who calls whom).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "corr.h"
#include "libhgclock.h"
#include "merge.h"
#include "output.h"
#include "proto.h"
#include "sync.h"
#include "vmfind.h"
#include "record.h"

static void record_usage(FILE *out)
{
	fprintf(out,
		"usage: hgclock record -o FILE [--duration SEC] [--period MS] [--ring-size KIB]\n"
		"                      [--guest SPEC[,vm=PID][,no-agent]]... [--all-guests]\n"
		"                      [--probe-interval MS] [--compress zstd|none]\n"
		"                      [--probe-burst N] [--require-all] [--follow-timeout SEC]\n"
		"                      [--merge OUT [--merge-host FILE] [--merge-guest [ID=]FILE]...]\n"
		"                      [[--] COMMAND [ARG...]]\n"
		"Records this host's clock data (per-CPU conversions, vCPU tracking,\n"
		"KVM TSC offset changes) into a correlation file until SEC seconds\n"
		"have passed or it is interrupted (Ctrl-C, SIGTERM, SIGHUP): the file\n"
		"is then complete.  With a COMMAND, it runs it and records until it\n"
		"exits (e.g. -- trace-cmd record -A @3 ...; Ctrl-C reaches both, record\n"
		"waits for the command); the exit status is then the command's.\n"
		"--merge OUT (with a COMMAND): when the file is complete and COMMAND exited\n"
		"0, runs 'hgclock merge' into OUT on the traces COMMAND wrote: --merge-host\n"
		"FILE (default trace.dat) and the guests' (default: trace-NAME.dat next to it,\n"
		"trace-cmd record -A's names, matched to the guests by VM name; or each\n"
		"--merge-guest [ID=]FILE as merge's --guest), all written since COMMAND\n"
		"started; the exit status is then merge's.\n"
		"-o, --output FILE is written as FILE.tmp-XXXXXX, renamed to FILE at a\n"
		"clean end (a failed run leaves FILE as it was).\n"
		"--compress zstd (the default when built with libzstd) stores the batches of\n"
		"records and probes compressed (file format 1.4, some 3.5 times smaller);\n"
		"none writes a file that hgclock before format 1.4 also reads.\n"
		"--period sets the module's snapshot period while recording; --ring-size KIB\n"
		"sizes this recording's own rings (default 4096 per CPU; other readers keep theirs).\n"
		"--guest vsock:CID[:PORT][,vm=PID], tcp:HOST:PORT[,vm=PID] or domain:NAME\n"
		"adds a guest running 'hgclock agent': its clock data joins the file, its\n"
		"clocks are probed every --probe-interval MS (default 100, 0: never; N\n"
		"exchanges back to back each time, --probe-burst, default 4), and the\n"
		"guest-to-host mapping is computed at the end.  vm=PID names the VM's\n"
		"process on this host (for vsock:CID found otherwise: the QEMU whose\n"
		"vhost-vsock -device has guest-cid=CID); with it KVM's exact TSC relation\n"
		"is used, without it probes only (said on stderr).  domain:NAME is libvirt's\n"
		"running domain NAME, at vsock:CID: its QEMU process and CID are found, or\n"
		"exit 2 says why not.  --all-guests adds every running libvirt domain and\n"
		"every other QEMU with a vsock device.\n"
		"--guest vm=PID alone, or any form above with ,no-agent, records a VM\n"
		"whose guest runs no agent (no module): its vCPUs' TSC offsets and exit\n"
		"pairing for 'hgclock pairmark' in it; its x86-tsc trace then maps\n"
		"exactly, local/perf only through pairmark's markers (merge).\n");
	fprintf(out,
		"A guest whose session breaks (a live migration, a restore from a file, a\n"
		"lost connection) is looked for, for --follow-timeout SEC (default 60, 0:\n"
		"never): a VM with its vsock CID or its VM's name whose agent answers. The\n"
		"recording goes on meanwhile; once found, the guest goes on under a new\n"
		"guest id, and a DISRUPTION in the file says when, what kind, which VMs and\n"
		"how far its clock jumped (hgclock dump).\n"
		"A guest whose agent cannot be reached at the start, or that does not come\n"
		"back, is noted in the file as lost and the others go on; --require-all\n"
		"makes that an error (exit 1; a loss after the start ends the recording,\n"
		"which is kept).\n"
		"At most %d guests.  'hgclock recover' completes a file that a killed\n"
		"record left unfinished.\n", HG_MAX_GUESTS);
}

/* Long options without a short form. */
enum { OPT_MERGE = 0x100, OPT_MERGE_HOST, OPT_MERGE_GUEST };
enum { OPT_COMPRESS = 0x200, OPT_FOLLOW };

int cmd_record(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "duration", required_argument, NULL, 'd' },
		{ "period", required_argument, NULL, 'p' },
		{ "guest", required_argument, NULL, 'g' },
		{ "all-guests", no_argument, NULL, 'G' },
		{ "probe-interval", required_argument, NULL, 'i' },
		{ "probe-burst", required_argument, NULL, 'b' },
		{ "ring-size", required_argument, NULL, 'r' },
		{ "compress", required_argument, NULL, OPT_COMPRESS },
		{ "require-all", no_argument, NULL, 'A' },
		{ "follow-timeout", required_argument, NULL, OPT_FOLLOW },
		{ "merge", required_argument, NULL, OPT_MERGE },
		{ "merge-host", required_argument, NULL, OPT_MERGE_HOST },
		{ "merge-guest", required_argument, NULL, OPT_MERGE_GUEST },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	/* --merge: nothing merged unless asked (merge_at_end()). */
	struct merge_req mr = { 0 };
	uint64_t duration_s = 0, period_ms = 0;
	struct hgclock_ring_config cfg, saved;
	struct hg_batch b = { .max = HG_SECTION_MAX };
	struct hgcor_writer w;
	struct hg_output o;
	struct host_sink sink = { .w = &w };
	struct hgclock_info info;
	struct hgclock_map map;
	const char *out = NULL;
	double start, last_status = 0;
	bool tty = isatty(STDERR_FILENO), period_set = false;
	bool all_guests = false;
	/* Record batches and probes stored compressed (file-format.rst, 1.4). */
	int compress = hgcor_have_zstd() ? HGCOR_COMPRESS_ZSTD : HGCOR_COMPRESS_NONE;
	/* Each guest holds a probe buffer: allocated as --guest adds them. */
	struct guest *guests = NULL;
	struct pollfd *pfd = NULL;
	char **command = NULL;
	int child_status = 0;
	bool child_running = false, child_started = false, child_told = false;
	struct host_clock hc;
	uint64_t interval_ms = 100, ring_kib = 4096, burst = HG_PROBE_BURST;
	double interval_s;
	unsigned int nr_guests = 0, g;
	uint8_t *gbuf = NULL;
	char note[512];
	int c, fd, ret, i;

	/* "+": the first argument that is not an option starts COMMAND. */
	while ((c = getopt_long(argc, argv, "+o:d:p:g:i:b:r:Ah", opts, NULL)) != -1) {
		switch (c) {
		case 'g':
			ret = add_guest(&guests, &nr_guests, optarg);
			if (ret) {
				free(guests);
				return ret;
			}
			break;
		case 'G':
			all_guests = true;
			break;
		case OPT_COMPRESS:
			if (!strcmp(optarg, "none")) {
				compress = HGCOR_COMPRESS_NONE;
			} else if (!strcmp(optarg, "zstd") && hgcor_have_zstd()) {
				compress = HGCOR_COMPRESS_ZSTD;
			} else {
				hg_err(!strcmp(optarg, "zstd") ? "--compress zstd: this hgclock was "
				       "built without libzstd" : "--compress wants zstd or none, not '%s'",
				       optarg);
				free(guests);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'A':
			require_all = true;
			break;
		case OPT_FOLLOW: {
			uint64_t t;

			if (!parse_u64(optarg, 86400, &t)) {
				hg_err("--follow-timeout wants seconds from 0 to 86400, not '%s'",
				       optarg);
				free(guests);
				return HGCLOCK_EXIT_USAGE;
			}
			follow_timeout_s = (unsigned int)t;
			break;
		}
		case OPT_MERGE:
			mr.out = optarg;
			break;
		case OPT_MERGE_HOST:
			mr.host = optarg;
			mr.host_given = true;
			break;
		case OPT_MERGE_GUEST:
			if (mr.nr_guest == HG_MAX_GUESTS) {
				hg_err("at most %d --merge-guest", HG_MAX_GUESTS);
				free(guests);
				return HGCLOCK_EXIT_USAGE;
			}
			mr.guest[mr.nr_guest++] = optarg;
			break;
		case 'r':
			if (!parse_u64(optarg, 65536, &ring_kib) || ring_kib < 8 ||
			    (ring_kib & (ring_kib - 1))) {
				hg_err("--ring-size wants KiB, a power of two from 8 to 65536, not '%s'",
				       optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'i':
			if (!parse_u64(optarg, 3600 * 1000, &interval_ms)) {
				hg_err("--probe-interval wants milliseconds, not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'b':
			if (!parse_u64(optarg, HG_PROBE_BURST_MAX, &burst) || !burst) {
				hg_err("--probe-burst wants a count from 1 to %d, not '%s'",
				       HG_PROBE_BURST_MAX, optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'o':
			out = optarg;
			break;
		case 'd':
			if (!parse_u64(optarg, 86400 * 365, &duration_s) || !duration_s) {
				hg_err("--duration wants seconds, not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'p':
			if (!parse_u64(optarg, 3600 * 1000, &period_ms) || !period_ms) {
				hg_err("--period wants milliseconds (1 or more), not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'h':
			free(guests);
			record_usage(stdout);
			return HGCLOCK_EXIT_OK;
		default:
			free(guests);
			record_usage(stderr);
			return HGCLOCK_EXIT_USAGE;
		}
	}
	if (!out) {
		hg_err("-o FILE is required");
		free(guests);
		record_usage(stderr);
		return HGCLOCK_EXIT_USAGE;
	}
	if (!strcmp(out, "-")) {
		hg_err("-o -: record writes a file (it reads it back for the mapping)");
		free(guests);
		return HGCLOCK_EXIT_USAGE;
	}
	if (all_guests) {
		ret = add_all_guests(&guests, &nr_guests);
		if (ret) {
			free(guests);
			return ret;
		}
	}
	if (optind < argc)
		command = argv + optind;
	if (!mr.host)
		mr.host = "trace.dat";
	ret = merge_check_args(&mr, out, command, nr_guests);
	if (ret) {
		free(guests);
		return ret;
	}
	for (g = 0; g < nr_guests; g++)
		pthread_mutex_init(&guests[g].lock, NULL);
	pfd = calloc(1 + nr_guests, sizeof(*pfd));
	if (!pfd) {
		hg_err("%s", strerror(ENOMEM));
		free(guests);
		return HGCLOCK_EXIT_FAILURE;
	}
	/*
	 * Two sockets a guest: a host recording hundreds of guests needs more
	 * than the usual 1024 descriptors; as many as the hard limit allows.
	 */
	if (nr_guests > 100) {
		struct rlimit rl;

		if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
	}
	/*
	 * Before anything is created: a signal from here on ends the
	 * recording cleanly (output.c's handlers, which remove a temporary
	 * file, are then not installed over these).
	 */
	setup_signals();
	fd = hg_open_device();
	if (fd < 0) {
		free(pfd);
		free(guests);
		return -fd;
	}
	ret = hgclock_get_info(fd, &info);
	if (ret) {
		hg_err("GET_INFO failed: %s", strerror(-ret));
		close(fd);
		free(pfd);
		free(guests);
		return ret == -EPROTO ? HGCLOCK_EXIT_ABI : HGCLOCK_EXIT_FAILURE;
	}
	/*
	 * A bigger ring before mapping it: a busy host (a trace running, the
	 * guests' vCPUs switching) fills the default one between two drains.
	 * Our session's rings only (ABI 1.2; before, the one shared ring,
	 * refused while another reader had it mapped).
	 */
	if (info.ring_size && info.ring_size < ring_kib * 1024) {
		memset(&cfg, 0, sizeof(cfg));
		cfg.flags = HGCLOCK_CFG_SET_RING_SIZE;
		cfg.ring_size = ring_kib * 1024;
		if (hgclock_ring_config(fd, &cfg))
			fprintf(stderr, "hgclock record: keeping the %llu KiB rings (%s)\n",
				(unsigned long long)info.ring_size / 1024, strerror(errno));
	}
	ret = hg_map_consumer(fd, &map);
	if (ret) {
		close(fd);
		free(pfd);
		free(guests);
		return HGCLOCK_EXIT_FAILURE;
	}
	out_name = out;
	b.buf = malloc(b.max);
	sink.hold.buf = malloc(HG_HOST_HOLD_BYTES);
	if (!b.buf || !sink.hold.buf) {
		ret = HGCLOCK_EXIT_FAILURE;
		goto out_map;
	}
	/* A temporary file next to FILE, renamed to it after a clean run. */
	ret = hg_output_open(&o, out);
	if (ret)
		goto out_map;
	/* Killed, it leaves its temporary file: valid up to its last section. */
	hg_output_keep_on_signal(&o);
	ret = hgcor_create(&w, hg_output_write_path(&o));
	if (ret) {
		hg_err("%s: %s", out, strerror(-ret));
		hg_output_abort(&o);
		ret = HGCLOCK_EXIT_FAILURE;
		goto out_map;
	}
	hgcor_set_compression(&w, compress);	/* checked with the option */
	/* Start from now, with every CPU's conversion in the stream first. */
	hgclock_ring_skip_all(&map);
	if (period_ms) {
		memset(&saved, 0, sizeof(saved));
		memset(&cfg, 0, sizeof(cfg));
		cfg.flags = HGCLOCK_CFG_SET_PERIOD;
		cfg.snapshot_period_ns = period_ms * 1000000ull;
		if (hgclock_ring_config(fd, &saved) || hgclock_ring_config(fd, &cfg))
			hg_err("cannot set the snapshot period: %s", strerror(errno));
		else
			period_set = true;
	}
	hgclock_snapshot(fd, -1);

	{
		char host[65] = "";

		gethostname(host, sizeof(host) - 1);
		snprintf(note, sizeof(note), "hgclock record on %s; host abi %u.%u",
			 host, info.abi_major, info.abi_minor);
	}
	for (i = 0; i < argc; i++) {
		size_t l = strlen(note);

		snprintf(note + l, sizeof(note) - l, "%s%s", i ? " " : "; argv: ", argv[i]);
	}
	ret = put_section(&w, HGCOR_SEC_HOST_INFO, 0, &info, sizeof(info));
	if (!ret)
		ret = put_section(&w, HGCOR_SEC_NOTE, 0, note, strlen(note));
	if (nr_guests) {
		gbuf = malloc(HGP_MAX_PAYLOAD);
		if (!gbuf)
			ret = -ENOMEM;
	}
	hc.fd = fd;
	hc.map = &map;
	interval_s = interval_ms / 1000.0;
	for (g = 0; g < nr_guests; g++) {
		guests[g].hc = &hc;
		guests[g].interval_s = interval_s;
		guests[g].burst = (unsigned int)burst;
	}
	if (!ret)
		ret = write_tracked(&w, fd, &hc);
	rec_start = now_s();
	next_file_id = nr_guests;
	for (g = 0; g < nr_guests && !ret && !stop; g++) {
		ret = guest_open(&guests[g], &w, gbuf);
		if (ret > 0)
			ret = guest_lost(&guests[g], &w, &hc);
	}
	if (!ret && stop)
		fprintf(stderr, "hgclock record: interrupted while connecting to the guests\n");
	/* --require-all: nothing is recorded unless every guest is there. */
	if (!ret && require_all && nr_lost) {
		hg_err("%u of %u guests could not be reached (--require-all): not recording",
		       nr_lost, nr_guests);
		ret = -ENOTCONN;
	}
	if (!ret && command && !stop) {
		/* --merge takes the traces written from here on (merge_input_fresh()). */
		clock_gettime(CLOCK_REALTIME_COARSE, &mr.t0);
		child_pid = run_command(command);
		if (child_pid < 0)
			ret = -ECHILD;
		else
			child_running = child_started = true;
	}
	start = now_s();
	while (!ret) {
		bool last;

		/* The command's end ends the recording; record's own stop waits for it. */
		if (child_running) {
			pid_t p = waitpid(child_pid, &child_status, WNOHANG);

			if (p == child_pid || (p < 0 && errno == ECHILD)) {
				child_running = false;
				child_pid = 0;
			}
		}
		if (child_running && !child_told &&
		    ((duration_s && now_s() - start >= duration_s) || (require_all && nr_lost))) {
			/* As Ctrl-C would: trace-cmd finishes its file on SIGINT. */
			fprintf(stderr, "hgclock record: %s: sending SIGINT to %s (pid %d)\n",
				require_all && nr_lost ? "a guest was lost" : "--duration is over",
				command[0], (int)child_pid);
			kill(child_pid, SIGINT);
			child_told = true;
		}
		if (command)
			/* A third signal: record stops waiting for the command. */
			last = !child_running || nr_signals >= 3;
		else
			last = stop || (duration_s && now_s() - start >= duration_s) ||
			       (require_all && nr_lost);

		/*
		 * Everything read is copied out before the next read, and
		 * written within HG_HOST_HOLD_S (at once on the last pass).
		 */
		ret = hg_drain_batched(&map, &b, write_host_batch, &sink);
		if (!ret)
			ret = host_sink_flush(&sink, last);
		for (g = 0; g < nr_guests && !ret; g++)
			ret = flush_probes_due(&guests[g], &w, last);
		if (ret)
			break;
		if (tty && (now_s() - last_status >= 1 || last)) {
			last_status = now_s();
			uint64_t probes = 0, rtt = 0;

			for (g = 0; g < nr_guests; g++) {
				probes += guests[g].nr_probes;
				if (guests[g].best_rtt_ns > rtt)
					rtt = guests[g].best_rtt_ns;
			}
			fprintf(stderr, "\rhgclock record: %.0f s, %llu records, %llu lost, %llu bytes",
				last_status - start, (unsigned long long)sink.total,
				(unsigned long long)sink.lost, (unsigned long long)w.bytes);
			if (nr_guests)
				fprintf(stderr, ", %u guests (%u lost), %llu probes, tightest round "
					"trip %llu ns", nr_guests, nr_lost, (unsigned long long)probes,
					(unsigned long long)rtt);
			fputs("  ", stderr);
		}
		if (last)
			break;
		pfd[0].fd = fd;
		pfd[0].events = POLLIN;
		for (g = 0; g < nr_guests; g++) {
			pfd[1 + g].fd = guests[g].fd;	/* -1: ignored */
			pfd[1 + g].events = POLLIN;
			pfd[1 + g].revents = 0;
		}
		if (poll(pfd, 1 + nr_guests, 200) < 0 && errno != EINTR) {
			ret = -errno;
			hg_err("poll: %s", strerror(errno));
		}
		for (g = 0; g < nr_guests && !ret; g++)
			if (guests[g].fd >= 0 && (pfd[1 + g].revents & (POLLIN | POLLHUP | POLLERR))) {
				ret = guest_message(&guests[g], &w, gbuf, &hc, interval_s);
				if (ret > 0)
					ret = guest_ended(&guests[g], &w, &hc);
			}
		/* Guests being followed (guest_ended()), and their DISRUPTIONs. */
		for (g = 0; g < nr_guests && !ret; g++) {
			struct guest *gs = &guests[g];
			bool done;

			if (gs->following) {
				pthread_mutex_lock(&gs->lock);
				done = gs->follow_done;
				pthread_mutex_unlock(&gs->lock);
				if (done && gs->follow_fd >= 0) {
					ret = follow_finish(gs, &w, &hc);
					if (ret > 0)
						ret = guest_lost(gs, &w, &hc);
				} else if (done) {
					char when[64];

					snprintf(when, sizeof(when), "it did not come back within %u s",
						 follow_timeout_s);
					ret = follow_gone(gs, &w, &hc, when);
				}
			}
			if (!ret && gs->disr_pending &&
			    ((gs->disr_identity_in && gs->disr_probe_in) || now_s() >= gs->disr_deadline))
				ret = disr_commit(gs, &w);
		}
		/*
		 * A guest probed that has answered nothing for a long time (a
		 * hung or paused VM) is lost: its data would stop anyway.
		 */
		for (g = 0; g < nr_guests && !ret; g++) {
			struct guest *gs = &guests[g];
			double silent_s = 3 * interval_s > HG_GUEST_SILENT_S ? 3 * interval_s :
					  HG_GUEST_SILENT_S;
			double heard_at;

			if (gs->fd < 0 || !gs->can_probe || !interval_ms || gs->probe_dead)
				continue;
			pthread_mutex_lock(&gs->lock);
			heard_at = gs->last_heard;
			pthread_mutex_unlock(&gs->lock);
			if (now_s() - heard_at < silent_s)
				continue;
			set_why(gs, "no message and no probe reply for %.0f s", now_s() - heard_at);
			ret = guest_ended(gs, &w, &hc);
		}
		/* A new burst of probes for each guest whose interval has passed. */
		for (g = 0; g < nr_guests && !ret; g++) {
			struct guest *gs = &guests[g];

			if (gs->fd < 0 || gs->probe_fd >= 0 || !gs->can_probe || gs->probe_pending ||
			    !interval_ms || now_s() < gs->next_probe)
				continue;
			gs->burst_left = gs->burst - 1;
			ret = send_probe(gs, &hc);
			if (ret) {
				set_why(gs, "sending a probe: %s", strerror(-ret));
				ret = guest_ended(gs, &w, &hc);
			}
		}
	}
	if (child_running && !ret)
		fprintf(stderr, "hgclock record: not waiting for %s (pid %d) any longer\n",
			command[0], (int)child_pid);
	/* A guest still being looked for is lost; a DISRUPTION waiting is written. */
	for (g = 0; g < nr_guests; g++) {
		int err = 0;

		if (guests[g].following && !ret)
			err = follow_gone(&guests[g], &w, &hc, "the recording ended before it came back");
		else if (guests[g].following)
			follow_stop(&guests[g]);
		if (!err && !ret)
			err = disr_commit(&guests[g], &w);
		if (err && !ret)
			ret = err;
	}
	for (g = 0; g < nr_guests; g++)
		close_probe_channel(&guests[g]);
	/*
	 * Ask every guest to finish: each sends what its rings still hold,
	 * then BYE.  What arrives is written; together they get 5 s.
	 */
	for (g = 0; g < nr_guests; g++) {
		int err;

		if (guests[g].fd < 0)
			continue;
		guests[g].closing = true;
		err = hgp_send(guests[g].fd, HGP_BYE, NULL, 0);
		if (err) {
			set_why(&guests[g], "sending BYE at the end: %s", strerror(-err));
			if (!ret)
				ret = guest_lost(&guests[g], &w, &hc);
		}
	}
	for (double until = now_s() + 5; !ret && now_s() < until;) {
		unsigned int open = 0;

		for (g = 0; g < nr_guests; g++) {
			pfd[g].fd = guests[g].fd;
			pfd[g].events = POLLIN;
			pfd[g].revents = 0;
			open += guests[g].fd >= 0;
		}
		if (!open)
			break;
		if (poll(pfd, nr_guests, 200) < 0 && errno != EINTR)
			break;
		for (g = 0; g < nr_guests && !ret; g++)
			if (guests[g].fd >= 0 && (pfd[g].revents & (POLLIN | POLLHUP | POLLERR))) {
				ret = guest_message(&guests[g], &w, gbuf, &hc, interval_s);
				if (ret > 0)
					ret = guest_lost(&guests[g], &w, &hc);
			}
	}
	for (g = 0; g < nr_guests; g++) {
		if (guests[g].fd < 0)
			continue;
		if (ret) {	/* the recording failed (said): no file to note it in */
			close(guests[g].fd);
			guests[g].fd = -1;
			continue;
		}
		set_why(&guests[g], "no BYE within 5 s of the end: its last records may be missing");
		ret = guest_lost(&guests[g], &w, &hc);
	}
	for (g = 0; g < nr_guests && !ret; g++)
		ret = flush_probes(&guests[g], &w);
	for (g = 0; g < nr_guests; g++)
		fprintf(stderr, "hgclock record: guest %s: %llu record batches, %llu probes"
			" (tightest round trip %llu ns, %llu dropped, %llu timed out)%s\n",
			guests[g].spec, (unsigned long long)guests[g].records,
			(unsigned long long)guests[g].nr_probes,
			(unsigned long long)guests[g].best_rtt_ns,
			(unsigned long long)guests[g].probes_dropped,
			(unsigned long long)guests[g].probe_timeouts, guests[g].lost ? ", lost" : "");
	if (!ret && nr_guests)
		ret = write_segments(&w, hg_output_write_path(&o));
	if (tty)
		fputc('\n', stderr);
	if (period_set) {
		saved.flags = HGCLOCK_CFG_SET_PERIOD;
		hgclock_ring_config(fd, &saved);
	}
	/*
	 * END only after a clean run: a failed one must not look complete,
	 * and leaves FILE as it was.
	 */
	if (ret) {
		hgcor_abort(&w);
	} else {
		ret = hgcor_close(&w);
		if (ret)
			hg_err("%s: writing the END section: %s", out, strerror(-ret));
	}
	if (ret)
		hg_output_abort(&o);
	else if (hg_output_commit(&o))
		ret = -EIO;
	if (!ret)
		fprintf(stderr, "hgclock record: %s: %llu records (%llu lost in the kernel), %llu bytes\n",
			out, (unsigned long long)sink.total, (unsigned long long)sink.lost,
			(unsigned long long)w.bytes);
	if (!ret && nr_lost)
		fprintf(stderr, "hgclock record: %u of %u guests lost (the file's notes say when "
			"and why)%s\n", nr_lost, nr_guests, require_all ? "; exit 1 (--require-all)" : "");
	/*
	 * The status: record's own failure first; then --require-all's; then,
	 * with a command, the command's (a shell's 128 + N when a signal N
	 * killed it; 1 if record stopped waiting for it).
	 */
	mr.file_complete = !ret;
	if (ret)
		ret = HGCLOCK_EXIT_FAILURE;
	else if (require_all && nr_lost)
		ret = HGCLOCK_EXIT_FAILURE;
	else if (command)
		ret = child_running || !child_started ? HGCLOCK_EXIT_FAILURE :
		      command_status(child_status);
	else
		ret = HGCLOCK_EXIT_OK;
	/*
	 * --merge: a complete file and a command that exited 0 only; merge's
	 * status is then record's.
	 */
	if (mr.out && !ret)
		ret = merge_at_end(&mr, out, guests, nr_guests);
	else if (mr.out && !child_running && child_started && !(require_all && nr_lost) &&
		 mr.file_complete)
		fprintf(stderr, "hgclock record: not merging into %s: %s exited with status %d\n",
			mr.out, command[0], ret);
	else if (mr.out)
		fprintf(stderr, "hgclock record: not merging into %s: the recording did not end "
			"cleanly\n", mr.out);
	/* record failed with the command still running: it is told to stop too. */
	if (child_running && ret == HGCLOCK_EXIT_FAILURE && !nr_signals && !child_told) {
		fprintf(stderr, "hgclock record: sending SIGTERM to %s (pid %d)\n", command[0],
			(int)child_pid);
		kill(child_pid, SIGTERM);
	}
out_map:
	for (g = 0; g < nr_guests; g++) {
		follow_stop(&guests[g]);
		close_probe_channel(&guests[g]);
		if (guests[g].fd >= 0)
			close(guests[g].fd);
		pthread_mutex_destroy(&guests[g].lock);
		free(guests[g].rec_hold.buf);
	}
	free(guests);
	free(pfd);
	free(gbuf);
	free(b.buf);
	free(sink.hold.buf);
	hgclock_map_close(&map);
	close(fd);
	return ret;
}

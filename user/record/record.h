/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hgclock record's parts (user/record/), internal to the recorder; the
 * command itself, its options and main loop, is user/cmd/cmd_record.c.
 *
 * Layers: each file calls only the files below it (an arrow: calls),
 * never back up; tools/layer-check.py checks it from the objects.
 *
 *   cmd/cmd_record.c   options, the main loop over the host ring and guests
 *     -> disrupt.c     a broken session followed, DISRUPTION written
 *          -> session.c   one agent's session: HELLO, INFO, messages, lost
 *               -> guests.c   --guest / --all-guests: the guests, their VMs
 *               -> probe.c    the probe channel, its thread, PROBES, disr_jump()
 *     -> merge_end.c   --merge: the traces found, cmd_merge() at the end
 *          -> signals.c   SIGINT/SIGTERM/SIGHUP, COMMAND's life
 *   leaves:  writer.c (every section; host records, tracked vCPUs,
 *            SEGMENTS), vmfind.c over vmfind_args.c (which process runs a
 *            VM, from /proc, libvirt and QEMU's command line; unit-tested
 *            alone), and the inline helpers below (now_s(), set_why()...)
 *
 * State: struct guest is one guest's (its session's fd, its probe thread
 * and follower thread share @lock); the recording's own counters
 * (rec_start, nr_lost, next_file_id...) are defined in the file that
 * changes them and read by cmd_record.c.
 */
#ifndef HGCLOCK_RECORD_H
#define HGCLOCK_RECORD_H

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

/*
 * Guests of one recording: the readers' limit (sync.h), so that every
 * guest recorded can be mapped.  Allocated as given, not up front.
 */
#define HG_MAX_GUESTS	HGSYNC_MAX_GUESTS
/* A message from an agent that has begun must be complete within this. */
#define HG_GUEST_MSG_TIMEOUT_S	10
/* With probes on: an agent that answers none for this long is lost. */
#define HG_GUEST_SILENT_S	60

static inline double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Host records are held back and written as one section when this many
 * bytes are pending, or when the oldest pending batch is this old, or at
 * the end: with vCPU stops coalesced (Documentation/tracking.rst) an idle
 * host has a few records per drain, and a section of its own for each
 * made the sections' overhead (header, zstd frame) most of the file.
 */
#define HG_HOST_HOLD_BYTES	(64u << 10)
#define HG_HOST_HOLD_S		1.0

/*
 * Records held back for one section (host records; each guest's records,
 * whose agent sends a message per drain): written when HG_HOST_HOLD_BYTES
 * would be exceeded, when the oldest is HG_HOST_HOLD_S old, or when
 * forced.  @buf NULL: nothing is held, every batch is a section.
 */
struct rec_hold {
	uint8_t *buf;		/* HG_HOST_HOLD_BYTES: records not written yet */
	size_t len;
	double since_s;		/* now_s() of the oldest held bytes */
};

#define HG_PROBE_BURST	4	/* default: probes back to back each interval */
#define HG_PROBE_BURST_MAX 1024
#define HG_PROBE_BUF	512	/* probes per PROBES section */

struct guest {
	char spec[128];		/* the connection part of --guest */
	int fd;			/* -1 once the session is over */
	uint32_t id;		/* index: the guest id in the file */
	/*
	 * No agent (--guest vm=PID, or ,no-agent): only the VM is recorded
	 * (its GUEST_VM; exit pairing on, for `hgclock pairmark` in it), no
	 * connection, no probes (sync.rst, "Guests without the module").
	 */
	bool no_agent;
	uint64_t records;
	/*
	 * Its record messages held for one section under its id
	 * (guest_records_flush(): due with its probes, at once before its id
	 * changes or its session ends).  Main loop only.
	 */
	struct rec_hold rec_hold;
	struct hgcor_guest_vm vm;
	/* Probing: one request in flight at a time. */
	bool probe_pending;
	bool closing;			/* BYE sent: no new probes */
	bool can_probe;			/* the agent speaks 1.1 or later */
	uint64_t probe_seq;
	struct hgclock_now probe_send;	/* host clocks right before sending */
	unsigned int burst;		/* probes back to back each interval */
	unsigned int burst_left;
	double next_probe;
	uint64_t nr_probes;
	uint64_t best_rtt_ns;		/* tightest round trip so far */
	struct hgcor_probe pbuf[HG_PROBE_BUF];
	size_t np;
	double probes_written_s;	/* now_s() of the main loop's last flush_probes() */
	uint64_t probes_dropped;	/* buffer full: the main loop fell behind */
	uint64_t probe_timeouts;	/* replies later than the receive timeout */
	/*
	 * Losing the guest: @lost once its NOTE is written (guest_lost());
	 * @why says what went wrong before that.  @last_heard (now_s(),
	 * under @lock): its last message or probe reply; @probe_dead: the
	 * probe thread ended on an error, so silence means nothing.
	 */
	bool lost;
	char why[200];
	double last_heard;
	volatile bool probe_dead;
	/*
	 * The probe channel: a connection of its own, probed by a thread in
	 * a tight send/receive loop, so that neither ring data on the main
	 * connection nor this process's file writes sit inside a round trip.
	 * @lock guards pbuf, np, nr_probes, best_rtt_ns and probes_dropped
	 * between that thread and the main loop.  -1: probes go in-band.
	 */
	int probe_fd;
	pthread_t probe_thread;
	bool probe_thread_on;
	volatile bool probe_stop;
	pthread_mutex_t lock;
	const struct host_clock *hc;
	double interval_s;
	/*
	 * Following the guest through a migration, a restore or a broken
	 * connection (sync.rst, "Migration and restore").  When its session
	 * breaks, guest_ended() starts the follower thread instead of losing
	 * it: until --follow-timeout, the thread looks for a VM with its
	 * vsock CID or its VM's name (@vm_name; a local migration's
	 * destination has another CID) whose agent answers HELLO, and hands
	 * the connection over in the follow_* fields, under @lock, with
	 * @follow_done.  The main loop then starts a new session under a new
	 * guest id (follow_finish()): @id changes, this slot stays.  @disr
	 * is the DISRUPTION between the two, written when the new session's
	 * identity and first probe are in (the clock jump), or after
	 * HG_DISR_WAIT_S.  The follower reads only @spec, @vm, @vm_name and
	 * @port_suffix, which nothing changes while it runs.
	 */
	char vm_name[VMFIND_NAME_MAX + 1];
	char port_suffix[16];		/* ":PORT" of a vsock spec, or "" */
	struct hgcor_identity identity;	/* of the first session, for comparison */
	bool has_identity;
	bool following;
	double follow_since, follow_deadline;
	char follow_cause[200];		/* why the session broke */
	pthread_t follower;
	bool follower_on;
	volatile bool follow_stop;
	bool follow_done;		/* under @lock, with the four below */
	int follow_fd;
	int32_t follow_pid;
	uint32_t follow_cid;
	uint8_t *follow_hello;		/* the HELLO reply's payload (malloc) */
	uint32_t follow_hello_len, follow_hello_minor;
	struct hgcor_disruption disr;
	bool disr_pending, disr_identity_in, disr_probe_in;
	double disr_deadline;
	bool have_last_probe, want_first_probe;
	struct hgcor_probe last_probe;	/* the latest written: the jump's "before" */
};

/* Seconds a DISRUPTION waits for the new session's identity and first probe. */
#define HG_DISR_WAIT_S	5

/* The host's clocks, now (zero-syscall where the conversion is exact). */
struct host_clock {
	int fd;
	const struct hgclock_map *map;
};

static inline int host_now(const struct host_clock *hc, struct hgclock_now *now)
{
	int used_ioctl;

	return hgclock_now(hc->fd, hc->map, now, &used_ioctl);
}

/* Guest @g was heard from now (a message or a probe reply): see @last_heard. */
static inline void heard(struct guest *g)
{
	pthread_mutex_lock(&g->lock);
	g->last_heard = now_s();
	pthread_mutex_unlock(&g->lock);
}

/* What went wrong with guest @g, for guest_lost(): one line, printable. */
static inline void __attribute__((format(printf, 2, 3))) set_why(struct guest *g, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(g->why, sizeof(g->why), fmt, ap);
	va_end(ap);
	/* An agent's ERROR text is the agent's: no control characters. */
	for (char *p = g->why; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' ';
}

/* Sections of host records are at most this long (a ring may be 64 MiB). */
#define HG_SECTION_MAX	(4u << 20)

struct host_sink {
	struct hgcor_writer *w;
	uint64_t total, lost;
	struct rec_hold hold;
};

/*
 * --merge OUT (Documentation/tools.rst, "Merging at the end"): once the
 * file is complete and COMMAND exited 0, the traces COMMAND wrote are
 * merged into OUT by cmd_merge() itself, given the arguments 'hgclock
 * merge' would get: its checks (no output over an input, inputs that
 * belong together) and exit statuses are the same.  Which traces: the
 * host's (--merge-host, default trace.dat) and the guests' (each
 * --merge-guest [ID=]FILE as merge's --guest; by default trace-cmd
 * record -A's names next to the host's, STEM-NAME.EXT, matched to the
 * recorded guests below), every one written since COMMAND started.
 */
#define HG_MERGE_MAX_CANDS	4096	/* guest traces looked at in one directory */

struct merge_req {
	const char *out;		/* the timeline; NULL: no merge */
	const char *host;		/* the host's trace */
	bool host_given;
	const char *guest[HG_MAX_GUESTS];	/* --merge-guest [ID=]FILE, as given */
	int nr_guest;
	struct timespec t0;		/* CLOCK_REALTIME_COARSE before COMMAND started */
	bool file_complete;		/* the correlation file got END and its name */
};

/* writer.c: sections, host records, SEGMENTS */
extern const char *out_name;
int put_section2(struct hgcor_writer *w, uint32_t type, uint32_t flags,
		 const void *p1, size_t l1, const void *p2, size_t l2);
int put_section(struct hgcor_writer *w, uint32_t type, uint32_t flags,
		const void *payload, size_t len);
int write_segments(struct hgcor_writer *w, const char *path);
int write_tracked(struct hgcor_writer *w, int fd, const struct host_clock *hc);
int write_host_batch(const struct hg_batch *b, void *ctx);
int host_sink_flush(struct host_sink *sink, bool force);
/*
 * The hold of @h: its records as one section of @type, after @prefix
 * (@prefix_len bytes, 0 for none), when @force or due; and a batch added,
 * written at once when no hold or larger than one (after what was held).
 */
int rec_hold_flush(struct rec_hold *h, struct hgcor_writer *w, uint32_t type,
		   const void *prefix, size_t prefix_len, bool force);
int rec_hold_add(struct rec_hold *h, struct hgcor_writer *w, uint32_t type,
		 const void *prefix, size_t prefix_len, const void *recs, size_t len);
/* probe.c: a guest's held records, under its current id (now, or when due). */
int guest_records_flush(struct guest *g, struct hgcor_writer *w, bool force);

/* guests.c: --guest and --all-guests */
int32_t vm_by_cid(struct guest *g, char *why, size_t size);
int add_guest(struct guest **guests, unsigned int *nr_guests, const char *arg);
int add_all_guests(struct guest **guests, unsigned int *nr_guests);

/* probe.c: the probe channel */
int flush_probes(struct guest *g, struct hgcor_writer *w);
int flush_probes_due(struct guest *g, struct hgcor_writer *w, bool force);
int open_probe_channel(struct guest *g, uint8_t *buf);
void close_probe_channel(struct guest *g);
int send_probe(struct guest *g, const struct host_clock *hc);
int probe_reply(struct guest *g, struct hgcor_writer *w, const struct host_clock *hc,
		const struct hgclock_now *recv, const uint8_t *buf, uint32_t len,
		double interval_s);

/* session.c: one agent's session */
extern double rec_start;
extern unsigned int nr_lost;
extern bool require_all;
int agent_hello(int fd, uint8_t *buf, uint32_t *len, uint32_t *minor, int timeout_s,
		char *why, size_t why_size);
int session_start(struct guest *g, struct hgcor_writer *w, uint8_t *buf,
		  uint32_t hello_len, uint32_t minor);
int guest_open(struct guest *g, struct hgcor_writer *w, uint8_t *buf);
int guest_lost(struct guest *g, struct hgcor_writer *w, const struct host_clock *hc);
int guest_message(struct guest *g, struct hgcor_writer *w, uint8_t *buf,
		  const struct host_clock *hc, double interval_s);

/* disrupt.c: following a guest, DISRUPTION */
extern unsigned int follow_timeout_s;
extern uint32_t next_file_id;
int disr_commit(struct guest *g, struct hgcor_writer *w);
int guest_ended(struct guest *g, struct hgcor_writer *w, const struct host_clock *hc);
void follow_stop(struct guest *g);
int follow_gone(struct guest *g, struct hgcor_writer *w, const struct host_clock *hc,
		const char *when);
int follow_finish(struct guest *g, struct hgcor_writer *w, const struct host_clock *hc);

/* signals.c: ending, COMMAND */
extern volatile sig_atomic_t stop, nr_signals;
extern volatile pid_t child_pid;
extern const int stop_sigs[3];
extern struct sigaction saved_sigs[3], saved_pipe;
void setup_signals(void);
pid_t run_command(char **cmd);
int command_status(int status);

/* merge_end.c: --merge */
int merge_check_args(const struct merge_req *mr, const char *corr, bool command,
		     unsigned int nr_guests);
int merge_at_end(struct merge_req *mr, const char *corr, const struct guest *guests,
		 unsigned int nr_guests);

#endif /* HGCLOCK_RECORD_H */

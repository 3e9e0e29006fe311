/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The hgclock tool's subcommands: one file each, each parsing its own
 * options and returning an exit status (enum hgclock_exit).
 */
#ifndef HGCLOCK_CMD_H
#define HGCLOCK_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hgclock_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

/*
 * A binary's command line: hgclock has every command, hgclock-guest the
 * guest-side ones.  Both dispatch through hg_dispatch(), so that help,
 * usage and error texts and exit statuses are the same code.
 */
struct hgclock_cli {
	const char *prog;		/* the binary's name: usage, --version, hg_err() */
	const char *version;		/* HGCLOCK_VERSION */
	const struct hgclock_cmd *cmds;
	size_t nr_cmds;
	const char *about;		/* usage's paragraph after the commands, or NULL */
	const char *unknown_hint;	/* said after "unknown command 'X'", or NULL */
};

/*
 * The commands hgclock-guest shares with hgclock, one entry each, so that
 * both list them with the same summary (tools/deb-check.sh compares).
 */
#define HGCLOCK_CMD_INFO \
	{ "info", cmd_info, "show the module's clock setup and ABI" }
#define HGCLOCK_CMD_NOW \
	{ "now", cmd_now, "read the kernel's trace clocks (ftrace local/perf, TSC, POSIX)" }
#define HGCLOCK_CMD_AGENT \
	{ "agent", cmd_agent, "serve this guest's clock data to 'record --guest' (vsock/TCP)" }
#define HGCLOCK_CMD_MARK \
	{ "mark", cmd_mark, \
	  "guest: read the clocks, then exit to the host (CPUID) where it is traced" }
#define HGCLOCK_CMD_PAIRMARK \
	{ "pairmark", cmd_pairmark, \
	  "guest without the module: markers around exits the host records" }

int cmd_info(int argc, char **argv);
int cmd_now(int argc, char **argv);
int cmd_snapshots(int argc, char **argv);
int cmd_vcpus(int argc, char **argv);
int cmd_records(int argc, char **argv);
int cmd_record(int argc, char **argv);
int cmd_recover(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_agent(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_mark(int argc, char **argv);
int cmd_pairmark(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_plot(int argc, char **argv);

/* recprint.c: one record as text or a JSON object; @prefix opens it */
struct hgclock_rec_header;
void hg_print_record(const struct hgclock_rec_header *h, bool json, const char *prefix);

/* util.c */
extern const char *hgclock_prog;
/*
 * Runs the command argv[1] names ("help CMD" is "CMD --help", as in git)
 * or prints usage or the version; sets hgclock_prog to @cli->prog first.
 * The command's exit status, or HGCLOCK_EXIT_USAGE for an unknown command
 * or none.  The caller still checks stdout (hg_close_stdout()).
 */
int hg_dispatch(const struct hgclock_cli *cli, int argc, char **argv);
/* Prints "hgclock: <msg>" to stderr. */
void hg_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Parses a decimal unsigned integer <= @max; false on any junk. */
bool parse_u64(const char *s, uint64_t max, uint64_t *out);
/* Maps the rings as their consumer, or says why not; 0 or -errno. */
struct hgclock_map;
int hg_map_consumer(int fd, struct hgclock_map *map);
/*
 * Consumes every CPU's ring through @fn (a hgclock_rec_fn), saying which
 * ring failed; an exit status.
 */
int hg_drain_all(struct hgclock_map *map,
		 int (*fn)(const struct hgclock_rec_header *rec, void *ctx), void *ctx);
/*
 * Ring records gathered for one message or file section: at most @max
 * bytes in @buf (allocated by the caller, @max bytes).  @nr and @lost
 * count the records and the losses LOST records report, for the batch.
 */
struct hg_batch {
	uint8_t *buf;
	size_t len, max;
	uint64_t nr, lost;
};
/*
 * Drains every CPU's ring in batches: a full batch stops the ring walk
 * (the record stays in the ring), goes to @flush, and the walk resumes.
 * 0, or -errno from the ring or from @flush.
 */
int hg_drain_batched(struct hgclock_map *map, struct hg_batch *b,
		     int (*flush)(const struct hg_batch *b, void *ctx), void *ctx);
/* Opens the device or explains why not; returns fd or -(exit status). */
int hg_open_device(void);
/*
 * Maps a whole file read-only (an empty file gives ""); an exit status:
 * HGCLOCK_EXIT_FAILURE, said, when it cannot be opened or is not a
 * regular file (a directory, a FIFO, a device: never waited on).
 */
int hg_map_file(const char *path, const void **buf, size_t *len);
void hg_unmap_file(const void *buf, size_t len);
/* Checks that an input can be opened and is a regular file, as above. */
int hg_check_input(const char *path);
/*
 * Maps a correlation file and loads its mapping (computing it when the
 * file has none) or says why not; an exit status.  On success the caller
 * frees @s with hgsync_free() and unmaps @buf/@len.
 */
struct hgsync;
int hg_load_sync(const char *path, int flags, struct hgsync *s, const void **buf, size_t *len);

#endif /* HGCLOCK_CMD_H */

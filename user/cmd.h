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

int cmd_info(int argc, char **argv);
int cmd_now(int argc, char **argv);
int cmd_snapshots(int argc, char **argv);
int cmd_vcpus(int argc, char **argv);
int cmd_records(int argc, char **argv);
int cmd_record(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_agent(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_mark(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_plot(int argc, char **argv);

/* recprint.c: one record as text or a JSON object; @prefix opens it */
struct hgclock_rec_header;
void hg_print_record(const struct hgclock_rec_header *h, bool json, const char *prefix);

/* util.c */
extern const char *hgclock_prog;
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
/* Maps a whole file read-only (an empty file gives ""); an exit status. */
int hg_map_file(const char *path, const void **buf, size_t *len);
void hg_unmap_file(const void *buf, size_t len);
/*
 * Maps a correlation file and loads its mapping (computing it when the
 * file has none) or says why not; an exit status.  On success the caller
 * frees @s with hgsync_free() and unmaps @buf/@len.
 */
struct hgsync;
int hg_load_sync(const char *path, int flags, struct hgsync *s, const void **buf, size_t *len);

#endif /* HGCLOCK_CMD_H */

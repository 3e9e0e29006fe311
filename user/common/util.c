// SPDX-License-Identifier: GPL-2.0
/*
 * Helpers shared by the subcommands.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "libhgclock.h"
#include "sync.h"

const char *hgclock_prog = "hgclock";

void hg_err(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", hgclock_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void usage(const struct hgclock_cli *cli, FILE *out)
{
	size_t i;

	fprintf(out, "usage: %s <command> [options]\n\ncommands:\n", cli->prog);
	for (i = 0; i < cli->nr_cmds; i++)
		fprintf(out, "  %-10s %s\n", cli->cmds[i].name, cli->cmds[i].summary);
	fprintf(out, "\n%s'%s <command> --help' or '%s help <command>' describes a command.\n"
		"exit status: 0 ok, 1 failure, 2 usage, 3 no /dev/hgclock (module not loaded),\n"
		"             4 permission denied, 5 ABI mismatch, 6 bad input file\n",
		cli->about ? cli->about : "", cli->prog, cli->prog);
}

static const struct hgclock_cmd *find_command(const struct hgclock_cli *cli, const char *name)
{
	for (size_t i = 0; i < cli->nr_cmds; i++)
		if (!strcmp(name, cli->cmds[i].name))
			return &cli->cmds[i];
	return NULL;
}

static int unknown_command(const struct hgclock_cli *cli, const char *name)
{
	if (cli->unknown_hint)
		hg_err("unknown command '%s' (%s)", name, cli->unknown_hint);
	else
		hg_err("unknown command '%s'", name);
	usage(cli, stderr);
	return HGCLOCK_EXIT_USAGE;
}

int hg_dispatch(const struct hgclock_cli *cli, int argc, char **argv)
{
	const struct hgclock_cmd *cmd;

	hgclock_prog = cli->prog;
	if (argc < 2) {
		usage(cli, stderr);
		return HGCLOCK_EXIT_USAGE;
	}
	/* "help CMD" is "CMD --help", as in git. */
	if (!strcmp(argv[1], "help") && argc > 2) {
		char *help_argv[] = { argv[2], "--help", NULL };

		if (argc > 3) {
			hg_err("help takes one command");
			return HGCLOCK_EXIT_USAGE;
		}
		cmd = find_command(cli, argv[2]);
		if (!cmd)
			return unknown_command(cli, argv[2]);
		return cmd->fn(2, help_argv);
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(cli, stdout);
		return HGCLOCK_EXIT_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("%s %s (ABI %d.%d)\n", cli->prog, cli->version,
		       HGCLOCK_ABI_MAJOR, HGCLOCK_ABI_MINOR);
		return HGCLOCK_EXIT_OK;
	}
	cmd = find_command(cli, argv[1]);
	if (cmd)
		return cmd->fn(argc - 1, argv + 1);
	return unknown_command(cli, argv[1]);
}

bool parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return false;
	*out = v;
	return true;
}

int hg_map_consumer(int fd, struct hgclock_map *map)
{
	int ret = hgclock_map_open(fd, HGCLOCK_MAP_CONSUMER, map);

	if (ret == -EBUSY)	/* a module before ABI 1.2: one consumer at a time */
		hg_err("another process is reading the ring (one consumer at a time)");
	else if (ret)
		hg_err("cannot map the ring: %s", strerror(-ret));
	return ret;
}

int hg_drain_all(struct hgclock_map *map, hgclock_rec_fn fn, void *ctx)
{
	unsigned int cpu;

	for (cpu = 0; cpu < map->meta->nr_cpus; cpu++) {
		long n = hgclock_ring_consume(map, cpu, fn, ctx);

		if (n < 0) {
			hg_err("ring of CPU %u: %s", cpu, strerror((int)-n));
			return HGCLOCK_EXIT_FAILURE;
		}
	}
	return HGCLOCK_EXIT_OK;
}

#define HG_BATCH_FULL 0x7fffffff	/* hg_batch_add's stop; no count reaches it */

static int hg_batch_add(const struct hgclock_rec_header *h, void *arg)
{
	struct hg_batch *b = arg;

	if (b->len + h->size > b->max)
		return HG_BATCH_FULL;
	memcpy(b->buf + b->len, h, h->size);
	b->len += h->size;
	b->nr++;
	if (h->type == HGCLOCK_REC_LOST)
		b->lost += ((const struct hgclock_rec_lost *)h)->nr_lost;
	return 0;
}

int hg_drain_batched(struct hgclock_map *map, struct hg_batch *b,
		     int (*flush)(const struct hg_batch *b, void *ctx), void *ctx)
{
	unsigned int cpu;

	for (cpu = 0; cpu < map->meta->nr_cpus; cpu++) {
		long n;

		do {
			b->len = 0;
			b->nr = 0;
			b->lost = 0;
			n = hgclock_ring_consume(map, cpu, hg_batch_add, b);
			if (n < 0) {
				hg_err("reading the ring of CPU %u: %s", cpu, strerror((int)-n));
				return (int)n;
			}
			if (b->len) {
				int ret = flush(b, ctx);

				if (ret)
					return ret;
			}
		} while (n == HG_BATCH_FULL);
	}
	return 0;
}

int hg_open_device(void)
{
	int fd = hgclock_open(NULL);

	if (fd < 0) {
		hg_err("%s", hgclock_open_hint(fd));
		return -(int)hgclock_open_exit(fd);
	}
	return fd;
}

/*
 * Opens an input file for reading, refusing what is not a regular file
 * before it can block (a FIFO opens at once with O_NONBLOCK, whose
 * reads then never wait); an fd, or -(exit status) after saying why.
 */
static int open_input(const char *path, struct stat *st)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0 || fstat(fd, st)) {
		hg_err("%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -HGCLOCK_EXIT_FAILURE;
	}
	if (!S_ISREG(st->st_mode)) {
		if (S_ISDIR(st->st_mode))
			hg_err("%s: %s", path, strerror(EISDIR));
		else
			hg_err("%s: not a regular file (%s): give a file", path,
			       S_ISFIFO(st->st_mode) ? "a FIFO" : S_ISSOCK(st->st_mode) ? "a socket" :
			       S_ISCHR(st->st_mode) ? "a character device" :
			       S_ISBLK(st->st_mode) ? "a block device" : "not a file");
		close(fd);
		return -HGCLOCK_EXIT_FAILURE;
	}
	return fd;
}

int hg_check_input(const char *path)
{
	struct stat st;
	int fd = open_input(path, &st);

	if (fd < 0)
		return -fd;
	close(fd);
	return HGCLOCK_EXIT_OK;
}

int hg_map_file(const char *path, const void **buf, size_t *len)
{
	struct stat st;
	void *p = NULL;
	int fd = open_input(path, &st);

	if (fd < 0)
		return -fd;
	if (st.st_size > 0) {
		p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED) {
			hg_err("%s: %s", path, strerror(errno));
			close(fd);
			return HGCLOCK_EXIT_FAILURE;
		}
	}
	close(fd);
	*buf = p ? p : "";
	*len = st.st_size;
	return HGCLOCK_EXIT_OK;
}

void hg_unmap_file(const void *buf, size_t len)
{
	if (len)
		munmap((void *)buf, len);
}

int hg_load_sync(const char *path, int flags, struct hgsync *s, const void **buf, size_t *len)
{
	size_t pos = 0;
	int ret = hg_map_file(path, buf, len);

	if (ret)
		return ret;
	ret = hgsync_load(s, *buf, *len, flags, &pos);
	if (ret) {
		hg_err("%s: %s (at byte %zu)", path,
		       ret == -ENOMEM ? strerror(ENOMEM) : hgcor_strerror(ret), pos);
		hg_unmap_file(*buf, *len);
		return ret == -ENOMEM ? HGCLOCK_EXIT_FAILURE : HGCLOCK_EXIT_BAD_INPUT;
	}
	/* Files without a SEGMENTS section: the mapping is computed here. */
	if (!s->has_file_segments && hgsync_build(s)) {
		hg_err("out of memory");
		hgsync_free(s);
		hg_unmap_file(*buf, *len);
		return HGCLOCK_EXIT_FAILURE;
	}
	return HGCLOCK_EXIT_OK;
}

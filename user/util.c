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

	if (ret == -EBUSY)
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

int hg_map_file(const char *path, const void **buf, size_t *len)
{
	struct stat st;
	void *p = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st)) {
		hg_err("%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return HGCLOCK_EXIT_FAILURE;
	}
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

// SPDX-License-Identifier: LGPL-2.1
/*
 * libhgclock: mapping /dev/hgclock and reading its per-CPU rings.
 *
 * The consumer side of the protocol in Documentation/ring.rst: load the
 * head with acquire, read the records before it, store the tail with
 * release.  The walk itself is pure and validates every record against
 * the ring's geometry, since a reader must never trust what it maps.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "libhgclock.h"

/* What every meta area's header must say, whichever device mapped it. */
static bool meta_header_ok(const struct hgclock_meta *probe)
{
	return probe->magic == HGCLOCK_META_MAGIC && probe->abi_major == HGCLOCK_ABI_MAJOR &&
	       probe->header_size >= sizeof(struct hgclock_meta) &&
	       probe->cpu_slot_size >= sizeof(struct hgclock_meta_cpu);
}

int hgclock_map_open(int fd, int flags, struct hgclock_map *map)
{
	const struct hgclock_meta *meta;
	struct hgclock_meta probe;
	size_t size;
	void *p;

	memset(map, 0, sizeof(*map));
	{
		struct hgclock_info info;
		int ret = hgclock_get_info(fd, &info);

		if (ret)
			return ret;
		if (!(info.features & HGCLOCK_FEAT_RING) || !info.map_size)
			return -EOPNOTSUPP;
		size = info.map_size;
	}
	p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, HGCLOCK_MMAP_RING_OFFSET);
	if (p == MAP_FAILED)
		return -errno;
	meta = p;
	memcpy(&probe, meta, sizeof(probe));
	if (!meta_header_ok(&probe) ||
	    (size_t)probe.meta_size + (size_t)probe.nr_cpus * probe.ring_size != size) {
		munmap(p, size);
		return -EPROTO;
	}
	map->meta = meta;
	map->map_size = size;

	if (flags & (HGCLOCK_MAP_CONSUMER | HGCLOCK_MAP_TAILS_RO)) {
		int writable = !!(flags & HGCLOCK_MAP_CONSUMER);

		p = mmap(NULL, probe.consumer_size,
			 writable ? PROT_READ | PROT_WRITE : PROT_READ,
			 MAP_SHARED, fd, HGCLOCK_MMAP_CONSUMER_OFFSET);
		if (p == MAP_FAILED) {
			int err = -errno;

			munmap((void *)map->meta, map->map_size);
			memset(map, 0, sizeof(*map));
			return err;
		}
		map->tail = p;
		map->consumer_size = probe.consumer_size;
		map->writable = writable;
	}
	return 0;
}

int hgclock_map_clock(int fd, struct hgclock_map *map)
{
	long page = sysconf(_SC_PAGESIZE);
	struct hgclock_meta probe;
	size_t size;
	void *p;

	memset(map, 0, sizeof(*map));
	if (page <= 0 || (size_t)page < sizeof(probe))
		return -EINVAL;
	/* One page first: the area's length is in it. */
	p = mmap(NULL, (size_t)page, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	memcpy(&probe, p, sizeof(probe));
	munmap(p, (size_t)page);
	/* What the module wrote is checked before anything is sized by it. */
	size = probe.meta_size;
	if (!meta_header_ok(&probe) || !probe.nr_cpus || probe.ring_size || probe.consumer_size ||
	    size < (size_t)page || size % (size_t)page ||
	    probe.header_size + (uint64_t)probe.nr_cpus * probe.cpu_slot_size > size)
		return -EPROTO;
	p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	map->meta = p;
	map->map_size = size;
	return 0;
}

void hgclock_map_close(struct hgclock_map *map)
{
	if (map->tail)
		munmap(map->tail, map->consumer_size);
	if (map->meta)
		munmap((void *)map->meta, map->map_size);
	memset(map, 0, sizeof(*map));
}

const struct hgclock_meta_cpu *hgclock_map_slot(const struct hgclock_map *map,
						unsigned int cpu)
{
	const struct hgclock_meta *meta = map->meta;

	return (const void *)((const char *)meta + meta->header_size +
			      (size_t)cpu * meta->cpu_slot_size);
}

const void *hgclock_map_data(const struct hgclock_map *map, unsigned int cpu)
{
	const struct hgclock_meta *meta = map->meta;

	return (const char *)meta + meta->meta_size + (size_t)cpu * meta->ring_size;
}

long hgclock_ring_walk(const void *data, uint64_t ring_size, uint64_t *tail,
		       uint64_t head, hgclock_rec_fn fn, void *ctx)
{
	const unsigned char *base = data;
	uint64_t pos = *tail;
	long nr = 0;

	if (head - pos > ring_size)
		return -ERANGE;
	while (pos != head) {
		uint64_t off = pos & (ring_size - 1);
		struct hgclock_rec_header hdr;
		uint64_t left = head - pos;

		if (left < 8)
			return -EBADMSG;
		/* Only type and size are defined in a PAD: copy 4 bytes. */
		memcpy(&hdr, base + off, 4);
		if (hdr.type == HGCLOCK_REC_PAD) {
			if (ring_size - off > left)
				return -EBADMSG;
			pos += ring_size - off;
			*tail = pos;
			continue;
		}
		if (hdr.size < sizeof(hdr) || hdr.size % 8 ||
		    off + hdr.size > ring_size || hdr.size > left)
			return -EBADMSG;
		if (fn) {
			int ret = fn((const void *)(base + off), ctx);

			if (ret)
				return ret;
		}
		pos += hdr.size;
		*tail = pos;
		nr++;
	}
	return nr;
}

long hgclock_ring_consume(struct hgclock_map *map, unsigned int cpu,
			  hgclock_rec_fn fn, void *ctx)
{
	const struct hgclock_meta_cpu *slot;
	uint64_t head, tail;
	long ret;

	if (!map->writable || cpu >= map->meta->nr_cpus)
		return -EINVAL;
	slot = hgclock_map_slot(map, cpu);
	/* Pairs with the kernel's release store of the head. */
	head = __atomic_load_n(&slot->head, __ATOMIC_ACQUIRE);
	tail = map->tail[cpu];
	ret = hgclock_ring_walk(hgclock_map_data(map, cpu), map->meta->ring_size,
				&tail, head, fn, ctx);
	/*
	 * Pairs with the kernel's acquire load of the tail: our reads of the
	 * records are done before it may overwrite them.
	 */
	__atomic_store_n(&map->tail[cpu], tail, __ATOMIC_RELEASE);
	return ret;
}

void hgclock_ring_skip_all(struct hgclock_map *map)
{
	unsigned int cpu;

	if (!map->writable)
		return;
	for (cpu = 0; cpu < map->meta->nr_cpus; cpu++) {
		const struct hgclock_meta_cpu *slot = hgclock_map_slot(map, cpu);

		__atomic_store_n(&map->tail[cpu],
				 __atomic_load_n(&slot->head, __ATOMIC_ACQUIRE),
				 __ATOMIC_RELEASE);
	}
}

const char *hgclock_rec_name(unsigned int type)
{
	switch (type) {
	case HGCLOCK_REC_PAD:
		return "pad";
	case HGCLOCK_REC_LOST:
		return "lost";
	case HGCLOCK_REC_CYC2NS:
		return "cyc2ns";
	case HGCLOCK_REC_TEST:
		return "test";
	case HGCLOCK_REC_VCPU_SEEN:
		return "vcpu_seen";
	case HGCLOCK_REC_VCPU_RUN:
		return "vcpu_run";
	case HGCLOCK_REC_VCPU_STOP:
		return "vcpu_stop";
	case HGCLOCK_REC_VCPU_MIGRATE:
		return "vcpu_migrate";
	case HGCLOCK_REC_VCPU_EXIT:
		return "vcpu_exit";
	case HGCLOCK_REC_TSC_OFFSET:
		return "tsc_offset";
	case HGCLOCK_REC_EXIT_PAIR:
		return "exit_pair";
	case HGCLOCK_REC_EXIT_HOST:
		return "exit_host";
	case HGCLOCK_REC_PVCLOCK:
		return "pvclock";
	case HGCLOCK_REC_UNTRACKED:
		return "untracked";
	case HGCLOCK_REC_EXIT_SUPPRESSED:
		return "exit_suppressed";
	default:
		return "unknown";
	}
}

size_t hgclock_rec_min_size(unsigned int type)
{
	switch (type) {
	case HGCLOCK_REC_LOST:
		return sizeof(struct hgclock_rec_lost);
	case HGCLOCK_REC_CYC2NS:
		return sizeof(struct hgclock_rec_cyc2ns);
	case HGCLOCK_REC_TEST:
		return sizeof(struct hgclock_rec_test);
	case HGCLOCK_REC_EXIT_PAIR:
		return sizeof(struct hgclock_rec_exit_pair);
	case HGCLOCK_REC_VCPU_SEEN:
		return sizeof(struct hgclock_rec_vcpu_seen);
	case HGCLOCK_REC_VCPU_RUN:
	case HGCLOCK_REC_VCPU_STOP:
	case HGCLOCK_REC_VCPU_EXIT:
	case HGCLOCK_REC_UNTRACKED:
		return sizeof(struct hgclock_rec_vcpu);
	case HGCLOCK_REC_EXIT_SUPPRESSED:
		return sizeof(struct hgclock_rec_exit_suppressed);
	case HGCLOCK_REC_VCPU_MIGRATE:
		return sizeof(struct hgclock_rec_vcpu_migrate);
	case HGCLOCK_REC_TSC_OFFSET:
		return sizeof(struct hgclock_rec_tsc_offset);
	case HGCLOCK_REC_EXIT_HOST:
		return sizeof(struct hgclock_rec_exit_host);
	case HGCLOCK_REC_PVCLOCK:
		return sizeof(struct hgclock_rec_pvclock);
	default:
		return sizeof(struct hgclock_rec_header);
	}
}

const char *hgclock_snap_reason_name(unsigned int reason)
{
	switch (reason) {
	case HGCLOCK_SNAP_PERIODIC:
		return "periodic";
	case HGCLOCK_SNAP_IOCTL:
		return "ioctl";
	case HGCLOCK_SNAP_HOTPLUG:
		return "hotplug";
	case HGCLOCK_SNAP_CHANGED:
		return "changed";
	case HGCLOCK_SNAP_START:
		return "start";
	case HGCLOCK_SNAP_RESUME:
		return "resume";
	default:
		return "unknown";
	}
}

int hgclock_ring_config(int fd, struct hgclock_ring_config *cfg)
{
	cfg->size = sizeof(*cfg);
	memset(cfg->reserved, 0, sizeof(cfg->reserved));
	return ioctl(fd, HGCLOCK_IOC_RING_CONFIG, cfg) ? -errno : 0;
}

int hgclock_snapshot(int fd, int cpu)
{
	struct hgclock_snapshot req;

	memset(&req, 0, sizeof(req));
	req.size = sizeof(req);
	if (cpu < 0)
		req.flags = HGCLOCK_SNAPSHOT_ALL_CPUS;
	else
		req.cpu = (__u32)cpu;
	if (ioctl(fd, HGCLOCK_IOC_SNAPSHOT, &req))
		return -errno;
	return (int)req.nr_written;
}

int hgclock_exit_pair(int fd, int cpu)
{
	struct hgclock_exit_pair req;

	memset(&req, 0, sizeof(req));
	req.size = sizeof(req);
	if (cpu < 0) {
		req.flags = HGCLOCK_READ_ALL_CPUS;
	} else {
		req.flags = HGCLOCK_READ_CPU;
		req.cpu = (__u32)cpu;
	}
	if (ioctl(fd, HGCLOCK_IOC_EXIT_PAIR, &req))
		return -errno;
	return (int)req.nr_written;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock info [--json]: what the module reports about this kernel's clocks.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "json.h"
#include "libhgclock.h"

static void info_usage(FILE *out)
{
	fprintf(out, "usage: hgclock info [--json]\n"
		"Shows the ABI, CPUs, TSC frequency and stability, clocksource and role.\n");
}

static void ring_json(struct json_writer *w, const struct hgclock_map *map)
{
	unsigned int cpu;

	json_begin_array(w, "cpus");
	for (cpu = 0; cpu < map->meta->nr_cpus; cpu++) {
		const struct hgclock_meta_cpu *slot = hgclock_map_slot(map, cpu);
		uint64_t head = __atomic_load_n(&slot->head, __ATOMIC_ACQUIRE);
		uint64_t tail = map->tail ? map->tail[cpu] : 0;

		json_begin_object(w, NULL);
		json_u64(w, "cpu", cpu);
		json_bool(w, "online", slot->online);
		json_u64(w, "head", head);
		json_u64(w, "tail", tail);
		json_u64(w, "unread", head - tail);
		json_u64(w, "lost", slot->lost);
		json_u64(w, "conv_flags", slot->conv.flags);
		json_end_object(w);
	}
	json_end_array(w);
}

static void ring_text(const struct hgclock_map *map)
{
	unsigned int cpu;

	printf("ring:           %llu bytes per CPU, %u CPU slots\n",
	       (unsigned long long)map->meta->ring_size, map->meta->nr_cpus);
	printf("  cpu online       head       tail     unread       lost  conversion\n");
	for (cpu = 0; cpu < map->meta->nr_cpus; cpu++) {
		const struct hgclock_meta_cpu *slot = hgclock_map_slot(map, cpu);
		uint64_t head = __atomic_load_n(&slot->head, __ATOMIC_ACQUIRE);
		uint64_t tail = map->tail ? map->tail[cpu] : 0;
		uint32_t f = slot->conv.flags;

		printf("  %3u %6s %10llu %10llu %10llu %10llu  %s%s\n", cpu,
		       slot->online ? "yes" : "no", (unsigned long long)head,
		       (unsigned long long)tail, (unsigned long long)(head - tail),
		       (unsigned long long)slot->lost,
		       f & HGCLOCK_CONV_EXACT ? "exact" :
		       f & HGCLOCK_CONV_DERIVED ? "derived" : "none",
		       f & HGCLOCK_CONV_PVCLOCK ? " (kvm-clock)" : "");
	}
}

static void info_json(const struct hgclock_info *info, const struct hgclock_map *map)
{
	struct json_writer w;
	char flags[256];

	json_init(&w, stdout, true);
	json_begin_object(&w, NULL);
	json_u64(&w, "abi_major", info->abi_major);
	json_u64(&w, "abi_minor", info->abi_minor);
	json_u64(&w, "features", info->features);
	json_u64(&w, "nr_cpu_ids", info->nr_cpu_ids);
	json_u64(&w, "nr_online_cpus", info->nr_online_cpus);
	json_u64(&w, "tsc_khz", info->tsc_khz);
	json_u64(&w, "clock_flags", info->clock_flags);
	json_string(&w, "clock_flag_names",
		    hgclock_clock_flags_str(info->clock_flags, flags, sizeof(flags)));
	json_string(&w, "role", hgclock_role_name(info->role));
	json_string(&w, "clocksource", info->clocksource);
	json_string(&w, "hypervisor", info->hypervisor);
	json_u64(&w, "ring_size", info->ring_size);
	json_u64(&w, "snapshot_period_ns", info->snapshot_period_ns);
	json_u64(&w, "max_tracked", info->max_tracked);
	json_u64(&w, "nr_untracked", info->nr_untracked);
	json_u64(&w, "nr_exits_suppressed", info->nr_exits_suppressed);
	json_u64(&w, "ring_bytes", info->ring_bytes);
	json_u64(&w, "ring_max_bytes", info->ring_max_bytes);
	if (map)
		ring_json(&w, map);
	json_end_object(&w);
	json_finish(&w);
}

static void info_text(const struct hgclock_info *info, const struct hgclock_map *map)
{
	char flags[256];

	printf("abi:            %u.%u\n", info->abi_major, info->abi_minor);
	printf("features:       0x%llx\n", (unsigned long long)info->features);
	printf("cpus:           %u online, %u possible\n",
	       info->nr_online_cpus, info->nr_cpu_ids);
	printf("tsc_khz:        %u\n", info->tsc_khz);
	printf("clock flags:    %s\n",
	       hgclock_clock_flags_str(info->clock_flags, flags, sizeof(flags)));
	printf("clocksource:    %s\n", info->clocksource[0] ? info->clocksource : "(unknown)");
	printf("hypervisor:     %s\n", info->hypervisor[0] ? info->hypervisor : "(none)");
	printf("role:           %s\n", hgclock_role_name(info->role));
	if (info->snapshot_period_ns)
		printf("snapshots:      every %llu ms\n",
		       (unsigned long long)(info->snapshot_period_ns / 1000000));
	else
		printf("snapshots:      periodic snapshots off\n");
	if (info->ring_max_bytes)
		printf("ring memory:    %llu KiB of at most %llu MiB\n",
		       (unsigned long long)info->ring_bytes >> 10,
		       (unsigned long long)info->ring_max_bytes >> 20);
	if (info->max_tracked)
		printf("tracking:       %u threads at most, %llu refused (table full),"
		       " %llu exit pairings over the rate\n", info->max_tracked,
		       (unsigned long long)info->nr_untracked,
		       (unsigned long long)info->nr_exits_suppressed);
	if (map)
		ring_text(map);
}

int cmd_info(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct hgclock_info info;
	struct hgclock_map map;
	bool json = false, have_map;
	int c, fd, ret;

	while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			info_usage(stdout);
			return HGCLOCK_EXIT_OK;
		default:
			info_usage(stderr);
			return HGCLOCK_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		info_usage(stderr);
		return HGCLOCK_EXIT_USAGE;
	}

	fd = hg_open_device();
	if (fd < 0)
		return -fd;
	ret = hgclock_get_info(fd, &info);
	if (ret == -EPROTO) {
		close(fd);
		hg_err("module ABI %u.%u, this tool speaks %u.x",
		       info.abi_major, info.abi_minor, HGCLOCK_ABI_MAJOR);
		return HGCLOCK_EXIT_ABI;
	}
	if (ret) {
		close(fd);
		hg_err("GET_INFO failed: %s", strerror(-ret));
		return HGCLOCK_EXIT_FAILURE;
	}
	/* Ring state: a read-only view, which never takes the consumer's place. */
	have_map = info.map_size && !hgclock_map_open(fd, HGCLOCK_MAP_TAILS_RO, &map);
	if (json)
		info_json(&info, have_map ? &map : NULL);
	else
		info_text(&info, have_map ? &map : NULL);
	if (have_map)
		hgclock_map_close(&map);
	close(fd);
	return HGCLOCK_EXIT_OK;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock now [--cpu N | --all-cpus] [--json]: the kernel's trace clocks,
 * read together on one CPU (or each online CPU) by HGCLOCK_IOC_READ_CLOCK.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "json.h"
#include "libhgclock.h"

static void now_usage(FILE *out)
{
	fprintf(out,
		"usage: hgclock now [--cpu N | --all-cpus] [--json]\n"
		"Reads, on one CPU with interrupts off: TSC, sched_clock (ftrace 'local'),\n"
		"local_clock (ftrace 'perf'), TSC again, CLOCK_MONOTONIC, _RAW, BOOTTIME.\n");
}

static void sample_json(struct json_writer *w, const struct hgclock_clock_sample *s)
{
	json_begin_object(w, NULL);
	json_u64(w, "cpu", s->cpu);
	json_u64(w, "tsc_before", s->tsc_before);
	json_u64(w, "sched_clock_ns", s->sched_clock_ns);
	json_u64(w, "local_clock_ns", s->local_clock_ns);
	json_u64(w, "tsc_after", s->tsc_after);
	json_u64(w, "mono_ns", s->mono_ns);
	json_u64(w, "mono_raw_ns", s->mono_raw_ns);
	json_u64(w, "boot_ns", s->boot_ns);
	json_end_object(w);
}

static void sample_text(const struct hgclock_clock_sample *s)
{
	printf("%3u %20llu %20llu %20llu %6llu %20llu %20llu %20llu\n", s->cpu,
	       (unsigned long long)s->tsc_before,
	       (unsigned long long)s->sched_clock_ns,
	       (unsigned long long)s->local_clock_ns,
	       (unsigned long long)(s->tsc_after - s->tsc_before),
	       (unsigned long long)s->mono_ns,
	       (unsigned long long)s->mono_raw_ns,
	       (unsigned long long)s->boot_ns);
}

int cmd_now(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cpu", required_argument, NULL, 'c' },
		{ "all-cpus", no_argument, NULL, 'a' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct hgclock_clock_sample *samples = NULL, one;
	struct hgclock_now user_now;
	int has_user = 0, used_ioctl = 0;
	unsigned int nr = 0, i;
	bool json = false, all = false;
	int cpu = -1, c, fd, ret;
	uint64_t v;

	while ((c = getopt_long(argc, argv, "c:ajh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			if (!parse_u64(optarg, 65535, &v)) {
				hg_err("--cpu wants a CPU number, not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			cpu = (int)v;
			break;
		case 'a':
			all = true;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			now_usage(stdout);
			return HGCLOCK_EXIT_OK;
		default:
			now_usage(stderr);
			return HGCLOCK_EXIT_USAGE;
		}
	}
	if (optind != argc || (all && cpu >= 0)) {
		if (all && cpu >= 0)
			hg_err("--cpu and --all-cpus exclude each other");
		now_usage(stderr);
		return HGCLOCK_EXIT_USAGE;
	}

	fd = hg_open_device();
	if (fd < 0)
		return -fd;

	if (all) {
		/* Ask once with no room to learn the count, then read. */
		ret = hgclock_read_all_cpus(fd, NULL, 0, &nr);
		while (ret == -ENOSPC) {
			free(samples);
			samples = calloc(nr, sizeof(*samples));
			if (!samples) {
				ret = -ENOMEM;
				break;
			}
			ret = hgclock_read_all_cpus(fd, samples, nr, &nr);
		}
	} else {
		ret = hgclock_read_clock(fd, cpu, &one);
		samples = &one;
		nr = 1;
	}
	if (ret) {
		close(fd);
		if (ret == -EINVAL && cpu >= 0)
			hg_err("CPU %d is not online", cpu);
		else
			hg_err("READ_CLOCK failed: %s", strerror(-ret));
		if (samples != &one)
			free(samples);
		return HGCLOCK_EXIT_FAILURE;
	}

	/*
	 * The zero-syscall clock on the caller's CPU, from the meta area;
	 * without an exact conversion one READ_CLOCK answers instead.
	 */
	if (!all && cpu < 0) {
		struct hgclock_map map;
		int mret;

		mret = hgclock_map_open(fd, 0, &map);
		has_user = !hgclock_now(fd, mret ? NULL : &map, &user_now, &used_ioctl);
		if (!mret)
			hgclock_map_close(&map);
	}
	close(fd);

	if (json) {
		struct json_writer w;

		json_init(&w, stdout, true);
		json_begin_object(&w, NULL);
		json_begin_array(&w, "samples");
		for (i = 0; i < nr; i++)
			sample_json(&w, &samples[i]);
		json_end_array(&w);
		if (has_user) {
			json_begin_object(&w, "user_clock");
			json_string(&w, "source", used_ioctl ? "ioctl" : "zero-syscall");
			json_string(&w, "method", hgclock_uclock_method_name(user_now.method));
			if (used_ioctl)
				json_string(&w, "user_method",
					    hgclock_uclock_method_name(hgclock_uclock_method()));
			json_u64(&w, "user_cpu", user_now.cpu);
			json_u64(&w, "tsc", user_now.tsc);
			json_u64(&w, "sched_clock_ns", user_now.sched_clock_ns);
			if (user_now.has_local)
				json_u64(&w, "local_clock_ns", user_now.local_clock_ns);
			json_end_object(&w);
		}
		json_end_object(&w);
		json_finish(&w);
	} else {
		printf("cpu           tsc_before       sched_clock_ns       local_clock_ns"
		       "  tsc_d              mono_ns          mono_raw_ns              boot_ns\n");
		for (i = 0; i < nr; i++)
			sample_text(&samples[i]);
		if (has_user) {
			int method = hgclock_uclock_method();

			if (!used_ioctl)
				printf("user clock (zero-syscall, %s):",
				       hgclock_uclock_method_name(user_now.method));
			else if (method == HGCLOCK_UCLOCK_NONE)
				printf("user clock (ioctl fallback: no rdtscp, rdpid or rseq):");
			else
				printf("user clock (ioctl fallback: no exact conversion):");
			printf(" cpu %u tsc %llu sched_clock_ns %llu",
			       user_now.cpu, (unsigned long long)user_now.tsc,
			       (unsigned long long)user_now.sched_clock_ns);
			if (user_now.has_local)
				printf(" local_clock_ns %llu",
				       (unsigned long long)user_now.local_clock_ns);
			printf("\n");
		}
	}
	if (samples != &one)
		free(samples);
	return HGCLOCK_EXIT_OK;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock vcpus [--json]: the threads the module tracks on this host:
 * KVM vCPU threads it discovered (and threads tracked by hand), with the
 * VM, vcpu_id, host CPU, TSC offset and scaling ratio.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cmd.h"
#include "json.h"
#include "libhgclock.h"

static void vcpus_usage(FILE *out)
{
	fprintf(out, "usage: hgclock vcpus [--json]\n"
		"Lists tracked vCPU threads: VM (KVM debugfs name), vcpu_id, thread,\n"
		"host CPU now, TSC offset and scaling ratio.\n");
}

int cmd_vcpus(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct hgclock_vcpu_info *infos = NULL;
	struct hgclock_info info;
	unsigned int nr, i;
	bool json = false;
	int c, fd, ret;

	while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			vcpus_usage(stdout);
			return HGCLOCK_EXIT_OK;
		default:
			vcpus_usage(stderr);
			return HGCLOCK_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		vcpus_usage(stderr);
		return HGCLOCK_EXIT_USAGE;
	}
	fd = hg_open_device();
	if (fd < 0)
		return -fd;
	ret = hgclock_get_info(fd, &info);
	if (!ret)
		ret = hgclock_list_vcpus(fd, &infos, &nr);
	close(fd);
	if (ret) {
		hg_err("LIST_VCPUS failed: %s", strerror(-ret));
		return HGCLOCK_EXIT_FAILURE;
	}

	if (json) {
		struct json_writer w;

		json_init(&w, stdout, true);
		json_begin_object(&w, NULL);
		json_bool(&w, "kvm_attached", !!(info.features & HGCLOCK_FEAT_KVM_TRACK));
		json_begin_array(&w, "vcpus");
		for (i = 0; i < nr; i++) {
			json_begin_object(&w, NULL);
			json_string(&w, "vm", infos[i].vm_name);
			json_i64(&w, "vm_pid", infos[i].vm_pid);
			json_i64(&w, "vcpu_id", infos[i].vcpu_id);
			json_i64(&w, "tid", infos[i].tid);
			json_i64(&w, "host_cpu", infos[i].host_cpu);
			json_u64(&w, "tsc_offset", infos[i].tsc_offset);
			json_u64(&w, "tsc_scaling_ratio", infos[i].tsc_scaling_ratio);
			json_u64(&w, "tsc_frac_bits", infos[i].tsc_frac_bits);
			json_u64(&w, "nr_migrations", infos[i].nr_migrations);
			json_bool(&w, "kvm", !!(infos[i].flags & HGCLOCK_VCPU_KVM));
			json_end_object(&w);
		}
		json_end_array(&w);
		json_end_object(&w);
		json_finish(&w);
	} else {
		if (!(info.features & HGCLOCK_FEAT_KVM_TRACK))
			printf("# kvm is not loaded: KVM vCPUs are discovered once it is\n");
		printf("%-14s %7s %7s %7s %8s %20s %20s %4s %6s\n", "vm", "vm_pid", "vcpu",
		       "tid", "host_cpu", "tsc_offset", "tsc_ratio", "frac", "migr");
		for (i = 0; i < nr; i++) {
			char vcpu[16];

			if (infos[i].vcpu_id >= 0)
				snprintf(vcpu, sizeof(vcpu), "%d", infos[i].vcpu_id);
			else
				snprintf(vcpu, sizeof(vcpu), "manual");
			printf("%-14s %7d %7s %7d %8d %20lld %20llu %4u %6llu\n",
			       infos[i].vm_name[0] ? infos[i].vm_name : "-",
			       infos[i].vm_pid, vcpu, infos[i].tid, infos[i].host_cpu,
			       (long long)infos[i].tsc_offset,
			       (unsigned long long)infos[i].tsc_scaling_ratio,
			       infos[i].tsc_frac_bits,
			       (unsigned long long)infos[i].nr_migrations);
		}
	}
	free(infos);
	return HGCLOCK_EXIT_OK;
}

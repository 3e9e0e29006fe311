// SPDX-License-Identifier: GPL-2.0
/*
 * ks_times FILE...: the events of trace.dat files as KernelShark loads
 * them, through its own library (libkshark, as kernelshark -i FILE -a
 * FILE... opens them): one line per event, "STREAM CPU TIME_NS EVENT PID",
 * stream 0 the first file; then the host/guest map that KernelShark's
 * KVM combo plot is drawn from (kshark_tracecmd_get_hostguest_mapping()),
 * a line "MAP NAME HOST_STREAM GUEST_STREAM VCPU HOST_PID" per vCPU.
 * test_kernelshark.sh compares these with hgclock merge's: the same time
 * base means the same numbers.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <libkshark.h>
#include <libkshark-tepdata.h>

int main(int argc, char **argv)
{
	struct kshark_context *ctx = NULL;
	int ret = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: ks_times FILE...\n");
		return 2;
	}
	if (!kshark_instance(&ctx)) {
		fprintf(stderr, "ks_times: no KernelShark context\n");
		return 1;
	}
	for (int i = 1; i < argc && !ret; i++) {
		struct kshark_entry **rows = NULL;
		int sd = kshark_open(ctx, argv[i]);
		ssize_t n;

		if (sd < 0) {
			fprintf(stderr, "ks_times: KernelShark cannot open %s\n", argv[i]);
			ret = 1;
			break;
		}
		n = kshark_load_entries(ctx, sd, &rows);
		if (n < 0) {
			fprintf(stderr, "ks_times: KernelShark cannot load %s\n", argv[i]);
			ret = 1;
			break;
		}
		for (ssize_t k = 0; k < n; k++) {
			char *name = kshark_get_event_name(rows[k]);

			if (printf("%d %d %" PRId64 " %s %d\n", i - 1, rows[k]->cpu, rows[k]->ts,
				   name ? name : "?", rows[k]->pid) < 0)
				ret = 1;
			free(name);
			free(rows[k]);
		}
		free(rows);
	}
	if (!ret) {
		struct kshark_host_guest_map *map = NULL;
		int n = kshark_tracecmd_get_hostguest_mapping(&map);

		for (int i = 0; i < n; i++)
			for (int v = 0; v < map[i].vcpu_count; v++)
				printf("MAP %s %d %d %d %d\n", map[i].guest_name ? map[i].guest_name : "?",
				       map[i].host_id, map[i].guest_id, v, map[i].cpu_pid[v]);
		if (n > 0)
			kshark_tracecmd_free_hostguest_map(map, n);
	}
	kshark_close_all(ctx);
	kshark_free(ctx);
	if (fflush(stdout))
		ret = 1;
	return ret;
}

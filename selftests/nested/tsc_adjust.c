// SPDX-License-Identifier: GPL-2.0
/*
 * tsc_adjust CPU DELTA: moves CPU's TSC by DELTA counts (signed) through
 * IA32_TSC (MSR 0x10) and /dev/cpu/CPU/msr: rdtsc and the write back to
 * back on that CPU, so the TSC moves by DELTA plus the few counts between
 * them (a shell pipeline takes long enough under emulation to move it
 * backwards).  Inside a KVM guest this makes KVM move the vCPU's TSC
 * offset by the same amount.  Prints the value written.  A test aid for
 * the nested testbed, linked static for the guest's initramfs.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <x86intrin.h>

#define MSR_IA32_TSC 0x10

int main(int argc, char **argv)
{
	char path[64], *end;
	cpu_set_t set;
	long cpu;
	long long delta;
	uint64_t tsc;
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: tsc_adjust CPU DELTA\n");
		return 2;
	}
	cpu = strtol(argv[1], &end, 10);
	if (*end || cpu < 0 || cpu >= CPU_SETSIZE)
		return 2;
	delta = strtoll(argv[2], &end, 0);
	if (*end)
		return 2;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("sched_setaffinity");
		return 1;
	}
	snprintf(path, sizeof(path), "/dev/cpu/%ld/msr", cpu);
	fd = open(path, O_WRONLY);
	if (fd < 0) {
		fprintf(stderr, "%s: %s (modprobe msr?)\n", path, strerror(errno));
		return 1;
	}
	tsc = __rdtsc() + (uint64_t)delta;
	if (pwrite(fd, &tsc, sizeof(tsc), MSR_IA32_TSC) != sizeof(tsc)) {
		perror("write IA32_TSC");
		return 1;
	}
	close(fd);
	printf("%llu\n", (unsigned long long)tsc);
	return 0;
}

// SPDX-License-Identifier: MIT
/*
 * An application reading ftrace's perf and local clocks through
 * libhgclock (Documentation/library.rst): copy it and build it with
 *
 *	cc -o hgclock-clock hgclock-clock.c $(pkg-config --cflags --libs hgclock)
 *
 *	hgclock-clock [DEVICE]      (default /dev/hgclock)
 *
 * Opens the clock once, reads it twice around a piece of work, and prints
 * both readings and the elapsed time in perf's clock.  Exits 0, or 1 with
 * "hgclock-clock: open DEVICE: ERRNO_NAME (N): ADVICE" on standard error.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <hgclock/hgclock.h>

static void print_reading(const char *what, const struct hgclock_reading *r)
{
	printf("%s: cpu %u tsc %llu local %llu", what, r->cpu,
	       (unsigned long long)r->tsc, (unsigned long long)r->local_ns);
	if (r->flags & HGCLOCK_READING_PERF)
		printf(" perf %llu", (unsigned long long)r->perf_ns);
	printf(" mono %llu (%s)\n", (unsigned long long)r->mono_ns,
	       (r->flags & HGCLOCK_READING_EXACT) ? "exact, no syscall" :
	       "no exact conversion on this CPU: read by the kernel");
}

static const char *errno_name(int err)
{
	switch (err) {
	case ENOENT:
		return "ENOENT";
	case EACCES:
		return "EACCES";
	case EPERM:
		return "EPERM";
	case ENODEV:
		return "ENODEV";
	case ENXIO:
		return "ENXIO";
	case EPROTO:
		return "EPROTO";
	case ENOSPC:
		return "ENOSPC";
	case ENODATA:
		return "ENODATA";
	default:
		return "errno";
	}
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : HGCLOCK_CLOCK_DEVICE;
	struct hgclock_reading start, end;
	struct hgclock_clock *clk;
	volatile unsigned long spin;
	int err;

	if (argc > 2) {
		fprintf(stderr, "usage: hgclock-clock [DEVICE]\n");
		return 2;
	}
	if (hgclock_lib_version() >> 16 != HGCLOCK_LIB_VERSION_MAJOR) {
		fprintf(stderr, "hgclock-clock: libhgclock %#x, built for %#x\n",
			hgclock_lib_version(), HGCLOCK_LIB_VERSION);
		return 1;
	}
	clk = hgclock_clock_open(path, 0);
	if (!clk) {
		err = errno;
		fprintf(stderr, "hgclock-clock: open %s: %s (%d): %s\n", path,
			errno_name(err), err, hgclock_clock_strerror(err));
		return 1;
	}
	if (hgclock_clock_read(clk, &start))
		goto fail;
	for (spin = 0; spin < 1000000; spin++)
		;
	if (hgclock_clock_read(clk, &end))
		goto fail;
	print_reading("start", &start);
	print_reading("end  ", &end);
	if ((start.flags & end.flags & HGCLOCK_READING_PERF))
		printf("elapsed: %lld ns (perf clock)\n",
		       (long long)(end.perf_ns - start.perf_ns));
	hgclock_clock_close(clk);
	return 0;
fail:
	err = errno;
	fprintf(stderr, "hgclock-clock: read: %s (%d): %s\n", errno_name(err), err,
		hgclock_clock_strerror(err));
	hgclock_clock_close(clk);
	return 1;
}

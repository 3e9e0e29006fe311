// SPDX-License-Identifier: GPL-2.0
/*
 * gen_disrupt IN OUT GUEST: OUT is the correlation file IN with one
 * DISRUPTION section more, before its END: guest GUEST is "gone", lost
 * one count after the last host TSC of IN's host records (so no event of
 * IN changes its mapping).  Its VM and CID are the guest's GUEST_VM's.
 * For test_cli.sh: merge's disruption marks on the real recording of
 * selftests/data, in every output.  IN is not written to; OUT is made
 * new (an existing OUT is refused).
 *
 * Exit 0, or 1 with the reason on standard error.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/hgclock.h>

#include "corr.h"

static uint64_t last_host_tsc;

static int host_rec(const void *rec, size_t size, void *ctx)
{
	const struct hgclock_rec_header *h = rec;

	(void)ctx;
	if (size >= sizeof(*h) && h->tsc > last_host_tsc)
		last_host_tsc = h->tsc;
	return 0;
}

static int die(const char *what, int err)
{
	fprintf(stderr, "gen_disrupt: %s: %s\n", what, strerror(err));
	return 1;
}

int main(int argc, char **argv)
{
	struct hgcor_disruption d = { 0 };
	struct hgcor_reader r;
	struct hgcor_writer w;
	struct hgcor_view v;
	struct stat st;
	uint8_t *buf;
	unsigned long guest_arg;
	uint32_t guest;
	char *end;
	bool have_vm = false;
	int fd, ret;

	if (argc != 4) {
		fprintf(stderr, "usage: gen_disrupt IN OUT GUEST\n");
		return 1;
	}
	errno = 0;
	guest_arg = strtoul(argv[3], &end, 10);
	if (errno || end == argv[3] || *end || guest_arg >= HGCOR_NO_GUEST) {
		fprintf(stderr, "gen_disrupt: GUEST '%s': want 0..%u\n", argv[3],
			HGCOR_NO_GUEST - 1);
		return 1;
	}
	guest = (uint32_t)guest_arg;
	if (!access(argv[2], F_OK))
		return die(argv[2], EEXIST);
	fd = open(argv[1], O_RDONLY);
	if (fd < 0 || fstat(fd, &st))
		return die(argv[1], errno);
	buf = malloc((size_t)st.st_size);
	if (!buf || read(fd, buf, (size_t)st.st_size) != st.st_size)
		return die(argv[1], buf ? EIO : ENOMEM);
	close(fd);

	ret = hgcor_open(&r, buf, (size_t)st.st_size);
	if (ret)
		return die(argv[1], -ret);
	ret = hgcor_create(&w, argv[2]);
	if (ret)
		return die(argv[2], -ret);
	while ((ret = hgcor_next(&r, &v)) > 0) {
		if (v.type == HGCOR_SEC_END)
			continue;	/* hgcor_close() writes ours */
		if (v.type == HGCOR_SEC_HOST_RECORDS)
			hgcor_walk_records(v.payload, v.length, host_rec, NULL);
		if (v.type == HGCOR_SEC_GUEST_VM && v.length >= sizeof(struct hgcor_guest_vm)) {
			const struct hgcor_guest_vm *vm = (const void *)v.payload;

			if (vm->guest_id == guest) {
				d.old_vm_pid = vm->vm_pid;
				d.old_cid = vm->cid;
				have_vm = true;
			}
		}
		ret = hgcor_write_section(&w, v.type, v.flags & HGCOR_SEC_OPTIONAL, v.payload,
					  v.length);
		if (ret)
			return die(argv[2], -ret);
	}
	if (ret < 0)
		return die(argv[1], -ret);
	if (!have_vm || !last_host_tsc) {
		fprintf(stderr, "gen_disrupt: %s: no GUEST_VM of guest %u, or no host records\n",
			argv[1], guest);
		unlink(argv[2]);
		return 1;
	}
	d.guest_id = guest;
	d.next_guest_id = HGCOR_NO_GUEST;
	d.kind = HGCOR_DISRUPT_GONE;
	d.new_vm_pid = -1;
	d.host_tsc_lost = last_host_tsc + 1;
	ret = hgcor_write_section(&w, HGCOR_SEC_DISRUPTION, HGCOR_SEC_OPTIONAL, &d, sizeof(d));
	ret = ret ?: hgcor_close(&w);
	if (ret) {
		unlink(argv[2]);
		return die(argv[2], -ret);
	}
	hgcor_release(&r);
	free(buf);
	return 0;
}

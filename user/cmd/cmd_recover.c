// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock recover FILE -o OUT: makes a valid correlation file of one
 * that did not finish (no END: record was killed, the machine stopped,
 * the file was cut or damaged), up to its last complete section.
 *
 * Every section the reader accepts (header and payload CRCs, content,
 * values: corr.c) up to the first it does not is copied byte for byte;
 * then a NOTE saying what was dropped and why, and END.  What is lost is
 * said on standard error.  A file that is complete already is copied
 * unchanged.  OUT is written as a temporary file renamed into place
 * (output.h), and never over FILE.  Documentation/man/hgclock-recover.rst.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "corr.h"
#include "libhgclock.h"
#include "output.h"

static const char *sec_name(uint32_t type, char *buf, size_t len)
{
	static const char *const names[] = {
		[HGCOR_SEC_HOST_INFO] = "host_info", [HGCOR_SEC_HOST_RECORDS] = "host_records",
		[HGCOR_SEC_GUEST_INFO] = "guest_info", [HGCOR_SEC_GUEST_RECORDS] = "guest_records",
		[HGCOR_SEC_NOTE] = "note", [HGCOR_SEC_END] = "end",
		[HGCOR_SEC_PROBES] = "probes", [HGCOR_SEC_GUEST_VM] = "guest_vm",
		[HGCOR_SEC_SEGMENTS] = "segments",
#ifdef HGCOR_SEC_CPU_MAP
		[HGCOR_SEC_CPU_MAP] = "cpu_map",
#endif
	};

	if (type < sizeof(names) / sizeof(names[0]) && names[type])
		return names[type];
	snprintf(buf, len, "type %u", type);
	return buf;
}

/* The host's ftrace local clock over the records kept: what time the file covers. */
struct span {
	uint64_t first_ns, last_ns;
	uint64_t nr;
};

static int span_rec(const void *rec, size_t size, void *arg)
{
	const struct hgclock_rec_header *h = rec;
	struct span *sp = arg;

	(void)size;
	/* hgcor_walk_records() checked the size: a whole header is there. */
	if (!h->sched_clock_ns)
		return 0;
	if (!sp->nr || h->sched_clock_ns < sp->first_ns)
		sp->first_ns = h->sched_clock_ns;
	if (!sp->nr || h->sched_clock_ns > sp->last_ns)
		sp->last_ns = h->sched_clock_ns;
	sp->nr++;
	return 0;
}

/* What the walk found: the sections to keep and why the rest goes. */
struct walk {
	size_t keep;		/* bytes to keep: header and whole sections */
	uint64_t nr_kept;	/* sections kept */
	uint32_t last_type;	/* of the last kept section */
	uint64_t last_off;
	int err;		/* why reading stopped (an hgcor_err), 0: complete */
	size_t err_off;		/* where */
	struct span host;
};

/* Walks @buf; an hgcor_err of the file header, else 0 (@wk says the rest). */
static int walk(const uint8_t *buf, size_t len, struct walk *wk)
{
	struct hgcor_reader r;
	struct hgcor_view v;
	int ret;

	memset(wk, 0, sizeof(*wk));
	ret = hgcor_open(&r, buf, len);
	if (ret)
		return ret;
	wk->keep = r.pos;
	while ((ret = hgcor_next(&r, &v)) > 0) {
		if (v.type == HGCOR_SEC_END)
			continue;	/* then 0: complete */
		wk->nr_kept++;
		wk->keep = r.pos;
		wk->last_type = v.type;
		wk->last_off = v.offset;
		if (v.type == HGCOR_SEC_HOST_RECORDS)
			hgcor_walk_records(v.payload, v.length, span_rec, &wk->host);
	}
	wk->err = ret;
	wk->err_off = r.pos;
	return 0;
}

static void recover_usage(FILE *out)
{
	fprintf(out,
		"usage: hgclock recover FILE -o OUT\n"
		"Makes a valid correlation file OUT of FILE, a recording that did not\n"
		"finish (record killed, the machine stopped, the file cut or damaged):\n"
		"every section up to the first incomplete or damaged one, a note saying\n"
		"what was dropped, and END.  The loss is said on standard error.  A file\n"
		"that is complete is copied unchanged.  OUT is never FILE.\n"
		"-o, --output OUT  where to write (a temporary file renamed at the end)\n"
		"exit status: 0 written, 1 cannot read FILE or write OUT, 2 usage\n"
		"(OUT is FILE), 6 FILE is not a correlation file (no valid file header)\n");
}

/* Writes the kept bytes, a NOTE and END to @o: 0, or -errno. */
static int write_recovered(struct hg_output *o, const uint8_t *buf, const struct walk *wk,
			   const char *note)
{
	struct hgcor_writer w = { .f = o->f, .nr_sections = wk->nr_kept, .bytes = wk->keep };
	uint64_t n;
	int ret;

	errno = 0;
	if (fwrite(buf, 1, wk->keep, o->f) != wk->keep || fflush(o->f))
		return errno ? -errno : -EIO;
	ret = hgcor_write_section(&w, HGCOR_SEC_NOTE, 0, note, strlen(note));
	if (ret)
		return ret;
	/* END counts the sections before it, the note included. */
	n = w.nr_sections;
	return hgcor_write_section(&w, HGCOR_SEC_END, 0, &n, sizeof(n));
}

/* Reads back what was written: it must be complete (a check of this tool). */
static int verify(const char *path)
{
	struct hgcor_reader r;
	struct hgcor_view v;
	const void *buf;
	size_t len;
	int ret;

	if (hg_map_file(path, &buf, &len))
		return HGCOR_E_SHORT;
	ret = hgcor_open(&r, buf, len);
	if (!ret)
		while ((ret = hgcor_next(&r, &v)) > 0)
			;
	if (!ret && !r.seen_end)
		ret = HGCOR_E_NO_END;
	hg_unmap_file(buf, len);
	return ret;
}

int cmd_recover(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *in, *out = NULL, *ins[1], *outs[1];
	char note[600], tname[32], cover[160] = "", last[100] = "";
	struct hg_output o;
	struct walk wk;
	const void *buf;
	size_t len;
	int c, ret;

	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 'h':
			recover_usage(stdout);
			return HGCLOCK_EXIT_OK;
		default:
			recover_usage(stderr);
			return HGCLOCK_EXIT_USAGE;
		}
	}
	if (optind != argc - 1 || !out) {
		hg_err(!out ? "-o OUT is required" : "recover takes one FILE");
		recover_usage(stderr);
		return HGCLOCK_EXIT_USAGE;
	}
	in = argv[optind];
	ins[0] = in;
	outs[0] = out;
	ret = hg_check_outputs(ins, 1, outs, 1);
	if (ret)
		return ret;
	ret = hg_map_file(in, &buf, &len);
	if (ret)
		return ret;
	ret = walk(buf, len, &wk);
	if (ret) {
		hg_err("%s: nothing to recover: %s", in, hgcor_strerror(ret));
		hg_unmap_file(buf, len);
		return HGCLOCK_EXIT_BAD_INPUT;
	}
	ret = hg_output_open(&o, out);
	if (ret) {
		hg_unmap_file(buf, len);
		return ret;
	}
	if (!wk.err) {
		/* Complete: the same bytes, whatever follows its END. */
		errno = 0;
		if (fwrite(buf, 1, len, o.f) != len || fflush(o.f)) {
			hg_err("%s: %s", hg_output_name(out), strerror(errno ? errno : EIO));
			hg_output_abort(&o);
			hg_unmap_file(buf, len);
			return HGCLOCK_EXIT_FAILURE;
		}
		hg_unmap_file(buf, len);
		ret = hg_output_commit(&o);
		if (!ret)
			fprintf(stderr, "hgclock recover: %s is complete (%llu sections and END): "
				"copied unchanged to %s\n", in, (unsigned long long)wk.nr_kept,
				hg_output_name(out));
		return ret;
	}
	if (wk.host.nr)
		snprintf(cover, sizeof(cover), "; host records up to local clock %llu ns, "
			 "%.3f s after the first",
			 (unsigned long long)wk.host.last_ns,
			 (wk.host.last_ns - wk.host.first_ns) / 1e9);
	if (wk.nr_kept)
		snprintf(last, sizeof(last), ", the last %s at byte %llu",
			 sec_name(wk.last_type, tname, sizeof(tname)),
			 (unsigned long long)wk.last_off);
	snprintf(note, sizeof(note), "hgclock recover: the recording did not finish (%s, at byte "
		 "%zu); %zu of %zu bytes kept, %zu dropped; %llu sections kept%s%s",
		 hgcor_strerror(wk.err), wk.err_off, wk.keep, len, len - wk.keep,
		 (unsigned long long)wk.nr_kept, last, cover);
	ret = write_recovered(&o, buf, &wk, note);
	hg_unmap_file(buf, len);
	if (ret) {
		hg_err("%s: %s", hg_output_name(out), strerror(-ret));
		hg_output_abort(&o);
		return HGCLOCK_EXIT_FAILURE;
	}
	if (o.tmp) {
		int v;

		if (fflush(o.f)) {
			hg_err("%s: %s", hg_output_name(out), strerror(errno));
			hg_output_abort(&o);
			return HGCLOCK_EXIT_FAILURE;
		}
		v = verify(o.tmp);
		if (v) {
			hg_err("%s: the recovered file does not read back (%s): not written",
			       out, hgcor_strerror(v));
			hg_output_abort(&o);
			return HGCLOCK_EXIT_FAILURE;
		}
	}
	ret = hg_output_commit(&o);
	if (ret)
		return ret;
	fprintf(stderr, "%s\n", note);
	fprintf(stderr, "hgclock recover: wrote %s\n", hg_output_name(out));
	return HGCLOCK_EXIT_OK;
}

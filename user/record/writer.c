// SPDX-License-Identifier: GPL-2.0
/*
 * The recorder's writer: every section goes through put_section() (a
 * failed write said with the file's name); the host ring's batches as
 * HOST_RECORDS (write_host_batch()), the vCPU threads tracked before the
 * run (write_tracked()) and, at the end, the mapping as SEGMENTS
 * (write_segments()).  Below every other part of the recorder: it calls
 * none of them.
 */
#include "record.h"

/* The output's name for messages: what -o said. */
const char *out_name;

/* Every section goes through here: a failed write is said, with the file's name. */
int put_section2(struct hgcor_writer *w, uint32_t type, uint32_t flags,
		 const void *p1, size_t l1, const void *p2, size_t l2)
{
	int ret = hgcor_write_section2(w, type, flags, p1, l1, p2, l2);

	if (ret)
		hg_err("%s: writing a section (type %u, %zu bytes): %s", out_name, type, l1 + l2,
		       strerror(-ret));
	return ret;
}

int put_section(struct hgcor_writer *w, uint32_t type, uint32_t flags,
		const void *payload, size_t len)
{
	return put_section2(w, type, flags, payload, len, NULL, 0);
}

/*
 * The mapping, computed from what this run wrote (read back from the
 * file, so it is exactly what a later reader sees), as SEGMENTS.
 */
int write_segments(struct hgcor_writer *w, const char *path)
{
	const void *buf;
	struct hgsync s;
	size_t len, total = 0;
	struct hgcor_segment *all;
	int ret;

	if (fflush(w->f)) {
		hg_err("%s: %s", out_name, strerror(errno));
		return -EIO;
	}
	if (hg_map_file(path, &buf, &len))
		return -EIO;
	ret = hgsync_load(&s, buf, len, HGSYNC_ALLOW_OPEN | HGSYNC_IGNORE_SEGMENTS, NULL);
	if (!ret)
		ret = hgsync_build(&s);
	if (ret) {
		hg_err("%s: cannot compute the mapping: %s", path,
		       ret == -ENOMEM ? strerror(ENOMEM) : hgcor_strerror(ret));
		goto out;
	}
	for (unsigned int i = 0; i < s.nr_guests; i++)
		total += s.guests[i].nr_segs;
	all = calloc(total ? total : 1, sizeof(*all));
	if (!all) {
		ret = -ENOMEM;
		goto out;
	}
	total = 0;
	for (unsigned int i = 0; i < s.nr_guests; i++) {
		const struct hgsync_guest *g = &s.guests[i];
		unsigned int n[HGCOR_METHOD_EXIT + 1] = { 0 };
		uint64_t best[HGCOR_METHOD_EXIT + 1];

		memcpy(all + total, g->segs, g->nr_segs * sizeof(*all));
		total += g->nr_segs;
		for (int m = 0; m <= HGCOR_METHOD_EXIT; m++)
			best[m] = UINT64_MAX;
		for (size_t j = 0; j < g->nr_segs; j++) {
			uint32_t m = g->segs[j].method;

			if (m > HGCOR_METHOD_EXIT)
				continue;
			n[m]++;
			if (g->segs[j].clock == HGCOR_CLOCK_SCHED && g->segs[j].bound_ns < best[m])
				best[m] = g->segs[j].bound_ns;
		}
		if (g->agentless) {
			fprintf(stderr, "hgclock record: guest %u (no agent): %u kvm-exact "
				"segments\n", i, n[HGCOR_METHOD_KVM_EXACT]);
			continue;
		}
		if (!g->present)
			continue;
		fprintf(stderr, "hgclock record: guest %u: %u kvm-exact segments (%llu of %llu "
			"probes and pairings agree), %u exit-pairing segments, %u probe segments",
			i, n[HGCOR_METHOD_KVM_EXACT], (unsigned long long)g->kvm_agree,
			(unsigned long long)g->kvm_checked, n[HGCOR_METHOD_EXIT],
			n[HGCOR_METHOD_PROBE]);
		if (best[HGCOR_METHOD_EXIT] != UINT64_MAX)
			fprintf(stderr, ", exit bound %llu ns",
				(unsigned long long)best[HGCOR_METHOD_EXIT]);
		if (best[HGCOR_METHOD_PROBE] != UINT64_MAX)
			fprintf(stderr, ", probe bound %llu ns",
				(unsigned long long)best[HGCOR_METHOD_PROBE]);
		if (g->pv_known)
			fprintf(stderr, "; kvm-clock from %llu of %llu snapshots' parameters, "
				"clamp bound %llu ns", (unsigned long long)g->pv_agree,
				(unsigned long long)g->pv_checked,
				(unsigned long long)g->pv_clamp_ns);
		if (g->has_prev)
			fprintf(stderr, "; guest %u again, in VM %d", hgsync_guest_root(&s, i),
				(int)g->vm.vm_pid);
		fputc('\n', stderr);
	}
	ret = put_section(w, HGCOR_SEC_SEGMENTS, HGCOR_SEC_OPTIONAL, all,
			  total * sizeof(*all));
	free(all);
out:
	hgsync_free(&s);
	hg_unmap_file(buf, len);
	return ret;
}

/*
 * The vCPU threads tracked before this run, as VCPU_SEEN records stamped
 * now: the ring was skipped at the start, so their discovery records are
 * gone, but their TSC offsets are what the mapping starts from.  Changes
 * after the skip are in the ring (TSC_OFFSET), stamped when they
 * happened, so a reader sorting by TSC sees them in the right order.
 */
int write_tracked(struct hgcor_writer *w, int fd, const struct host_clock *hc)
{
	struct hgclock_vcpu_info *infos = NULL;
	struct hgclock_rec_vcpu_seen *recs;
	struct hgclock_now now;
	unsigned int nr = 0, n = 0;
	int ret;

	ret = hgclock_list_vcpus(fd, &infos, &nr);
	if (ret || !nr) {
		free(infos);
		return ret == -ENOTTY ? 0 : ret;
	}
	recs = calloc(nr, sizeof(*recs));
	ret = recs ? host_now(hc, &now) : -ENOMEM;
	for (unsigned int i = 0; i < nr && !ret; i++) {
		struct hgclock_rec_vcpu_seen *r = &recs[n];

		if (!(infos[i].flags & HGCLOCK_VCPU_KVM))
			continue;
		r->hdr.type = HGCLOCK_REC_VCPU_SEEN;
		r->hdr.size = sizeof(*r);
		r->hdr.cpu = infos[i].host_cpu >= 0 ? (uint32_t)infos[i].host_cpu : now.cpu;
		r->hdr.tsc = now.tsc;
		r->hdr.sched_clock_ns = now.sched_clock_ns;
		r->tid = infos[i].tid;
		r->vm_pid = infos[i].vm_pid;
		r->vcpu_id = infos[i].vcpu_id;
		r->flags = infos[i].flags;
		memcpy(r->vm_name, infos[i].vm_name, sizeof(r->vm_name));
		r->tsc_offset = infos[i].tsc_offset;
		r->tsc_scaling_ratio = infos[i].tsc_scaling_ratio;
		r->tsc_frac_bits = infos[i].tsc_frac_bits;
		r->host_cpu = infos[i].host_cpu;
		n++;
	}
	if (!ret && n)
		ret = put_section(w, HGCOR_SEC_HOST_RECORDS, 0, recs, n * sizeof(*recs));
	free(recs);
	free(infos);
	return ret;
}

/* A section of records of @type, after @prefix when there is one. */
static int put_records(struct hgcor_writer *w, uint32_t type, const void *prefix,
		       size_t prefix_len, const void *recs, size_t len)
{
	if (!prefix_len)
		return put_section(w, type, 0, recs, len);
	return put_section2(w, type, 0, prefix, prefix_len, recs, len);
}

int rec_hold_flush(struct rec_hold *h, struct hgcor_writer *w, uint32_t type,
		   const void *prefix, size_t prefix_len, bool force)
{
	int ret;

	if (!h->len)
		return 0;
	if (!force && h->len < HG_HOST_HOLD_BYTES && now_s() - h->since_s < HG_HOST_HOLD_S)
		return 0;
	ret = put_records(w, type, prefix, prefix_len, h->buf, h->len);
	h->len = 0;
	return ret;
}

/*
 * Held while it fits with the others; a batch larger than the hold is
 * written at once, after the held ones.  The records stay whole and in
 * the order they were given.
 */
int rec_hold_add(struct rec_hold *h, struct hgcor_writer *w, uint32_t type,
		 const void *prefix, size_t prefix_len, const void *recs, size_t len)
{
	int ret = 0;

	if (h->buf && h->len + len > HG_HOST_HOLD_BYTES)
		ret = rec_hold_flush(h, w, type, prefix, prefix_len, true);
	if (ret)
		return ret;
	if (h->buf && len <= HG_HOST_HOLD_BYTES) {
		if (!h->len)
			h->since_s = now_s();
		memcpy(h->buf + h->len, recs, len);
		h->len += len;
		return 0;
	}
	return put_records(w, type, prefix, prefix_len, recs, len);
}

/* The held host records, when @force or due (rec_hold_flush()). */
int host_sink_flush(struct host_sink *sink, bool force)
{
	return rec_hold_flush(&sink->hold, sink->w, HGCOR_SEC_HOST_RECORDS, NULL, 0, force);
}

/* A drained batch of host records (rec_hold_add()), counted. */
int write_host_batch(const struct hg_batch *b, void *ctx)
{
	struct host_sink *sink = ctx;
	int ret;

	ret = rec_hold_add(&sink->hold, sink->w, HGCOR_SEC_HOST_RECORDS, NULL, 0, b->buf, b->len);
	if (ret)
		return ret;
	sink->total += b->nr;
	sink->lost += b->lost;
	return 0;
}

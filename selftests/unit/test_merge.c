// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of hgclock merge (user/merge/merge*.c) on a real recording: a KVM
 * host's and guest's trace.dat (trace-cmd record -A) and the correlation
 * file hgclock record wrote meanwhile, captured by
 * selftests/data/capture.sh (selftests/data/capture.txt says how) and
 * unpacked by the Makefile into data/ next to this program.
 *
 * The strongest check needs no reference output: a guest event can only
 * happen while its vCPU is in guest mode, so in the merged timeline the
 * last KVM event of its vCPU thread before it must be a kvm_entry, on
 * the host CPU the merge names.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event-parse.h>
#include <trace-cmd.h>
#include <trace-seq.h>

#include "kselftest_harness.h"
#include "appev.h"
#include "libhgclock.h"
#include "merge.h"
#include "perf_in.h"
#include "gen.h"

static char data_dir[PATH_MAX];

static const char *data(const char *name)
{
	static char path[4][PATH_MAX + 64];
	static int k;
	char *p = path[k++ % 4];

	if (!data_dir[0]) {
		ssize_t n = readlink("/proc/self/exe", data_dir, sizeof(data_dir) - 1);

		if (n > 0) {
			data_dir[n] = '\0';
			*strrchr(data_dir, '/') = '\0';
		}
	}
	snprintf(p, PATH_MAX + 64, "%s/data/%s", data_dir, name);
	return p;
}

/* Events counted by libtracecmd itself, for "nothing lost". */
static int count_cb(struct tracecmd_input *h, struct tep_record *r, int cpu, void *ctx)
{
	(void)h;
	(void)r;
	(void)cpu;
	(*(uint64_t *)ctx)++;
	return 0;
}

static uint64_t count_events(const char *path)
{
	static char counted[4][PATH_MAX + 64];
	static uint64_t counts[4];
	struct tracecmd_input *h;
	uint64_t n = 0;
	int i;

	/* Each file is counted once (the tests ask many times). */
	for (i = 0; i < 4 && counted[i][0]; i++)
		if (!strcmp(counted[i], path))
			return counts[i];
	h = tracecmd_open(path, 0);
	if (!h)
		return UINT64_MAX;
	tracecmd_iterate_events(h, NULL, 0, count_cb, &n);
	tracecmd_close(h);
	if (i < 4) {
		snprintf(counted[i], sizeof(counted[i]), "%s", path);
		counts[i] = n;
	}
	return n;
}

/* What a merge saw, event by event. */
struct seen {
	uint64_t n, host_n, guest_n, back_steps, last_ts;
	uint64_t unmapped, no_cpu, max_bound, non_kvm;
	uint64_t in_guest_mode, outside, cpu_ok, cpu_bad, before_first;
	/* per host thread: was its last KVM event an entry, and where */
	struct { int tid, entry, cpu; } kvm[64];
	int nr_kvm;
};

static int seen_emit(void *ctx, const struct hgm_event *ev)
{
	struct seen *s = ctx;
	const char *name = ev->event ? ev->event->name : "";

	s->n++;
	if (ev->host_ts < s->last_ts)
		s->back_steps++;
	s->last_ts = ev->host_ts;
	if (ev->in->guest < 0) {
		int tid = tep_data_pid(ev->in->tep, ev->rec), i;

		s->host_n++;
		if (strcmp(name, "kvm_entry") && strcmp(name, "kvm_exit"))
			return 0;
		for (i = 0; i < s->nr_kvm && s->kvm[i].tid != tid; i++)
			;
		if (i == s->nr_kvm && s->nr_kvm < 64)
			s->kvm[s->nr_kvm++].tid = tid;
		if (i < 64) {
			s->kvm[i].entry = !strcmp(name, "kvm_entry");
			s->kvm[i].cpu = ev->cpu;
		}
		return 0;
	}
	s->guest_n++;
	if (ev->flags & HGM_EV_UNMAPPED) {
		s->unmapped++;
		return 0;
	}
	if (ev->flags & HGM_EV_NO_HOST_CPU)
		s->no_cpu++;
	if (ev->method != HGCOR_METHOD_KVM_EXACT)
		s->non_kvm++;
	if (ev->bound_ns > s->max_bound)
		s->max_bound = ev->bound_ns;
	for (int i = 0; i < s->nr_kvm; i++) {
		if (s->kvm[i].tid != ev->host_tid)
			continue;
		if (!s->kvm[i].entry) {
			s->outside++;
		} else {
			s->in_guest_mode++;
			if (s->kvm[i].cpu == ev->host_cpu)
				s->cpu_ok++;
			else
				s->cpu_bad++;
		}
		return 0;
	}
	s->before_first++;
	return 0;
}

FIXTURE(rec) {
	struct hgsync sync;
	void *corr;
	size_t corr_len;
	struct hgm m;
	char err[512];
};

FIXTURE_SETUP(rec)
{
	size_t pos;

	memset(&self->m, 0, sizeof(self->m));
	self->corr = gen_slurp(data("merge.hgc"), &self->corr_len);
	ASSERT_NE(NULL, self->corr) TH_LOG("no %s: run make unit (it unpacks selftests/data)",
					   data("merge.hgc"));
	ASSERT_EQ(0, hgsync_load(&self->sync, self->corr, self->corr_len, 0, &pos));
	if (!self->sync.has_file_segments)
		ASSERT_EQ(0, hgsync_build(&self->sync));
}

FIXTURE_TEARDOWN(rec)
{
	hgm_close(&self->m);
	hgsync_free(&self->sync);
	free(self->corr);
}

static int open_both(struct hgm *m, const struct hgsync *sync, char *err, size_t len,
		     int nr_shards, int shard)
{
	struct hgm_options opt = { .shard = shard, .nr_shards = nr_shards };

	if (hgm_add_input(m, data("host.dat"), -1, err, len) ||
	    hgm_add_input(m, data("guest.dat"), 0, err, len))
		return -1;
	return hgm_start(m, sync, &opt, err, len);
}

/* Every event of both files comes out, once, in host time order. */
TEST_F(rec, ordered_and_complete)
{
	struct seen s = { 0 };

	ASSERT_EQ(0, open_both(&self->m, &self->sync, self->err, sizeof(self->err), 0, 0))
		TH_LOG("%s", self->err);
	ASSERT_EQ(0, hgm_run(&self->m, seen_emit, &s));
	EXPECT_EQ(count_events(data("host.dat")), s.host_n);
	EXPECT_EQ(count_events(data("guest.dat")), s.guest_n);
	EXPECT_LT(0, s.guest_n);
	EXPECT_EQ(0, s.back_steps);
}

/* Guest events: exact, on the host CPU of their vCPU's kvm_entry. */
TEST_F(rec, annotated_against_host_kvm_trace)
{
	struct seen s = { 0 };

	ASSERT_EQ(0, open_both(&self->m, &self->sync, self->err, sizeof(self->err), 0, 0))
		TH_LOG("%s", self->err);
	ASSERT_EQ(0, hgm_run(&self->m, seen_emit, &s));
	TH_LOG("%lu guest events: %lu in guest mode (%lu on the kvm_entry's CPU), %lu outside, "
	       "%lu before their vCPU's first KVM event, max bound %lu ns",
	       (unsigned long)s.guest_n, (unsigned long)s.in_guest_mode, (unsigned long)s.cpu_ok,
	       (unsigned long)s.outside, (unsigned long)s.before_first,
	       (unsigned long)s.max_bound);
	EXPECT_EQ(0, s.unmapped);
	EXPECT_EQ(0, s.no_cpu);
	EXPECT_EQ(0, s.non_kvm);
	EXPECT_GE(10, s.max_bound);
	EXPECT_EQ(0, s.outside);
	EXPECT_EQ(0, s.cpu_bad);
	EXPECT_LT(s.guest_n * 9 / 10, s.cpu_ok);
}

/* With no mapping, guest events are flagged, kept, and keep their order. */
TEST_F(rec, unmapped_flagged_not_dropped)
{
	struct seen s = { 0 };

	for (unsigned int g = 0; g < self->sync.nr_guests; g++)
		self->sync.guests[g].nr_segs = 0;
	ASSERT_EQ(0, open_both(&self->m, &self->sync, self->err, sizeof(self->err), 0, 0))
		TH_LOG("%s", self->err);
	ASSERT_EQ(0, hgm_run(&self->m, seen_emit, &s));
	EXPECT_EQ(count_events(data("guest.dat")), s.guest_n);
	EXPECT_EQ(s.guest_n, s.unmapped);
	EXPECT_EQ(count_events(data("host.dat")), s.host_n);
}

/* Shards partition the streams: together they see every event once. */
TEST_F_TIMEOUT(rec, shards_partition_the_streams, 600)
{
	uint64_t total = 0, host = 0, guest = 0;

	for (int shard = 0; shard < 3; shard++) {
		struct hgm m = { 0 };
		struct seen s = { 0 };

		ASSERT_EQ(0, open_both(&m, &self->sync, self->err, sizeof(self->err), 3, shard))
			TH_LOG("%s", self->err);
		ASSERT_EQ(0, hgm_run(&m, seen_emit, &s));
		EXPECT_EQ(0, s.back_steps);
		total += s.n;
		host += s.host_n;
		guest += s.guest_n;
		hgm_close(&m);
	}
	EXPECT_EQ(count_events(data("host.dat")), host);
	EXPECT_EQ(count_events(data("guest.dat")), guest);
	EXPECT_EQ(host + guest, total);
}

/* ---- names taught without printing (sched_names.c) ---- */

/* A record of @e with @pid (and @comm, 16 bytes, NUL-less when full) in its fields. */
static void put_field(struct tep_event *e, char *data, const char *name, unsigned long long v,
		      const char *comm)
{
	struct tep_format_field *f = tep_find_any_field(e, name);

	if (!f)
		return;
	if (comm)
		strncpy(data + f->offset, comm, (size_t)f->size);
	else if (f->size == 4)
		*(uint32_t *)(data + f->offset) = (uint32_t)v;
	else if (f->size == 8)
		*(uint64_t *)(data + f->offset) = v;
	else if (f->size == 2)
		*(uint16_t *)(data + f->offset) = (uint16_t)v;
}

/*
 * hgm_teach_quietly() against printing, on the recording's own sched
 * formats and libtraceevent's plugin: two handles of guest.dat, the same
 * generated sched_switch and sched_wakeup records (pids the recording
 * does not name, names reused, changed and 16 bytes long, lookups in
 * between, which end libtraceevent's unchecked list) printed into one
 * and taught quietly to the other; every pid must then have the same
 * name in both.  Without the plugin, and for a record too short for its
 * fields, the answer is "print it".
 */
TEST(sched_names_taught_quietly)
{
	struct tracecmd_input *ha = tracecmd_open_head(data("guest.dat"), 0);
	struct tracecmd_input *hb = tracecmd_open_head(data("guest.dat"), 0);
	struct tracecmd_input *hn = tracecmd_open_head(data("guest.dat"), TRACECMD_FL_LOAD_NO_PLUGINS);
	struct hgm_input in = { 0 }, in_np = { 0 };
	static const char *const comms[] = { "worker", "kvm-pit/317", "exactly16bytes!!", "",
					     "sh", "CPU 0/KVM" };
	struct trace_seq seq, scratch;
	struct tep_event *sw_a, *sw_b, *wk_a, *wk_b;
	struct tep_handle *a, *b;
	char data_a[256], data_b[256];
	unsigned int r = 12345;
	int base = 3000000;

	ASSERT_NE(NULL, ha);
	ASSERT_NE(NULL, hb);
	ASSERT_NE(NULL, hn);
	a = tracecmd_get_tep(ha);
	b = tracecmd_get_tep(hb);
	sw_a = tep_find_event_by_name(a, "sched", "sched_switch");
	sw_b = tep_find_event_by_name(b, "sched", "sched_switch");
	wk_a = tep_find_event_by_name(a, "sched", "sched_wakeup");
	wk_b = tep_find_event_by_name(b, "sched", "sched_wakeup");
	ASSERT_NE(NULL, sw_a);
	ASSERT_NE(NULL, sw_b);
	ASSERT_NE(NULL, wk_a);
	ASSERT_NE(NULL, wk_b);
	/*
	 * No lookup before the first records: libtraceevent keeps the names
	 * in a list without a check for duplicates until one (done to both
	 * at the same points below), so both of its modes are compared.
	 */
	in.tep = b;
	trace_seq_init(&seq);
	trace_seq_init(&scratch);
	for (int i = 0; i < 600; i++) {
		bool wake = i % 5 == 4;
		struct tep_event *ea = wake ? wk_a : sw_a, *eb = wake ? wk_b : sw_b;
		struct tep_record ra = { 0 }, rb = { 0 };
		int p1 = base + (int)((r = r * 1103515245 + 12345) >> 16) % 64;
		int p2 = base + (int)((r = r * 1103515245 + 12345) >> 16) % 64;
		const char *c1 = comms[(r >> 8) % 6], *c2 = comms[(r >> 12) % 6];

		memset(data_a, 0, sizeof(data_a));
		put_field(ea, data_a, "common_type", (unsigned long long)ea->id, NULL);
		if (wake) {
			put_field(ea, data_a, "pid", (unsigned long long)p1, NULL);
			put_field(ea, data_a, "comm", 0, c1);
		} else {
			put_field(ea, data_a, "prev_pid", (unsigned long long)p1, NULL);
			put_field(ea, data_a, "prev_comm", 0, c1);
			put_field(ea, data_a, "next_pid", (unsigned long long)p2, NULL);
			put_field(ea, data_a, "next_comm", 0, c2);
		}
		memcpy(data_b, data_a, sizeof(data_b));
		ra.data = data_a;
		rb.data = data_b;
		ra.size = rb.size = 128;
		trace_seq_reset(&seq);
		tep_print_event(a, &seq, &ra, "%s", TEP_PRINT_INFO);
		ASSERT_TRUE(hgm_teach_quietly(&in, &scratch, eb, &rb));
		/* now and then a lookup, in both: the list becomes an array */
		if (i % 97 == 50) {
			int p = base + i % 64;

			EXPECT_STREQ(tep_data_comm_from_pid(a, p), tep_data_comm_from_pid(b, p));
		}
	}
	for (int p = 0; p < 64; p++) {
		EXPECT_EQ(tep_is_pid_registered(a, base + p), tep_is_pid_registered(b, base + p));
		EXPECT_STREQ(tep_data_comm_from_pid(a, base + p), tep_data_comm_from_pid(b, base + p)) {
			TH_LOG("pid %d", base + p);
		}
	}
	/* At least some names came from the generated records. */
	EXPECT_TRUE(tep_is_pid_registered(b, base + 1) || tep_is_pid_registered(b, base + 2));
	if (true) {
		struct tep_record rb = { 0 };

		memset(data_b, 0, sizeof(data_b));
		put_field(sw_b, data_b, "common_type", (unsigned long long)sw_b->id, NULL);
		rb.data = data_b;
		rb.size = 20;	/* shorter than its fields: printed instead */
		EXPECT_FALSE(hgm_teach_quietly(&in, &scratch, sw_b, &rb));
		in_np.tep = tracecmd_get_tep(hn);
		rb.size = 128;
		EXPECT_FALSE(hgm_teach_quietly(&in_np, &scratch,
					       tep_find_event_by_name(in_np.tep, "sched", "sched_switch"),
					       &rb));
	}
	trace_seq_destroy(&seq);
	trace_seq_destroy(&scratch);
	tracecmd_close(ha);
	tracecmd_close(hb);
	tracecmd_close(hn);
}

static char *read_all(FILE *f, size_t *len)
{
	char *buf = NULL;
	long n;

	fflush(f);
	n = ftell(f);
	if (n < 0)
		return NULL;
	buf = malloc((size_t)n + 1);
	rewind(f);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		return NULL;
	}
	if (buf)
		buf[n] = '\0';	/* a C string too: strstr() and strtok() read it */
	*len = (size_t)n;
	return buf;
}

/* The threaded merge writes exactly what one thread writes. */
TEST_F_TIMEOUT(rec, threads_write_the_same_bytes, 600)
{
	struct hgm_input_spec in[2] = { { data("host.dat"), -1 }, { data("guest.dat"), 0 } };
	char *text[3], *json[3];
	size_t tlen[3], jlen[3];

	for (int t = 1; t <= 3; t++) {
		struct hgm_par par = { .sync = &self->sync, .inputs = in, .nr_inputs = 2,
				       .nr_threads = t };
		struct hgm_par_result res;
		FILE *tf = tmpfile(), *jf = tmpfile();

		ASSERT_TRUE(tf && jf);
		par.text = tf;
		par.json = jf;
		ASSERT_EQ(0, hgm_par_run(&par, &res, self->err, sizeof(self->err)))
			TH_LOG("%d threads: %s", t, self->err);
		EXPECT_EQ(count_events(data("host.dat")) + count_events(data("guest.dat")),
			  res.nr_events);
		text[t - 1] = read_all(tf, &tlen[t - 1]);
		json[t - 1] = read_all(jf, &jlen[t - 1]);
		ASSERT_TRUE(text[t - 1] && json[t - 1]);
		fclose(tf);
		fclose(jf);
	}
	for (int t = 1; t < 3; t++) {
		ASSERT_EQ(tlen[0], tlen[t]);
		EXPECT_EQ(0, memcmp(text[0], text[t], tlen[0])) TH_LOG("text, %d threads", t + 1);
		ASSERT_EQ(jlen[0], jlen[t]);
		EXPECT_EQ(0, memcmp(json[0], json[t], jlen[0])) TH_LOG("JSON, %d threads", t + 1);
	}
	/* One line per event, guest lines tagged. */
	{
		size_t lines = 0, tagged = 0;

		for (size_t i = 0; i < tlen[0]; i++)
			if (text[0][i] == '\n') {
				lines++;
				if (i + 1 < tlen[0] && text[0][i + 1] == 'g')
					tagged++;
			}
		EXPECT_EQ(count_events(data("host.dat")) + count_events(data("guest.dat")), lines);
		EXPECT_LT(0, tagged);
	}
	for (int t = 0; t < 3; t++) {
		free(text[t]);
		free(json[t]);
	}
}

/* A file cut short anywhere is refused with its name, never half-read. */
TEST_F_TIMEOUT(rec, truncated_trace_rejected, 600)
{
	size_t len;
	char *buf = gen_slurp(data("guest.dat"), &len);
	char tmp[] = "/tmp/hgclock-test-XXXXXX";
	static const double cuts[] = { 0.0001, 0.01, 0.3, 0.6, 0.9, 0.999 };
	int fd;

	ASSERT_NE(NULL, buf);
	fd = mkstemp(tmp);
	ASSERT_LE(0, fd);
	for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
		struct hgm m = { 0 };
		size_t n = (size_t)(len * cuts[k]);
		int ret;

		ASSERT_EQ(0, ftruncate(fd, 0));
		ASSERT_EQ((ssize_t)n, pwrite(fd, buf, n, 0));
		ret = hgm_add_input(&m, tmp, 0, self->err, sizeof(self->err));
		EXPECT_EQ(-1, ret) TH_LOG("cut at %zu of %zu bytes: accepted", n, len);
		if (!ret)
			hgm_close(&m);
		else
			EXPECT_NE(NULL, strstr(self->err, tmp)) TH_LOG("%s", self->err);
	}
	close(fd);
	unlink(tmp);
	free(buf);
}

/*
 * One flipped bit in host.dat's compressed data (byte 2234786) ends CPU
 * 1's events for libtracecmd there: 24372 of its 63372 events were
 * dropped and the merge exited 0.  Now the input is refused as damaged.
 */
TEST_F_TIMEOUT(rec, damaged_trace_rejected, 600)
{
	size_t len;
	char *buf = gen_slurp(data("host.dat"), &len);
	char tmp[] = "/tmp/hgclock-test-XXXXXX";
	struct hgm m = { 0 };
	int fd, ret;

	ASSERT_NE(NULL, buf);
	ASSERT_LT(2234786, len);
	fd = mkstemp(tmp);
	ASSERT_LE(0, fd);
	ASSERT_EQ((ssize_t)len, pwrite(fd, buf, len, 0));
	ASSERT_EQ(0, hgm_add_input(&m, tmp, -1, self->err, sizeof(self->err)))
		TH_LOG("%s", self->err);
	hgm_close(&m);
	memset(&m, 0, sizeof(m));
	buf[2234786] ^= 1;
	ASSERT_EQ((ssize_t)len, pwrite(fd, buf, len, 0));
	ret = hgm_add_input(&m, tmp, -1, self->err, sizeof(self->err));
	EXPECT_EQ(-1, ret);
	if (!ret)
		hgm_close(&m);
	EXPECT_NE(NULL, strstr(self->err, "damaged")) TH_LOG("%s", self->err);
	EXPECT_NE(NULL, strstr(self->err, "CPU 1")) TH_LOG("%s", self->err);
	close(fd);
	unlink(tmp);
	free(buf);
}

/* Not a trace.dat at all: the correlation file, and random bytes. */
TEST_F(rec, not_a_trace_rejected)
{
	struct hgm m = { 0 };
	char tmp[] = "/tmp/hgclock-test-XXXXXX";
	char junk[4096];
	int fd = mkstemp(tmp);

	ASSERT_LE(0, fd);
	EXPECT_EQ(-1, hgm_add_input(&m, data("merge.hgc"), 0, self->err, sizeof(self->err)));
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (char)(i * 7919 >> 3);
	ASSERT_EQ((ssize_t)sizeof(junk), write(fd, junk, sizeof(junk)));
	EXPECT_EQ(-1, hgm_add_input(&m, tmp, 0, self->err, sizeof(self->err)));
	EXPECT_EQ(-1, hgm_add_input(&m, "/nonexistent/trace.dat", 0, self->err,
				    sizeof(self->err)));
	EXPECT_NE(NULL, strstr(self->err, "/nonexistent/trace.dat"));
	close(fd);
	unlink(tmp);
}

/* A guest the correlation does not know is an error, not a silent shift. */
TEST_F(rec, unknown_guest_rejected)
{
	struct hgm_options opt = { 0 };

	ASSERT_EQ(0, hgm_add_input(&self->m, data("guest.dat"), 7, self->err, sizeof(self->err)));
	EXPECT_EQ(-1, hgm_start(&self->m, &self->sync, &opt, self->err, sizeof(self->err)));
	EXPECT_NE(NULL, strstr(self->err, "no guest 7"));
}

/* The same guest twice: the message names it (it printed "both are guest "). */
TEST_F(rec, duplicate_guest_named)
{
	struct hgm_options opt = { 0 };

	ASSERT_EQ(0, hgm_add_input(&self->m, data("guest.dat"), 0, self->err, sizeof(self->err)));
	ASSERT_EQ(0, hgm_add_input(&self->m, data("guest.dat"), 0, self->err, sizeof(self->err)));
	EXPECT_EQ(-1, hgm_start(&self->m, &self->sync, &opt, self->err, sizeof(self->err)));
	EXPECT_NE(NULL, strstr(self->err, "both are guest 0's trace")) TH_LOG("%s", self->err);
}

/*
 * The inputs are allocated as they are added (hgm.in grows past its first
 * four): nine keep their order, guests and handles, share one check of
 * each file's data, and hgm_close() frees them (under ASan, LeakSanitizer
 * checks).  Guests 1-7 are not in the recording: the merge refuses the
 * first.
 */
TEST_F_TIMEOUT(rec, many_inputs_grow, 600)
{
	struct hgm_checked *checked = hgm_checked_new();
	struct hgm_options opt = { 0 };
	struct hgm m = { 0 };
	char host[PATH_MAX + 64], guest[PATH_MAX + 64];	/* data()'s are reused */

	ASSERT_NE(NULL, checked);
	snprintf(host, sizeof(host), "%s", data("host.dat"));
	snprintf(guest, sizeof(guest), "%s", data("guest.dat"));
	m.checked = checked;
	ASSERT_EQ(0, hgm_add_input(&m, host, -1, self->err, sizeof(self->err)))
		TH_LOG("%s", self->err);
	for (int g = 0; g < 8; g++) {
		ASSERT_EQ(0, hgm_add_input(&m, guest, g, self->err, sizeof(self->err)))
			TH_LOG("guest %d: %s", g, self->err);
	}
	EXPECT_EQ(9, m.nr_in);
	EXPECT_LE(9, m.cap_in);
	EXPECT_GE(HGM_MAX_INPUTS, m.cap_in);
	for (int i = 0; i < m.nr_in; i++) {
		EXPECT_EQ(i - 1, m.in[i].guest);
		EXPECT_NE(NULL, m.in[i].handle);
		EXPECT_STREQ(i ? guest : host, m.in[i].path);
		EXPECT_EQ(m.in[i ? 1 : 0].nr_cpus, m.in[i].nr_cpus);
	}
	EXPECT_EQ(-1, hgm_start(&m, &self->sync, &opt, self->err, sizeof(self->err)));
	EXPECT_NE(NULL, strstr(self->err, "no guest 1")) TH_LOG("%s", self->err);
	hgm_close(&m);
	EXPECT_EQ(NULL, m.in);
	EXPECT_EQ(0, m.nr_in);
	hgm_checked_free(checked);
	EXPECT_EQ(0, gen_leaked());
}

/* The streams point into the inputs: none is added once the merge started. */
TEST_F(rec, no_input_after_start)
{
	ASSERT_EQ(0, open_both(&self->m, &self->sync, self->err, sizeof(self->err), 0, 0))
		TH_LOG("%s", self->err);
	EXPECT_EQ(-1, hgm_add_input(&self->m, data("guest.dat"), 1, self->err,
				    sizeof(self->err)));
	EXPECT_NE(NULL, strstr(self->err, "before the merge starts")) TH_LOG("%s", self->err);
	EXPECT_EQ(2, self->m.nr_in);
}

TEST(clock_names)
{
	static const char *const bad[] = { "global", "mono", "mono_raw", "boot", "counter",
					   "uptime", "tai", "" };
	uint32_t c;

	ASSERT_EQ(0, hgclock_clock_parse("local", &c));
	EXPECT_EQ(HGSYNC_CLOCK_SCHED, c);
	ASSERT_EQ(0, hgclock_clock_parse("perf", &c));
	EXPECT_EQ(HGSYNC_CLOCK_LOCAL, c);
	ASSERT_EQ(0, hgclock_clock_parse("x86-tsc", &c));
	EXPECT_EQ(HGSYNC_CLOCK_TSC, c);
	/* The aliases convert always took, now every command's. */
	ASSERT_EQ(0, hgclock_clock_parse("tsc", &c));
	EXPECT_EQ(HGSYNC_CLOCK_TSC, c);
	ASSERT_EQ(0, hgclock_clock_parse("sched", &c));
	EXPECT_EQ(HGSYNC_CLOCK_SCHED, c);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		EXPECT_EQ(-EINVAL, hgclock_clock_parse(bad[i], &c)) TH_LOG("'%s' accepted", bad[i]);
	}
}

/* ---- application event files (appev.h, hgclock_events_open(3)) ---- */

struct app_ev {
	unsigned int kind;
	uint32_t cpu, tid;
	uint64_t ts;
	const char *name, *text;
};

/* An application event file of @n events at a fresh path in @path. */
static int write_app(char *path, uint32_t clock, const char *nodename, const struct app_ev *ev,
		     size_t n)
{
	unsigned char buf[HGEV_REC_MAX];
	int fd;
	FILE *f;

	strcpy(path, "/tmp/hgclock-app-XXXXXX");
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	f = fdopen(fd, "wb");
	if (!f)
		return -1;
	hgev_encode_header(buf, clock, 4242, "appname", nodename);
	fwrite(buf, 1, HGEV_HEADER_SIZE, f);
	for (size_t i = 0; i < n; i++) {
		size_t sz = hgev_encode_record(buf, ev[i].kind, HGEV_REC_EXACT, ev[i].cpu, ev[i].ts,
					       ev[i].tid, ev[i].name, ev[i].text);

		if (!sz || fwrite(buf, 1, sz, f) != sz) {
			fclose(f);
			return -1;
		}
	}
	return fclose(f) ? -1 : 0;
}

/* Every record back as written; the limits of each field; control characters cleaned. */
TEST(app_records_round_trip)
{
	char name[HGEV_NAME_MAX + 2], text[HGEV_TEXT_MAX + 2], path[64], err[256];
	unsigned char buf[HGEV_REC_MAX];
	struct app_ev ev[3] = {
		{ HGEV_KIND_BEGIN, 3, 77, 1000, "request", "id=1\nline" },
		{ HGEV_KIND_END, 3, 77, 2000, name, text },
		{ HGEV_KIND_INSTANT, 8191, 78, 1500, "x", NULL },
	};
	struct hgev_header h;
	struct hgev_rec r;
	FILE *f;

	memset(name, 'n', HGEV_NAME_MAX);
	name[HGEV_NAME_MAX] = '\0';
	memset(text, 't', HGEV_TEXT_MAX);
	text[HGEV_TEXT_MAX] = '\0';
	/* The limits: one byte more is refused, as an empty name and an unknown kind. */
	EXPECT_EQ(HGEV_REC_MAX, hgev_encode_record(buf, 2, 0, 0, 0, 0, name, text));
	name[HGEV_NAME_MAX] = 'n';
	name[HGEV_NAME_MAX + 1] = '\0';
	EXPECT_EQ(0, hgev_encode_record(buf, 1, 0, 0, 0, 0, name, NULL));
	name[HGEV_NAME_MAX] = '\0';
	text[HGEV_TEXT_MAX] = 't';
	text[HGEV_TEXT_MAX + 1] = '\0';
	EXPECT_EQ(0, hgev_encode_record(buf, 1, 0, 0, 0, 0, "a", text));
	text[HGEV_TEXT_MAX] = '\0';
	EXPECT_EQ(0, hgev_encode_record(buf, 1, 0, 0, 0, 0, "", NULL));
	EXPECT_EQ(0, hgev_encode_record(buf, 0, 0, 0, 0, 0, "a", NULL));
	EXPECT_EQ(0, hgev_encode_record(buf, 4, 0, 0, 0, 0, "a", NULL));

	ASSERT_EQ(0, write_app(path, HGEV_CLOCK_PERF, "box", ev, 3));
	f = fopen(path, "rb");
	ASSERT_NE(NULL, f);
	ASSERT_EQ(0, hgev_read_header(f, &h, err, sizeof(err))) TH_LOG("%s", err);
	EXPECT_EQ(HGEV_CLOCK_PERF, h.clock);
	EXPECT_EQ(4242, h.pid);
	EXPECT_STREQ("appname", h.comm);
	EXPECT_STREQ("box", h.nodename);
	ASSERT_EQ(1, hgev_read_record(f, &r, err, sizeof(err))) TH_LOG("%s", err);
	EXPECT_EQ(HGEV_KIND_BEGIN, r.kind);
	EXPECT_EQ(3, r.cpu);
	EXPECT_EQ(77, r.tid);
	EXPECT_EQ(1000, r.ts);
	EXPECT_STREQ("request", r.name);
	EXPECT_STREQ("id=1?line", r.text);
	ASSERT_EQ(1, hgev_read_record(f, &r, err, sizeof(err))) TH_LOG("%s", err);
	EXPECT_EQ(HGEV_NAME_MAX, strlen(r.name));
	EXPECT_EQ(HGEV_TEXT_MAX, strlen(r.text));
	ASSERT_EQ(1, hgev_read_record(f, &r, err, sizeof(err))) TH_LOG("%s", err);
	EXPECT_EQ(8191, r.cpu);
	EXPECT_STREQ("", r.text);
	EXPECT_EQ(0, hgev_read_record(f, &r, err, sizeof(err)));
	fclose(f);
	unlink(path);
}

/* Damage in the header or a record is named; a cut-short end is told apart. */
TEST(app_damage_named)
{
	static const struct { size_t off; unsigned char val; int hdr; const char *what; } cases[] = {
		{ 0, 'X', 1, "no HGCLKEVT magic" },
		{ 8, 2, 1, "format version 2" },
		{ 12, 7, 1, "impossible header size" },
		{ 16, 9, 1, "unknown clock 9" },
		{ 128, 9, 0, "damaged record at offset 128" },		/* size not a multiple of 8 */
		{ 130, 4, 0, "damaged record at offset 128" },		/* kind */
		{ 148, 0, 0, "damaged record at offset 128" },		/* name length 0 */
		{ 150, 200, 0, "damaged record at offset 128" },	/* text longer than the record */
		{ 133, 0x20, 0, "damaged record at offset 128" },	/* cpu 8192 */
	};
	struct app_ev ev = { HGEV_KIND_INSTANT, 1, 5, 100, "tick", "t" };
	char path[64], err[256];
	struct hgev_header h;
	struct hgev_rec r;
	size_t len;
	char *good;

	ASSERT_EQ(0, write_app(path, HGEV_CLOCK_LOCAL, "", &ev, 1));
	good = gen_slurp(path, &len);
	ASSERT_NE(NULL, good);
	ASSERT_EQ(HGEV_HEADER_SIZE + 32, len);
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		FILE *f;
		int ret;

		{
			char *bad = malloc(len);

			ASSERT_NE(NULL, bad);
			memcpy(bad, good, len);
			bad[cases[k].off] = (char)cases[k].val;
			f = fmemopen(bad, len, "rb");
			ASSERT_NE(NULL, f);
			ret = hgev_read_header(f, &h, err, sizeof(err));
			if (!cases[k].hdr) {
				ASSERT_EQ(0, ret);
				ret = hgev_read_record(f, &r, err, sizeof(err));
				EXPECT_EQ(-1, ret) TH_LOG("case %zu", k);
			} else {
				EXPECT_EQ(-1, ret) TH_LOG("case %zu", k);
			}
			EXPECT_NE(NULL, strstr(err, cases[k].what)) TH_LOG("case %zu: %s", k, err);
			fclose(f);
			free(bad);
		}
	}
	/* Cut inside the record, at each length: "ends inside a record", never a record. */
	for (size_t cut = HGEV_HEADER_SIZE + 1; cut < len; cut++) {
		FILE *f = fmemopen(good, cut, "rb");

		ASSERT_NE(NULL, f);
		ASSERT_EQ(0, hgev_read_header(f, &h, err, sizeof(err)));
		EXPECT_EQ(-2, hgev_read_record(f, &r, err, sizeof(err))) TH_LOG("cut at %zu", cut);
		fclose(f);
	}
	free(good);
	unlink(path);
}

/* libtracecmd exports them; its header does not declare them (merge.c). */
int tracecmd_cpus(struct tracecmd_input *handle);
void tracecmd_set_flag(struct tracecmd_input *handle, int flag);
#define TEST_TRACECMD_FL_RAW_TS	(1 << 3)

/* The sampled events of a trace: (cpu, ts) of every @step-th event of each CPU. */
static size_t sample_trace(const char *path, size_t step, struct app_ev *ev, size_t cap,
			   unsigned int kind, uint32_t tid)
{
	struct tracecmd_input *h = tracecmd_open_head(path, 0);
	size_t n = 0;

	if (!h)
		return 0;
	/* Raw, as the merge reads them: no TimeShift of trace-cmd's applied. */
	tracecmd_set_flag(h, TEST_TRACECMD_FL_RAW_TS);
	if (tracecmd_init_data(h) < 0) {
		tracecmd_close(h);
		return 0;
	}
	/* CPU after CPU: the file is not in time order across CPUs, as a writer's may not be. */
	for (int cpu = 0; cpu < tracecmd_cpus(h); cpu++) {
		size_t k = 0;

		for (struct tep_record *r = tracecmd_read_cpu_first(h, cpu); r;
		     r = tracecmd_read_data(h, cpu), k++) {
			if (k % step == 0 && n < cap)
				ev[n++] = (struct app_ev){ kind, (uint32_t)cpu, tid + (uint32_t)cpu,
							   r->ts, "probe", "sampled" };
			tracecmd_free_record(r);
		}
	}
	tracecmd_close(h);
	return n;
}

struct app_seen {
	uint64_t n, app_n, back_steps, last_ts, matched, mismatched, app_before_trace;
	/* guest trace events at the sampled times, by (cpu, raw ts) */
	struct { int cpu; uint64_t raw, host_ts, bound; int host_cpu, host_tid; uint32_t method; } t[512];
	int nr_t;
	const struct app_ev *want;
	size_t nr_want;
};

static int app_emit(void *ctx, const struct hgm_event *ev)
{
	struct app_seen *s = ctx;

	s->n++;
	if (ev->host_ts < s->last_ts)
		s->back_steps++;
	s->last_ts = ev->host_ts;
	if (!ev->app) {
		if (ev->in->guest < 0)
			return 0;
		/* A guest event at a sampled time: what the app's twin must get. */
		for (size_t i = 0; i < s->nr_want && s->nr_t < 512; i++)
			if (s->want[i].ts == ev->raw_ts && (int)s->want[i].cpu == ev->cpu) {
				s->t[s->nr_t].cpu = ev->cpu;
				s->t[s->nr_t].raw = ev->raw_ts;
				s->t[s->nr_t].host_ts = ev->host_ts;
				s->t[s->nr_t].bound = ev->bound_ns;
				s->t[s->nr_t].host_cpu = ev->host_cpu;
				s->t[s->nr_t].host_tid = ev->host_tid;
				s->t[s->nr_t].method = ev->method;
				s->nr_t++;
				break;
			}
		return 0;
	}
	s->app_n++;
	if (ev->in->guest < 0) {
		/* The host's clock is the app's: its value unchanged. */
		if (ev->host_ts == ev->app->ts && ev->cpu == (int)ev->app->cpu)
			s->matched++;
		else
			s->mismatched++;
		return 0;
	}
	for (int i = 0; i < s->nr_t; i++)
		if (s->t[i].cpu == ev->cpu && s->t[i].raw == ev->raw_ts) {
			if (s->t[i].host_ts == ev->host_ts && s->t[i].host_cpu == ev->host_cpu &&
			    s->t[i].host_tid == ev->host_tid && s->t[i].method == ev->method &&
			    s->t[i].bound == ev->bound_ns)
				s->matched++;
			else
				s->mismatched++;
			return 0;
		}
	s->app_before_trace++;
	return 0;
}

/*
 * A guest application's events at the very times of guest trace events
 * get exactly their host time, host CPU, vCPU thread, method and bound;
 * a host application's keep their time; everything comes out once, in
 * host time order, with the traces' events first at equal times.
 */
TEST_F_TIMEOUT(rec, app_events_mapped_as_trace_events, 600)
{
	static struct app_ev gev[400], hev[400];
	size_t ng = sample_trace(data("guest.dat"), 3, gev, 400, HGEV_KIND_INSTANT, 500);
	size_t nh = sample_trace(data("host.dat"), 1000, hev, 400, HGEV_KIND_INSTANT, 900);
	struct hgm_options opt = { 0 };
	struct app_seen *s = calloc(1, sizeof(*s));
	char gpath[64], hpath[64];

	ASSERT_NE(NULL, s);
	ASSERT_LT(20, ng);
	ASSERT_LT(20, nh);
	ASSERT_EQ(0, write_app(gpath, HGEV_CLOCK_LOCAL, "", gev, ng));
	ASSERT_EQ(0, write_app(hpath, HGEV_CLOCK_LOCAL, "", hev, nh));
	s->want = gev;
	s->nr_want = ng;
	ASSERT_EQ(0, hgm_add_input(&self->m, data("host.dat"), -1, self->err, sizeof(self->err)));
	ASSERT_EQ(0, hgm_add_input(&self->m, data("guest.dat"), 0, self->err, sizeof(self->err)));
	ASSERT_EQ(0, hgm_add_app_input(&self->m, gpath, 0, self->err, sizeof(self->err)))
		TH_LOG("%s", self->err);
	ASSERT_EQ(0, hgm_add_app_input(&self->m, hpath, -1, self->err, sizeof(self->err)))
		TH_LOG("%s", self->err);
	ASSERT_EQ(0, hgm_start(&self->m, &self->sync, &opt, self->err, sizeof(self->err)))
		TH_LOG("%s", self->err);
	ASSERT_EQ(0, hgm_run(&self->m, app_emit, s));
	TH_LOG("%zu guest and %zu host app events: %lu matched, %lu mismatched", ng, nh,
	       (unsigned long)s->matched, (unsigned long)s->mismatched);
	EXPECT_EQ(count_events(data("host.dat")) + count_events(data("guest.dat")) + ng + nh, s->n);
	EXPECT_EQ(ng + nh, s->app_n);
	EXPECT_EQ(ng + nh, s->matched);
	EXPECT_EQ(0, s->mismatched);
	EXPECT_EQ(0, s->app_before_trace);
	EXPECT_EQ(0, s->back_steps);
	free(s);
	unlink(gpath);
	unlink(hpath);
}

static int host_app_emit(void *ctx, const struct hgm_event *ev)
{
	struct app_seen *s = ctx;

	s->n++;
	if (ev->host_ts < s->last_ts)
		s->back_steps++;
	s->last_ts = ev->host_ts;
	if (!ev->app)
		return 0;
	s->app_n++;
	/* Its text is the local-clock value the perf-clock stamp was made from. */
	if (!(ev->flags & HGM_EV_UNMAPPED) && ev->host_ts == strtoull(ev->app->text, NULL, 10))
		s->matched++;
	else
		s->mismatched++;
	return 0;
}

/*
 * An application in perf's clock merged with traces in ftrace's local
 * clock: each event's host time is the local-clock value of the same
 * host TSC (perf = local + the CPU's local_clock offset), to the ns.
 */
TEST_F_TIMEOUT(rec, app_perf_clock_on_local_timeline, 600)
{
	static struct app_ev hev[200];
	static char text[200][24];
	size_t nh = sample_trace(data("host.dat"), 2000, hev, 200, HGEV_KIND_INSTANT, 900);
	struct hgm_options opt = { 0 };
	struct app_seen *s = calloc(1, sizeof(*s));
	size_t converted = 0;
	char hpath[64];

	ASSERT_NE(NULL, s);
	ASSERT_LT(20, nh);
	for (size_t i = 0; i < nh; i++) {
		uint64_t tsc, perf;

		snprintf(text[i], sizeof(text[i]), "%llu", (unsigned long long)hev[i].ts);
		hev[i].text = text[i];
		if (hgsync_host_to_tsc(&self->sync, (int)hev[i].cpu, HGSYNC_CLOCK_SCHED, hev[i].ts,
				       &tsc) ||
		    hgsync_host_from_tsc(&self->sync, (int)hev[i].cpu, HGSYNC_CLOCK_LOCAL, tsc, &perf))
			continue;
		hev[i].ts = perf;
		converted++;
	}
	/* The recording's module knew local_clock's offset on every CPU. */
	ASSERT_EQ(nh, converted);
	ASSERT_NE(hev[0].ts, strtoull(text[0], NULL, 10));
	ASSERT_EQ(0, write_app(hpath, HGEV_CLOCK_PERF, "", hev, nh));
	ASSERT_EQ(0, hgm_add_input(&self->m, data("host.dat"), -1, self->err, sizeof(self->err)));
	ASSERT_EQ(0, hgm_add_app_input(&self->m, hpath, -1, self->err, sizeof(self->err)));
	ASSERT_EQ(0, hgm_start(&self->m, &self->sync, &opt, self->err, sizeof(self->err)))
		TH_LOG("%s", self->err);
	ASSERT_EQ(0, hgm_run(&self->m, host_app_emit, s));
	EXPECT_EQ(nh, s->app_n);
	EXPECT_EQ(nh, s->matched);
	EXPECT_EQ(0, s->back_steps);
	free(s);
	unlink(hpath);
}

/*
 * A host application on 16 CPUs, its records in turns (CPU 15, 14, ...,
 * 0, 15, ...; in each turn CPU 0's is the earliest, so most wait in a
 * queue): every event comes out once, in time order, and the file is
 * read once, not once per CPU (each CPU's stream used to read the whole
 * file for its records: 16 times as many reads here).
 */
TEST_F_TIMEOUT(rec, app_file_read_once_for_all_cpus, 600)
{
	enum { CPUS = 16, PER_CPU = 64 };
	static struct app_ev ev[CPUS * PER_CPU];
	struct app_ev one;
	struct hgm_options opt = { 0 };
	struct app_seen *s = calloc(1, sizeof(*s));
	char path[64];

	ASSERT_NE(NULL, s);
	ASSERT_EQ(1, sample_trace(data("host.dat"), 1000000, &one, 1, HGEV_KIND_INSTANT, 900));
	for (size_t i = 0; i < CPUS * PER_CPU; i++) {
		ev[i] = one;
		/* In each turn the last CPU first, the first CPU's time first. */
		ev[i].cpu = (uint32_t)(CPUS - 1 - i % CPUS);
		ev[i].ts = one.ts + i / CPUS * 1000 + ev[i].cpu;
		ev[i].text = "turn";
	}
	ASSERT_EQ(0, write_app(path, HGEV_CLOCK_LOCAL, "", ev, CPUS * PER_CPU));
	ASSERT_EQ(0, hgm_add_input(&self->m, data("host.dat"), -1, self->err, sizeof(self->err)));
	ASSERT_EQ(0, hgm_add_app_input(&self->m, path, -1, self->err, sizeof(self->err)))
		TH_LOG("%s", self->err);
	ASSERT_EQ(0, hgm_start(&self->m, &self->sync, &opt, self->err, sizeof(self->err)))
		TH_LOG("%s", self->err);
	ASSERT_EQ(0, hgm_run(&self->m, host_app_emit, s));
	EXPECT_EQ((size_t)CPUS * PER_CPU, s->app_n);
	EXPECT_EQ(0, s->back_steps);
	EXPECT_EQ((uint64_t)CPUS * PER_CPU, self->m.nr_app_reads);
	free(s);
	unlink(path);
}

/*
 * An event file that changes between its check (hgm_add_app_input()) and
 * its reading: the merge stops reading it at the damage and says so
 * through hgm_read_error(), never a silently shorter output.
 */
TEST_F(rec, app_file_damaged_after_check_is_an_error)
{
	enum { N = 64, DAMAGED = 10 };
	static struct app_ev ev[N];
	unsigned char buf[HGEV_REC_MAX], junk[HGEV_REC_MAX];
	struct app_ev one;
	struct hgm_options opt = { 0 };
	struct app_seen *s = calloc(1, sizeof(*s));
	char path[64], err[512] = "";
	size_t sz;
	FILE *f;

	ASSERT_NE(NULL, s);
	ASSERT_EQ(1, sample_trace(data("host.dat"), 1000000, &one, 1, HGEV_KIND_INSTANT, 900));
	for (size_t i = 0; i < N; i++) {
		ev[i] = one;
		ev[i].cpu = (uint32_t)(i % 2);
		ev[i].ts = one.ts + i * 1000;
		ev[i].text = "tick";
	}
	ASSERT_EQ(0, write_app(path, HGEV_CLOCK_LOCAL, "", ev, N));
	ASSERT_EQ(0, hgm_add_input(&self->m, data("host.dat"), -1, self->err, sizeof(self->err)));
	ASSERT_EQ(0, hgm_add_app_input(&self->m, path, -1, self->err, sizeof(self->err)))
		TH_LOG("%s", self->err);
	/* Every record has the same size: the DAMAGED-th one is overwritten. */
	sz = hgev_encode_record(buf, ev[0].kind, HGEV_REC_EXACT, ev[0].cpu, ev[0].ts, ev[0].tid,
				ev[0].name, ev[0].text);
	ASSERT_LT(0, sz);
	memset(junk, 0xff, sz);
	f = fopen(path, "r+b");
	ASSERT_NE(NULL, f);
	ASSERT_EQ(0, fseek(f, (long)(HGEV_HEADER_SIZE + DAMAGED * sz), SEEK_SET));
	ASSERT_EQ(sz, fwrite(junk, 1, sz, f));
	ASSERT_EQ(0, fclose(f));
	ASSERT_EQ(0, hgm_start(&self->m, &self->sync, &opt, self->err, sizeof(self->err)))
		TH_LOG("%s", self->err);
	ASSERT_EQ(0, hgm_run(&self->m, host_app_emit, s));
	EXPECT_EQ((size_t)DAMAGED, s->app_n);
	EXPECT_EQ(HGM_E_INPUT, hgm_read_error(&self->m, err, sizeof(err)));
	EXPECT_NE(NULL, strstr(err, path)) TH_LOG("%s", err);
	EXPECT_NE(NULL, strstr(err, "reading stopped before its end")) TH_LOG("%s", err);
	free(s);
	unlink(path);
}

/*
 * A file read to its end: no read error.  Records appended after the
 * check (a file still being written) are not read: they were not checked.
 */
TEST_F(rec, app_file_whole_no_read_error)
{
	struct app_ev ev[4];
	struct hgm_options opt = { 0 };
	struct app_seen *s = calloc(1, sizeof(*s));
	unsigned char buf[HGEV_REC_MAX];
	char path[64], err[512] = "";
	size_t sz;
	FILE *f;

	ASSERT_NE(NULL, s);
	ASSERT_EQ(1, sample_trace(data("host.dat"), 1000000, ev, 1, HGEV_KIND_INSTANT, 900));
	for (size_t i = 1; i < 4; i++) {
		ev[i] = ev[0];
		ev[i].ts += i;
	}
	ASSERT_EQ(0, write_app(path, HGEV_CLOCK_LOCAL, "", ev, 4));
	ASSERT_EQ(0, hgm_add_input(&self->m, data("host.dat"), -1, self->err, sizeof(self->err)));
	ASSERT_EQ(0, hgm_add_app_input(&self->m, path, -1, self->err, sizeof(self->err)));
	/* One more record, and half of another, after the check. */
	sz = hgev_encode_record(buf, ev[0].kind, HGEV_REC_EXACT, ev[0].cpu, ev[3].ts + 1,
				ev[0].tid, ev[0].name, ev[0].text);
	f = fopen(path, "ab");
	ASSERT_NE(NULL, f);
	ASSERT_EQ(sz, fwrite(buf, 1, sz, f));
	ASSERT_EQ(sz / 2, fwrite(buf, 1, sz / 2, f));
	ASSERT_EQ(0, fclose(f));
	ASSERT_EQ(0, hgm_start(&self->m, &self->sync, &opt, self->err, sizeof(self->err)));
	ASSERT_EQ(0, hgm_run(&self->m, host_app_emit, s));
	EXPECT_EQ(4, s->app_n);
	EXPECT_EQ(0, hgm_read_error(&self->m, err, sizeof(err)));
	EXPECT_STREQ("", err);
	free(s);
	unlink(path);
}

/* The outputs: "app:NAME", the kind, the process's name and the tag; B/E in the JSON. */
TEST_F(rec, app_events_in_both_outputs)
{
	struct app_ev ev[2];
	size_t n = sample_trace(data("guest.dat"), 100, ev, 1, HGEV_KIND_BEGIN, 7);
	struct hgm_input_spec in[3] = { { data("host.dat"), -1, false },
					{ data("guest.dat"), 0, false }, { NULL, 0, true } };
	struct hgm_par par = { .sync = &self->sync, .inputs = in, .nr_inputs = 3, .nr_threads = 2 };
	struct hgm_par_result res;
	FILE *tf = tmpfile(), *jf = tmpfile();
	char path[64], *text, *json, line[512];
	size_t tlen, jlen;

	ASSERT_EQ(1, n);
	ev[1] = ev[0];
	ev[1].kind = HGEV_KIND_END;
	ev[0].text = "req 1";
	ev[1].text = "req 1 done";
	ASSERT_EQ(0, write_app(path, HGEV_CLOCK_LOCAL, "", ev, 2));
	in[2].path = path;
	ASSERT_TRUE(tf && jf);
	par.text = tf;
	par.json = jf;
	ASSERT_EQ(0, hgm_par_run(&par, &res, self->err, sizeof(self->err))) TH_LOG("%s", self->err);
	EXPECT_EQ(3, res.nr_in);
	EXPECT_TRUE(res.in[2].app);
	EXPECT_EQ(2, res.in[2].nr_events);
	text = read_all(tf, &tlen);
	json = read_all(jf, &jlen);
	ASSERT_TRUE(text && json);
	snprintf(line, sizeof(line), "appname-%-5u [%03u]", ev[0].tid, ev[0].cpu);
	EXPECT_NE(NULL, strstr(text, line)) TH_LOG("no '%s'", line);
	EXPECT_NE(NULL, strstr(text, "app:probe")) TH_LOG("no app:probe line");
	EXPECT_NE(NULL, strstr(text, "[begin] req 1  {tid "));
	EXPECT_NE(NULL, strstr(text, "[end] req 1 done  {tid "));
	snprintf(line, sizeof(line), "g0 v%u h", ev[0].cpu);
	EXPECT_NE(NULL, strstr(text, line));
	EXPECT_NE(NULL, strstr(json, "\"ph\":\"B\",\"name\":\"probe\",\"cat\":\"app\""));
	EXPECT_NE(NULL, strstr(json, "\"ph\":\"E\",\"name\":\"probe\",\"cat\":\"app\""));
	EXPECT_NE(NULL, strstr(json, "\"appname 7 (app)\"")) TH_LOG("no thread name");
	free(text);
	free(json);
	fclose(tf);
	fclose(jf);
	unlink(path);
}

/*
 * Refused, each with its reason: a step back in one CPU's time, a CPU
 * the guest does not have.  A record
 * cut short at the end is left out and counted, the rest merged.
 */
TEST_F(rec, app_bad_files)
{
	struct app_ev back[3] = {
		{ 1, 0, 1, 5000, "a", NULL }, { 1, 1, 1, 100, "a", NULL }, { 1, 0, 1, 4999, "a", NULL },
	};
	struct app_ev cpu9 = { 1, 9, 1, 5000, "a", NULL };
	struct hgm_options opt = { 0 };
	char path[64];
	struct hgm m = { 0 };
	size_t len;
	char *buf;
	FILE *f;

	ASSERT_EQ(0, write_app(path, HGEV_CLOCK_LOCAL, "", back, 3));
	EXPECT_EQ(HGM_E_INPUT, hgm_add_app_input(&m, path, 0, self->err, sizeof(self->err)));
	EXPECT_NE(NULL, strstr(self->err, "CPU 0) goes back in time")) TH_LOG("%s", self->err);
	unlink(path);
	/* Across CPUs the order is free: CPU 1's 100 after CPU 0's 5000. */
	ASSERT_EQ(0, write_app(path, HGEV_CLOCK_LOCAL, "", back, 2));
	ASSERT_EQ(0, hgm_add_app_input(&m, path, 0, self->err, sizeof(self->err)));
	hgm_close(&m);
	unlink(path);

	ASSERT_EQ(0, write_app(path, HGEV_CLOCK_LOCAL, "", &cpu9, 1));
	ASSERT_EQ(0, hgm_add_input(&m, data("guest.dat"), 0, self->err, sizeof(self->err)));
	ASSERT_EQ(0, hgm_add_app_input(&m, path, 0, self->err, sizeof(self->err)));
	EXPECT_EQ(-1, hgm_start(&m, &self->sync, &opt, self->err, sizeof(self->err)));
	EXPECT_NE(NULL, strstr(self->err, "an event on CPU 9")) TH_LOG("%s", self->err);
	hgm_close(&m);
	unlink(path);

	ASSERT_EQ(0, write_app(path, HGEV_CLOCK_PERF, "", back, 2));

	/* Two whole records and 20 bytes of a third: two merged, 20 bytes said. */
	buf = gen_slurp(path, &len);
	ASSERT_NE(NULL, buf);
	f = fopen(path, "ab");
	ASSERT_NE(NULL, f);
	ASSERT_EQ(20, fwrite(buf + HGEV_HEADER_SIZE, 1, 20, f));
	fclose(f);
	ASSERT_EQ(0, hgm_add_app_input(&m, path, -1, self->err, sizeof(self->err)));
	EXPECT_EQ(2, m.in[0].app_records);
	EXPECT_EQ(20, m.in[0].app_tail_bytes);
	hgm_close(&m);
	free(buf);
	unlink(path);
}

/* ---- perf samples (perf_in.c) ---- */

/* perf script's lines: a comm with spaces, a symbol with spaces; damage refused. */
TEST(perf_lines_parsed)
{
	struct hg_perf_sample ps;

	ASSERT_EQ(0, hg_perf_parse_line(" qemu-system-x86  4027 [000] 14214.682977950: cpu-clock:"
					"      55b5dfc3d42b [unknown] (/usr/bin/qemu-system-x86_64)\n",
					&ps));
	EXPECT_STREQ("qemu-system-x86", ps.comm);
	EXPECT_EQ(4027, ps.tid);
	EXPECT_EQ(0, ps.cpu);
	EXPECT_EQ(14214682977950ULL, ps.ts_ns);
	EXPECT_STREQ("cpu-clock", ps.event);
	EXPECT_STREQ("55b5dfc3d42b [unknown] (/usr/bin/qemu-system-x86_64)", ps.where);
	ASSERT_EQ(0, hg_perf_parse_line("  Web Content 12 [3] 1.000000001: cycles:  ffffffff81000000 "
					"operator new(unsigned long) (/usr/lib/libstdc++.so.6)", &ps));
	EXPECT_STREQ("Web Content", ps.comm);
	EXPECT_EQ(3, ps.cpu);
	EXPECT_EQ(1000000001ULL, ps.ts_ns);
	EXPECT_STREQ("ffffffff81000000 operator new(unsigned long) (/usr/lib/libstdc++.so.6)",
		     ps.where);
	/* A comm of digits and brackets cannot fake the head: 15 bytes are too few. */
	ASSERT_EQ(0, hg_perf_parse_line("1 [2] 3.4: x 9 [1] 5.000000006: e: 1 f (d)", &ps));
	EXPECT_STREQ("1 [2] 3.4: x", ps.comm);
	EXPECT_EQ(1, ps.cpu);
	EXPECT_EQ(-1, hg_perf_parse_line("sleep 12 [000] 1.00000000: e: 1 f (d)", &ps));	/* 8 digits */
	EXPECT_EQ(-1, hg_perf_parse_line("sleep 12 [8192] 1.000000000: e: 1 f (d)", &ps));	/* CPU */
	EXPECT_EQ(-1, hg_perf_parse_line("sleep 12 [0] 1.000000000: e 1 f (d)", &ps));	/* event */
	EXPECT_EQ(-1, hg_perf_parse_line("sleep 12 [0] 1.000000000: e:", &ps));		/* where */
	EXPECT_EQ(-1, hg_perf_parse_line("a-comm-longer-than-15 12 [0] 1.000000000: e: 1 f (d)", &ps));
	EXPECT_EQ(-1, hg_perf_parse_line("# perf script header", &ps));
}

/* A real perf.data, decoded by perf itself: every sample, each CPU in order. */
TEST(perf_data_decoded)
{
	const struct hg_perf_stats *st;
	struct hgev_header h;
	struct hg_perf p;
	struct hgev_rec r;
	char err[600];
	uint64_t n = 0, last[HGEV_MAX_CPUS] = { 0 }, back = 0;
	FILE *f;

	if (system("perf --version >/dev/null 2>&1"))
		SKIP(return, "no perf (tools/deps.sh installs linux-perf)");
	hg_perf_init(&p);
	hg_perf_start(&p, data("perf-sample.data"), "/tmp");
	ASSERT_EQ(0, hg_perf_finish(&p, err, sizeof(err))) TH_LOG("%s", err);
	st = &p.st;
	EXPECT_TRUE(st->decoded);
	EXPECT_EQ(58, st->nr_samples);
	EXPECT_EQ(0, st->nr_bad) TH_LOG("%s", st->first_bad);
	EXPECT_EQ(0, st->nr_unordered);
	EXPECT_STREQ("vm", st->host);
	f = fopen(p.path, "rb");
	ASSERT_NE(NULL, f);
	ASSERT_EQ(0, hgev_read_header(f, &h, err, sizeof(err)));
	EXPECT_EQ(HGEV_CLOCK_PERF, h.clock);
	EXPECT_STREQ("vm", h.nodename);
	while (hgev_read_record(f, &r, err, sizeof(err)) == 1) {
		back += r.ts < last[r.cpu];
		last[r.cpu] = r.ts;
		EXPECT_EQ(0, strncmp(r.text, "cpu-clock ", 10)) TH_LOG("%s", r.text);
		n++;
	}
	fclose(f);
	hg_perf_end(&p);
	EXPECT_EQ(58, n);
	EXPECT_EQ(0, back);
	/* Not perf's at all: refused with the first line. */
	hg_perf_init(&p);
	hg_perf_start(&p, data("merge.hgc"), "/tmp");
	EXPECT_EQ(-1, hg_perf_finish(&p, err, sizeof(err)));
	hg_perf_end(&p);
	EXPECT_NE(NULL, strstr(err, "not perf script")) TH_LOG("%s", err);
}

/*
 * A stand-in for perf in @dir (HGCLOCK_PERF): a shell script whose body
 * is @body, and a file with perf.data's magic for it to "decode".
 */
static void fake_perf(const char *dir, const char *body, char *data_path, size_t len)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/perf", dir);
	f = fopen(path, "w");
	if (f) {
		fprintf(f, "#!/bin/sh\n%s\n", body);
		fclose(f);
	}
	chmod(path, 0755);
	setenv("HGCLOCK_PERF", path, 1);
	snprintf(data_path, len, "%s/perf.data", dir);
	f = fopen(data_path, "w");
	if (f) {
		fputs("PERFILE2 not really", f);
		fclose(f);
	}
}

/* One conversion of @input through whatever HGCLOCK_PERF is; its result, @err. */
static int perf_convert(const char *input, const char *tmpdir, struct hg_perf *p, char *err,
			size_t len)
{
	int ret;

	hg_perf_init(p);
	hg_perf_start(p, input, tmpdir);
	ret = hg_perf_finish(p, err, len);
	return ret;
}

/* No child left, not even a zombie; nothing left in @dir but perf and perf.data. */
static bool all_reaped(void)
{
	return waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD;
}

static int dir_entries(const char *dir)
{
	char cmd[PATH_MAX + 32];
	FILE *f;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "ls -A '%s' | wc -l", dir);
	f = popen(cmd, "r");
	if (f) {
		if (fscanf(f, "%d", &n) != 1)
			n = -1;
		pclose(f);
	}
	return n;
}

/*
 * perf's failures, each said, its child reaped and no file left: perf
 * missing, exiting non-zero, killed mid-output, a -k clock in its header
 * (refused at once, perf script killed), a hostile line among samples
 * (counted, the others kept), and the command giving up while perf runs.
 */
TEST(perf_errors)
{
	char dir[] = "/tmp/hgclock-perf-err-XXXXXX", tmp[] = "/tmp/hgclock-perf-tmp-XXXXXX";
	char input[PATH_MAX + 16], err[600], body[1024];
	const char *line = "    app 12 [001] 5.000000001: cpu-clock:  ffff81000000 f ([k])";
	struct hg_perf p;
	time_t t0;

	ASSERT_NE(NULL, mkdtemp(dir));
	ASSERT_NE(NULL, mkdtemp(tmp));

	setenv("HGCLOCK_PERF", "/nonexistent/perf", 1);
	snprintf(input, sizeof(input), "%s", data("perf-sample.data"));
	EXPECT_EQ(-1, perf_convert(input, tmp, &p, err, sizeof(err)));
	hg_perf_end(&p);
	EXPECT_NE(NULL, strstr(err, "cannot run '/nonexistent/perf script'")) TH_LOG("%s", err);
	EXPECT_TRUE(all_reaped());

	fake_perf(dir, "echo 'no such file' >&2; exit 3", input, sizeof(input));
	EXPECT_EQ(-1, perf_convert(input, tmp, &p, err, sizeof(err)));
	hg_perf_end(&p);
	EXPECT_NE(NULL, strstr(err, "failed (exit 3)")) TH_LOG("%s", err);
	EXPECT_TRUE(all_reaped());

	fake_perf(dir, "echo '# hostname : h'; echo '    app 12 [001] 5.000000001: cpu'; "
		  "kill -9 $$", input, sizeof(input));
	EXPECT_EQ(-1, perf_convert(input, tmp, &p, err, sizeof(err)));
	hg_perf_end(&p);
	EXPECT_NE(NULL, strstr(err, "killed by signal 9")) TH_LOG("%s", err);
	EXPECT_TRUE(all_reaped());

	/* Refused from the header, while perf would run for a minute more. */
	fake_perf(dir, "echo '# hostname : h'; echo '# clockid: CLOCK_MONOTONIC (1)'; "
		  "exec sleep 60", input, sizeof(input));
	t0 = time(NULL);
	EXPECT_EQ(-1, perf_convert(input, tmp, &p, err, sizeof(err)));
	hg_perf_end(&p);
	EXPECT_GT(10, time(NULL) - t0);
	EXPECT_NE(NULL, strstr(err, "perf record -k (clock CLOCK_MONOTONIC (1))")) TH_LOG("%s", err);
	EXPECT_TRUE(all_reaped());

	/* Out of range (CPU 8192, a 20-digit tid, a 16-byte comm), cut short: counted, left out. */
	snprintf(body, sizeof(body), "echo '# hostname : h'; echo '%s'; "
		 "echo '    app 12 [8192] 5.000000002: cpu-clock:  1 f ([k])'; "
		 "echo '    app 99999999999999999999 [1] 5.000000003: cpu-clock:  1 f ([k])'; "
		 "echo 'sixteen-byte-com 12 [1] 5.000000004: cpu-clock:  1 f ([k])'; "
		 "echo '%s'; printf '    app 12 [001] 5.00000'", line, line);
	fake_perf(dir, body, input, sizeof(input));
	ASSERT_EQ(0, perf_convert(input, tmp, &p, err, sizeof(err))) TH_LOG("%s", err);
	EXPECT_EQ(2, p.st.nr_samples);
	EXPECT_EQ(4, p.st.nr_bad);
	EXPECT_NE(NULL, strstr(p.st.first_bad, "[8192]")) TH_LOG("%s", p.st.first_bad);
	EXPECT_STREQ("h", p.st.host);
	EXPECT_EQ(0, access(p.path, R_OK));
	hg_perf_end(&p);
	EXPECT_TRUE(all_reaped());

	/* Given up while perf runs: killed and reaped at once. */
	fake_perf(dir, "exec sleep 60", input, sizeof(input));
	t0 = time(NULL);
	hg_perf_init(&p);
	EXPECT_EQ(0, hg_perf_start(&p, input, tmp));
	hg_perf_end(&p);
	EXPECT_GT(10, time(NULL) - t0);
	EXPECT_TRUE(all_reaped());

	/* The event files had no name: nothing in the temporary directory. */
	EXPECT_EQ(0, dir_entries(tmp));
	unsetenv("HGCLOCK_PERF");
	rmdir(tmp);
	unlink(input);
	snprintf(input, sizeof(input), "%s/perf", dir);
	unlink(input);
	rmdir(dir);
}

static void check_report(struct __test_metadata *_metadata, const struct hgm_par *par,
			 const struct app_ev *hev, size_t nh);

/*
 * Host samples as perf script text, in perf's clock at the instants of
 * host trace events: each comes out at that trace event's local-clock
 * time, as "perf:cpu-clock" with the sample's comm, and in the JSON on
 * its CPU's track.
 */
TEST_F(rec, perf_text_merged)
{
	static struct app_ev hev[100];
	size_t nh = sample_trace(data("host.dat"), 5000, hev, 100, HGEV_KIND_INSTANT, 900);
	struct hgm_input_spec in[2] = { { .path = data("host.dat"), .guest = -1 },
					{ .path = "samples.txt", .guest = -1, .app = true,
					  .perf = true } };
	struct hgm_par par = { .sync = &self->sync, .inputs = in, .nr_inputs = 2, .nr_threads = 1 };
	char txt[] = "/tmp/hgclock-perf-txt-XXXXXX", err[600], want[256];
	struct hg_perf conv;
	struct hgm_par_result res;
	FILE *f, *tf = tmpfile(), *jf = tmpfile();
	size_t tlen, jlen, found = 0;
	char *text, *json;
	int fd = mkstemp(txt);

	ASSERT_LE(0, fd);
	ASSERT_LT(10, nh);
	f = fdopen(fd, "w");
	ASSERT_NE(NULL, f);
	fprintf(f, "# a comment line, as perf script -F ... --header writes\n");
	for (size_t i = 0; i < nh; i++) {
		uint64_t tsc, perf;

		ASSERT_EQ(0, hgsync_host_to_tsc(&self->sync, (int)hev[i].cpu, HGSYNC_CLOCK_SCHED,
						hev[i].ts, &tsc));
		ASSERT_EQ(0, hgsync_host_from_tsc(&self->sync, (int)hev[i].cpu, HGSYNC_CLOCK_LOCAL,
						  tsc, &perf));
		fprintf(f, "    my app %5u [%03u] %llu.%09llu: cpu-clock:  ffffffff8100%04zx "
			"do_work+0x%zx ([kernel.kallsyms])\n", 300 + (unsigned int)i, hev[i].cpu,
			(unsigned long long)(perf / 1000000000ULL),
			(unsigned long long)(perf % 1000000000ULL), i, i);
	}
	ASSERT_EQ(0, fclose(f));
	hg_perf_init(&conv);
	hg_perf_start(&conv, txt, "/tmp");
	ASSERT_EQ(0, hg_perf_finish(&conv, err, sizeof(err))) TH_LOG("%s", err);
	EXPECT_FALSE(conv.st.decoded);
	EXPECT_EQ(nh, conv.st.nr_samples);
	in[1].open_path = conv.path;
	ASSERT_TRUE(tf && jf);
	par.text = tf;
	par.json = jf;
	ASSERT_EQ(0, hgm_par_run(&par, &res, self->err, sizeof(self->err))) TH_LOG("%s", self->err);
	EXPECT_EQ(nh, res.in[1].nr_events);
	EXPECT_EQ(0, res.in[1].nr_unmapped);
	text = read_all(tf, &tlen);
	json = read_all(jf, &jlen);
	ASSERT_TRUE(text && json);
	for (size_t i = 0; i < nh; i++) {
		char ts[32];

		hgm_format_ts(ts, sizeof(ts), HGSYNC_CLOCK_SCHED, hev[i].ts);
		snprintf(want, sizeof(want), "%-12s %16s-%-5u [%03u] %s: %-20s "
			 "ffffffff8100%04zx do_work+0x%zx ([kernel.kallsyms])\n", "host", "my app",
			 300 + (unsigned int)i, hev[i].cpu, ts, "perf:cpu-clock", i, i);
		found += strstr(text, want) != NULL;
	}
	EXPECT_EQ(nh, found) TH_LOG("e.g. no '%s' in %.300s", want, strstr(text, "perf:") ?
				    strstr(text, "perf:") - 100 : text);
	EXPECT_NE(NULL, strstr(json, "\"name\":\"cpu-clock\",\"cat\":\"perf\""));
	check_report(_metadata, &par, hev, nh);
	free(text);
	free(json);
	fclose(tf);
	fclose(jf);
	hg_perf_end(&conv);
	unlink(txt);
	(void)err;
}

/* --report --sort comm,pcpu on perf_text_merged's samples: a row per host CPU, adding up. */
static void check_report(struct __test_metadata *_metadata, const struct hgm_par *par,
			 const struct app_ev *hev, size_t nh)
{
	{
		int keys[6], nk;
		FILE *rf = tmpfile();
		size_t rlen, per_cpu[2] = { 0 }, rows = 0, sum = 0;
		char *rep, *line, err[256];

		for (size_t i = 0; i < nh; i++)
			per_cpu[hev[i].cpu & 1]++;
		ASSERT_EQ(0, hgm_report_parse_sort("comm,pcpu", keys, &nk, err, sizeof(err)));
		EXPECT_EQ(-1, hgm_report_parse_sort("comm,cpu", keys + 2, &nk, err, sizeof(err)));
		EXPECT_EQ(-1, hgm_report_parse_sort("sym,sym", keys + 2, &nk, err, sizeof(err)));
		ASSERT_EQ(0, hgm_report_parse_sort("comm,pcpu", keys, &nk, err, sizeof(err)));
		ASSERT_NE(NULL, rf);
		ASSERT_EQ(0, hgm_report_run(par, keys, nk, rf, err, sizeof(err))) TH_LOG("%s", err);
		rep = read_all(rf, &rlen);
		ASSERT_NE(NULL, rep);

		for (line = strtok(rep, "\n"); line; line = strtok(NULL, "\n")) {
			unsigned long long n;
			double pct, of;
			char comm1[16], comm2[16];
			int cpu;

			if (line[0] == '#')
				continue;
			ASSERT_EQ(6, sscanf(line, " %lf%% %llu %lf%% %15s %15s %d", &pct, &n, &of, comm1,
					    comm2, &cpu)) {
				TH_LOG("%s", line);
			}
			EXPECT_STREQ("my", comm1);
			EXPECT_EQ(per_cpu[cpu & 1], n) TH_LOG("CPU %d", cpu);
			rows++;
			sum += n;
		}
		EXPECT_EQ((per_cpu[0] != 0) + (per_cpu[1] != 0), rows);
		EXPECT_EQ(nh, sum);
		free(rep);
		fclose(rf);
	}
}

TEST_HARNESS_MAIN

// SPDX-License-Identifier: GPL-2.0
/*
 * perf samples as merge input (merge --perf, --guest-perf): a perf.data
 * file is decoded by perf itself (`perf script`, Debian's linux-perf),
 * which also resolves the symbols, and its samples are written into an
 * application event file (appev.h) that the merge then reads as it reads
 * an application's: one stream per CPU, a guest's mapped per vCPU.
 * Documentation/merge.rst, "perf samples", says why perf's own decoder.
 *
 * The text perf script writes for
 *	perf script -F comm,tid,cpu,time,event,ip,sym,dso --ns
 * is also accepted as it is: a guest's samples are best decoded in the
 * guest, where its symbols are.  Each line is
 *	COMM TID [CPU] SEC.NSEC: EVENT: IP SYM (DSO)
 * with COMM right-aligned and at most 15 bytes (the kernel's TASK_COMM_LEN),
 * so the first " TID [CPU] SEC.NSEC: " in a line is never inside it.
 * Every field is checked: the text may come from a guest.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "appev.h"
#include "cmd.h"
#include "perf_in.h"

static const char *perf_prog(void)
{
	const char *p = getenv("HGCLOCK_PERF");

	return p && *p ? p : "perf";
}

/* Runs @argv with its standard output into the returned stream (and its pid). */
static FILE *run_reader(char *const argv[], pid_t *pid)
{
	int fds[2];
	FILE *f;

	if (pipe2(fds, O_CLOEXEC))
		return NULL;
	*pid = fork();
	if (*pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return NULL;
	}
	if (*pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	if (!f)
		close(fds[0]);
	return f;
}

static int wait_child(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Is @path a perf.data file (perf's "PERFILE2" magic)? */
static int is_perf_data(const char *path)
{
	char magic[8];
	FILE *f = fopen(path, "rbe");
	size_t n;

	if (!f)
		return -1;
	n = fread(magic, 1, sizeof(magic), f);
	fclose(f);
	return n == sizeof(magic) && !memcmp(magic, "PERFILE2", 8);
}

/*
 * The header of a perf.data, through perf report --header-only: its
 * host name, and whether the samples carry another clock than perf's
 * own (perf record -k).  0, or -1 when perf cannot read it.
 */
static int perf_header(const char *path, char *host, size_t host_len, char *clock,
		       size_t clock_len)
{
	char *argv[] = { (char *)perf_prog(), "report", "--header-only", "-i", (char *)path, NULL };
	char line[1024];
	pid_t pid;
	FILE *f = run_reader(argv, &pid);

	host[0] = clock[0] = '\0';
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strncmp(line, "# hostname : ", 13))
			snprintf(host, host_len, "%.*s", (int)(host_len - 1), line + 13);
		else if (!strncmp(line, "# clockid: ", 11))
			snprintf(clock, clock_len, "%.*s", (int)(clock_len - 1), line + 11);
	}
	fclose(f);
	return wait_child(pid) ? -1 : 0;
}

/* Decimal digits at *@p into *@v (at most @max); advances *@p.  false if none or too big. */
static bool take_u64(const char **p, uint64_t max, uint64_t *v)
{
	const char *s = *p;
	uint64_t x = 0;

	if (!isdigit((unsigned char)*s))
		return false;
	for (; isdigit((unsigned char)*s); s++) {
		if (x > (max - (uint64_t)(*s - '0')) / 10)
			return false;
		x = x * 10 + (uint64_t)(*s - '0');
	}
	*p = s;
	*v = x;
	return true;
}

/*
 * " TID [CPU] SEC.NSEC: " at @s: the sample's thread, CPU and time; @s
 * then points after it.  false if it is not there.
 */
static bool take_head(const char **s, struct hg_perf_sample *ps)
{
	const char *p = *s;
	uint64_t tid, cpu, sec, nsec;

	if (*p++ != ' ')
		return false;
	while (*p == ' ')
		p++;
	if (!take_u64(&p, UINT32_MAX, &tid) || *p++ != ' ' || *p++ != '[' ||
	    !take_u64(&p, HGEV_MAX_CPUS - 1, &cpu) || *p++ != ']' || *p++ != ' ')
		return false;
	while (*p == ' ')
		p++;
	if (!take_u64(&p, UINT64_MAX / 1000000000ULL - 1, &sec) || *p++ != '.')
		return false;
	{
		const char *d = p;

		if (!take_u64(&p, 999999999, &nsec) || p - d != 9)
			return false;
	}
	if (*p++ != ':' || *p != ' ')
		return false;
	ps->tid = (uint32_t)tid;
	ps->cpu = (uint32_t)cpu;
	ps->ts_ns = sec * 1000000000ULL + nsec;
	*s = p + 1;
	return true;
}

int hg_perf_parse_line(const char *line, struct hg_perf_sample *ps)
{
	const char *p = NULL, *head, *ev, *rest, *end;
	size_t n;

	memset(ps, 0, sizeof(*ps));
	/*
	 * The first place where " TID [CPU] SEC.NSEC: " parses: after COMM.
	 * take_head() fills @ps and moves p past the head only when it parses.
	 */
	for (head = line; *head; head++) {
		p = head;
		if (*head == ' ' && take_head(&p, ps))
			break;
	}
	if (!*head)
		return -1;
	/* COMM: what precedes, without the padding. */
	while (line < head && *line == ' ')
		line++;
	n = (size_t)(head - line);
	if (!n || n > 15)
		return -1;
	memcpy(ps->comm, line, n);
	ps->comm[n] = '\0';
	/* "EVENT: " then "IP SYM (DSO)". */
	while (*p == ' ')
		p++;
	ev = p;
	while (*p && *p != ' ')
		p++;
	if (p == ev || p[-1] != ':' || (size_t)(p - ev - 1) >= sizeof(ps->event))
		return -1;
	memcpy(ps->event, ev, (size_t)(p - ev - 1));
	ps->event[p - ev - 1] = '\0';
	while (*p == ' ')
		p++;
	rest = p;
	end = rest + strlen(rest);
	while (end > rest && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
		end--;
	n = (size_t)(end - rest);
	if (!n)
		return -1;
	if (n >= sizeof(ps->where))
		n = sizeof(ps->where) - 1;
	memcpy(ps->where, rest, n);
	ps->where[n] = '\0';
	return 0;
}

int hg_perf_to_events(const char *input, const char *tmpdir, char *out_path, size_t out_len,
		      struct hg_perf_stats *st, char *err, size_t err_len)
{
	char *argv[] = { (char *)perf_prog(), "script", "-i", (char *)input, "-F",
			 "comm,tid,cpu,time,event,ip,sym,dso", "--ns", NULL };
	unsigned char hdr[HGEV_HEADER_SIZE], rec[HGEV_REC_MAX];
	char line[4096], host[256] = "", clock[128] = "", text[HGEV_TEXT_MAX + 1];
	uint64_t *last = NULL;
	FILE *in, *out = NULL;
	pid_t pid = -1;
	int data, fd, ret = -1, rc;

	memset(st, 0, sizeof(*st));
	data = is_perf_data(input);
	if (data < 0) {
		snprintf(err, err_len, "%s: %s", input, strerror(errno));
		return -1;
	}
	if (data) {
		if (perf_header(input, host, sizeof(host), clock, sizeof(clock))) {
			snprintf(err, err_len, "%s: '%s report --header-only' cannot read it "
				 "(install linux-perf, or set HGCLOCK_PERF)", input, perf_prog());
			return -1;
		}
		if (clock[0]) {
			snprintf(err, err_len, "%s: recorded with perf record -k (clock %s): only "
				 "perf's own clock (local_clock) maps exactly; record without -k",
				 input, clock);
			return -1;
		}
		snprintf(st->host, sizeof(st->host), "%s", host);
		st->decoded = true;
		in = run_reader(argv, &pid);
	} else {
		in = fopen(input, "re");
	}
	if (!in) {
		snprintf(err, err_len, "%s: %s", input, strerror(errno));
		return -1;
	}
	snprintf(out_path, out_len, "%s/hgclock-perf-XXXXXX", tmpdir);
	fd = mkstemp(out_path);
	if (fd < 0 || !(out = fdopen(fd, "w"))) {
		snprintf(err, err_len, "%s: a temporary file in %s: %s", input, tmpdir,
			 strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlink(out_path);
		}
		goto out;
	}
	last = calloc(HGEV_MAX_CPUS, sizeof(*last));
	if (!last) {
		snprintf(err, err_len, "out of memory");
		goto out;
	}
	hgev_encode_header(hdr, HGEV_CLOCK_PERF, 0, "perf", host);
	if (fwrite(hdr, 1, sizeof(hdr), out) != sizeof(hdr)) {
		snprintf(err, err_len, "writing %s: %s", out_path, strerror(errno));
		goto out;
	}
	while (fgets(line, sizeof(line), in)) {
		struct hg_perf_sample ps;
		size_t n;

		if (line[0] == '#' || line[strspn(line, " \t\r\n")] == '\0')
			continue;
		if (hg_perf_parse_line(line, &ps)) {
			if (st->nr_bad++ < 1)
				snprintf(st->first_bad, sizeof(st->first_bad), "%.120s", line);
			continue;
		}
		/* perf script sorts the samples by time: each CPU's never go back. */
		if (ps.ts_ns < last[ps.cpu]) {
			st->nr_unordered++;
			continue;
		}
		last[ps.cpu] = ps.ts_ns;
		snprintf(text, sizeof(text), "%s %s", ps.event, ps.where);
		n = hgev_encode_record(rec, HGEV_KIND_INSTANT, 0, ps.cpu, ps.ts_ns, ps.tid, ps.comm,
				       text);
		if (!n || fwrite(rec, 1, n, out) != n) {
			snprintf(err, err_len, "writing %s: %s", out_path, strerror(errno));
			goto out;
		}
		st->nr_samples++;
	}
	if (fflush(out) || ferror(out)) {
		snprintf(err, err_len, "writing %s: %s", out_path, strerror(errno));
		goto out;
	}
	if (pid > 0) {
		fclose(in);
		in = NULL;
		rc = wait_child(pid);
		pid = -1;
		if (rc) {
			snprintf(err, err_len, "%s: '%s script' failed (exit %d): perf record -a "
				 "(or --sample-cpu) gives the CPU of each sample, which hgclock "
				 "needs", input, perf_prog(), rc);
			goto out;
		}
	}
	if (!st->nr_samples && st->nr_bad) {
		snprintf(err, err_len, "%s: not perf script -F comm,tid,cpu,time,event,ip,sym,dso "
			 "--ns output (first line: %s)", input, st->first_bad);
		goto out;
	}
	ret = 0;
out:
	if (in)
		fclose(in);
	if (pid > 0)
		wait_child(pid);
	if (out && fclose(out) && !ret) {
		snprintf(err, err_len, "writing %s: %s", out_path, strerror(errno));
		ret = -1;
	}
	if (ret && out)
		unlink(out_path);
	free(last);
	return ret;
}

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
 *
 * Time (Documentation/bench.rst, "perf samples"): perf script is most of
 * it.  So it starts first, with --header (the host name and a -k clock
 * come in the same stream: no second perf run), and a thread reads its
 * pipe as it writes while the command loads the correlation file; the
 * lines are cut in place in a large buffer, and the records gathered into
 * large writes of a file without a name, which nothing can leave behind.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "appev.h"
#include "perf_in.h"

extern char **environ;

/* The fields asked of perf script: each goes into the sample's record. */
#define PERF_FIELDS	"comm,tid,cpu,time,event,ip,sym,dso"

/*
 * Bytes of perf script's text held at once.  A line longer than that less
 * one is not a sample (the symbol is cut at 511 bytes anyway): counted as
 * a bad line and skipped to its end.
 */
#define PERF_IN_BUF	(256 * 1024)
/* Records gathered for one write() of the event file. */
#define PERF_OUT_BUF	(256 * 1024)

static const char *perf_prog(void)
{
	const char *p = getenv("HGCLOCK_PERF");

	return p && *p ? p : "perf";
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

/* The reader's state: what it has read, gathered and seen. */
struct conv {
	struct hg_perf *p;
	unsigned char *out;	/* the file's next bytes, written by flush() */
	size_t out_len;
	bool header_done;	/* the file's header is in @out or written */
	bool sampled;		/* a sample was seen: perf's '#' header is over */
	uint64_t *last;		/* per CPU: the last sample's time */
	char *err;
	size_t err_len;
};

/*
 * Writes what is gathered.  The file's header goes first, once: it holds
 * the host name, which perf's header gives before any sample.
 */
static int flush(struct conv *c)
{
	int ret = 0;

	if (!c->header_done) {
		unsigned char hdr[HGEV_HEADER_SIZE];

		hgev_encode_header(hdr, HGEV_CLOCK_PERF, 0, "perf", c->p->st.host);
		ret = hgev_write_all(c->p->ev_fd, hdr, sizeof(hdr));
		if (ret)
			goto fail;
		c->header_done = true;
	}
	if (c->out_len) {
		ret = hgev_write_all(c->p->ev_fd, c->out, c->out_len);
		if (ret)
			goto fail;
	}
	c->out_len = 0;
	return 0;
fail:
	snprintf(c->err, c->err_len, "%s: writing its samples to a temporary file: %s",
		 c->p->input, strerror(-ret));
	return -1;
}

/*
 * A '#' line of perf's header (perf script --header, before the first
 * sample): the host name (the first: a later one could come from the
 * recorded command line), and a clock other than perf's own, which is
 * refused (-1).
 */
static int header_line(struct conv *c, const char *line)
{
	struct hg_perf_stats *st = &c->p->st;

	if (!strncmp(line, "# hostname : ", 13) && !st->host[0]) {
		snprintf(st->host, sizeof(st->host), "%.*s", (int)(sizeof(st->host) - 1),
			 line + 13);
	} else if (!strncmp(line, "# clockid: ", 11)) {
		snprintf(c->err, c->err_len, "%s: recorded with perf record -k (clock %.100s): "
			 "only perf's own clock (local_clock) maps exactly; record without -k",
			 c->p->input, line + 11);
		return -1;
	}
	return 0;
}

/* One line, NUL-terminated, its newline gone: a sample into @c->out. */
static int take_line(struct conv *c, const char *line)
{
	struct hg_perf_stats *st = &c->p->st;
	char text[HGEV_TEXT_MAX + 1];
	struct hg_perf_sample ps;
	size_t n, el, wl;

	if (line[0] == '#') {
		if (st->decoded && !c->sampled)
			return header_line(c, line);
		return 0;
	}
	if (line[strspn(line, " \t\r\n")] == '\0')
		return 0;
	if (hg_perf_parse_line(line, &ps)) {
		if (st->nr_bad++ < 1)
			snprintf(st->first_bad, sizeof(st->first_bad), "%.120s", line);
		return 0;
	}
	c->sampled = true;
	/* perf script sorts the samples by time: each CPU's never go back. */
	if (ps.ts_ns < c->last[ps.cpu]) {
		st->nr_unordered++;
		return 0;
	}
	c->last[ps.cpu] = ps.ts_ns;
	/* "EVENT IP SYM (DSO)": at most 63 + 1 + 511 bytes, within the text's room. */
	el = strlen(ps.event);
	wl = strlen(ps.where);
	memcpy(text, ps.event, el);
	text[el] = ' ';
	memcpy(text + el + 1, ps.where, wl);
	if (c->out_len + HGEV_REC_MAX > PERF_OUT_BUF && flush(c))
		return -1;
	n = hgev_encode_record_len(c->out + c->out_len, HGEV_KIND_INSTANT, 0, ps.cpu, ps.ts_ns,
				   ps.tid, ps.comm, strlen(ps.comm), text, el + 1 + wl);
	if (!n) {
		snprintf(c->err, c->err_len, "%s: a sample that does not fit a record", c->p->input);
		return -1;
	}
	c->out_len += n;
	st->nr_samples++;
	return 0;
}

/*
 * Reads @p->in_fd to its end, a line at a time, until @p->stop_fd is
 * written.  0, or -1 with the reason in @err.
 */
static int read_samples(struct hg_perf *p, char *err, size_t err_len)
{
	struct pollfd pfd[2] = { { .fd = p->in_fd, .events = POLLIN },
				 { .fd = p->stop_fd, .events = POLLIN } };
	struct conv c = { .p = p, .err = err, .err_len = err_len };
	size_t have = 0;
	bool skipping = false;	/* inside a line too long for @buf */
	char *buf;
	int ret = -1;

	buf = malloc(PERF_IN_BUF);
	c.out = malloc(PERF_OUT_BUF);
	c.last = calloc(HGEV_MAX_CPUS, sizeof(*c.last));
	if (!buf || !c.out || !c.last) {
		snprintf(err, err_len, "out of memory");
		goto out;
	}
	for (;;) {
		char *line, *nl;
		ssize_t n;

		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			snprintf(err, err_len, "%s: poll: %s", p->input, strerror(errno));
			goto out;
		}
		if (pfd[1].revents) {
			snprintf(err, err_len, "%s: stopped", p->input);
			goto out;
		}
		n = read(p->in_fd, buf + have, PERF_IN_BUF - 1 - have);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			snprintf(err, err_len, "%s: reading %s: %s", p->input,
				 p->st.decoded ? "perf script's output" : "it", strerror(errno));
			goto out;
		}
		if (!n)
			break;
		have += (size_t)n;
		line = buf;
		while ((nl = memchr(line, '\n', have - (size_t)(line - buf)))) {
			*nl = '\0';
			if (skipping)
				skipping = false;
			else if (take_line(&c, line))
				goto out;
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		if (have == PERF_IN_BUF - 1) {
			/* No newline in a full buffer: not a sample; its rest is skipped. */
			buf[have] = '\0';
			if (!skipping && p->st.nr_bad++ < 1)
				snprintf(p->st.first_bad, sizeof(p->st.first_bad), "%.120s", buf);
			skipping = true;
			have = 0;
		} else if (have && line != buf) {
			memmove(buf, line, have);
		}
	}
	/* A last line without its newline, as it is. */
	if (have && !skipping) {
		buf[have] = '\0';
		if (take_line(&c, buf))
			goto out;
	}
	ret = flush(&c);
out:
	free(c.last);
	free(c.out);
	free(buf);
	return ret;
}

static void *reader_main(void *arg)
{
	struct hg_perf *p = arg;

	p->rd_ret = read_samples(p, p->rd_err, sizeof(p->rd_err));
	/* perf script, if it still writes, gets EPIPE: the reader owned this. */
	close(p->in_fd);
	p->in_fd = -1;
	return NULL;
}

/*
 * perf script on @p->input, its standard output into a pipe for the
 * reader (its standard error is the command's: perf's own messages).  The
 * child gets the default SIGPIPE and no blocked signal, whatever the
 * command's threads have, so that it ends when the reader stops reading.
 */
static int spawn_perf(struct hg_perf *p)
{
	char *argv[] = { (char *)perf_prog(), "script", "--header", "-i", (char *)p->input,
			 "-F", PERF_FIELDS, "--ns", NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, dfl;
	int fds[2], rc;

	if (pipe2(fds, O_CLOEXEC)) {
		snprintf(p->rd_err, sizeof(p->rd_err), "%s: pipe: %s", p->input, strerror(errno));
		return -1;
	}
	sigemptyset(&none);
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGPIPE);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
	posix_spawnattr_init(&at);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &dfl);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	rc = posix_spawnp(&p->pid, argv[0], &fa, &at, argv, environ);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	/* The child's copy is its standard output; ours would hide its end. */
	close(fds[1]);
	if (rc) {
		p->pid = -1;
		close(fds[0]);
		snprintf(p->rd_err, sizeof(p->rd_err), "%s: cannot run '%s script': %s (install "
			 "linux-perf, or set HGCLOCK_PERF)", p->input, argv[0], strerror(rc));
		return -1;
	}
	p->in_fd = fds[0];
	return 0;
}

void hg_perf_init(struct hg_perf *p)
{
	memset(p, 0, sizeof(*p));
	p->pid = -1;
	p->in_fd = p->ev_fd = p->stop_fd = -1;
}

/*
 * The event file: unnamed in @tmpdir (O_TMPFILE), so that no exit, not
 * even a killed one, leaves it behind; in memory where the file system
 * cannot.  The merge opens it by /proc/self/fd while @p holds it.
 */
static int open_events(struct hg_perf *p, const char *tmpdir)
{
	p->ev_fd = open(tmpdir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (p->ev_fd < 0)
		p->ev_fd = memfd_create("hgclock-perf", MFD_CLOEXEC);
	if (p->ev_fd < 0) {
		snprintf(p->rd_err, sizeof(p->rd_err), "%s: a temporary file in %s: %s",
			 p->input, tmpdir, strerror(errno));
		return -1;
	}
	snprintf(p->path, sizeof(p->path), "/proc/self/fd/%d", p->ev_fd);
	return 0;
}

int hg_perf_start(struct hg_perf *p, const char *input, const char *tmpdir)
{
	int data, rc;

	p->input = input;
	p->rd_ret = -1;
	data = is_perf_data(input);
	if (data < 0) {
		snprintf(p->rd_err, sizeof(p->rd_err), "%s: %s", input, strerror(errno));
		return -1;
	}
	if (open_events(p, tmpdir))
		return -1;
	p->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->stop_fd < 0) {
		snprintf(p->rd_err, sizeof(p->rd_err), "eventfd: %s", strerror(errno));
		return -1;
	}
	if (data) {
		p->st.decoded = true;
		if (spawn_perf(p))
			return -1;
	} else {
		p->in_fd = open(input, O_RDONLY | O_CLOEXEC);
		if (p->in_fd < 0) {
			snprintf(p->rd_err, sizeof(p->rd_err), "%s: %s", input, strerror(errno));
			return -1;
		}
	}
	/* Before the thread runs: from then on @rd_ret is its to set. */
	p->rd_ret = 0;
	rc = pthread_create(&p->reader, NULL, reader_main, p);
	if (rc) {
		p->rd_ret = -1;
		snprintf(p->rd_err, sizeof(p->rd_err), "%s: a thread: %s", input, strerror(rc));
		return -1;
	}
	p->reading = true;
	return 0;
}

int hg_perf_finish(struct hg_perf *p, char *err, size_t err_len)
{
	int rc = 0;

	if (p->reading) {
		pthread_join(p->reader, NULL);
		p->reading = false;
	}
	/* Not reaped yet, so still our child: a reader's error ends it. */
	if (p->rd_ret && p->pid > 0)
		kill(p->pid, SIGKILL);
	if (p->pid > 0) {
		rc = wait_child(p->pid);
		p->pid = -1;
	}
	if (p->rd_ret) {
		snprintf(err, err_len, "%s", p->rd_err);
		return -1;
	}
	if (rc > 128) {
		snprintf(err, err_len, "%s: '%s script' was killed by signal %d: its output is "
			 "incomplete", p->input, perf_prog(), rc - 128);
		return -1;
	}
	if (rc) {
		snprintf(err, err_len, "%s: '%s script' failed (exit %d): a perf.data it cannot "
			 "read, or without the CPU of each sample (perf record -a or --sample-cpu "
			 "gives it, which hgclock needs)", p->input, perf_prog(), rc);
		return -1;
	}
	if (!p->st.nr_samples && p->st.nr_bad) {
		snprintf(err, err_len, "%s: not perf script -F " PERF_FIELDS " --ns output "
			 "(first line: %s)", p->input, p->st.first_bad);
		return -1;
	}
	return 0;
}

void hg_perf_end(struct hg_perf *p)
{
	uint64_t one = 1;

	/*
	 * An error elsewhere: the reader gives up at its next poll, and perf
	 * script, killed, stops writing (it is not reaped yet, so the pid is
	 * still its own).
	 */
	if (p->reading) {
		ssize_t w = write(p->stop_fd, &one, sizeof(one));

		(void)w;	/* cannot fail: the counter is 0 */
		if (p->pid > 0)
			kill(p->pid, SIGKILL);
		pthread_join(p->reader, NULL);
		p->reading = false;
	}
	if (p->pid > 0) {
		kill(p->pid, SIGKILL);
		wait_child(p->pid);
		p->pid = -1;
	}
	if (p->in_fd >= 0)
		close(p->in_fd);
	if (p->stop_fd >= 0)
		close(p->stop_fd);
	if (p->ev_fd >= 0)
		close(p->ev_fd);
	p->in_fd = p->stop_fd = p->ev_fd = -1;
}

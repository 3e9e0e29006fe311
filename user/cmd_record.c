// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock record -o FILE [--duration SEC] [--period MS]: records this
 * host's clock data into a correlation file: the module's INFO, then every
 * record of every CPU's ring (CYC2NS snapshots, vCPU tracking, KVM TSC
 * offset changes, losses) as it arrives, until the duration ends or
 * SIGINT/SIGTERM.  Then it drains what is left, writes the END section and
 * closes: the file is valid up to its last section at any time, and
 * complete after a clean stop.  A status line is shown on a terminal.
 *
 * Pairing with guests (hgclock agent) is not built yet: this records the
 * host side, which is what converts and annotates guest events once the
 * guests' data joins it.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "corr.h"
#include "libhgclock.h"
#include "proto.h"

#define HG_MAX_GUESTS 8

struct guest {
	const char *spec;
	int fd;			/* -1 once the session is over */
	uint32_t id;		/* index: the guest id in the file */
	uint64_t records;
};

/* Connects, says HELLO, writes the guest's INFO to the file. */
static int guest_open(struct guest *g, struct hgcor_writer *w, uint8_t *buf)
{
	struct hgp_hello hello = { HGP_VERSION_MAJOR, HGP_VERSION_MINOR, 0 };
	struct timeval tv = { .tv_sec = 10 };
	struct hgp_header h;
	char err[300];
	uint32_t prefix[2] = { g->id, 0 };
	int ret;

	g->fd = hgp_connect(g->spec, err, sizeof(err));
	if (g->fd < 0) {
		hg_err("guest %s", err);
		return g->fd;
	}
	setsockopt(g->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ret = hgp_send(g->fd, HGP_HELLO, &hello, sizeof(hello));
	if (!ret)
		ret = hgp_recv(g->fd, &h, buf);
	if (!ret && h.type == HGP_ERROR) {
		hg_err("guest %s: %.*s", g->spec, (int)h.length, (char *)buf);
		ret = -EPROTO;
	} else if (!ret && (h.type != HGP_HELLO_REPLY ||
			    h.length < sizeof(hello) + HGCLOCK_INFO_SIZE_VER0)) {
		hg_err("guest %s: not an hgclock agent (bad reply)", g->spec);
		ret = -EPROTO;
	} else if (ret) {
		hg_err("guest %s: %s", g->spec, strerror(-ret));
	}
	if (!ret) {
		memcpy(&hello, buf, sizeof(hello));
		if (hello.major != HGP_VERSION_MAJOR) {
			hg_err("guest %s speaks protocol %u.%u, this host %u.%u",
			       g->spec, hello.major, hello.minor,
			       HGP_VERSION_MAJOR, HGP_VERSION_MINOR);
			ret = -EPROTO;
		}
	}
	if (!ret)
		ret = hgcor_write_section2(w, HGCOR_SEC_GUEST_INFO, 0, prefix, sizeof(prefix),
					   buf + sizeof(hello), h.length - sizeof(hello));
	if (ret) {
		close(g->fd);
		g->fd = -1;
		return ret;
	}
	/* Blocking reads from here: poll() says when. */
	tv.tv_sec = 0;
	setsockopt(g->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return 0;
}

/* One message from a guest: records go to the file; BYE/ERROR end it. */
static int guest_message(struct guest *g, struct hgcor_writer *w, uint8_t *buf)
{
	uint32_t prefix[2] = { g->id, 0 };
	struct hgp_header h;
	int ret = hgp_recv(g->fd, &h, buf);

	if (!ret && h.type == HGP_RECORDS) {
		if (hgcor_walk_records(buf, h.length, NULL, NULL)) {
			hg_err("guest %s: malformed records", g->spec);
			ret = -EPROTO;
		} else {
			ret = hgcor_write_section2(w, HGCOR_SEC_GUEST_RECORDS, 0, prefix,
						   sizeof(prefix), buf, h.length);
			g->records++;
			return ret;
		}
	} else if (!ret && h.type == HGP_ERROR) {
		hg_err("guest %s: %.*s", g->spec, (int)h.length, (char *)buf);
	} else if (ret && ret != -ECONNRESET) {
		hg_err("guest %s: %s", g->spec, strerror(-ret));
	}
	/*
	 * BYE, ERROR, closed or broken: this guest's session is over (said
	 * above); the recording goes on with the host and the other guests.
	 */
	close(g->fd);
	g->fd = -1;
	return 0;
}

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* Sections of host records are at most this long (a ring may be 64 MiB). */
#define HG_SECTION_MAX	(4u << 20)

struct host_sink {
	struct hgcor_writer *w;
	const char *path;
	uint64_t total, lost;
};

static int write_host_batch(const struct hg_batch *b, void *ctx)
{
	struct host_sink *sink = ctx;
	int ret = hgcor_write_section(sink->w, HGCOR_SEC_HOST_RECORDS, 0, b->buf, b->len);

	if (ret) {
		hg_err("%s: %s", sink->path, strerror(-ret));
		return ret;
	}
	sink->total += b->nr;
	sink->lost += b->lost;
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void record_usage(FILE *out)
{
	fprintf(out,
		"usage: hgclock record -o FILE [--duration SEC] [--period MS] [--guest SPEC]...\n"
		"Records this host's clock data (per-CPU conversions, vCPU tracking,\n"
		"KVM TSC offset changes) into a correlation file until SEC seconds\n"
		"have passed or it is interrupted (Ctrl-C): the file is then complete.\n"
		"--period sets the module's snapshot period while recording.\n"
		"--guest vsock:CID[:PORT] or tcp:HOST:PORT adds a guest running\n"
		"'hgclock agent': its clock data joins the file.\n");
}

int cmd_record(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "duration", required_argument, NULL, 'd' },
		{ "period", required_argument, NULL, 'p' },
		{ "guest", required_argument, NULL, 'g' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t duration_s = 0, period_ms = 0;
	struct hgclock_ring_config cfg, saved;
	struct hg_batch b = { .max = HG_SECTION_MAX };
	struct hgcor_writer w;
	struct host_sink sink = { .w = &w };
	struct hgclock_info info;
	struct hgclock_map map;
	const char *out = NULL;
	double start, last_status = 0;
	bool tty = isatty(STDERR_FILENO), period_set = false;
	struct guest guests[HG_MAX_GUESTS];
	unsigned int nr_guests = 0, g;
	uint8_t *gbuf = NULL;
	char note[512];
	int c, fd, ret, i;

	while ((c = getopt_long(argc, argv, "o:d:p:g:h", opts, NULL)) != -1) {
		switch (c) {
		case 'g':
			if (nr_guests == HG_MAX_GUESTS) {
				hg_err("at most %d guests", HG_MAX_GUESTS);
				return HGCLOCK_EXIT_USAGE;
			}
			guests[nr_guests].spec = optarg;
			guests[nr_guests].id = nr_guests;
			guests[nr_guests].fd = -1;
			nr_guests++;
			break;
		case 'o':
			out = optarg;
			break;
		case 'd':
			if (!parse_u64(optarg, 86400 * 365, &duration_s) || !duration_s) {
				hg_err("--duration wants seconds, not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'p':
			if (!parse_u64(optarg, 3600 * 1000, &period_ms) || !period_ms) {
				hg_err("--period wants milliseconds (1 or more), not '%s'", optarg);
				return HGCLOCK_EXIT_USAGE;
			}
			break;
		case 'h':
			record_usage(stdout);
			return HGCLOCK_EXIT_OK;
		default:
			record_usage(stderr);
			return HGCLOCK_EXIT_USAGE;
		}
	}
	if (!out || optind != argc) {
		if (!out)
			hg_err("-o FILE is required");
		record_usage(stderr);
		return HGCLOCK_EXIT_USAGE;
	}
	fd = hg_open_device();
	if (fd < 0)
		return -fd;
	ret = hgclock_get_info(fd, &info);
	if (ret) {
		hg_err("GET_INFO failed: %s", strerror(-ret));
		close(fd);
		return ret == -EPROTO ? HGCLOCK_EXIT_ABI : HGCLOCK_EXIT_FAILURE;
	}
	ret = hg_map_consumer(fd, &map);
	if (ret) {
		close(fd);
		return HGCLOCK_EXIT_FAILURE;
	}
	sink.path = out;
	b.buf = malloc(b.max);
	if (!b.buf) {
		ret = HGCLOCK_EXIT_FAILURE;
		goto out_map;
	}
	ret = hgcor_create(&w, out);
	if (ret) {
		hg_err("%s: %s", out, strerror(-ret));
		ret = HGCLOCK_EXIT_FAILURE;
		goto out_map;
	}
	/* Start from now, with every CPU's conversion in the stream first. */
	hgclock_ring_skip_all(&map);
	if (period_ms) {
		memset(&saved, 0, sizeof(saved));
		memset(&cfg, 0, sizeof(cfg));
		cfg.flags = HGCLOCK_CFG_SET_PERIOD;
		cfg.snapshot_period_ns = period_ms * 1000000ull;
		if (hgclock_ring_config(fd, &saved) || hgclock_ring_config(fd, &cfg))
			hg_err("cannot set the snapshot period: %s", strerror(errno));
		else
			period_set = true;
	}
	hgclock_snapshot(fd, -1);

	{
		char host[65] = "";

		gethostname(host, sizeof(host) - 1);
		snprintf(note, sizeof(note), "hgclock record on %s; host abi %u.%u",
			 host, info.abi_major, info.abi_minor);
	}
	for (i = 0; i < argc; i++) {
		size_t l = strlen(note);

		snprintf(note + l, sizeof(note) - l, "%s%s", i ? " " : "; argv: ", argv[i]);
	}
	ret = hgcor_write_section(&w, HGCOR_SEC_HOST_INFO, 0, &info, sizeof(info));
	if (!ret)
		ret = hgcor_write_section(&w, HGCOR_SEC_NOTE, 0, note, strlen(note));
	if (nr_guests) {
		gbuf = malloc(HGP_MAX_PAYLOAD);
		if (!gbuf)
			ret = -ENOMEM;
	}
	for (g = 0; g < nr_guests && !ret; g++)
		ret = guest_open(&guests[g], &w, gbuf);
	signal(SIGPIPE, SIG_IGN);

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	start = now_s();
	while (!ret) {
		struct pollfd pfd[1 + HG_MAX_GUESTS];
		bool last = stop || (duration_s && now_s() - start >= duration_s);

		/* Everything read is written before the next read. */
		ret = hg_drain_batched(&map, &b, write_host_batch, &sink);
		if (ret)
			break;
		if (tty && (now_s() - last_status >= 1 || last)) {
			last_status = now_s();
			fprintf(stderr, "\rhgclock record: %.0f s, %llu records, %llu lost, %llu bytes  ",
				last_status - start, (unsigned long long)sink.total,
				(unsigned long long)sink.lost, (unsigned long long)w.bytes);
		}
		if (last)
			break;
		pfd[0].fd = fd;
		pfd[0].events = POLLIN;
		for (g = 0; g < nr_guests; g++) {
			pfd[1 + g].fd = guests[g].fd;	/* -1: ignored */
			pfd[1 + g].events = POLLIN;
			pfd[1 + g].revents = 0;
		}
		if (poll(pfd, 1 + nr_guests, 200) < 0 && errno != EINTR) {
			ret = -errno;
			hg_err("poll: %s", strerror(errno));
		}
		for (g = 0; g < nr_guests && !ret; g++)
			if (guests[g].fd >= 0 && (pfd[1 + g].revents & (POLLIN | POLLHUP | POLLERR)))
				ret = guest_message(&guests[g], &w, gbuf);
	}
	/*
	 * Ask each guest to finish: it sends what its rings still hold, then
	 * BYE.  What arrives is written; a guest gets 5 s.
	 */
	for (g = 0; g < nr_guests; g++) {
		double until = now_s() + 5;

		if (guests[g].fd < 0)
			continue;
		hgp_send(guests[g].fd, HGP_BYE, NULL, 0);
		while (!ret && guests[g].fd >= 0 && now_s() < until) {
			struct pollfd one = { .fd = guests[g].fd, .events = POLLIN };

			if (poll(&one, 1, 500) > 0)
				ret = guest_message(&guests[g], &w, gbuf);
		}
		if (guests[g].fd >= 0) {
			close(guests[g].fd);
			guests[g].fd = -1;
		}
	}
	for (g = 0; g < nr_guests; g++)
		fprintf(stderr, "hgclock record: guest %s: %llu record batches\n",
			guests[g].spec, (unsigned long long)guests[g].records);
	if (tty)
		fputc('\n', stderr);
	if (period_set) {
		saved.flags = HGCLOCK_CFG_SET_PERIOD;
		hgclock_ring_config(fd, &saved);
	}
	/* END only after a clean run: a failed one must not look complete. */
	if (ret)
		hgcor_abort(&w);
	else if (hgcor_close(&w))
		ret = -EIO;
	if (!ret)
		fprintf(stderr, "hgclock record: %s: %llu records (%llu lost in the kernel), %llu bytes\n",
			out, (unsigned long long)sink.total, (unsigned long long)sink.lost,
			(unsigned long long)w.bytes);
	ret = ret ? HGCLOCK_EXIT_FAILURE : HGCLOCK_EXIT_OK;
out_map:
	for (g = 0; g < nr_guests; g++)
		if (guests[g].fd >= 0)
			close(guests[g].fd);
	free(gbuf);
	free(b.buf);
	hgclock_map_close(&map);
	close(fd);
	return ret;
}

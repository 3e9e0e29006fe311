// SPDX-License-Identifier: GPL-2.0
/*
 * hgclock merge's check that its inputs belong together, as far as the
 * files say (check_claims()): a file given twice, a host trace that a
 * guest's trace names as its host or that was recorded on another machine
 * than the correlation file's host, more CPUs than that host has, a guest
 * trace recorded on the host itself, application events of another
 * machine.  The names it compares come from the correlation file's NOTE
 * (corr_host_name()) and each trace's uname.  Called by cmd_merge.c before
 * anything is merged; --force skips it.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <trace-cmd.h>

#include "appev.h"
#include "claims.h"
#include "cmd.h"
#include "corr.h"
#include "libhgclock.h"
#include "markpair.h"
#include "merge.h"
#include "output.h"
#include "perf_in.h"
#include "trace_pool.h"
#include "tracecmd_priv.h"

/* The host name 'record' wrote into its NOTE ("hgclock record on NAME; ..."), or "". */
void corr_host_name(const void *buf, size_t len, char *name, size_t size)
{
	static const char prefix[] = "hgclock record on ";
	struct hgcor_reader r;
	struct hgcor_view v;

	name[0] = '\0';
	if (hgcor_open(&r, buf, len))
		return;
	while (hgcor_next(&r, &v) > 0) {
		const char *note = (const char *)v.payload, *end;

		if (v.type != HGCOR_SEC_NOTE || v.length <= sizeof(prefix) - 1 ||
		    memcmp(note, prefix, sizeof(prefix) - 1))
			continue;
		note += sizeof(prefix) - 1;
		end = memchr(note, ';', v.length - (sizeof(prefix) - 1));
		if (end && (size_t)(end - note) < size) {
			memcpy(name, note, (size_t)(end - note));
			name[end - note] = '\0';
		}
		hgcor_release(&r);	/* stopped before the end */
		return;
	}
}

/*
 * The nodename in a trace.dat's uname ("sysname nodename release ..."),
 * as it is: "(none)" too, the kernel's name for a machine never named.
 * "" when the file has no uname.
 */
static void trace_nodename(struct tracecmd_input *h, char *name, size_t size)
{
	const char *u = tracecmd_get_uname(h), *p, *e;

	name[0] = '\0';
	if (!u || !(p = strchr(u, ' ')))
		return;
	p++;
	e = strchr(p, ' ');
	if (!e)
		e = p + strlen(p);
	if ((size_t)(e - p) < size) {
		memcpy(name, p, (size_t)(e - p));
		name[e - p] = '\0';
	}
}

/*
 * The host name in a trace.dat's uname ("Linux NAME release machine"):
 * its nodename, "" for none or the kernel's "(none)".
 */
static void trace_host_name(struct tracecmd_input *h, char *name, size_t size)
{
	trace_nodename(h, name, size);
	if (!strncmp(name, "(none)", 6))
		name[0] = '\0';
}

/*
 * Guest @gid's identity from its agent (GUEST_IDENTITY, format 1.3; the
 * last one wins): true, or false when the file has none (an older agent,
 * a guest recorded without one).  The reader checked its strings
 * (corr_check.c): terminated, printable, no spaces.
 */
static bool corr_guest_identity(const void *buf, size_t len, uint32_t gid,
				struct hgcor_identity *id)
{
	struct hgcor_reader r;
	struct hgcor_view v;
	bool found = false;

	if (hgcor_open(&r, buf, len))
		return false;
	while (hgcor_next(&r, &v) > 0) {
		uint32_t g;

		if (v.type != HGCOR_SEC_GUEST_IDENTITY || v.length != 8 + sizeof(*id))
			continue;
		memcpy(&g, v.payload, sizeof(g));
		if (g != gid)
			continue;
		memcpy(id, v.payload + 8, sizeof(*id));
		found = true;
	}
	return found;
}

/*
 * Is guest trace @in (open as @h) that guest's?  Its uname's nodename
 * against the one the guest's agent sent (IDENTITY), literally: "(none)"
 * is a name too (a guest never named), and both are read while the same
 * guest runs, so they differ only if the trace is another machine's.
 * Writes the reason into @msg and returns true when it is not; sets
 * *@unchecked when the file has no identity for that guest.
 */
static bool guest_trace_mismatch(const struct hgsync *s, const void *buf, size_t len,
				 const struct hgm_input_spec *in, struct tracecmd_input *h,
				 bool *unchecked, char *msg, size_t size)
{
	const struct hgsync_guest *sg;
	struct hgcor_identity id;
	char name[256], who[64] = "";

	if (in->guest < 0 || (unsigned int)in->guest >= s->nr_guests)
		return false;	/* a guest the file does not have: the merge says so */
	sg = &s->guests[in->guest];
	if (sg->vm.spec[0])
		snprintf(who, sizeof(who), " (%.16s)", sg->vm.spec);
	if (!corr_guest_identity(buf, len, (uint32_t)in->guest, &id)) {
		*unchecked = true;
	} else {
		trace_nodename(h, name, sizeof(name));
		if (name[0] && strcmp(name, id.nodename)) {
			snprintf(msg, size, "guest %d's trace %s was recorded on host '%s', but "
				 "guest %d%s is '%s'", in->guest, in->path, name, in->guest, who,
				 id.nodename);
			return true;
		}
	}
	/* Its CPU count against the guest's is the merge's (merge.c), --force or not. */
	return false;
}

/*
 * Is application event file @in the machine's it is given for?  Its
 * header's node name against the correlation file's host (for --app) or
 * the guest's identity (--guest-app), as for traces.  Unreadable files
 * are the merge's to report.  Writes the reason into @msg and returns
 * true when it is not.
 */
static bool app_mismatch(const struct hgsync *s, const void *buf, size_t len,
			 const struct hgm_input_spec *in, const char *corr_host, char *msg,
			 size_t size)
{
	struct hgcor_identity id;
	struct hgev_header h;
	char why[256];
	FILE *f = fopen(in->path, "rbe");
	int bad;

	if (!f)
		return false;
	bad = hgev_read_header(f, &h, why, sizeof(why));
	fclose(f);
	if (bad || !h.nodename[0])
		return false;
	if (in->guest < 0) {
		if (corr_host[0] && strcmp(h.nodename, corr_host)) {
			snprintf(msg, size, "%s: the application ran on '%s', but the correlation "
				 "file's host is '%s': a guest's (--guest-app)?", in->path,
				 h.nodename, corr_host);
			return true;
		}
		return false;
	}
	if (corr_host[0] && !strcmp(h.nodename, corr_host)) {
		snprintf(msg, size, "%s: the application ran on the correlation file's host '%s', "
			 "not in guest %d (--app)?", in->path, h.nodename, in->guest);
		return true;
	}
	if ((unsigned int)in->guest < s->nr_guests &&
	    corr_guest_identity(buf, len, (uint32_t)in->guest, &id) &&
	    strcmp(h.nodename, id.nodename)) {
		snprintf(msg, size, "%s: the application ran on '%s', but guest %d is '%s'",
			 in->path, h.nodename, in->guest, id.nodename);
		return true;
	}
	return false;
}

/*
 * Do the inputs belong together, as far as the files say?  A file given
 * twice, a host trace that a guest's trace names as its host (trace-cmd
 * record -A records the peers' trace ids) or recorded on another machine
 * than the correlation file's host, more CPUs than that host has, or a
 * guest trace recorded on the host itself.  One line with the reason;
 * HGCLOCK_EXIT_OK or HGCLOCK_EXIT_BAD_INPUT.  --force skips this.
 */
int check_claims(const struct hgsync *s, const void *buf, size_t len,
		 const struct hgm_input_spec *in, int n, bool force, bool quiet,
		 const char *corr)
{
	char unchecked_ids[128] = "";
	size_t nr_unchecked = 0;
	/* Per input, on the heap: up to HGM_MAX_INPUTS of them (155 KB). */
	struct tracecmd_input **h = calloc((size_t)n, sizeof(*h));
	const char **paths = calloc((size_t)n, sizeof(*paths));
	struct stat *st = calloc((size_t)n, sizeof(*st));
	char corr_host[256], name[256];
	const char *why = NULL;
	char msg[1024];
	int ret = HGCLOCK_EXIT_OK;

	if (!h || !st || !paths) {
		free(h);
		free(paths);
		free(st);
		hg_err("out of memory");
		return HGCLOCK_EXIT_FAILURE;
	}
	corr_host_name(buf, len, corr_host, sizeof(corr_host));
	/* Unreadable files are the merge's to report, with its words. */
	for (int i = 0; i < n; i++)
		paths[i] = in[i].app ? NULL : in[i].path;
	hg_trace_open_all(paths, n, h);
	free(paths);
	for (int i = 0; i < n; i++) {
		if (stat(in[i].path, &st[i]))
			memset(&st[i], 0, sizeof(st[i]));
		for (int j = 0; j < i && !why; j++)
			if (st[i].st_ino && st[i].st_dev == st[j].st_dev &&
			    st[i].st_ino == st[j].st_ino) {
				snprintf(msg, sizeof(msg), "%s and %s are the same file: one trace "
					 "cannot be two machines'", in[j].path, in[i].path);
				why = msg;
			}
	}
	for (int i = 0; i < n && !why; i++) {
		if (in[i].app) {
			if (app_mismatch(s, buf, len, &in[i], corr_host, msg, sizeof(msg)))
				why = msg;
			continue;
		}
		if (!h[i])
			continue;
		trace_host_name(h[i], name, sizeof(name));
		if (in[i].guest < 0) {
			for (int j = 0; j < n && !why; j++) {
				const char *gname = NULL;
				const int *pids;
				int vcpus;

				if (j == i || !h[j] ||
				    tracecmd_get_guest_cpumap(h[j], tracecmd_get_traceid(h[i]), &gname,
							      &vcpus, &pids))
					continue;
				snprintf(msg, sizeof(msg), "%s is a guest's trace, not the host's: %s "
					 "names it as its guest%s%s", in[i].path, in[j].path,
					 gname && *gname ? " " : "", gname ? gname : "");
				why = msg;
			}
			if (!why && corr_host[0] && name[0] && strcmp(name, corr_host)) {
				snprintf(msg, sizeof(msg), "%s was recorded on '%s', but the correlation "
					 "file's host is '%s': not the host's trace?", in[i].path, name,
					 corr_host);
				why = msg;
			}
			if (!why && s->host_info.nr_cpu_ids &&
			    (unsigned int)tracecmd_cpus(h[i]) > s->host_info.nr_cpu_ids) {
				snprintf(msg, sizeof(msg), "%s has %d CPUs, but the correlation file's "
					 "host has %u: not the host's trace?", in[i].path,
					 tracecmd_cpus(h[i]), s->host_info.nr_cpu_ids);
				why = msg;
			}
		} else if (corr_host[0] && name[0] && !strcmp(name, corr_host)) {
			snprintf(msg, sizeof(msg), "%s was recorded on the correlation file's host '%s':"
				 " the host's trace, not guest %d's?", in[i].path, name, in[i].guest);
			why = msg;
		} else {
			bool unchecked = false;

			if (guest_trace_mismatch(s, buf, len, &in[i], h[i], &unchecked, msg,
						 sizeof(msg)))
				why = msg;
			else if (unchecked && nr_unchecked++ < 8) {
				size_t u = strlen(unchecked_ids);

				snprintf(unchecked_ids + u, sizeof(unchecked_ids) - u, "%s%d",
					 u ? ", " : "", in[i].guest);
			}
		}
	}
	if (why && force) {
		hg_err("warning: %s; merging anyway (--force)", why);
	} else if (why) {
		hg_err("%s (--force merges anyway)", why);
		ret = HGCLOCK_EXIT_BAD_INPUT;
	} else if (nr_unchecked && !quiet) {
		/* Once: files from agents before protocol 1.3 have no identity. */
		hg_err("%s: guest%s %s%s: no identity recorded (no agent, or one before protocol "
		       "1.3): cannot check that the trace given is that guest's", corr,
		       nr_unchecked > 1 ? "s" : "", unchecked_ids, nr_unchecked > 8 ? "..." : "");
	}
	/* The merge reads them again. */
	for (int i = 0; i < n; i++)
		if (h[i])
			hg_trace_keep(h[i]);
	free(h);
	free(st);
	return ret;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * record --merge OUT: the checks of the --merge options before anything is
 * created (merge_check_args()), and after a clean recording the traces
 * COMMAND wrote found (the host's and each recorded guest's, by trace-cmd
 * record -A's names) and merged by cmd_merge() itself (merge_at_end()).
 */
#include "record.h"

/* A file in the host trace's directory named as trace-cmd names a guest's trace. */
struct merge_cand {
	char *path;
	char *name;			/* NAME of STEM-NAME.EXT */
	bool fresh;			/* written since COMMAND started */
	int guest;			/* the recorded guest it is, -1: none */
};

/*
 * The --merge options on the command line, before anything is created:
 * 0, or HGCLOCK_EXIT_USAGE (said).  OUT is not the correlation file nor a
 * trace given, and the correlation file not a trace (hg_check_outputs(),
 * which merge runs on its own arguments again at the end).
 */
int merge_check_args(const struct merge_req *mr, const char *corr, bool command,
		     unsigned int nr_guests)
{
	const char *ins[2 + HG_MAX_GUESTS];
	int next = 0, n = 0, ret;

	if (!mr->out) {
		if (!mr->host_given && !mr->nr_guest)
			return HGCLOCK_EXIT_OK;
		hg_err("--merge-host and --merge-guest go with --merge OUT");
		return HGCLOCK_EXIT_USAGE;
	}
	if (!command) {
		hg_err("--merge %s needs a COMMAND that writes the traces (record ... --merge %s -- "
		       "trace-cmd record ...)", mr->out, mr->out);
		return HGCLOCK_EXIT_USAGE;
	}
	ins[n++] = mr->host;
	for (int i = 0; i < mr->nr_guest; i++) {
		struct hgm_input_spec in;

		hgm_guest_spec(mr->guest[i], &next, &in);
		if ((unsigned int)in.guest >= nr_guests) {
			if (nr_guests)
				hg_err("--merge-guest %s: no guest %d in this recording (guests 0 to "
				       "%u, in the order of --guest)", mr->guest[i], in.guest,
				       nr_guests - 1);
			else
				hg_err("--merge-guest %s: no guest is recorded (--guest)",
				       mr->guest[i]);
			return HGCLOCK_EXIT_USAGE;
		}
		ins[n++] = in.path;
	}
	ins[n] = corr;
	ret = hg_check_outputs(ins, n + 1, &mr->out, 1);
	if (!ret)
		ret = hg_check_outputs(ins, n, &corr, 1);
	return ret;
}

static bool written_since(const struct stat *st, const struct timespec *t0)
{
	return st->st_mtim.tv_sec > t0->tv_sec ||
	       (st->st_mtim.tv_sec == t0->tv_sec && st->st_mtim.tv_nsec >= t0->tv_nsec);
}

/*
 * A trace to merge, @what ("host trace", "guest 0's trace"): written
 * since COMMAND started?  0; else said (@hint after a missing file's
 * reason): HGCLOCK_EXIT_FAILURE when it is missing, HGCLOCK_EXIT_BAD_INPUT
 * when older (a trace left by an earlier run is never merged in silence).
 * Not a regular file: merge says so.
 */
static int merge_input_fresh(const char *what, const char *path, const struct timespec *t0,
			     const char *hint)
{
	struct stat st;

	if (stat(path, &st)) {
		hg_err("--merge: %s %s: %s%s", what, path, strerror(errno), hint);
		return HGCLOCK_EXIT_FAILURE;
	}
	if (S_ISREG(st.st_mode) && !written_since(&st, t0)) {
		hg_err("--merge: %s %s was last written before the command started (left by an "
		       "earlier run?): not merging it", what, path);
		return HGCLOCK_EXIT_BAD_INPUT;
	}
	return HGCLOCK_EXIT_OK;
}

/* The name trace-cmd gives guest @g by default: its QEMU's -name (libvirt's domain), or "". */
static void guest_vm_name(const struct guest *g, char *name, size_t size)
{
	struct vmfind_args a;
	struct vmfind vf;

	name[0] = '\0';
	if (g->vm.vm_pid <= 0)
		return;
	vmfind_init(&vf);
	if (vmfind_read_cmdline(&vf, g->vm.vm_pid, &a))
		return;
	if (vmfind_args_name(&a, name, size) != 1)
		name[0] = '\0';
	vmfind_args_free(&a);
}

static int cand_cmp(const void *a, const void *b)
{
	return strcmp(((const struct merge_cand *)a)->name, ((const struct merge_cand *)b)->name);
}

static void cands_free(struct merge_cand *c, size_t nr)
{
	for (size_t i = 0; i < nr; i++) {
		free(c[i].path);
		free(c[i].name);
	}
	free(c);
}

static bool same_file(const struct stat *a, const char *path)
{
	struct stat b;

	return !stat(path, &b) && a->st_dev == b.st_dev && a->st_ino == b.st_ino;
}

/*
 * The files trace-cmd record -A names after the host's trace @host for
 * its guests (trace_get_guest_file(): "trace.dat" gives trace-NAME.dat):
 * STEM-NAME.EXT in @host's directory, regular files, neither the
 * correlation file @corr nor OUT; sorted by NAME.  0, or an exit status
 * (said).
 */
static int merge_list_cands(const struct merge_req *mr, const char *corr,
			    struct merge_cand **out, size_t *nr_out)
{
	const char *slash = strrchr(mr->host, '/'), *base, *dot;
	struct merge_cand *c = NULL;
	size_t nr = 0, stem_len, ext_len, dir_len;
	struct dirent *d;
	char *dir;
	DIR *dp;

	base = slash ? slash + 1 : mr->host;
	dot = strrchr(base, '.');
	if (!dot || dot == base)
		dot = base + strlen(base);
	stem_len = (size_t)(dot - base);
	ext_len = strlen(dot);
	dir_len = (size_t)(base - mr->host);
	dir = strndup(mr->host, dir_len);
	if (!dir)
		goto nomem;
	dp = opendir(dir_len ? dir : ".");
	if (!dp) {
		hg_err("--merge: reading the directory %s: %s", dir_len ? dir : ".",
		       strerror(errno));
		free(dir);
		return HGCLOCK_EXIT_FAILURE;
	}
	while ((d = readdir(dp))) {
		size_t len = strlen(d->d_name);
		struct merge_cand *more;
		struct stat st;
		char *path;

		if (len <= stem_len + 1 + ext_len || strncmp(d->d_name, base, stem_len) ||
		    d->d_name[stem_len] != '-' || strcmp(d->d_name + len - ext_len, dot))
			continue;
		if (asprintf(&path, "%s%s", dir, d->d_name) < 0)
			goto nomem_dir;
		if (stat(path, &st) || !S_ISREG(st.st_mode) || same_file(&st, corr) ||
		    (strcmp(mr->out, "-") && same_file(&st, mr->out))) {
			free(path);
			continue;
		}
		if (nr == HG_MERGE_MAX_CANDS) {
			hg_err("--merge: more than %d files named like guest traces in %s: give "
			       "them (--merge-guest)", HG_MERGE_MAX_CANDS, dir_len ? dir : ".");
			free(path);
			closedir(dp);
			free(dir);
			cands_free(c, nr);
			return HGCLOCK_EXIT_USAGE;
		}
		more = realloc(c, (nr + 1) * sizeof(*c));
		if (!more) {
			free(path);
			goto nomem_dir;
		}
		c = more;
		c[nr].path = path;
		c[nr].name = strndup(d->d_name + stem_len + 1, len - stem_len - 1 - ext_len);
		c[nr].fresh = written_since(&st, &mr->t0);
		c[nr].guest = -1;
		nr++;
		if (!c[nr - 1].name)
			goto nomem_dir;
	}
	closedir(dp);
	free(dir);
	qsort(c, nr, sizeof(*c), cand_cmp);
	*out = c;
	*nr_out = nr;
	return HGCLOCK_EXIT_OK;
nomem_dir:
	closedir(dp);
nomem:
	free(dir);
	cands_free(c, nr);
	hg_err("--merge: %s", strerror(ENOMEM));
	return HGCLOCK_EXIT_FAILURE;
}

/*
 * Default guest traces: which STEM-NAME.EXT is which recorded guest.  A
 * guest whose VM's QEMU has -name NAME (libvirt names it after the
 * domain, and trace-cmd -A NAME calls the guest that) gets the file of
 * that NAME; then, if one guest and one file are left (-A @CID --name
 * ANY), they go together.  A file left over that was written during the
 * run is an error (which guest's?); an older one is said and left out.
 * A guest without a trace is said and merged without.  Fills @args with
 * "ID=FILE" strings (freed by the caller); 0 or an exit status (said).
 */
static int merge_find_guests(const struct merge_req *mr, const char *corr,
			     const struct guest *guests, unsigned int nr_guests,
			     char **args, int *nr_args)
{
	struct merge_cand *c = NULL;
	unsigned int left_guest = 0, nr_left_guests = 0;
	size_t nr = 0, left_cand = 0, left_fresh = 0, nr_left_cands = 0, nr_left_fresh = 0;
	char name[VMFIND_NAME_MAX + 1];
	int ret;

	ret = merge_list_cands(mr, corr, &c, &nr);
	if (ret)
		return ret;
	for (unsigned int g = 0; g < nr_guests; g++) {
		bool found = false;

		guest_vm_name(&guests[g], name, sizeof(name));
		for (size_t i = 0; i < nr && name[0] && !found; i++)
			if (c[i].guest < 0 && !strcmp(c[i].name, name)) {
				c[i].guest = (int)g;
				found = true;
			}
		if (!found) {
			left_guest = g;
			nr_left_guests++;
		}
	}
	for (size_t i = 0; i < nr; i++) {
		if (c[i].guest >= 0)
			continue;
		left_cand = i;
		nr_left_cands++;
		if (c[i].fresh) {
			left_fresh = i;
			nr_left_fresh++;
		}
	}
	/* The one left: the one written in this run, else the only one (then refused as old). */
	if (nr_left_guests == 1 && nr_left_fresh == 1) {
		c[left_fresh].guest = (int)left_guest;
		nr_left_cands--;
	} else if (nr_left_guests == 1 && nr_left_cands == 1) {
		c[left_cand].guest = (int)left_guest;
		nr_left_cands--;
	}
	for (size_t i = 0; i < nr && !ret; i++) {
		char what[64];

		if (c[i].guest < 0 && c[i].fresh) {
			hg_err("--merge: cannot tell which recorded guest's trace %s is (guests "
			       "recorded: %u, traces unmatched: %zu): give each with --merge-guest "
			       "ID=FILE", c[i].path, nr_guests, nr_left_cands);
			ret = HGCLOCK_EXIT_BAD_INPUT;
		} else if (c[i].guest < 0) {
			fprintf(stderr, "hgclock record: --merge: leaving out %s: last written before "
				"the command started\n", c[i].path);
		} else {
			snprintf(what, sizeof(what), "guest %d's trace", c[i].guest);
			ret = merge_input_fresh(what, c[i].path, &mr->t0, "");
			if (!ret && asprintf(&args[(*nr_args)++], "%d=%s", c[i].guest,
					     c[i].path) < 0) {
				(*nr_args)--;
				hg_err("--merge: %s", strerror(ENOMEM));
				ret = HGCLOCK_EXIT_FAILURE;
			}
		}
	}
	for (unsigned int g = 0; g < nr_guests && !ret; g++) {
		bool has = false;

		for (size_t i = 0; i < nr; i++)
			has |= c[i].guest == (int)g;
		if (!has)
			fprintf(stderr, "hgclock record: --merge: guest %u (%s): no trace of its own "
				"next to %s (give it with --merge-guest %u=FILE): merged without\n",
				g, guests[g].vm.spec[0] ? guests[g].vm.spec : guests[g].spec,
				mr->host, g);
	}
	cands_free(c, nr);
	return ret;
}

/*
 * The merge at the end of a clean recording into correlation file @corr
 * (complete, renamed into place): the traces found as above, then
 * cmd_merge() with "merge [--guest ID=FILE]... --host HOST -o OUT --
 * CORR".  record's signal handlers are taken down first: Ctrl-C now
 * stops the merge as it stops 'hgclock merge' (its temporary file
 * removed, OUT as it was).  merge's exit status.
 */
int merge_at_end(struct merge_req *mr, const char *corr, const struct guest *guests,
		 unsigned int nr_guests)
{
	char **args = calloc(HG_MAX_GUESTS, sizeof(*args));
	char **argv = calloc(8 + 2 * HG_MAX_GUESTS, sizeof(*argv));
	int nr_args = 0, argc = 0, ret;
	struct stat st;

	if (!args || !argv) {
		hg_err("--merge: %s", strerror(ENOMEM));
		ret = HGCLOCK_EXIT_FAILURE;
		goto out;
	}
	/* An OUT written while the command ran is one of its outputs, not an old timeline. */
	if (strcmp(mr->out, "-") && !stat(mr->out, &st) && S_ISREG(st.st_mode) &&
	    written_since(&st, &mr->t0)) {
		hg_err("--merge: %s was written while the command ran (one of its traces?): "
		       "refusing to overwrite it", mr->out);
		ret = HGCLOCK_EXIT_USAGE;
		goto out;
	}
	ret = merge_input_fresh("host trace", mr->host, &mr->t0, mr->host_given ? "" :
				" (the command wrote none; trace-cmd record -o FILE: --merge-host FILE)");
	for (int i = 0, next = 0; i < mr->nr_guest && !ret; i++) {
		struct hgm_input_spec in;
		char what[32];

		hgm_guest_spec(mr->guest[i], &next, &in);
		snprintf(what, sizeof(what), "guest %d's trace", in.guest);
		ret = merge_input_fresh(what, in.path, &mr->t0, "");
	}
	if (!ret && !mr->nr_guest)
		ret = merge_find_guests(mr, corr, guests, nr_guests, args, &nr_args);
	if (ret)
		goto out;
	argv[argc++] = "merge";
	argv[argc++] = "--host";
	argv[argc++] = (char *)mr->host;
	for (int i = 0; i < mr->nr_guest; i++) {
		argv[argc++] = "--guest";
		argv[argc++] = (char *)mr->guest[i];
	}
	for (int i = 0; i < nr_args; i++) {
		argv[argc++] = "--guest";
		argv[argc++] = args[i];
	}
	argv[argc++] = "-o";
	argv[argc++] = (char *)mr->out;
	argv[argc++] = "--";
	argv[argc++] = (char *)corr;
	fprintf(stderr, "hgclock record: merging:");
	for (int i = 0; i < argc; i++)
		fprintf(stderr, " %s", argv[i]);
	fputc('\n', stderr);
	for (size_t i = 0; i < sizeof(stop_sigs) / sizeof(stop_sigs[0]); i++)
		sigaction(stop_sigs[i], &saved_sigs[i], NULL);
	sigaction(SIGPIPE, &saved_pipe, NULL);
	optind = 0;	/* glibc: a new getopt scan */
	ret = cmd_merge(argc, argv);
out:
	for (int i = 0; i < nr_args; i++)
		free(args[i]);
	free(args);
	free(argv);
	return ret;
}

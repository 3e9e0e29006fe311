// SPDX-License-Identifier: GPL-2.0
/*
 * Output files that never clobber an input and never leave half a file:
 * user/output.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "libhgclock.h"
#include "output.h"

const char *hg_output_name(const char *path)
{
	return strcmp(path, "-") ? path : "standard output";
}

/* What a path names: for comparing inputs and outputs. */
struct ident {
	const char *path;
	bool is_stdout;
	bool exists;
	struct stat st;
	char *real;		/* resolved, or NULL */
};

/* @path resolved; when it does not exist yet, its directory resolved. */
static char *resolve(const char *path)
{
	char *r = realpath(path, NULL), *copy, *slash, *dir, *out = NULL;
	const char *base;

	if (r || errno != ENOENT)
		return r;
	copy = strdup(path);
	if (!copy)
		return NULL;
	slash = strrchr(copy, '/');
	if (!slash) {
		dir = realpath(".", NULL);
		base = copy;
	} else {
		base = slash + 1;
		if (slash == copy) {
			dir = strdup("");
		} else {
			*slash = '\0';
			dir = realpath(copy, NULL);
		}
	}
	if (dir && asprintf(&out, "%s/%s", strcmp(dir, "/") ? dir : "", base) < 0)
		out = NULL;
	free(dir);
	free(copy);
	return out;
}

static void ident_get(const char *path, struct ident *id)
{
	memset(id, 0, sizeof(*id));
	id->path = path;
	if (!strcmp(path, "-")) {
		id->is_stdout = true;
		id->exists = !fstat(STDOUT_FILENO, &id->st);
		return;
	}
	id->exists = !stat(path, &id->st);
	id->real = resolve(path);
}

static bool ident_same(const struct ident *a, const struct ident *b)
{
	if (a->is_stdout && b->is_stdout)
		return true;
	if (a->exists && b->exists && a->st.st_dev == b->st.st_dev &&
	    a->st.st_ino == b->st.st_ino)
		/* Writing twice to /dev/null or a terminal harms nothing. */
		return !S_ISCHR(a->st.st_mode);
	return a->real && b->real && !strcmp(a->real, b->real);
}

int hg_check_outputs(const char *const *inputs, int nr_inputs,
		     const char *const *outputs, int nr_outputs)
{
	struct ident in[HGCLOCK_MAX_IO], out[HGCLOCK_MAX_IO];
	int ret = HGCLOCK_EXIT_OK, ni = 0, no = 0;

	for (int i = 0; i < nr_inputs && ni < HGCLOCK_MAX_IO; i++)
		if (inputs[i])
			ident_get(inputs[i], &in[ni++]);
	for (int i = 0; i < nr_outputs && no < HGCLOCK_MAX_IO; i++)
		if (outputs[i])
			ident_get(outputs[i], &out[no++]);
	for (int o = 0; o < no && !ret; o++) {
		for (int i = 0; i < ni && !ret; i++) {
			if (!ident_same(&out[o], &in[i]))
				continue;
			if (out[o].is_stdout)
				hg_err("standard output is the input file %s: refusing to write over it",
				       in[i].path);
			else
				hg_err("%s: the output is the input file %s: refusing to overwrite it",
				       out[o].path, in[i].path);
			ret = HGCLOCK_EXIT_USAGE;
		}
		for (int k = 0; k < o && !ret; k++) {
			if (!ident_same(&out[o], &out[k]))
				continue;
			if (out[o].is_stdout && out[k].is_stdout)
				hg_err("two outputs to standard output (the text and --json -?): "
				       "give one of them a file");
			else
				hg_err("%s and %s are the same destination: two outputs cannot share it",
				       hg_output_name(out[k].path), hg_output_name(out[o].path));
			ret = HGCLOCK_EXIT_USAGE;
		}
	}
	for (int i = 0; i < ni; i++)
		free(in[i].real);
	for (int o = 0; o < no; o++)
		free(out[o].real);
	return ret;
}

/*
 * Temporary files a signal that ends the process (Ctrl-C, SIGTERM, a
 * hangup, a closed pipe) removes before it does: the destination never
 * held them, and nothing else would clean up.
 */
#define HG_MAX_TEMPS	8
static char *volatile temps[HG_MAX_TEMPS];

static void on_fatal_signal(int sig)
{
	for (int i = 0; i < HG_MAX_TEMPS; i++)
		if (temps[i])
			unlink(temps[i]);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void temp_register(char *path)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGPIPE };
	static bool installed;

	for (int i = 0; i < HG_MAX_TEMPS; i++)
		if (!temps[i]) {
			temps[i] = path;
			break;
		}
	if (installed)
		return;
	installed = true;
	/* Only where the default would end the process: not over a handler. */
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction old, sa = { .sa_handler = on_fatal_signal };

		if (!sigaction(sigs[i], NULL, &old) && old.sa_handler == SIG_DFL)
			sigaction(sigs[i], &sa, NULL);
	}
}

static void temp_forget(const char *path)
{
	for (int i = 0; i < HG_MAX_TEMPS; i++)
		if (temps[i] == path)
			temps[i] = NULL;
}

void hg_output_keep_on_signal(struct hg_output *o)
{
	temp_forget(o->tmp);
}

int hg_output_open(struct hg_output *o, const char *path)
{
	struct stat st;
	bool exists;
	mode_t mask;
	int fd;

	memset(o, 0, sizeof(*o));
	o->path = path;
	if (!strcmp(path, "-")) {
		o->f = stdout;
		return HGCLOCK_EXIT_OK;
	}
	exists = !stat(path, &st);
	if (exists && !S_ISREG(st.st_mode)) {
		/* A device, a FIFO: written in place, there is nothing to replace. */
		o->f = fopen(path, "w");
		if (!o->f) {
			hg_err("%s: %s", path, strerror(errno));
			return HGCLOCK_EXIT_FAILURE;
		}
		return HGCLOCK_EXIT_OK;
	}
	o->dest = exists ? realpath(path, NULL) : strdup(path);
	if (!o->dest || asprintf(&o->tmp, "%s.tmp-XXXXXX", o->dest) < 0) {
		hg_err("%s: %s", path, strerror(errno));
		free(o->dest);
		o->dest = NULL;
		o->tmp = NULL;
		return HGCLOCK_EXIT_FAILURE;
	}
	fd = mkostemp(o->tmp, O_CLOEXEC);
	if (fd < 0) {
		hg_err("%s: cannot create a temporary file next to it: %s", path, strerror(errno));
		goto fail;
	}
	/* The mode (and, for root, the owner) of the file it replaces. */
	mask = umask(0);
	umask(mask);
	if (exists) {
		if (fchown(fd, st.st_uid, st.st_gid))
			errno = 0;	/* not ours to give away: keep ours */
		fchmod(fd, st.st_mode & 07777);
	} else {
		fchmod(fd, 0666 & ~mask);
	}
	o->f = fdopen(fd, "w");
	if (!o->f) {
		hg_err("%s: %s", path, strerror(errno));
		close(fd);
		unlink(o->tmp);
		goto fail;
	}
	/* Outputs run to megabytes: a write per 256 KiB, not per 4 KiB. */
	setvbuf(o->f, NULL, _IOFBF, 256u << 10);
	temp_register(o->tmp);
	return HGCLOCK_EXIT_OK;
fail:
	free(o->tmp);
	free(o->dest);
	o->tmp = o->dest = NULL;
	return HGCLOCK_EXIT_FAILURE;
}

const char *hg_output_write_path(const struct hg_output *o)
{
	return o->tmp ? o->tmp : o->path;
}

/* The directory entry of a rename made durable too. */
static int sync_dir(const char *path)
{
	char *copy = strdup(path), *slash;
	int fd, err = 0;

	if (!copy)
		return ENOMEM;
	slash = strrchr(copy, '/');
	if (slash)
		slash[slash == copy ? 1 : 0] = '\0';
	fd = open(slash ? copy : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || (fsync(fd) && errno != EINVAL))
		err = errno;
	if (fd >= 0)
		close(fd);
	free(copy);
	return err;
}

int hg_output_commit(struct hg_output *o)
{
	const char *name = hg_output_name(o->path);
	int err = 0;

	if (!o->f)
		return HGCLOCK_EXIT_FAILURE;
	errno = 0;
	if (fflush(o->f))
		err = errno ? errno : EIO;
	else if (ferror(o->f))
		err = EIO;
	if (!err && o->tmp && fsync(fileno(o->f)))
		err = errno;
	if (o->f != stdout && fclose(o->f) && !err)
		err = errno ? errno : EIO;
	o->f = NULL;
	if (!err && o->tmp && rename(o->tmp, o->dest))
		err = errno;
	temp_forget(o->tmp);
	if (err) {
		hg_err("%s: %s", name, strerror(err));
		if (o->path && !strcmp(o->path, "-"))
			clearerr(stdout);	/* said: not again at exit */
		if (o->tmp)
			unlink(o->tmp);
	} else if (o->tmp) {
		err = sync_dir(o->dest);
		if (err)
			hg_err("%s: syncing its directory: %s", name, strerror(err));
	}
	free(o->tmp);
	free(o->dest);
	o->tmp = o->dest = NULL;
	return err ? HGCLOCK_EXIT_FAILURE : HGCLOCK_EXIT_OK;
}

void hg_output_abort(struct hg_output *o)
{
	if (o->f && o->f != stdout) {
		fclose(o->f);
	} else if (o->f) {
		/* What is still buffered goes nowhere; the failure was said. */
		__fpurge(stdout);
		clearerr(stdout);
	}
	o->f = NULL;
	temp_forget(o->tmp);
	if (o->tmp)
		unlink(o->tmp);
	free(o->tmp);
	free(o->dest);
	o->tmp = o->dest = NULL;
}

int hg_stdout_check(void)
{
	int err;

	errno = 0;
	if (!fflush(stdout) && !ferror(stdout))
		return HGCLOCK_EXIT_OK;
	err = errno ? errno : EIO;
	hg_err("standard output: %s", strerror(err));
	clearerr(stdout);
	return HGCLOCK_EXIT_FAILURE;
}

int hg_close_stdout(int ret)
{
	bool failed = ferror(stdout);
	int err = 0;

	errno = 0;
	if (fflush(stdout) || failed)
		err = errno ? errno : EIO;
	/* A closed standard output that nothing was written to is fine. */
	if (fclose(stdout) && !err && errno != EBADF)
		err = errno;
	if (!err)
		return ret;
	hg_err("standard output: %s", strerror(err));
	return ret ? ret : HGCLOCK_EXIT_FAILURE;
}

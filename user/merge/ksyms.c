// SPDX-License-Identifier: GPL-2.0
/*
 * One parse of a trace.dat's kallsyms for every handle of a command.
 *
 * Why.  Opening a trace.dat, libtracecmd hands the kernel's symbol table
 * it holds (a copy of /proc/kallsyms: 176 000 lines, 8 MB for a Debian
 * 6.1 kernel) to libtraceevent's tep_parse_kallsyms(), which sscanf()s
 * each line and allocates three blocks per symbol; closing the handle
 * frees them one by one.  Profiled natively (Documentation/bench.rst),
 * that was 42% of a one-thread merge, and a merge opens each input once
 * for its checks and once more per worker thread: the same text parsed
 * again and again into the same table.
 *
 * How.  hgclock defines tep_parse_kallsyms() itself.  libtracecmd calls
 * it through its PLT, so the dynamic linker binds the call to the first
 * definition in the lookup order, the executable's (ELF symbol
 * interposition; the link exports the symbol: see the Makefile).  While
 * hg_ksyms_capture_begin() is in force on the calling thread, the call
 * only finds the table of the file being opened, or builds it from the
 * text then and there.  hg_ksyms_capture_end() then gives the
 * handle's tep a function resolver (tep_set_function_resolver(),
 * libtraceevent's interface for "a tool that already has the table")
 * over a table built once per file and never written after (but for a
 * cache of answers under a lock, and its sort, which a thread of its own
 * finishes before any lookup reads the entries): any number of threads
 * read it at once.
 * Every other call, and a text not in the kernel's form (below), goes to
 * libtraceevent's definition (dlsym(RTLD_NEXT)).
 *
 * The same answers.  libtraceevent (1.7.1, and the same through 1.8.4)
 * looks a function up in one place, find_func(): without a resolver it
 * builds its map from its list of registered functions (newest first),
 * qsort()s it by address and bsearch()es it with a comparator that
 * accepts the entry whose range holds the address; with a resolver it
 * asks the resolver.  The table here is built the same way: the lines
 * libtraceevent would register, in its list's order (reversed), sorted
 * by the same qsort() with the same comparison on entries of the same
 * size, searched by the same bsearch() with the same comparator and the
 * same end sentinel.  The same algorithm on the same array gives the
 * same entry, also among aliases at one address, whatever the C
 * library's qsort() is.  A line is only read here when it has the form
 * the kernel writes ("ADDR T name" or "ADDR t name\t[module]", at most
 * 16 hex digits, single separators); on that form this parser and
 * libtraceevent's sscanf() pattern agree field for field, and a text
 * with any other line is parsed by libtraceevent (for that text and
 * every tep it comes to).
 *
 * Which table a handle gets.  A table belongs to the file it was read
 * from, as the trace pool knows a file (trace_pool.c): its device, inode,
 * size and modification time, the same before and after the open.  A
 * later open of the same file gets its table without the text being
 * copied or compared (8 MB for each worker otherwise); a file changed
 * while it was opened gets a table of its own, and an open that found a
 * table while the file changed under it fails (hg_ksyms_capture_end()).
 * A table is never freed: a command opens a few files.
 *
 * Two things in libtraceevent read its list of functions without
 * find_func(): tep_get_function_count() (not called by libtracecmd,
 * its plugins or hgclock) and the first evaluation of an event format's
 * argument that is a name rather than a number (test_for_symbol(): a
 * symbol's address in a print format).  A tep whose event formats have
 * an argument that is one of the text's names gets libtraceevent's own
 * list instead of the resolver: the table's entries registered with
 * tep_register_function() in the text's order, the calls its parse makes
 * (register_in_order()).  The quoted strings most formats hold ("R",
 * "") are names of nothing and change nothing.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event-parse.h>

#include "ksyms.h"

/* libtraceevent's struct func_map, field for field: the same size for qsort(). */
struct ksym_ent {
	unsigned long long addr;
	char *func;
	char *mod;
};

enum { KSYMS_BUILDING, KSYMS_READY, KSYMS_OWN_PARSE };

/* The table of one file's kallsyms (or of one text, unkeyed), for the process's life. */
struct ksym_table {
	struct ksym_table *next;	/* ksyms_tables, under ksyms_lock */
	bool keyed;			/* file is its file (under ksyms_lock) */
	struct hg_file_id file;
	int state;			/* under ksyms_lock; READY: ent and names read-only */
	char *raw;			/* OWN_PARSE: the text, for libtraceevent's parse */
	struct ksym_ent *ent;		/* nr entries and a sentinel: sorted once sorted is */
	size_t nr;
	atomic_bool sorted;		/* ent[] in its final order (release by the sorter) */
	char *names;			/* the names from its start, the modules from its end */
	size_t funcs_len;		/* the names' bytes: nr NUL-terminated, text order */
	/* atoms of event formats looked up among the names: under ksyms_lock */
	struct atom_answer *answers;
	unsigned int nr_answers;
};

struct atom_answer {
	struct atom_answer *next;
	bool found;
	char atom[];
};

/* Answers kept per table: event formats hold a few dozen distinct atoms. */
#define KSYMS_MAX_ANSWERS	1024

static pthread_mutex_t ksyms_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ksyms_built = PTHREAD_COND_INITIALIZER;
static pthread_cond_t ksyms_sorted = PTHREAD_COND_INITIALIZER;
static struct ksym_table *ksyms_tables;
static atomic_ulong ksyms_nr_shared, ksyms_nr_parsed, ksyms_nr_built;
static __thread struct hg_ksyms_capture *ksyms_capture;

typedef int (*tep_parse_kallsyms_fn)(struct tep_handle *, const char *);
static tep_parse_kallsyms_fn ksyms_lib_parse;
static pthread_once_t ksyms_lib_once = PTHREAD_ONCE_INIT;

static void ksyms_lib_find(void)
{
	ksyms_lib_parse = (tep_parse_kallsyms_fn)dlsym(RTLD_NEXT, "tep_parse_kallsyms");
}

/* libtraceevent's own tep_parse_kallsyms(). */
static int lib_parse(struct tep_handle *tep, const char *kallsyms)
{
	pthread_once(&ksyms_lib_once, ksyms_lib_find);
	atomic_fetch_add(&ksyms_nr_parsed, 1);
	return ksyms_lib_parse ? ksyms_lib_parse(tep, kallsyms) : -1;
}

static struct ksym_table *table_for(const char *text, const struct hg_file_id *file,
				    bool *built);

/* The interposed definition (see the top of the file). */
int tep_parse_kallsyms(struct tep_handle *tep, const char *kallsyms)
{
	struct hg_ksyms_capture *cap = ksyms_capture;

	if (cap && !cap->table && kallsyms) {
		if (cap->keep_text)
			cap->text = strdup(kallsyms);
		cap->table = table_for(kallsyms, cap->keyed ? &cap->file : NULL, &cap->built);
		if (cap->table) {
			cap->tep = tep;
			return 0;
		}
	}
	return lib_parse(tep, kallsyms);
}

/* libtraceevent's func_cmp() and func_bcmp(), the same comparisons. */
static int ent_cmp(const void *a, const void *b)
{
	const struct ksym_ent *ea = a, *eb = b;

	if (ea->addr < eb->addr)
		return -1;
	if (ea->addr > eb->addr)
		return 1;
	return 0;
}

static int ent_bcmp(const void *a, const void *b)
{
	const struct ksym_ent *key = a, *e = b;

	if (key->addr == e->addr || (key->addr > e->addr && key->addr < (e + 1)->addr))
		return 0;
	if (key->addr < e->addr)
		return -1;
	return 1;
}

/*
 * Waits until @t's entries are sorted (sort_worker()).  The fast path is
 * one load: the sorter's release store makes its writes to ent[] visible
 * to a thread that sees the flag.
 */
static void wait_sorted(struct ksym_table *t)
{
	if (atomic_load_explicit(&t->sorted, memory_order_acquire))
		return;
	pthread_mutex_lock(&ksyms_lock);
	while (!atomic_load_explicit(&t->sorted, memory_order_acquire))
		pthread_cond_wait(&ksyms_sorted, &ksyms_lock);
	pthread_mutex_unlock(&ksyms_lock);
}

static char *ksyms_resolve(void *priv, unsigned long long *addrp, char **modp)
{
	struct ksym_table *t = priv;
	const struct ksym_ent key = { .addr = *addrp };
	const struct ksym_ent *e;

	wait_sorted(t);
	e = bsearch(&key, t->ent, t->nr, sizeof(*t->ent), ent_bcmp);
	if (!e)
		return NULL;
	*addrp = e->addr;
	*modp = e->mod;
	return e->func;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * One line [@p, @eol) in the kernel's form, or false.  On that form
 * libtraceevent's "%16llx %c %n%*s%n%*1[\t][%n%*s%n" reads the same
 * address, type, name and module (the module token less its last
 * character, the ']').
 */
static bool parse_line(const char *p, const char *eol, unsigned long long *addr, char *type,
		       const char **func, size_t *func_len, const char **mod, size_t *mod_len)
{
	const char *q = p;
	int digits = 0;

	int v;

	*addr = 0;
	while (q < eol && digits < 16 && (v = hexval(*q)) >= 0) {
		*addr = *addr << 4 | (unsigned int)v;
		q++;
		digits++;
	}
	if (!digits || eol - q < 4 || q[0] != ' ' || isspace((unsigned char)q[1]) || q[2] != ' ')
		return false;
	*type = q[1];
	q += 3;
	*func = q;
	while (q < eol && !isspace((unsigned char)*q))
		q++;
	*func_len = (size_t)(q - *func);
	*mod = NULL;
	*mod_len = 0;
	if (!*func_len)
		return false;
	if (q == eol)
		return true;
	/* "\t[" and a token of at least "x]" to the end of the line */
	if (eol - q < 4 || q[0] != '\t' || q[1] != '[')
		return false;
	q += 2;
	*mod = q;
	while (q < eol && !isspace((unsigned char)*q))
		q++;
	if (q != eol || q - *mod < 2 || q[-1] != ']')
		return false;
	*mod_len = (size_t)(q - 1 - *mod);
	return true;
}

/*
 * Is @name the name of one of @t's entries?  A scan of the names (a
 * millisecond), once per distinct atom and table: the answer is kept.
 */
static bool table_has_name(struct ksym_table *t, const char *name)
{
	struct atom_answer *a;
	bool found = false;

	pthread_mutex_lock(&ksyms_lock);
	for (a = t->answers; a; a = a->next)
		if (!strcmp(a->atom, name)) {
			found = a->found;
			goto out;
		}
	/* the names, not ent[], which the sorter may be permuting */
	for (const char *f = t->names, *end = t->names + t->funcs_len; f < end && !found;
	     f += strlen(f) + 1)
		found = f[0] == name[0] && !strcmp(f, name);
	if (t->nr_answers < KSYMS_MAX_ANSWERS) {
		a = malloc(sizeof(*a) + strlen(name) + 1);
		if (a) {
			strcpy(a->atom, name);
			a->found = found;
			a->next = t->answers;
			t->answers = a;
			t->nr_answers++;
		}
	}
out:
	pthread_mutex_unlock(&ksyms_lock);
	return found;
}

/* Fills @t's entries from @text; false when a line is not in the kernel's form. */
static bool table_build(struct ksym_table *t, const char *text)
{
	size_t len = strlen(text), lines = 1, used = 0, mods_at, nr = 0;
	const char *p = text, *end = text + len;
	struct ksym_ent *reg;
	char *names;

	for (const char *s = p; (s = memchr(s, '\n', (size_t)(end - s))); s++)
		lines++;
	reg = malloc((lines + 1) * sizeof(*reg));
	names = malloc(len + 1);
	if (!reg || !names)
		goto fail;
	mods_at = len + 1;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *func, *mod;
		size_t func_len, mod_len;
		unsigned long long addr;
		char type;

		if (!eol)
			eol = end;
		/* strtok_r() in libtraceevent: empty lines are no tokens */
		if (eol == p) {
			p++;
			continue;
		}
		if (!parse_line(p, eol, &addr, &type, &func, &func_len, &mod, &mod_len))
			goto fail;
		/* libtraceevent's exceptions: arm's '$' names, x86-64's per-CPU offsets */
		if (func[0] != '$' && type != 'A' && type != 'a') {
			/*
			 * A name and its module take no more than their line:
			 * the names, from the start, never meet the modules,
			 * from the end.
			 */
			reg[nr].addr = addr;
			reg[nr].func = names + used;
			memcpy(names + used, func, func_len);
			used += func_len;
			names[used++] = '\0';
			reg[nr].mod = NULL;
			if (mod) {
				mods_at -= mod_len + 1;
				reg[nr].mod = names + mods_at;
				memcpy(names + mods_at, mod, mod_len);
				names[mods_at + mod_len] = '\0';
			}
			nr++;
		}
		p = eol + 1;
	}
	/* libtraceevent's list is newest first: its map starts in that order */
	for (size_t i = 0; i < nr / 2; i++) {
		struct ksym_ent e = reg[i];

		reg[i] = reg[nr - 1 - i];
		reg[nr - 1 - i] = e;
	}
	reg[nr] = (struct ksym_ent){ 0 };
	t->ent = reg;
	t->nr = nr;
	t->names = names;
	t->funcs_len = used;
	return true;
fail:
	free(reg);
	free(names);
	return false;
}

/*
 * libtraceevent's qsort() of the map, on the table: the one step of a
 * build that needs neither the text nor libtracecmd's buffers, so it
 * runs on a thread of its own while the opener goes on (the next file's
 * open, the events), and a lookup waits for it (wait_sorted()).  A tenth
 * of a one-thread merge otherwise, on the path of every open that builds
 * (Documentation/bench.rst).
 */
static void *sort_worker(void *arg)
{
	struct ksym_table *t = arg;

	qsort(t->ent, t->nr, sizeof(*t->ent), ent_cmp);
	pthread_mutex_lock(&ksyms_lock);
	atomic_store_explicit(&t->sorted, true, memory_order_release);
	pthread_cond_broadcast(&ksyms_sorted);
	pthread_mutex_unlock(&ksyms_lock);
	return NULL;
}

static void sort_soon(struct ksym_table *t)
{
	pthread_attr_t attr;
	pthread_t tid;
	bool started = false;

	if (!pthread_attr_init(&attr)) {
		started = !pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) &&
			  !pthread_create(&tid, &attr, sort_worker, t);
		pthread_attr_destroy(&attr);
	}
	if (!started)
		sort_worker(t);
}

/*
 * The table of @file's text (waited for while another thread builds
 * it), or a new one built from @text by this thread (*@built), with
 * @file as its key; without @file, always a new one, found by no one
 * else.  NULL when out of memory.
 */
static struct ksym_table *table_for(const char *text, const struct hg_file_id *file,
				    bool *built)
{
	struct ksym_table *t = NULL;
	bool ok;

	*built = false;
	pthread_mutex_lock(&ksyms_lock);
	for (t = file ? ksyms_tables : NULL; t; t = t->next)
		if (t->keyed && hg_file_id_same(&t->file, file))
			break;
	if (t) {
		while (t->state == KSYMS_BUILDING)
			pthread_cond_wait(&ksyms_built, &ksyms_lock);
		pthread_mutex_unlock(&ksyms_lock);
		return t;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		pthread_mutex_unlock(&ksyms_lock);
		return NULL;
	}
	if (file) {
		t->keyed = true;
		t->file = *file;
	}
	t->state = KSYMS_BUILDING;
	t->next = ksyms_tables;
	ksyms_tables = t;
	pthread_mutex_unlock(&ksyms_lock);

	/* Built outside the lock: other files' tables are built at the same time. */
	ok = table_build(t, text);
	if (ok)
		sort_soon(t);
	else
		t->raw = strdup(text);	/* NULL when out of memory: no functions */
	atomic_fetch_add(&ksyms_nr_built, 1);
	*built = true;

	pthread_mutex_lock(&ksyms_lock);
	t->state = ok ? KSYMS_READY : KSYMS_OWN_PARSE;
	pthread_cond_broadcast(&ksyms_built);
	pthread_mutex_unlock(&ksyms_lock);
	return t;
}

/*
 * Could test_for_symbol() find @atom in @t's list?  It skips an atom
 * that starts with a digit and compares the others with the names in
 * the list: libtraceevent's parse of the text gives the same answer as
 * the table when @atom is none of them.  (Most atoms are the quoted
 * strings of a format, such as "R" or "" in sched_switch's.)
 */
static bool atom_may_name(struct ksym_table *t, const char *atom)
{
	if (!atom)
		return true;
	if (!atom[0] || isdigit((unsigned char)atom[0]))
		return false;
	return table_has_name(t, atom);
}

/* Does evaluating @arg (and what it holds) ever look a name up in the list? */
static bool arg_names_symbol(struct ksym_table *t, const struct tep_print_arg *arg, int depth)
{
	if (depth > 32)
		return true;
	for (; arg; arg = arg->next) {
		switch (arg->type) {
		case TEP_PRINT_NULL:
		case TEP_PRINT_FIELD:
		case TEP_PRINT_STRING:
		case TEP_PRINT_BSTRING:
		case TEP_PRINT_BITMASK:
		case TEP_PRINT_DYNAMIC_ARRAY_LEN:
		case TEP_PRINT_CPUMASK:
			break;
		case TEP_PRINT_ATOM:
			if (atom_may_name(t, arg->atom.atom))
				return true;
			break;
		case TEP_PRINT_FLAGS:
			if (arg_names_symbol(t, arg->flags.field, depth + 1))
				return true;
			break;
		case TEP_PRINT_SYMBOL:
			if (arg_names_symbol(t, arg->symbol.field, depth + 1))
				return true;
			break;
		case TEP_PRINT_HEX:
		case TEP_PRINT_HEX_STR:
			if (arg_names_symbol(t, arg->hex.field, depth + 1) ||
			    arg_names_symbol(t, arg->hex.size, depth + 1))
				return true;
			break;
		case TEP_PRINT_INT_ARRAY:
			if (arg_names_symbol(t, arg->int_array.field, depth + 1) ||
			    arg_names_symbol(t, arg->int_array.count, depth + 1) ||
			    arg_names_symbol(t, arg->int_array.el_size, depth + 1))
				return true;
			break;
		case TEP_PRINT_TYPE:
			if (arg_names_symbol(t, arg->typecast.item, depth + 1))
				return true;
			break;
		case TEP_PRINT_DYNAMIC_ARRAY:
			if (arg_names_symbol(t, arg->dynarray.index, depth + 1))
				return true;
			break;
		case TEP_PRINT_OP:
			if (arg_names_symbol(t, arg->op.left, depth + 1) ||
			    arg_names_symbol(t, arg->op.right, depth + 1))
				return true;
			break;
		case TEP_PRINT_FUNC:
			if (arg_names_symbol(t, arg->func.args, depth + 1))
				return true;
			break;
		default:
			return true;	/* a kind this file does not know: assume so */
		}
	}
	return false;
}

static bool tep_names_symbols(struct tep_handle *tep, struct ksym_table *t)
{
	int n = tep_get_events_count(tep);

	for (int i = 0; i < n; i++) {
		struct tep_event *ev = tep_get_event(tep, i);

		if (ev && arg_names_symbol(t, ev->print_fmt.args, 0))
			return true;
	}
	return false;
}

static int by_name_position(const void *a, const void *b, void *arg)
{
	const struct ksym_table *t = arg;
	const char *fa = t->ent[*(const uint32_t *)a].func;
	const char *fb = t->ent[*(const uint32_t *)b].func;

	return fa < fb ? -1 : fa > fb;
}

/*
 * libtraceevent's list, as its own parse of the text would leave it: the
 * same tep_register_function() calls in the text's order, which is the
 * order of the names in t->names (appended line by line).  For a tep
 * whose event formats name a symbol (tep_names_symbols()).
 */
static void register_in_order(struct tep_handle *tep, const struct ksym_table *t)
{
	uint32_t *idx = t->nr < UINT32_MAX ? malloc(t->nr * sizeof(*idx) + 1) : NULL;

	if (!idx)
		return;
	wait_sorted((struct ksym_table *)t);	/* ent[] no longer moves */
	for (size_t k = 0; k < t->nr; k++)
		idx[k] = (uint32_t)k;
	qsort_r(idx, t->nr, sizeof(*idx), by_name_position, (void *)t);
	for (size_t k = 0; k < t->nr; k++)
		tep_register_function(tep, t->ent[idx[k]].func, t->ent[idx[k]].addr,
				      t->ent[idx[k]].mod);
	free(idx);
}

/* @t's functions to @tep, READY or OWN_PARSE: both final, read without the lock. */
static bool give_table(struct tep_handle *tep, struct ksym_table *t)
{
	if (t->state == KSYMS_READY && !tep_names_symbols(tep, t) &&
	    !tep_set_function_resolver(tep, ksyms_resolve, t)) {
		atomic_fetch_add(&ksyms_nr_shared, 1);
		return true;
	}
	if (t->state == KSYMS_READY) {
		atomic_fetch_add(&ksyms_nr_parsed, 1);
		register_in_order(tep, t);
	} else if (t->raw) {
		lib_parse(tep, t->raw);
	}
	return false;
}

bool hg_ksyms_give(struct tep_handle *tep, const char *kallsyms)
{
	bool built;
	struct ksym_table *t = table_for(kallsyms, NULL, &built);

	if (!t) {
		lib_parse(tep, kallsyms);
		return false;
	}
	return give_table(tep, t);
}

void hg_ksyms_capture_begin(struct hg_ksyms_capture *cap, const struct hg_file_id *file,
			    bool keep_text)
{
	memset(cap, 0, sizeof(*cap));
	if (file) {
		cap->keyed = true;
		cap->file = *file;
	}
	cap->keep_text = keep_text;
	ksyms_capture = cap;
}

bool hg_ksyms_capture_end(struct hg_ksyms_capture *cap, struct tep_handle *tep, bool same)
{
	struct ksym_table *t = cap->table;

	ksyms_capture = NULL;
	cap->table = NULL;
	if (!t)
		return true;
	if (!same && cap->built) {
		/* its text may not be the file's of the key: nobody else's */
		pthread_mutex_lock(&ksyms_lock);
		t->keyed = false;
		pthread_mutex_unlock(&ksyms_lock);
	} else if (!same && tep) {
		/* a table of the file before it changed: not this handle's text */
		return false;
	}
	/* The tep the text was meant for; @tep only says the open succeeded. */
	if (tep && cap->tep)
		give_table(cap->tep, t);
	return true;
}

void hg_ksyms_counts(unsigned long *shared, unsigned long *parsed, unsigned long *built)
{
	*shared = atomic_load(&ksyms_nr_shared);
	*parsed = atomic_load(&ksyms_nr_parsed);
	*built = atomic_load(&ksyms_nr_built);
}

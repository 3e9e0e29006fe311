// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of user/merge/ksyms.c, one parse of a trace.dat's kallsyms
 * for all handles: a tep given a text through the shared table must name
 * every address as a tep given the same text by libtraceevent's own
 * tep_parse_kallsyms() (reached here through the interposed definition,
 * outside any capture).  On the kallsyms of both real recordings of
 * selftests/data (every symbol's address, one before and after it, and
 * the ends), on generated texts with aliases at one address, modules,
 * the entries libtraceevent skips, and on texts not in the kernel's form
 * (which must go to libtraceevent's parse); an event format naming a
 * symbol must also go there.  Opening a recording through the trace pool
 * must use the shared table (the interposition works in a linked
 * program), also from several threads at once.
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event-parse.h>
#include <trace-cmd.h>

#include "kselftest_harness.h"
#include "merge/ksyms.h"
#include "merge/trace_pool.h"

static const char *data(const char *name)
{
	static char path[PATH_MAX + 64];
	char dir[PATH_MAX] = "";
	ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);

	if (n > 0) {
		dir[n] = '\0';
		*strrchr(dir, '/') = '\0';
	}
	snprintf(path, sizeof(path), "%s/data/%s", dir, name);
	return path;
}

/* The kallsyms text of a recording, as libtracecmd hands it over. */
static char *text_of(const char *path)
{
	struct hg_ksyms_capture cap;
	struct tracecmd_input *h;
	char *text;

	hg_ksyms_capture_begin(&cap, NULL, true);
	h = tracecmd_open_head(path, 0);
	text = cap.text;
	hg_ksyms_capture_end(&cap, h ? tracecmd_get_tep(h) : NULL, true);
	if (h)
		tracecmd_close(h);
	return text;
}

static int cmp_ull(const void *a, const void *b)
{
	unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;

	return x < y ? -1 : x > y;
}

/*
 * Both teps answer alike at every address of interest in @text; returns
 * the number of addresses compared, or -1 at the first difference.
 */
static long same_answers(struct tep_handle *lib, struct tep_handle *ours, const char *text)
{
	size_t cap = 16, n = 0;
	unsigned long long *addr = malloc(cap * sizeof(*addr));
	long compared = 0;

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (n + 4 > cap) {
			cap *= 2;
			addr = realloc(addr, cap * sizeof(*addr));
		}
		addr[n] = strtoull(p, NULL, 16);
		n++;
	}
	addr[n++] = 0;
	addr[n++] = ~0ULL;
	qsort(addr, n, sizeof(*addr), cmp_ull);
	for (size_t i = 0; i < n; i++)
		for (int d = -1; d <= 1; d++) {
			unsigned long long a = addr[i] + (unsigned long long)(long long)d;
			const char *f1 = tep_find_function(lib, a), *f2 = tep_find_function(ours, a);

			compared++;
			if (!f1 != !f2 || (f1 && strcmp(f1, f2)) ||
			    tep_find_function_address(lib, a) != tep_find_function_address(ours, a)) {
				fprintf(stderr, "# at 0x%llx: %s at 0x%llx against %s at 0x%llx\n", a,
					f1 ? f1 : "(none)", tep_find_function_address(lib, a),
					f2 ? f2 : "(none)", tep_find_function_address(ours, a));
				free(addr);
				return -1;
			}
		}
	free(addr);
	return compared;
}

/* @text given both ways; *shared says whether the table served it. */
static long compare_text(const char *text, bool *shared)
{
	struct tep_handle *lib = tep_alloc(), *ours = tep_alloc();
	long r;

	tep_parse_kallsyms(lib, text);	/* no capture: libtraceevent's */
	*shared = hg_ksyms_give(ours, text);
	r = same_answers(lib, ours, text);
	tep_free(lib);
	tep_free(ours);
	return r;
}

TEST(recordings_same_answers)
{
	static const char *const files[] = { "host.dat", "guest.dat" };

	for (size_t i = 0; i < 2; i++) {
		char *text = text_of(data(files[i]));
		bool shared = false;
		long r;

		ASSERT_NE(NULL, text);
		r = compare_text(text, &shared);
		EXPECT_TRUE(shared);
		EXPECT_LT(300000, r);	/* 100 000 symbols and more, 3 addresses each */
		free(text);
	}
}

TEST(generated_same_answers)
{
	/* aliases at one address (which one is named is libtraceevent's choice: the same) */
	static const char text[] =
		"ffffffff81000000 T _stext\n"
		"ffffffff81000000 T _text\n"
		"ffffffff81000000 t startup_64\n"
		"\n"
		"ffffffff81000100 T second\n"
		"0000000000001000 A fixed_percpu_data\n"
		"0000000000002000 a local_abs\n"
		"ffffffff81000200 t $x\n"
		"FFFFFFFF81000300 W upper_hex\n"
		"ffffffffc0a00000 t kvm_mod_fn\t[kvm]\n"
		"ffffffffc0a00000 t kvm_mod_alias\t[kvm_amd]\n"
		"ffffffffc0a00080 d kvm_data\t[kvm]\n"
		"ffffffff81000100 T second_alias\n"
		"ffffffff81000150 r rodata_x\n"
		"ffffffffff600000 D last_one\n";
	bool shared = false;

	EXPECT_LT(0, compare_text(text, &shared));
	EXPECT_TRUE(shared);
}

/* Every line here is not in the kernel's form: libtraceevent parses it. */
TEST(odd_forms_parsed_by_libtraceevent)
{
	static const char *const odd[] = {
		"ffffffff81000000 T a\nffffffff81000100 T trailing \n",
		"ffffffff81000000 T a\n0xffffffff81000100 T prefixed\n",
		"ffffffff81000000 T a\n1ffffffff81000100 T seventeen\n",
		"ffffffff81000000 T a\nffffffff81000100  T two_spaces\n",
		"ffffffff81000000 T a\nffffffff81000100 T no_bracket\tkvm\n",
		"ffffffff81000000 T a\nffffffff81000100 T empty_mod\t[]\n",
		"ffffffff81000000 T a\nffffffff81000100 T after\t[kvm] x\n",
		"ffffffff81000000 T a\nffffffff81000100 T cr\r\n",
		"ffffffff81000000 T a\nnot a line at all\n",
		"ffffffff81000000 T\n",
	};

	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		bool shared = true;

		EXPECT_LE(0, compare_text(odd[i], &shared)) TH_LOG("text %zu", i);
		EXPECT_FALSE(shared) TH_LOG("text %zu", i);
	}
}

/* An event "hg_sym" with the common fields and one field x: the print format follows. */
#define HG_SYM_FIELDS \
	"name: hg_sym\nID: 901\nformat:\n" \
	"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n" \
	"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n" \
	"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n" \
	"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n" \
	"\tfield:unsigned long x;\toffset:8;\tsize:8;\tsigned:0;\n\n"

/* A print format whose argument is a symbol's name: its tep reads the list. */
TEST(format_naming_a_symbol)
{
	static const char fmt[] =
		HG_SYM_FIELDS
		"print fmt: \"x=%lx %s\", REC->x + jiffies_sym, REC->x ? \"R\" : \"\"\n";
	/* (an address past the last symbol's is no symbol's: libtraceevent's rule) */
	static const char with[] = "ffffffff81000000 T _stext\nffffffff82000000 D jiffies_sym\n"
				   "ffffffff83000000 T _end\n";
	static const char without[] = "ffffffff81000000 T _stext\nffffffff82000000 D other_sym\n"
				      "ffffffff83000000 T _end\n";
	struct tep_handle *a = tep_alloc(), *b = tep_alloc();

	ASSERT_EQ(0, tep_parse_event(a, fmt, sizeof(fmt) - 1, "hg"));
	ASSERT_EQ(0, tep_parse_event(b, fmt, sizeof(fmt) - 1, "hg"));
	EXPECT_FALSE(hg_ksyms_give(a, with));
	EXPECT_TRUE(hg_ksyms_give(b, without));	/* "R" and "" are names of nothing */
	ASSERT_NE(NULL, tep_find_function(a, 0xffffffff82000010ULL));
	ASSERT_NE(NULL, tep_find_function(b, 0xffffffff82000010ULL));
	EXPECT_STREQ("jiffies_sym", tep_find_function(a, 0xffffffff82000010ULL));
	EXPECT_STREQ("other_sym", tep_find_function(b, 0xffffffff82000010ULL));
	tep_free(a);
	tep_free(b);
}

/*
 * The same on a real text: the tep whose format names "jiffies" gets
 * libtraceevent's list back from the table (register_in_order()), which
 * must answer as libtraceevent's own parse of the text, aliases too.
 */
TEST(format_naming_a_symbol_real_text)
{
	static const char fmt[] =
		HG_SYM_FIELDS
		"print fmt: \"x=%lx\", REC->x + jiffies\n";
	char *text = text_of(data("guest.dat"));
	struct tep_handle *lib = tep_alloc(), *ours = tep_alloc();

	ASSERT_NE(NULL, text);
	ASSERT_EQ(0, tep_parse_event(ours, fmt, sizeof(fmt) - 1, "hg"));
	tep_parse_kallsyms(lib, text);
	EXPECT_FALSE(hg_ksyms_give(ours, text));
	EXPECT_LT(300000, same_answers(lib, ours, text));
	EXPECT_EQ(tep_get_function_count(lib), tep_get_function_count(ours));
	tep_free(lib);
	tep_free(ours);
	free(text);
}

struct opener {
	const char *path;
	struct tracecmd_input *h;
};

static void *open_one(void *arg)
{
	struct opener *o = arg;
	char err[256];

	o->h = hg_trace_open(o->path, err, sizeof(err));
	return NULL;
}

/*
 * Through the trace pool, from 4 threads at once: each handle served by
 * a table, and one file's headers read at a time (trace_pool.c's
 * open_gate: each open holds its kallsyms text three times).
 */
TEST(pool_opens_share)
{
	unsigned long shared0, parsed0, shared1, parsed1, built0, built1;
	struct opener o[4];
	pthread_t tid[4];

	hg_ksyms_counts(&shared0, &parsed0, &built0);
	for (int i = 0; i < 4; i++) {
		o[i].path = data(i % 2 ? "guest.dat" : "host.dat");
		o[i].path = strdup(o[i].path);
		ASSERT_EQ(0, pthread_create(&tid[i], NULL, open_one, &o[i]));
	}
	for (int i = 0; i < 4; i++)
		pthread_join(tid[i], NULL);
	hg_ksyms_counts(&shared1, &parsed1, &built1);
	EXPECT_EQ(shared0 + 4, shared1);
	EXPECT_EQ(parsed0, parsed1);
	EXPECT_EQ(built0 + 2, built1);	/* one table per file */
	EXPECT_EQ(1, hg_trace_pool_max_opening());
	for (int i = 0; i < 4; i++) {
		ASSERT_NE(NULL, o[i].h);
		EXPECT_NE(0, tep_get_events_count(tracecmd_get_tep(o[i].h)));
		hg_trace_close(o[i].h);
		free((void *)o[i].path);
	}
}

/*
 * A table is its file's: opened again, the same file reuses it (nothing
 * built); a file whose identity changed (here its modification time)
 * gets a new one, and each handle still names as libtraceevent would.
 */
TEST(table_per_file)
{
	char tmp[] = "/tmp/hg_ksyms_XXXXXX", err[256], cmd[PATH_MAX + 64];
	unsigned long s0, p0, b0, s1, p1, b1;
	struct tracecmd_input *h1, *h2, *h3;
	struct timespec times[2] = { { 0, UTIME_OMIT }, { 12345, 678 } };
	int fd = mkstemp(tmp);

	ASSERT_LE(0, fd);
	close(fd);
	snprintf(cmd, sizeof(cmd), "cp %s %s", data("guest.dat"), tmp);
	ASSERT_EQ(0, system(cmd));
	hg_ksyms_counts(&s0, &p0, &b0);
	h1 = hg_trace_open(tmp, err, sizeof(err));
	h2 = hg_trace_open(tmp, err, sizeof(err));	/* h1 held: a second handle */
	ASSERT_NE(NULL, h1);
	ASSERT_NE(NULL, h2);
	hg_ksyms_counts(&s1, &p1, &b1);
	EXPECT_EQ(b0 + 1, b1);
	EXPECT_EQ(s0 + 2, s1);
	ASSERT_EQ(0, utimensat(AT_FDCWD, tmp, times, 0));
	h3 = hg_trace_open(tmp, err, sizeof(err));
	ASSERT_NE(NULL, h3) TH_LOG("%s", err);
	hg_ksyms_counts(&s1, &p1, &b1);
	EXPECT_EQ(b0 + 2, b1);
	EXPECT_STREQ(tep_find_function(tracecmd_get_tep(h1), 0xffffffff81000100ULL) ?: "",
		     tep_find_function(tracecmd_get_tep(h3), 0xffffffff81000100ULL) ?: "");
	hg_trace_close(h1);
	hg_trace_close(h2);
	hg_trace_close(h3);
	unlink(tmp);
}

TEST_HARNESS_MAIN

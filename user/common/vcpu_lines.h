/* SPDX-License-Identifier: GPL-2.0 */
/*
 * "VCPU VALUE" lines, as `hgclock convert` reads them from standard
 * input: both decimal, unsigned, VCPU at most a limit, separated by
 * spaces or tabs, nothing else on the line (a CR before the newline is
 * allowed).  Lines of any length: a long line is one bad line, never two
 * values.
 */
#ifndef HGCLOCK_VCPU_LINES_H
#define HGCLOCK_VCPU_LINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * Parses one line of @len bytes (without its newline; a NUL in it is
 * junk).  True with *@vcpu <= @max_vcpu and *@value, false for anything
 * else: a sign, a number above the limit or 2^64 - 1, other characters,
 * a missing or third field.
 */
bool hg_parse_vcpu_value(const char *line, size_t len, uint64_t max_vcpu, uint64_t *vcpu,
			 uint64_t *value);

struct hg_line_reader {
	FILE *in;
	char *buf;
	size_t cap;
	unsigned long lineno;	/* of the line last read, from 1 */
};

/*
 * The next line of @lr->in: 1 with its values, 0 at the end, -EINVAL for
 * a bad line (@lr->lineno says which), -errno when reading fails.
 */
int hg_read_vcpu_value(struct hg_line_reader *lr, uint64_t max_vcpu, uint64_t *vcpu,
		       uint64_t *value);
void hg_line_reader_free(struct hg_line_reader *lr);

#endif /* HGCLOCK_VCPU_LINES_H */

// SPDX-License-Identifier: GPL-2.0
/* "VCPU VALUE" lines of `hgclock convert` (vcpu_lines.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "vcpu_lines.h"

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* Decimal digits [*pos, first blank or end): at most @max, no sign, no overflow. */
static bool parse_field(const char *s, size_t len, size_t *pos, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = *pos;

	if (i >= len || s[i] < '0' || s[i] > '9')
		return false;
	for (; i < len && !is_blank(s[i]); i++) {
		unsigned int d = (unsigned char)s[i] - '0';

		if (d > 9 || d > max || v > (max - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*pos = i;
	*out = v;
	return true;
}

static void skip_blanks(const char *s, size_t len, size_t *pos)
{
	while (*pos < len && is_blank(s[*pos]))
		(*pos)++;
}

bool hg_parse_vcpu_value(const char *line, size_t len, uint64_t max_vcpu, uint64_t *vcpu,
			 uint64_t *value)
{
	size_t pos = 0;
	uint64_t v, x;

	if (len && line[len - 1] == '\r')
		len--;
	skip_blanks(line, len, &pos);
	if (!parse_field(line, len, &pos, max_vcpu, &v) || pos >= len || !is_blank(line[pos]))
		return false;
	skip_blanks(line, len, &pos);
	if (!parse_field(line, len, &pos, UINT64_MAX, &x))
		return false;
	skip_blanks(line, len, &pos);
	if (pos != len)
		return false;
	*vcpu = v;
	*value = x;
	return true;
}

int hg_read_vcpu_value(struct hg_line_reader *lr, uint64_t max_vcpu, uint64_t *vcpu,
		       uint64_t *value)
{
	ssize_t n;

	errno = 0;
	n = getline(&lr->buf, &lr->cap, lr->in);
	if (n < 0)
		return ferror(lr->in) ? (errno ? -errno : -EIO) : 0;
	lr->lineno++;
	if (n && lr->buf[n - 1] == '\n')
		n--;
	return hg_parse_vcpu_value(lr->buf, (size_t)n, max_vcpu, vcpu, value) ? 1 : -EINVAL;
}

void hg_line_reader_free(struct hg_line_reader *lr)
{
	free(lr->buf);
	lr->buf = NULL;
	lr->cap = 0;
}

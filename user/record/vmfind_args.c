// SPDX-License-Identifier: GPL-2.0
/*
 * Reading a QEMU command line for what vmfind.c needs (vmfind.h): the
 * vsock CID of a vhost-vsock device, in both forms of QEMU's -device
 * argument (key=value and JSON), and the VM's -name; and whether a name
 * is one vmfind accepts.  Pure parsing of hostile text, no file read
 * here: bounded, range-checked, any doubt an error.  A leaf: it calls
 * nothing in vmfind.c.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vmfind.h"

/* A CID as QEMU reads a property: decimal, 0x hex or 0 octal, whole. */
static int parse_cid_qemu(const char *s, uint32_t *cid)
{
	unsigned long long v;
	char *end;

	if (!isdigit((unsigned char)*s))	/* no sign, no space */
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || v < VMFIND_CID_MIN || v > VMFIND_CID_MAX)
		return -EINVAL;
	*cid = (uint32_t)v;
	return 0;
}

static bool is_vsock_driver(const char *drv)
{
	return !strncmp(drv, "vhost-vsock-", 12) && drv[12];
}

/*
 * The next item of a QEMU option string ("a=b,c=d", ",," a literal comma)
 * from *@p into @item: 1, 0 at the end, -E2BIG when it does not fit.
 */
static int opt_next(const char **p, char *item, size_t size)
{
	const char *s = *p;
	size_t n = 0;

	if (!*s)
		return 0;
	for (;; s++) {
		if (*s == ',' && s[1] == ',') {
			s++;
		} else if (*s == ',' || !*s) {
			break;
		}
		if (n + 1 >= size)
			return -E2BIG;
		item[n++] = *s;
	}
	item[n] = 0;
	*p = *s ? s + 1 : s;
	return 1;
}

static int kv_device_cid(const char *arg, uint32_t *cid)
{
	char item[512], driver[128] = "", cid_str[64] = "";
	bool have_cid = false;
	int first = 1, r;

	while ((r = opt_next(&arg, item, sizeof(item))) > 0) {
		char *eq = strchr(item, '=');
		const char *key = item, *val;

		if (!eq) {
			if (!first)
				return -EINVAL;	/* only the driver goes without a key */
			key = "driver";
			val = item;
		} else {
			*eq = 0;
			val = eq + 1;
		}
		first = 0;
		if (!strcmp(key, "driver")) {
			if (*driver || strlen(val) >= sizeof(driver))
				return -EINVAL;
			strcpy(driver, val);
		} else if (!strcmp(key, "guest-cid")) {
			if (have_cid || strlen(val) >= sizeof(cid_str))
				return -EINVAL;
			strcpy(cid_str, val);
			have_cid = true;
		}
	}
	if (r < 0) {
		/* An item too long for us: fine unless this is a vsock device. */
		return is_vsock_driver(driver) ? -EINVAL : 0;
	}
	if (!is_vsock_driver(driver))
		return 0;
	if (!have_cid || parse_cid_qemu(cid_str, cid))
		return -EINVAL;
	return 1;
}

/*
 * A small JSON reader for one -device object: only its top-level
 * "driver" (a string) and "guest-cid" (a number) matter; every other
 * value is checked for syntax and skipped.
 */
struct js {
	const char *p;
	int depth;
};

#define JS_DEPTH_MAX 32

static void js_ws(struct js *j)
{
	while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')
		j->p++;
}

/* A string at j->p (on its quote), unescaped into @out if not NULL (ASCII only). */
static int js_string(struct js *j, char *out, size_t size, bool *cut)
{
	size_t n = 0;

	if (*j->p != '"')
		return -EINVAL;
	j->p++;
	if (cut)
		*cut = false;
	for (;;) {
		unsigned char c = (unsigned char)*j->p++;

		if (!c || c < 0x20)
			return -EINVAL;
		if (c == '"')
			break;
		if (c == '\\') {
			c = (unsigned char)*j->p++;
			switch (c) {
			case '"': case '\\': case '/': break;
			case 'b': c = '\b'; break;
			case 'f': c = '\f'; break;
			case 'n': c = '\n'; break;
			case 'r': c = '\r'; break;
			case 't': c = '\t'; break;
			case 'u': {
				unsigned int v = 0;

				for (int k = 0; k < 4; k++) {
					int h = (unsigned char)*j->p++;

					if (!isxdigit(h))
						return -EINVAL;
					h = isdigit(h) ? h - '0' : tolower(h) - 'a' + 10;
					v = v * 16 + (unsigned int)h;
				}
				/* Non-ASCII never matches a key we look for. */
				c = v && v < 0x80 ? (unsigned char)v : 0x7f;
				break;
			}
			default:
				return -EINVAL;
			}
		}
		if (out) {
			if (n + 1 < size)
				out[n++] = (char)c;
			else if (cut)
				*cut = true;
		}
	}
	if (out)
		out[n] = 0;
	return 0;
}

/* A number token: -?int(.frac)?(e[+-]?exp)?; @out gets it if it fits. */
static int js_number(struct js *j, char *out, size_t size)
{
	const char *s = j->p;

	if (*j->p == '-')
		j->p++;
	if (*j->p == '0')
		j->p++;
	else if (isdigit((unsigned char)*j->p))
		while (isdigit((unsigned char)*j->p))
			j->p++;
	else
		return -EINVAL;
	if (*j->p == '.') {
		j->p++;
		if (!isdigit((unsigned char)*j->p))
			return -EINVAL;
		while (isdigit((unsigned char)*j->p))
			j->p++;
	}
	if (*j->p == 'e' || *j->p == 'E') {
		j->p++;
		if (*j->p == '+' || *j->p == '-')
			j->p++;
		if (!isdigit((unsigned char)*j->p))
			return -EINVAL;
		while (isdigit((unsigned char)*j->p))
			j->p++;
	}
	if (out) {
		size_t n = (size_t)(j->p - s);

		if (n >= size)
			return -E2BIG;
		memcpy(out, s, n);
		out[n] = 0;
	}
	return 0;
}

static int js_value(struct js *j);

/* An object or array at j->p, skipped; keys are not looked at. */
static int js_container(struct js *j)
{
	char close = *j->p == '{' ? '}' : ']';
	int ret;

	if (++j->depth > JS_DEPTH_MAX)
		return -EINVAL;
	j->p++;
	js_ws(j);
	if (*j->p == close) {
		j->p++;
		j->depth--;
		return 0;
	}
	for (;;) {
		if (close == '}') {
			ret = js_string(j, NULL, 0, NULL);
			if (ret)
				return ret;
			js_ws(j);
			if (*j->p++ != ':')
				return -EINVAL;
			js_ws(j);
		}
		ret = js_value(j);
		if (ret)
			return ret;
		js_ws(j);
		if (*j->p == ',') {
			j->p++;
			js_ws(j);
			continue;
		}
		if (*j->p != close)
			return -EINVAL;
		j->p++;
		j->depth--;
		return 0;
	}
}

static int js_value(struct js *j)
{
	switch (*j->p) {
	case '"':
		return js_string(j, NULL, 0, NULL);
	case '{':
	case '[':
		return js_container(j);
	case 't':
		return strncmp(j->p, "true", 4) ? -EINVAL : (j->p += 4, 0);
	case 'f':
		return strncmp(j->p, "false", 5) ? -EINVAL : (j->p += 5, 0);
	case 'n':
		return strncmp(j->p, "null", 4) ? -EINVAL : (j->p += 4, 0);
	default:
		return js_number(j, NULL, 0);
	}
}

static int json_device_cid(const char *arg, uint32_t *cid)
{
	struct js j = { .p = arg };
	char key[64], driver[128] = "", num[32] = "";
	bool have_driver = false, have_cid = false, driver_cut = false, cid_bad = false;
	int ret;

	js_ws(&j);
	if (*j.p++ != '{')
		return -EINVAL;
	j.depth = 1;
	js_ws(&j);
	if (*j.p == '}') {
		j.p++;
		goto end;
	}
	for (;;) {
		bool cut;

		ret = js_string(&j, key, sizeof(key), &cut);
		if (ret)
			return ret;
		js_ws(&j);
		if (*j.p++ != ':')
			return -EINVAL;
		js_ws(&j);
		if (!cut && !strcmp(key, "driver")) {
			if (have_driver || *j.p != '"')
				return -EINVAL;
			ret = js_string(&j, driver, sizeof(driver), &driver_cut);
			have_driver = true;
		} else if (!cut && !strcmp(key, "guest-cid")) {
			if (have_cid)
				return -EINVAL;
			have_cid = true;
			if (*j.p == '"' || *j.p == '{' || *j.p == '[' ||
			    isalpha((unsigned char)*j.p)) {
				cid_bad = true;	/* QEMU wants a number here */
				ret = js_value(&j);
			} else {
				ret = js_number(&j, num, sizeof(num));
				if (ret == -E2BIG) {
					cid_bad = true;
					ret = js_number(&j, NULL, 0);
				}
			}
		} else {
			ret = js_value(&j);
		}
		if (ret)
			return ret;
		js_ws(&j);
		if (*j.p == ',') {
			j.p++;
			js_ws(&j);
			continue;
		}
		if (*j.p++ != '}')
			return -EINVAL;
		break;
	}
end:
	js_ws(&j);
	if (*j.p)
		return -EINVAL;		/* something after the object */
	if (driver_cut || !is_vsock_driver(driver))
		return 0;
	if (!have_cid || cid_bad)
		return -EINVAL;
	/* Decimal, no sign, no fraction, no exponent, no leading zero. */
	for (const char *s = num; *s; s++)
		if (!isdigit((unsigned char)*s))
			return -EINVAL;
	if (num[0] == '0')
		return -EINVAL;
	return parse_cid_qemu(num, cid) ? -EINVAL : 1;
}

int vmfind_device_cid(const char *arg, uint32_t *cid)
{
	const char *s = arg;

	while (*s == ' ' || *s == '\t' || *s == '\n')
		s++;
	if (*s == '{')
		return json_device_cid(s, cid);
	return kv_device_cid(arg, cid);
}

int vmfind_args_cids(const struct vmfind_args *a, uint32_t *cids, size_t max)
{
	int n = 0;

	for (size_t i = 1; i + 1 < a->argc; i++) {
		uint32_t cid;
		int r;

		if (strcmp(a->argv[i], "-device") && strcmp(a->argv[i], "--device"))
			continue;
		r = vmfind_device_cid(a->argv[++i], &cid);
		if (r < 0)
			return r;
		if (r == 1) {
			if ((size_t)n < max)
				cids[n] = cid;
			if (n < INT_MAX)
				n++;
		}
	}
	return n;
}

int vmfind_args_name(const struct vmfind_args *a, char *name, size_t size)
{
	int found = 0;

	for (size_t i = 1; i + 1 < a->argc; i++) {
		const char *s;
		char item[VMFIND_NAME_MAX * 2 + 16];
		int first = 1, r;

		if (strcmp(a->argv[i], "-name") && strcmp(a->argv[i], "--name"))
			continue;
		/* QEMU keeps the last -name. */
		s = a->argv[++i];
		found = 0;
		while ((r = opt_next(&s, item, sizeof(item))) > 0) {
			const char *val = NULL;

			if (first && !strchr(item, '='))
				val = item;
			else if (!strncmp(item, "guest=", 6))
				val = item + 6;
			first = 0;
			if (!val)
				continue;
			if (strlen(val) >= size)
				return -EINVAL;
			strcpy(name, val);
			found = 1;
		}
		if (r < 0)
			return -EINVAL;
	}
	return found;
}

/* ---- libvirt's XML ---- */

int vmfind_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (!n || n > VMFIND_NAME_MAX || !strcmp(name, ".") || !strcmp(name, ".."))
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == '/' || name[i] == 0x7f)
			return 0;
	return 1;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target: the correlation file reader on arbitrary bytes.  It
 * must return an error or walk the file, never crash, hang or read out
 * of bounds (built with ASan and UBSan).  `make fuzz` runs it for a
 * bounded time from a seed corpus of valid files.
 */
#include <stddef.h>
#include <stdint.h>

#include "corr.h"

static int touch(const void *rec, size_t size, void *ctx)
{
	const volatile uint8_t *p = rec;

	(void)ctx;
	if (size)
		(void)p[size - 1];
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hgcor_reader r;
	struct hgcor_view v;
	int n = 0;

	if (hgcor_open(&r, data, size))
		return 0;
	while (hgcor_next(&r, &v) > 0 && n++ < 100000) {
		if (v.type == HGCOR_SEC_HOST_RECORDS)
			hgcor_walk_records(v.payload, v.length, touch, NULL);
		else if (v.type == HGCOR_SEC_GUEST_RECORDS)
			hgcor_walk_records(v.payload + 8, v.length - 8, touch, NULL);
	}
	return 0;
}

/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz_form.c - the console's parsers of request input (server/form.c) on
 * arbitrary bytes: form bodies and query strings (form_get) and Cookie headers
 * (form_cookie). Whatever they accept must fit the caller's buffer, be NUL-terminated, hold
 * no NUL, and a cookie value only cookie characters. */
#include "common/err.h"
#include "server/form.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_value(int rc, const char *out, size_t cap, int cookie)
{
	size_t n;

	if (rc != 0)
		return;
	n = strnlen(out, cap);
	if (n >= cap)
		abort();
	for (size_t i = 0; cookie && i < n; i++)
		if ((unsigned char)out[i] <= 0x20 || (unsigned char)out[i] >= 0x7f ||
		    out[i] == ';' || out[i] == ',' || out[i] == '\\' || out[i] == '"')
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = {"csrf", "code", "state", "ap_session", "a", ""};
	char out[70], *hdr = malloc(size + 1);
	int rc;

	if (!hdr)
		return 0;
	memcpy(hdr, data, size);
	hdr[size] = '\0';
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		rc = form_get((const char *)data, size, names[i], out, sizeof(out));
		check_value(rc, out, sizeof(out), 0);
		if (rc != 0 && rc != AP_ENOTFOUND && rc != AP_ETOOBIG && rc != AP_EINVAL)
			abort();
		rc = form_get((const char *)data, size, names[i], out, 1);
		check_value(rc, out, 1, 0);
		rc = form_cookie(hdr, names[i], out, sizeof(out));
		check_value(rc, out, sizeof(out), 1);
		if (rc != 0 && rc != AP_ENOTFOUND && rc != AP_ETOOBIG && rc != AP_EINVAL)
			abort();
	}
	free(hdr);
	return 0;
}

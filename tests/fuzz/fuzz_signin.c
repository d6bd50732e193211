/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz_signin.c - the console's sign-in state cookie (server/signin.c) on
 * arbitrary bytes: a cookie value and a state from the browser and GitHub. Nothing but a
 * cookie this server signed, for that very state, is accepted: a genuine cookie with any
 * byte changed is refused, and every answer is one of the documented codes. */
#include "common/err.h"
#include "server/signin.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NOW 1700000000000LL

static signin *the_signin(void)
{
	static signin *s;
	signin_config cfg = {.console_url = "https://console.example.org",
			     .web_url = "https://github.example.org",
			     .client_id = "Iv1.fuzz",
			     .client_secret = "fuzz-client-secret"};

	if (!s && signin_new(&s, &cfg))
		abort();
	return s;
}

static void known(int rc)
{
	if (rc != 0 && rc != AP_EDENIED && rc != AP_ETIMEOUT && rc != AP_EINVAL)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	signin *s = the_signin();
	char state[SIGNIN_STATE_HEX + 1], cookie[SIGNIN_COOKIE_MAX], changed[SIGNIN_COOKIE_MAX];
	char *buf = malloc(size + 1), *sep;
	size_t n;
	int rc;

	if (!buf)
		return 0;
	/* 1. The bytes as "cookie\nstate": refused unless this server signed them. */
	memcpy(buf, data, size);
	buf[size] = '\0';
	sep = strchr(buf, '\n');
	if (sep)
		*sep = '\0';
	rc = signin_cookie_check(s, buf, sep ? sep + 1 : NULL, NOW);
	known(rc);
	if (rc == 0)
		abort(); /* a forgery: the fuzzer cannot know the key */
	/* 2. A genuine cookie with the bytes written over it: accepted only unchanged. */
	if (signin_cookie_make(s, NOW, state, cookie))
		abort();
	n = strlen(cookie);
	memcpy(changed, cookie, n + 1);
	for (size_t i = 0; i + 1 < size && i / 2 < n; i += 2)
		changed[(data[i] * 256u + data[i + 1]) % n] ^= data[i + 1] ? data[i + 1] : 1;
	rc = signin_cookie_check(s, changed, state, NOW);
	known(rc);
	if ((rc == 0) != (strcmp(changed, cookie) == 0))
		abort();
	free(buf);
	return 0;
}

/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz_webhook.c - libFuzzer target over verify -> parse -> route (wh_handle).
 *
 * Input layout: one flags byte, then three NUL-terminated header values (event, content type,
 * signature), then the body. Unless flag bit 0 is set the body is signed with the right secret,
 * so the fuzzer reaches the JSON parser and the router instead of stopping at the HMAC;
 * with bit 0 the signature from the input is used as is. Bits 1-3 drop headers, bit 4 picks
 * the previous (rotation) secret, bit 5 uses a wrong method. Every body is also cross-checked:
 * the fields the payload scanner extracts must equal what cJSON parses.
 */
#include "server/payload.h"
#include "server/sig.h"
#include "server/webhook.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The value at a field's dotted path in a cJSON tree (first key wins, like pl_scan), or NULL. */
static const cJSON *lookup(const cJSON *root, const char *path)
{
	char key[64];
	const cJSON *v = root;

	while (v && *path) {
		size_t n = strcspn(path, ".");

		if (n >= sizeof(key) || !cJSON_IsObject(v))
			return NULL;
		memcpy(key, path, n);
		key[n] = '\0';
		v = cJSON_GetObjectItemCaseSensitive(v, key);
		path += n + (path[n] == '.');
	}
	return v;
}

/* Differential check of the payload scanner against cJSON: whenever both accept a body, every
 * field the scanner extracted must be what cJSON sees at that path. */
static void cross_check(const char *body, size_t len)
{
	pl_fields f;
	cJSON *root;

	if (pl_scan(body, len, &f) != 0)
		return;
	root = cJSON_ParseWithLength(body, len);
	if (!root) {
		pl_fields_release(&f);
		return;
	}
	for (int i = 0; i < PL_NFIELDS; i++) {
		const cJSON *v = lookup(root, pl__field_path((enum pl_field)i));

		if ((f.str[i] && (!cJSON_IsString(v) || strcmp(v->valuestring, f.str[i]) != 0)) ||
		    (f.id[i] && (!cJSON_IsNumber(v) || v->valuedouble != (double)f.id[i])) ||
		    (f.object[i] && !cJSON_IsObject(v))) {
			fprintf(stderr, "payload scanner and cJSON disagree on %s\n",
				pl__field_path((enum pl_field)i));
			abort();
		}
	}
	cJSON_Delete(root);
	pl_fields_release(&f);
}

static const char *field(const uint8_t **p, const uint8_t *end)
{
	const uint8_t *nul = memchr(*p, 0, (size_t)(end - *p));
	const char *s;

	if (!nul)
		return NULL;
	s = (const char *)*p;
	*p = nul + 1;
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const wh_config cfg = {{"fuzz-secret-current", "fuzz-secret-previous"}, "autopatch"};
	const uint8_t *p = data + 1, *end = data + size;
	const char *event, *ctype, *sig;
	char good[SIG_HEADER_LEN];
	wh_decision d;
	wh_request req;
	uint8_t flags;

	if (size < 1)
		return 0;
	flags = data[0];
	if (!(event = field(&p, end)) || !(ctype = field(&p, end)) || !(sig = field(&p, end)))
		return 0;
	if (!(flags & 1)) {
		if (sig__sign(cfg.secrets[(flags >> 4) & 1], p, (size_t)(end - p), good))
			return 0;
		sig = good;
	}
	req = (wh_request){
	    .method = (flags & 32) ? "GET" : "POST",
	    .event = (flags & 2) ? NULL : event,
	    .delivery = (flags & 4) ? NULL : "0b989ba4-242f-11e5-81e1-c7b6966d2516",
	    .signature = (flags & 8) ? NULL : sig,
	    .content_type = ctype,
	    .body = (const char *)p,
	    .len = (size_t)(end - p),
	};
	wh_handle(&cfg, &req, &d);
	/* Invariants: a trigger names a repository and an issue; a rejection has a status. */
	if (d.action == WH_TRIGGER && (!d.repo[0] || d.issue <= 0 || d.installation_id <= 0))
		abort();
	if (d.action == WH_REJECT && (d.status < 400 || d.status > 599))
		abort();
	if (d.action != WH_REJECT && d.status != 200 && d.status != 202)
		abort();
	wh_decision_release(&d);
	cross_check(req.body, req.len);
	return 0;
}

/* SPDX-License-Identifier: MIT */
/* tests/common/test_redact.c - the redaction layer: encoded forms, token patterns, private-key
 * blocks, secrets split across stream writes, overlaps, false positives, and the logger. */
#include "common/buf.h"
#include "common/log.h"
#include "common/redact.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* Token-shaped strings are assembled at run time so this file holds none verbatim. */
static char *repeat_join(const char *prefix, const char *unit, size_t n, const char *suffix)
{
	size_t ul = strlen(unit);
	char *s = malloc(strlen(prefix) + n + strlen(suffix) + 1);
	size_t o = strlen(prefix);

	assert_non_null(s);
	memcpy(s, prefix, o);
	for (size_t i = 0; i < n; i++)
		s[o++] = unit[i % ul];
	strcpy(s + o, suffix);
	return s;
}

static char *cat3(const char *a, const char *b, const char *c)
{
	char *s = malloc(strlen(a) + strlen(b) + strlen(c) + 1);

	assert_non_null(s);
	strcpy(s, a);
	strcat(s, b);
	strcat(s, c);
	return s;
}

static void expect_redacted(const char *in, const char *want)
{
	char *got = redact_str(in);

	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

/* The masked text must contain the mask and none of the 6-byte windows of `secret_part`. */
static void expect_hidden(const char *in, const char *secret_part)
{
	char *got = redact_str(in);
	size_t n = strlen(secret_part);

	assert_non_null(got);
	assert_non_null(strstr(got, REDACT_MASK));
	for (size_t i = 0; i + 6 <= n; i++) {
		char w[7];

		memcpy(w, secret_part + i, 6);
		w[6] = '\0';
		if (strstr(got, w))
			fail_msg("window \"%s\" of the secret survived in \"%s\"", w, got);
	}
	free(got);
}

static int reset(void **state)
{
	(void)state;
	redact__clear();
	return 0;
}

static void test_redact_plain_and_short(void **state)
{
	(void)state;
	assert_int_equal(redact_add_secret("hunter2-is-my-password"), 0);
	expect_redacted("login with hunter2-is-my-password now", "login with *** now");
	expect_redacted("twice: hunter2-is-my-password hunter2-is-my-password.", "twice: *** ***.");
	assert_int_equal(redact_add_secret("abc"), 0); /* too short: would mask words */
	expect_redacted("abc abcdef", "abc abcdef");
	assert_int_equal(redact_add_secret(NULL), 0);
}

/* Expired tokens can be taken back; registrations are counted and shared variants stay. */
static void test_redact_remove_secret(void **state)
{
	(void)state;
	assert_int_equal(redact_add_secret("token-one-abcdef"), 0);
	assert_int_equal(redact_add_secret("token-two-ghijkl"), 0);
	assert_int_equal(redact_add_secret("token-two-ghijkl"), 0);
	assert_int_equal(redact_add_secret("shared-line-123456"), 0);
	assert_int_equal(redact_add_secret("multi\nshared-line-123456\nother-line-7890"), 0);
	assert_int_equal(redact_remove_secret("token-one-abcdef"), 0);
	expect_redacted("a token-one-abcdef b dG9rZW4tb25lLWFiY2RlZg",
			"a token-one-abcdef b dG9rZW4tb25lLWFiY2RlZg");
	assert_int_equal(redact_remove_secret("token-two-ghijkl"), 0);
	expect_redacted("a token-two-ghijkl b", "a *** b");
	assert_int_equal(redact_remove_secret("token-two-ghijkl"), 0);
	expect_redacted("a token-two-ghijkl b", "a token-two-ghijkl b");
	assert_int_equal(redact_remove_secret("multi\nshared-line-123456\nother-line-7890"), 0);
	expect_redacted("shared-line-123456 other-line-7890", "*** other-line-7890");
	assert_int_equal(redact_remove_secret("shared-line-123456"), 0);
	assert_int_equal(redact__variant_count(), 0);
	assert_int_equal(redact_remove_secret("never-registered"), 0);
}

/* base64 of prefix+secret+suffix for each alignment of the secret, in both alphabets. */
static void test_redact_base64_alignments(void **state)
{
	/* Bytes chosen so the standard encoding holds '+' and '/' and the URL-safe one differs. */
	static const char secret[] = "s3cr\xfb\xff\xbe\xfb\xef-t0ken?>?>";
	static const char *prefixes[] = {"", "u:", "us:", "user:", "x"};

	(void)state;
	assert_int_equal(redact_add_secret(secret), 0);
	for (size_t p = 0; p < sizeof(prefixes) / sizeof(prefixes[0]); p++) {
		char raw[128], std[256], url[256], text[300];
		size_t rl, start, end;
		int el;

		rl = (size_t)snprintf(raw, sizeof(raw), "%s%s@tail", prefixes[p], secret);
		el = EVP_EncodeBlock((unsigned char *)std, (unsigned char *)raw, (int)rl);
		assert_true(el > 0);
		strcpy(url, std);
		for (char *c = url; *c; c++)
			*c = *c == '+' ? '-' : *c == '/' ? '_' : *c;
		assert_string_not_equal(std, url);
		/* Characters that encode only secret bits. */
		start = (strlen(prefixes[p]) * 8 + 5) / 6;
		end = ((strlen(prefixes[p]) + strlen(secret)) * 8) / 6;
		for (int alpha = 0; alpha < 2; alpha++) {
			const char *enc = alpha ? url : std;
			char part[256];

			memcpy(part, enc + start, end - start);
			part[end - start] = '\0';
			snprintf(text, sizeof(text), "Authorization: Basic %s\n", enc);
			expect_hidden(text, part);
		}
	}
}

static void test_redact_url_encoded(void **state)
{
	(void)state;
	assert_int_equal(redact_add_secret("p@ss w/rd:key&1"), 0);
	expect_redacted("https://x/?t=p%40ss%20w%2Frd%3Akey%261&y=2", "https://x/?t=***&y=2");
	expect_redacted("https://x/?t=p%40ss%20w%2frd%3akey%261&y=2", "https://x/?t=***&y=2");
	expect_redacted("body=p%40ss+w%2Frd%3Akey%261", "body=***");
}

static void test_redact_json_escaped(void **state)
{
	static const char secret[] = "ab\"cd\\ef\ngh/ij\tk";
	cJSON *o, *outer;
	char *line, *twice;

	(void)state;
	assert_int_equal(redact_add_secret(secret), 0);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "k", secret);
	line = cJSON_PrintUnformatted(o);
	expect_redacted(line, "{\"k\":\"***\"}");
	/* JSON inside JSON (a logged request body) escapes the secret twice. */
	outer = cJSON_CreateObject();
	cJSON_AddStringToObject(outer, "body", line);
	twice = cJSON_PrintUnformatted(outer);
	expect_redacted(twice, "{\"body\":\"{\\\"k\\\":\\\"***\\\"}\"}");
	/* Encoders that escape '/' too. */
	expect_redacted("\"ab\\\"cd\\\\ef\\ngh\\/ij\\tk\"", "\"***\"");
	free(line);
	free(twice);
	cJSON_Delete(o);
	cJSON_Delete(outer);
}

static char *make_pem_key(void)
{
	EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)1024);
	BIO *bio = BIO_new(BIO_s_mem());
	char *data, *pem;
	long n;

	assert_non_null(k);
	assert_non_null(bio);
	assert_int_equal(PEM_write_bio_PrivateKey(bio, k, NULL, NULL, 0, NULL, NULL), 1);
	n = BIO_get_mem_data(bio, &data);
	pem = strndup(data, (size_t)n);
	BIO_free(bio);
	EVP_PKEY_free(k);
	return pem;
}

/* Lines 2..5 of the key body (no armour, so only registration can catch them), joined by sep. */
static char *key_middle(const char *pem, const char *sep, char lines[4][80])
{
	ap_buf b = AP_BUF_INIT(4096);
	const char *p = strchr(pem, '\n') + 1;

	for (int i = 0; i < 5; i++) {
		const char *nl = strchr(p, '\n');

		assert_non_null(nl);
		if (i >= 1) {
			memcpy(lines[i - 1], p, (size_t)(nl - p));
			lines[i - 1][nl - p] = '\0';
			ap_buf_adds(&b, lines[i - 1]);
			ap_buf_adds(&b, sep);
		}
		p = nl + 1;
	}
	return ap_buf_take(&b);
}

static void expect_lines_hidden(const char *text, char lines[4][80])
{
	for (int i = 0; i < 4; i++)
		expect_hidden(text, lines[i]);
}

static void test_redact_pem_registered(void **state)
{
	char *pem = make_pem_key(), *lit, *text, *single;
	char lines[4][80];

	(void)state;
	assert_int_equal(redact_add_secret(pem), 0);
	/* The key printed with real newlines, then in the literal-"\n" spelling of .env files. */
	text = key_middle(pem, "\n", lines);
	expect_lines_hidden(text, lines);
	free(text);
	text = key_middle(pem, "\\n", lines);
	expect_lines_hidden(text, lines);
	free(text);
	/* One line alone, and the whole key without its trailing newline. */
	single = cat3("line: ", lines[2], " end");
	expect_redacted(single, "line: *** end");
	lit = strndup(pem, strlen(pem) - 1);
	text = cat3("[", lit, "]");
	expect_redacted(text, "[***]");
	free(text);
	free(lit);
	free(single);
	free(pem);
}

/* PRIVATE_KEY=-----BEGIN...\n...\n... in .env arrives with literal backslash-n. */
static void test_redact_pem_registered_with_literal_newlines(void **state)
{
	char *pem = make_pem_key(), *lit, *text;
	ap_buf b = AP_BUF_INIT(8192);
	char lines[4][80];

	(void)state;
	for (const char *c = pem; *c; c++)
		ap_buf_adds(&b, *c == '\n' ? "\\n" : (char[]){*c, 0});
	lit = ap_buf_take(&b);
	assert_int_equal(redact_add_secret(lit), 0);
	text = key_middle(pem, "\n", lines);
	expect_lines_hidden(text, lines);
	free(text);
	text = key_middle(pem, "\\n", lines);
	expect_lines_hidden(text, lines);
	free(text);
	expect_redacted(pem, "***"); /* registered with its final newline */
	free(lit);
	free(pem);
}

struct pat_case {
	char *token;
	const char *name;
};

static void test_redact_patterns(void **state)
{
	const char *alnum = "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xYz";
	struct pat_case cases[] = {
	    {repeat_join("ghp_", alnum, 36, ""), "github pat classic"},
	    {repeat_join("gho_", alnum, 36, ""), "github oauth"},
	    {repeat_join("ghu_", alnum, 36, ""), "github user-to-server"},
	    {repeat_join("ghs_", alnum, 36, ""), "github installation"},
	    {repeat_join("ghr_", alnum, 36, ""), "github refresh"},
	    {repeat_join("github_pat_", "11ABCDEFG0_aBcDeFgHiJ", 82, ""), "github fine-grained"},
	    {repeat_join("sk-", alnum, 20, "T3BlbkFJ"), "openai legacy (head)"},
	    {repeat_join("sk-proj-", "Ab_9-zQ", 60, ""), "openai project"},
	    {repeat_join("sk-ant-api03-", "Zx_8-yW", 93, "AA"), "anthropic"},
	    {repeat_join("AKIA", "QWERTY234567ZXCV", 16, ""), "aws access key"},
	    {repeat_join("ASIA", "MNBV234567LKJHGF", 16, ""), "aws session key"},
	};
	char *legacy;

	(void)state;
	/* Complete the legacy OpenAI key: 20 characters on each side of T3BlbkFJ. */
	legacy = repeat_join(cases[6].token, alnum, 20, "");
	free(cases[6].token);
	cases[6].token = legacy;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *in = cat3("token=", cases[i].token, " rest");
		char *in_json = cat3("{\"t\":\"", cases[i].token, "\"}");

		print_message("pattern: %s\n", cases[i].name);
		expect_redacted(in, "token=*** rest");
		expect_redacted(in_json, "{\"t\":\"***\"}");
		expect_redacted(cases[i].token, "***");
		free(in);
		free(in_json);
		free(cases[i].token);
	}
}

static void test_redact_private_key_blocks(void **state)
{
	char *pem = make_pem_key(), *text, *cut, *ec;

	(void)state;
	text = cat3("before\n", pem, "after\n");
	expect_redacted(text, "before\n***\nafter\n");
	free(text);
	/* No END line yet: masked to the end of the input. */
	cut = strndup(pem, strlen(pem) / 2);
	text = cat3("before ", cut, "");
	expect_redacted(text, "before ***");
	free(text);
	free(cut);
	/* Other armour names, and the JSON-escaped spelling of a whole key. */
	ec = strdup("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIIr\n-----END EC PRIVATE KEY-----");
	text = cat3("k=", ec, ";");
	expect_redacted(text, "k=***;");
	free(text);
	free(ec);
	ec = strdup("x -----BEGIN OPENSSH PRIVATE KEY-----\\nb3BlbnNz\\n-----END OPENSSH PRIVATE "
		    "KEY-----\\n y");
	expect_redacted(ec, "x ***\\n y");
	free(ec);
	free(pem);
}

static void test_redact_overlapping_secrets(void **state)
{
	(void)state;
	assert_int_equal(redact_add_secret("alpha-bravo-charlie"), 0);
	assert_int_equal(redact_add_secret("charlie-delta-echo"), 0);
	assert_int_equal(redact_add_secret("bravo-char"), 0); /* nested inside the first */
	expect_redacted("x alpha-bravo-charlie-delta-echo y", "x *** y");
	expect_redacted("x bravo-charlie y", "x ***lie y");
	/* A registered secret that overlaps a token pattern. */
	{
		char *tok = repeat_join("ghs_", "Kq7Zp2", 36, "");
		char *sec = strndup(tok + 30, 20);
		char *in = cat3("see ", tok, "-tail");

		assert_int_equal(redact_add_secret(sec), 0);
		expect_redacted(in, "see ***-tail");
		free(in);
		free(sec);
		free(tok);
	}
}

static void test_redact_no_false_positives(void **state)
{
	static const char *text =
	    "The quick brown fox jumps over the lazy dog. Use sk-learn for task-based desk-lamp "
	    "risk-assessment-for-the-new-deployment-pipeline; see ghp_short and ghost_protocol.\n"
	    "AKIAshort, AKIA1234 and ASIAN-FOOD, XAKIAIOSFODNN7EXAMPLEX are not keys.\n"
	    "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n"
	    "-----END PUBLIC KEY-----\n"
	    "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----\n"
	    "github_pat_tooshort and sk-ant- alone; base64 aGVsbG8gd29ybGQ= and %41%42.\n"
	    "{\"login\":\"octocat\",\"token_url\":\"https://api.example/app/tokens\"}\n";
	char *got;

	(void)state;
	assert_int_equal(redact_add_secret("correct-horse-battery"), 0);
	assert_int_equal(redact_add_secret("-----BEGIN OPENSSH PRIVATE KEY-----\nAAAAB3Nza\n"), 0);
	got = redact_str(text);
	assert_string_equal(got, text);
	free(got);
}

/* ---- streaming ---- */

static void collect(void *ud, const char *p, size_t n)
{
	assert_int_equal(ap_buf_add(ud, p, n), 0);
}

static char *stream_pieces(const char *text, const size_t *cuts, size_t ncuts, size_t batch)
{
	ap_buf out = AP_BUF_INIT((size_t)-2);
	redact_stream *s;
	size_t prev = 0, len = strlen(text);

	assert_int_equal(redact_stream_new(&s, collect, &out), 0);
	redact_stream_set_batch(s, batch);
	for (size_t i = 0; i <= ncuts; i++) {
		size_t to = i < ncuts ? cuts[i] : len;

		assert_int_equal(redact_stream_write(s, text + prev, to - prev), 0);
		prev = to;
	}
	assert_int_equal(redact_stream_flush(s), 0);
	redact_stream_free(s);
	return ap_buf_take(&out);
}

static char *build_split_text(char **want)
{
	char *tok = repeat_join("ghp_", "Zq8Xw3Ny", 36, "");
	char *pem = strdup("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAw1\n"
			   "-----END RSA PRIVATE KEY-----");
	ap_buf b = AP_BUF_INIT(1 << 16), w = AP_BUF_INIT(1 << 16);

	ap_buf_addf(&b, "line one s3cret/value+42 and %s; url=s3cret%%2Fvalue%%2B42; ", tok);
	ap_buf_addf(&b, "b64=czNjcmV0L3ZhbHVlKzQy. %s done AKIAQWERTY234567ZXCV.", pem);
	ap_buf_adds(&w, "line one *** and ***; url=***; b64=***. *** done ***.");
	*want = ap_buf_take(&w);
	free(tok);
	free(pem);
	return ap_buf_take(&b);
}

static void test_redact_stream_every_split_point(void **state)
{
	char *want, *text;
	size_t len;

	(void)state;
	assert_int_equal(redact_add_secret("s3cret/value+42"), 0);
	text = build_split_text(&want);
	len = strlen(text);
	{
		char *whole = redact_str(text);

		assert_string_equal(whole, want);
		free(whole);
	}
	for (size_t k = 0; k <= len; k++) {
		for (size_t batch = 0; batch <= 64; batch += 64) {
			char *got = stream_pieces(text, &k, 1, batch);

			if (strcmp(got, want) != 0)
				fail_msg("split at %zu (batch %zu): got \"%s\"", k, batch, got);
			free(got);
		}
	}
	/* Byte by byte, and in three pieces with a 7-byte middle piece at every offset. */
	{
		size_t *cuts = calloc(len, sizeof(*cuts));
		char *got;

		assert_non_null(cuts);
		for (size_t i = 0; i < len; i++)
			cuts[i] = i;
		got = stream_pieces(text, cuts, len, 0);
		assert_string_equal(got, want);
		free(got);
		free(cuts);
	}
	for (size_t a = 0; a + 7 <= len; a += 7) {
		size_t cuts[2] = {a, a + 7};
		char *got = stream_pieces(text, cuts, 2, 0);

		assert_string_equal(got, want);
		free(got);
	}
	free(text);
	free(want);
}

/* With nothing registered the hold-back is only as long as a keyword: a token cut inside its
 * keyword ("g" | "hp_...") must still be caught. */
static void test_redact_stream_split_unregistered_tokens(void **state)
{
	char *tok = repeat_join("ghp_", "Zq8Xw3Ny", 36, "");
	char *pat = repeat_join("github_pat_", "Ab_9", 82, "");
	ap_buf b = AP_BUF_INIT(4096);
	char *text;
	size_t len;

	(void)state;
	assert_int_equal(ap_buf_addf(&b,
				     "a %s b -----BEGIN EC PRIVATE KEY-----\nMHc\n"
				     "-----END EC PRIVATE KEY----- %s.",
				     tok, pat),
			 0);
	text = ap_buf_take(&b);
	len = strlen(text);
	for (size_t k = 0; k <= len; k++) {
		char *got = stream_pieces(text, &k, 1, 0);

		if (strcmp(got, "a *** b *** ***.") != 0)
			fail_msg("split at %zu: got \"%s\"", k, got);
		free(got);
	}
	free(text);
	free(tok);
	free(pat);
}

/* Differential check: random texts made of secrets, their encodings, tokens, cut tokens, key
 * armour and noise, written in random pieces, must come out of the stream exactly as
 * redact_mem() redacts them in one go. Fragments are separated by whitespace, so no AWS key
 * follows a letter (the one documented difference: the stream may mask more there). */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 16);
}

static void test_redact_stream_matches_oneshot_random(void **state)
{
	char *tok = repeat_join("ghs_", "Ab1Cd2Ef3", 36, "");
	char *pat = repeat_join("github_pat_", "x_Y9", 82, "");
	char *ant = repeat_join("sk-ant-api03-", "Q_w-E", 93, "AA");
	const char *frags[] = {
	    "rotate-me-0xC0FFEE",
	    "cm90YXRlLW1lLTB4QzBGRkVF",
	    "rotate-me-0xC0FFEE\\n",
	    "pa%24%24%2Fword%3D9",
	    "pa%24%24%2fword%3d9",
	    "pa$$/word=9",
	    "cGEkJC93b3JkPTk",
	    tok,
	    pat,
	    ant,
	    "ghs_Ab1Cd2",
	    "github_pat_",
	    "sk-",
	    "sk-ant-",
	    "gh",
	    "AKIAQWERTY234567ZXCV",
	    "AKIA12",
	    "-----BEGIN RSA PRIVATE KEY-----",
	    "-----END RSA PRIVATE KEY-----",
	    "-----BEGIN PUBLIC KEY-----",
	    "MIIEpAIBAAKCAQEAz",
	    "-----",
	    "T3BlbkFJ",
	    "ordinary words",
	};
	const char *seps[] = {" ", "\n", "\\n", "\t", "  "};

	(void)state;
	assert_int_equal(redact_add_secret("rotate-me-0xC0FFEE"), 0);
	assert_int_equal(redact_add_secret("pa$$/word=9"), 0);
	for (int iter = 0; iter < 400; iter++) {
		ap_buf text = AP_BUF_INIT(1 << 20), out = AP_BUF_INIT((size_t)-2);
		size_t nfr = 1 + rng() % 40, pos = 0;
		redact_stream *s;
		char *want;

		for (size_t k = 0; k < nfr; k++) {
			if (rng() % 5 == 0) {
				for (uint32_t n = rng() % 120; n; n--)
					ap_buf_add(&text, &"abcXYZ019_-+/="[rng() % 14], 1);
			} else {
				ap_buf_adds(&text,
					    frags[rng() % (sizeof(frags) / sizeof(frags[0]))]);
			}
			ap_buf_adds(&text, seps[rng() % (sizeof(seps) / sizeof(seps[0]))]);
		}
		want = redact_mem(text.data, text.len);
		assert_non_null(want);
		assert_int_equal(redact_stream_new(&s, collect, &out), 0);
		redact_stream_set_batch(s, rng() % 3 ? 0 : rng() % 200);
		while (pos < text.len) {
			size_t n = 1 + rng() % (rng() % 4 ? 16 : 400);

			if (n > text.len - pos)
				n = text.len - pos;
			assert_int_equal(redact_stream_write(s, text.data + pos, n), 0);
			pos += n;
		}
		redact_stream_free(s);
		if (strcmp(ap_buf_str(&out), want) != 0)
			fail_msg("iteration %d\ninput: %s\nstream: %s\noneshot: %s", iter,
				 text.data, ap_buf_str(&out), want);
		free(want);
		ap_buf_release(&text);
		ap_buf_release(&out);
	}
	free(tok);
	free(pat);
	free(ant);
}

/* Large output: the stream emits as it goes (bounded hold-back) and stays exact. */
static void test_redact_stream_large_output(void **state)
{
	ap_buf text = AP_BUF_INIT((size_t)-2), want = AP_BUF_INIT((size_t)-2);
	ap_buf out = AP_BUF_INIT((size_t)-2);
	redact_stream *s;
	size_t emitted_before_flush;

	(void)state;
	assert_int_equal(redact_add_secret("0xDEADBEEF-api-key"), 0);
	for (int i = 0; i < 2000; i++) {
		ap_buf_addf(&text, "build step %d ok 0xDEADBEEF-api-key\n", i);
		ap_buf_addf(&want, "build step %d ok ***\n", i);
	}
	assert_int_equal(redact_stream_new(&s, collect, &out), 0);
	for (size_t off = 0; off < text.len; off += 1000) {
		size_t n = text.len - off < 1000 ? text.len - off : 1000;

		assert_int_equal(redact_stream_write(s, text.data + off, n), 0);
	}
	emitted_before_flush = out.len;
	redact_stream_free(s);
	assert_true(emitted_before_flush > want.len - 8192);
	assert_string_equal(ap_buf_str(&out), ap_buf_str(&want));
	ap_buf_release(&text);
	ap_buf_release(&want);
	ap_buf_release(&out);
}

/* A stream nothing was written to (an exec's silent stderr) flushes and frees cleanly. */
static void test_redact_stream_unused(void **state)
{
	ap_buf out = AP_BUF_INIT(64);
	redact_stream *s;

	(void)state;
	assert_int_equal(redact_stream_new(&s, collect, &out), 0);
	assert_int_equal(redact_stream_flush(s), 0);
	assert_int_equal(redact_stream_write(s, "", 0), 0);
	redact_stream_free(s);
	assert_int_equal(out.len, 0);
	ap_buf_release(&out);
}

/* A private-key block that never ends: masked once, its body is never emitted, output after
 * a later END line comes through. */
static void test_redact_stream_unterminated_key(void **state)
{
	ap_buf out = AP_BUF_INIT((size_t)-2);
	redact_stream *s;
	char line[80];

	(void)state;
	assert_int_equal(redact_stream_new(&s, collect, &out), 0);
	redact_stream_set_batch(s, 0); /* process every write: the END line arrives split */
	assert_int_equal(redact_stream_write(s, "start -----BEGIN PRIVATE KEY-----\n", 34), 0);
	memset(line, 'Q', 64);
	line[64] = '\n';
	for (int i = 0; i < 3000; i++)
		assert_int_equal(redact_stream_write(s, line, 65), 0);
	assert_string_equal(ap_buf_str(&out), "start ***");
	assert_int_equal(redact_stream_write(s, "QQ\n-----END PRIV", 16), 0);
	assert_int_equal(redact_stream_write(s, "ATE KEY-----\nvisible tail\n", 26), 0);
	assert_int_equal(redact_stream_flush(s), 0);
	redact_stream_free(s);
	assert_string_equal(ap_buf_str(&out), "start ***\nvisible tail\n");
	ap_buf_release(&out);
}

/* The sink runs outside the registry lock: it may log and register secrets (it would deadlock
 * otherwise), and what it registers applies to the bytes still held. */
static void register_from_sink(void *ud, const char *p, size_t n)
{
	collect(ud, p, n);
	assert_int_equal(redact_add_secret("late-secret-value"), 0);
	ap_info("sink got %zu bytes", n);
}

static void test_redact_stream_sink_may_register(void **state)
{
	ap_buf out = AP_BUF_INIT((size_t)-2);
	redact_stream *s;
	int fd = open("/dev/null", O_WRONLY);

	(void)state;
	ap_log_set_fd(fd);
	assert_int_equal(redact_stream_new(&s, register_from_sink, &out), 0);
	redact_stream_set_batch(s, 0);
	assert_int_equal(redact_stream_write(s, "0123456789abcdef-first part ", 28), 0);
	assert_int_equal(redact_stream_write(s, "then late-secret-value here", 27), 0);
	redact_stream_free(s);
	ap_log_set_fd(2);
	close(fd);
	assert_string_equal(ap_buf_str(&out), "0123456789abcdef-first part then *** here");
	ap_buf_release(&out);
}

/* NUL bytes in container output do not cut the stream short. */
static void test_redact_binary_safe(void **state)
{
	static const char in[] = "a\0b secret-bin-value\0c";
	ap_buf out = AP_BUF_INIT(256);

	(void)state;
	assert_int_equal(redact_add_secret("secret-bin-value"), 0);
	assert_int_equal(redact_append(&out, in, sizeof(in) - 1), 0);
	assert_int_equal(out.len, 9);
	assert_memory_equal(out.data, "a\0b ***\0c", 9);
	ap_buf_release(&out);
}

/* ---- logger ---- */

static char *read_all(int fd)
{
	ap_buf b = AP_BUF_INIT(1 << 20);
	char chunk[4096];
	ssize_t n;

	while ((n = read(fd, chunk, sizeof(chunk))) > 0)
		assert_int_equal(ap_buf_add(&b, chunk, (size_t)n), 0);
	return ap_buf_take(&b);
}

static void test_redact_logger_lines(void **state)
{
	char *tok = repeat_join("ghs_", "Pl9Ok8Ij7", 36, "");
	int fds[2];
	char *all, *line, *save = NULL;
	int lines = 0;

	(void)state;
	assert_int_equal(redact_add_secret("whsec-rotating-42"), 0);
	assert_int_equal(pipe(fds), 0);
	ap_log_set_fd(fds[1]);
	ap_log(AP_LOG_INFO, "d-whsec-rotating-42", 7, "secret %s token %s", "whsec-rotating-42",
	       tok);
	ap_info("key -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg \"quoted\"");
	ap_info("json {\"secret\":\"whsec-rotating-42\"} and %s", "d2hzZWMtcm90YXRpbmctNDI=");
	ap_log_set_fd(2);
	close(fds[1]);
	all = read_all(fds[0]);
	close(fds[0]);
	assert_null(strstr(all, "whsec-rotating-42"));
	assert_null(strstr(all, "d2hzZWMtcm90YXRpbmct"));
	assert_null(strstr(all, tok + 4));
	assert_null(strstr(all, "MIIEvQIBADANBg"));
	for (line = strtok_r(all, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		cJSON *o = cJSON_Parse(line);
		const char *msg;

		assert_non_null(o); /* still one JSON object per line */
		msg = cJSON_GetStringValue(cJSON_GetObjectItem(o, "msg"));
		assert_non_null(msg);
		assert_non_null(strstr(msg, REDACT_MASK));
		if (lines == 0) {
			assert_string_equal(msg, "secret *** token ***");
			assert_string_equal(
			    cJSON_GetStringValue(cJSON_GetObjectItem(o, "delivery")), "d-***");
		}
		if (lines == 1)
			assert_string_equal(msg, "key ***");
		cJSON_Delete(o);
		lines++;
	}
	assert_int_equal(lines, 3);
	free(all);
	free(tok);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_redact_plain_and_short, reset),
	    cmocka_unit_test_setup(test_redact_remove_secret, reset),
	    cmocka_unit_test_setup(test_redact_base64_alignments, reset),
	    cmocka_unit_test_setup(test_redact_url_encoded, reset),
	    cmocka_unit_test_setup(test_redact_json_escaped, reset),
	    cmocka_unit_test_setup(test_redact_pem_registered, reset),
	    cmocka_unit_test_setup(test_redact_pem_registered_with_literal_newlines, reset),
	    cmocka_unit_test_setup(test_redact_patterns, reset),
	    cmocka_unit_test_setup(test_redact_private_key_blocks, reset),
	    cmocka_unit_test_setup(test_redact_overlapping_secrets, reset),
	    cmocka_unit_test_setup(test_redact_no_false_positives, reset),
	    cmocka_unit_test_setup(test_redact_stream_every_split_point, reset),
	    cmocka_unit_test_setup(test_redact_stream_split_unregistered_tokens, reset),
	    cmocka_unit_test_setup(test_redact_stream_matches_oneshot_random, reset),
	    cmocka_unit_test_setup(test_redact_stream_large_output, reset),
	    cmocka_unit_test_setup(test_redact_stream_unused, reset),
	    cmocka_unit_test_setup(test_redact_stream_unterminated_key, reset),
	    cmocka_unit_test_setup(test_redact_stream_sink_may_register, reset),
	    cmocka_unit_test_setup(test_redact_binary_safe, reset),
	    cmocka_unit_test_setup(test_redact_logger_lines, reset),
	};

	return cmocka_run_group_tests(tests, NULL, reset);
}

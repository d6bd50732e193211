/* SPDX-License-Identifier: MIT */
/* tests/server/test_webhook.c - signature verification and routing (server/sig.c,
 * server/webhook.c), driven through the same pure function the server and the fuzzer use. */
#include "common/err.h"
#include "server/payload.h"
#include "server/sig.h"
#include "server/webhook.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static const char vector_secret[] = "It's a Secret to Everybody";
static const char vector_body[] = "Hello, World!";
static const char vector_sig[] =
    "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

static void test_sig_github_vector(void **state)
{
	char out[SIG_HEADER_LEN];

	(void)state;
	assert_int_equal(sig_verify(vector_secret, vector_body, strlen(vector_body), vector_sig),
			 0);
	assert_int_equal(sig__sign(vector_secret, vector_body, strlen(vector_body), out), 0);
	assert_string_equal(out, vector_sig);
}

static void test_sig_rejects_malformed(void **state)
{
	char buf[128];
	size_t n = strlen(vector_body);

	(void)state;
	/* missing pieces */
	assert_int_equal(sig_verify(vector_secret, vector_body, n, NULL), AP_EDENIED);
	assert_int_equal(sig_verify("", vector_body, n, vector_sig), AP_EDENIED);
	assert_int_equal(sig_verify(NULL, vector_body, n, vector_sig), AP_EDENIED);
	/* no prefix, the legacy sha1 prefix */
	assert_int_equal(sig_verify(vector_secret, vector_body, n, vector_sig + 7), AP_EDENIED);
	snprintf(buf, sizeof(buf), "sha1=%s", vector_sig + 7);
	assert_int_equal(sig_verify(vector_secret, vector_body, n, buf), AP_EDENIED);
	/* 63 and 65 hex digits */
	snprintf(buf, sizeof(buf), "%.*s", (int)strlen(vector_sig) - 1, vector_sig);
	assert_int_equal(sig_verify(vector_secret, vector_body, n, buf), AP_EDENIED);
	snprintf(buf, sizeof(buf), "%s0", vector_sig);
	assert_int_equal(sig_verify(vector_secret, vector_body, n, buf), AP_EDENIED);
	/* upper-case hex */
	snprintf(buf, sizeof(buf), "%s", vector_sig);
	for (char *p = buf + 7; *p; p++)
		if (*p >= 'a' && *p <= 'f')
			*p = (char)(*p - 'a' + 'A');
	assert_int_equal(sig_verify(vector_secret, vector_body, n, buf), AP_EDENIED);
	/* non-hex */
	snprintf(buf, sizeof(buf), "%s", vector_sig);
	buf[10] = 'g';
	assert_int_equal(sig_verify(vector_secret, vector_body, n, buf), AP_EDENIED);
	/* one body byte flipped, wrong secret */
	assert_int_equal(sig_verify(vector_secret, "Hello, World?", n, vector_sig), AP_EDENIED);
	assert_int_equal(sig_verify("It's a secret to everybody", vector_body, n, vector_sig),
			 AP_EDENIED);
	/* a truncated body */
	assert_int_equal(sig_verify(vector_secret, vector_body, n - 1, vector_sig), AP_EDENIED);
}

/* --- routing ----------------------------------------------------------------------------- */

static const char secret[] = "test-secret-123";
static const char prev_secret[] = "old-secret-456";
static wh_config cfg = {{secret, prev_secret}, "autopatch"};

struct signed_req {
	char sig[SIG_HEADER_LEN];
	wh_request req;
};

static void make_req(struct signed_req *s, const char *event, const char *body, const char *key)
{
	assert_int_equal(sig__sign(key, body, strlen(body), s->sig), 0);
	s->req = (wh_request){"POST",
			      event,
			      "1f2e3d4c-0000-1111-2222-333344445555",
			      s->sig,
			      "application/json",
			      body,
			      strlen(body),
			      0};
}

static void decide(const char *event, const char *body, wh_decision *d)
{
	struct signed_req s;

	make_req(&s, event, body, secret);
	assert_int_equal(wh_handle(&cfg, &s.req, d), 0);
}

#define INST  "\"installation\":{\"id\":77}"
#define REPO  "\"repository\":{\"id\":5,\"full_name\":\"acme/widget\"}"
#define USER  "\"sender\":{\"login\":\"alice\",\"type\":\"User\"}"
#define BOT   "\"sender\":{\"login\":\"autopatch[bot]\",\"type\":\"Bot\"}"
#define ISSUE "\"issue\":{\"number\":12}"
#define PRISS "\"issue\":{\"number\":13,\"pull_request\":{\"url\":\"x\"}}"

static void test_route_label_trigger_and_cancel(void **state)
{
	wh_decision d;

	(void)state;
	decide("issues",
	       "{\"action\":\"labeled\",\"label\":{\"name\":\"autopatch\"}," ISSUE "," REPO "," INST
	       "," USER "}",
	       &d);
	assert_int_equal(d.action, WH_TRIGGER);
	assert_int_equal(d.status, 202);
	assert_int_equal(d.trigger, JOB_TRIGGER_LABEL);
	assert_string_equal(d.repo, "acme/widget");
	assert_int_equal(d.issue, 12);
	assert_int_equal(d.installation_id, 77);
	assert_int_equal(d.repo_id, 5);
	assert_null(d.feedback);
	assert_null(d.title); /* the payload has none */
	wh_decision_release(&d);
	/* The issue's title, for the console; a long one cut at WH_TITLE_MAX on a character. */
	{
		char body[4096], title[1400];

		for (size_t i = 0; i + 2 < sizeof(title); i += 2)
			memcpy(title + i, "\xc3\xa9", 2); /* é */
		title[sizeof(title) - 2] = '\0';	  /* 699 characters */
		snprintf(body, sizeof(body),
			 "{\"action\":\"labeled\",\"label\":{\"name\":\"autopatch\"},\"issue\":"
			 "{\"number\":12,\"title\":\"%s\"}," REPO "," INST "," USER "}",
			 title);
		decide("issues", body, &d);
		assert_int_equal(d.action, WH_TRIGGER);
		assert_non_null(d.title);
		assert_int_equal(strlen(d.title), WH_TITLE_MAX);
		assert_memory_equal(d.title, title, WH_TITLE_MAX);
		wh_decision_release(&d);
	}

	decide("issues",
	       "{\"action\":\"unlabeled\",\"label\":{\"name\":\"autopatch\"}," ISSUE "," REPO
	       "," INST "," USER "}",
	       &d);
	assert_int_equal(d.action, WH_CANCEL);
	assert_int_equal(d.issue, 12);
	wh_decision_release(&d);

	/* another label, a bot sender, no installation: ignored */
	decide("issues",
	       "{\"action\":\"labeled\",\"label\":{\"name\":\"bug\"}," ISSUE "," REPO "," INST
	       "," USER "}",
	       &d);
	assert_int_equal(d.action, WH_IGNORE);
	decide("issues",
	       "{\"action\":\"labeled\",\"label\":{\"name\":\"autopatch\"}," ISSUE "," REPO "," INST
	       "," BOT "}",
	       &d);
	assert_int_equal(d.action, WH_IGNORE);
	assert_non_null(strstr(d.reason, "bot"));
	decide("issues",
	       "{\"action\":\"labeled\",\"label\":{\"name\":\"autopatch\"}," ISSUE "," REPO "," USER
	       "}",
	       &d);
	assert_int_equal(d.action, WH_IGNORE);
	decide("ping", "{\"zen\":\"Keep it logically awesome.\",\"hook_id\":1}", &d);
	assert_int_equal(d.action, WH_IGNORE);
	assert_int_equal(d.status, 200);
}

static void comment(const char *body, const char *assoc, const char *issue, wh_decision *d)
{
	char json[1024];

	snprintf(json, sizeof(json),
		 "{\"action\":\"created\",\"comment\":{\"id\":991,\"body\":\"%s\","
		 "\"author_association\":\"%s\"},%s," REPO "," INST "," USER "}",
		 body, assoc, issue);
	decide("issue_comment", json, d);
}

static void test_route_comments(void **state)
{
	wh_decision d;

	(void)state;
	comment("/autopatch  please use a mutex \\n", "OWNER", ISSUE, &d);
	assert_int_equal(d.action, WH_TRIGGER);
	assert_int_equal(d.trigger, JOB_TRIGGER_COMMENT);
	assert_string_equal(d.feedback, "please use a mutex");
	assert_int_equal(d.comment_id, 991);
	wh_decision_release(&d);

	comment("/autopatch", "MEMBER", ISSUE, &d);
	assert_int_equal(d.action, WH_TRIGGER);
	assert_string_equal(d.feedback, "");
	wh_decision_release(&d);

	comment("/autopatch rename the flag", "COLLABORATOR", PRISS, &d);
	assert_int_equal(d.action, WH_TRIGGER);
	assert_int_equal(d.trigger, JOB_TRIGGER_PR_FEEDBACK);
	assert_int_equal(d.issue, 13);
	assert_string_equal(d.feedback, "rename the flag");
	wh_decision_release(&d);

	comment("/autopatch stop", "OWNER", ISSUE, &d);
	assert_int_equal(d.action, WH_CANCEL);
	assert_int_equal(d.issue, 12);
	wh_decision_release(&d);

	/* untrusted commenters, other text, look-alike commands */
	comment("/autopatch go", "CONTRIBUTOR", ISSUE, &d);
	assert_int_equal(d.action, WH_IGNORE);
	comment("/autopatch go", "NONE", ISSUE, &d);
	assert_int_equal(d.action, WH_IGNORE);
	comment("please /autopatch", "OWNER", ISSUE, &d);
	assert_int_equal(d.action, WH_IGNORE);
	comment("/autopatchy", "OWNER", ISSUE, &d);
	assert_int_equal(d.action, WH_IGNORE);
}

static void test_route_review_comment(void **state)
{
	wh_decision d;

	(void)state;
	decide("pull_request_review_comment",
	       "{\"action\":\"created\",\"comment\":{\"id\":5,\"body\":\"use a constant here\","
	       "\"author_association\":\"OWNER\"},\"pull_request\":{\"number\":40,\"head\":"
	       "{\"ref\":\"autopatch/issue-12\"}}," REPO "," INST "," USER "}",
	       &d);
	assert_int_equal(d.action, WH_TRIGGER);
	assert_int_equal(d.trigger, JOB_TRIGGER_PR_FEEDBACK);
	assert_int_equal(d.issue, 40);
	assert_string_equal(d.feedback, "use a constant here");
	assert_null(d.title);
	wh_decision_release(&d);
	decide("pull_request_review_comment",
	       "{\"action\":\"created\",\"comment\":{\"id\":5,\"body\":\"again\","
	       "\"author_association\":\"OWNER\"},\"pull_request\":{\"number\":40,\"title\":"
	       "\"Fix mean()\",\"head\":{\"ref\":\"autopatch/issue-12\"}}," REPO "," INST "," USER
	       "}",
	       &d);
	assert_string_equal(d.title, "Fix mean()");
	wh_decision_release(&d);
	/* a pull request autopatch did not open */
	decide("pull_request_review_comment",
	       "{\"action\":\"created\",\"comment\":{\"id\":5,\"body\":\"nit\","
	       "\"author_association\":\"OWNER\"},\"pull_request\":{\"number\":40,\"head\":"
	       "{\"ref\":\"feature\"}}," REPO "," INST "," USER "}",
	       &d);
	assert_int_equal(d.action, WH_IGNORE);
}

static void test_checks_in_order(void **state)
{
	const char *body = "{\"zen\":\"x\"}";
	struct signed_req s;
	wh_decision d;

	(void)state;
	make_req(&s, "ping", body, secret);
	s.req.method = "GET";
	wh_handle(&cfg, &s.req, &d);
	assert_int_equal(d.status, 405);

	make_req(&s, "ping", body, secret);
	s.req.body_too_big = 1;
	s.req.signature = NULL; /* size is checked before headers */
	wh_handle(&cfg, &s.req, &d);
	assert_int_equal(d.status, 413);

	make_req(&s, "ping", body, secret);
	s.req.delivery = NULL;
	s.req.content_type = "text/plain"; /* headers before content type */
	wh_handle(&cfg, &s.req, &d);
	assert_int_equal(d.status, 400);

	make_req(&s, "ping", body, secret);
	s.req.content_type = "application/x-www-form-urlencoded";
	s.sig[10] ^= 1; /* content type before signature */
	wh_handle(&cfg, &s.req, &d);
	assert_int_equal(d.status, 415);

	make_req(&s, "ping", body, secret);
	s.req.content_type = "application/json; charset=utf-8";
	wh_handle(&cfg, &s.req, &d);
	assert_int_equal(d.status, 200);

	/* a bad body is never parsed before the signature: garbage with a bad signature is 401 */
	make_req(&s, "ping", "{\"zen\":", "wrong-secret");
	wh_handle(&cfg, &s.req, &d);
	assert_int_equal(d.status, 401);
	make_req(&s, "ping", "{\"zen\":", secret);
	wh_handle(&cfg, &s.req, &d);
	assert_int_equal(d.status, 400);
	make_req(&s, "ping", "[1,2]", secret);
	wh_handle(&cfg, &s.req, &d);
	assert_int_equal(d.status, 400);
	make_req(&s, "ping", "{} trailing", secret);
	wh_handle(&cfg, &s.req, &d);
	assert_int_equal(d.status, 400);
}

static void test_secret_rotation(void **state)
{
	const char *body = "{\"zen\":\"x\"}";
	wh_config only_current = {{secret, NULL}, "autopatch"};
	struct signed_req s;
	wh_decision d;

	(void)state;
	make_req(&s, "ping", body, prev_secret);
	wh_handle(&cfg, &s.req, &d);
	assert_int_equal(d.status, 200);
	wh_handle(&only_current, &s.req, &d);
	assert_int_equal(d.status, 401);
	make_req(&s, "ping", body, "neither");
	wh_handle(&cfg, &s.req, &d);
	assert_int_equal(d.status, 401);
}

/* --- the payload scanner ------------------------------------------------------------------ */

static void test_payload_rejects_invalid_json(void **state)
{
	static const char *bad[] = {
	    "",
	    "   ",
	    "[]",
	    "\"x\"",
	    "{",
	    "{\"a\"}",
	    "{\"a\":}",
	    "{\"a\":1,}",
	    "{\"a\":01}",
	    "{\"a\":1.}",
	    "{\"a\":-}",
	    "{\"a\":.5}",
	    "{\"a\":1e}",
	    "{a:1}",
	    "{\"a\":'x'}",
	    "{\"a\":tru}",
	    "{\"a\":nul}",
	    "{\"a\":[1,]}",
	    "{\"a\":\"\\x\"}",
	    "{\"a\":\"\\u12g4\"}",
	    "{\"a\":\"\n\"}",
	    "{} {}",
	    "{}x",
	    "{\"a\":\"unterminated}",
	};
	pl_fields f;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (pl_scan(bad[i], strlen(bad[i]), &f) != AP_EINVAL)
			fail_msg("accepted invalid JSON: %s", bad[i]);
	}
}

static void test_payload_depth_limit(void **state)
{
	char *p = malloc(8 * (PL_DEPTH_MAX + 2));
	size_t k = 0;
	pl_fields f;

	(void)state;
	/* {"a":{"a":...1...}} nested one level deeper than allowed */
	for (int i = 0; i < PL_DEPTH_MAX + 1; i++)
		k += (size_t)sprintf(p + k, "{\"a\":");
	k += (size_t)sprintf(p + k, "1");
	for (int i = 0; i < PL_DEPTH_MAX + 1; i++)
		p[k++] = '}';
	assert_int_equal(pl_scan(p, k, &f), AP_EINVAL);
	/* one level less is fine */
	assert_int_equal(pl_scan(p + 5, k - 6, &f), 0);
	pl_fields_release(&f);
	free(p);
}

static void test_payload_extracts_and_decodes(void **state)
{
	const char *body =
	    " {\"zen\":[{\"action\":\"inner\"}],\"action\":\"crea\\u0074ed\","
	    "\"comment\":{\"body\":\"/autopatch \\\"quoted\\\" \\u00e9\\ud83d\\ude00\\n\","
	    "\"id\":12345678901,\"author_association\":\"OWNER\"},"
	    "\"issue\":{\"number\":7,\"pull_request\":{\"url\":\"u\"},\"labels\":[{\"name\":\"x\"}]"
	    "},"
	    "\"repository\":{\"id\":1.5,\"full_name\":\"a/b\"},"
	    "\"installation\":{\"id\":-3},\"sender\":{\"type\":null},"
	    "\"pull_request\":{\"head\":{\"ref\":\"autopatch/issue-7\"},\"number\":1e3}} ";
	pl_fields f;

	(void)state;
	assert_int_equal(pl_scan(body, strlen(body), &f), 0);
	assert_string_equal(f.str[PL_ACTION], "created"); /* not the one inside the array */
	assert_string_equal(f.str[PL_COMMENT_BODY],
			    "/autopatch \"quoted\" \xc3\xa9\xf0\x9f\x98\x80\n");
	assert_int_equal(f.id[PL_COMMENT_ID], 12345678901LL);
	assert_string_equal(f.str[PL_COMMENT_ASSOCIATION], "OWNER");
	assert_int_equal(f.id[PL_ISSUE_NUMBER], 7);
	assert_true(f.object[PL_ISSUE_PULL_REQUEST]);
	assert_null(f.str[PL_LABEL_NAME]);	       /* issue.labels[].name is not label.name */
	assert_int_equal(f.id[PL_REPO_ID], 0);	       /* not an integer */
	assert_int_equal(f.id[PL_INSTALLATION_ID], 0); /* not positive */
	assert_null(f.str[PL_SENDER_TYPE]);	       /* null is not a string */
	assert_string_equal(f.str[PL_PR_HEAD_REF], "autopatch/issue-7");
	assert_int_equal(f.id[PL_PR_NUMBER], 0); /* exponent form is not an id */
	pl_fields_release(&f);
}

static void test_payload_first_key_wins_at_every_level(void **state)
{
	const char *body = "{\"action\":\"labeled\",\"action\":\"unlabeled\","
			   "\"sender\":{\"login\":\"a\"},\"sender\":{\"type\":\"Bot\"},"
			   "\"label\":\"str\",\"label\":{\"name\":\"autopatch\"},"
			   "\"comment\":{\"body\":\"x\\u0000y\"}}";
	pl_fields f;

	(void)state;
	assert_int_equal(pl_scan(body, strlen(body), &f), 0);
	assert_string_equal(f.str[PL_ACTION], "labeled");
	assert_null(f.str[PL_SENDER_TYPE]); /* the second "sender" is never looked at */
	assert_null(f.str[PL_LABEL_NAME]);
	assert_null(f.str[PL_COMMENT_BODY]); /* U+0000 inside a value: unusable */
	pl_fields_release(&f);
}

/* A body of exactly len bytes in its own allocation, so a read past it is an ASan error. */
static char *exact_copy(const char *s, size_t len)
{
	char *p = malloc(len ? len : 1);

	assert_non_null(p);
	memcpy(p, s, len);
	return p;
}

/* The string scanner looks at 16 (or 8) bytes at a time: a quote, backslash, control
 * character or high byte at every position of a word, and a string ending at every distance
 * from the end of the buffer, must all be seen as the byte loop would. */
static void test_payload_string_positions(void **state)
{
	static const char head[] = "{\"comment\":{\"body\":\"";
	char body[256], want[128];
	pl_fields f;

	(void)state;
	for (int n = 0; n < 40; n++) {
		for (int kind = 0; kind < 5; kind++) {
			size_t k = 0, w = 0, len;
			char *copy;
			int rc;

			k += (size_t)sprintf(body + k, "%s", head);
			for (int i = 0; i < n; i++)
				body[k++] = want[w++] = (char)('a' + i % 26);
			switch (kind) {
			case 0: /* a control character: invalid */
				body[k++] = (char)(n % 2 ? 0x1f : 0x01);
				break;
			case 1: /* an escape */
				body[k++] = '\\';
				body[k++] = 'n';
				want[w++] = '\n';
				break;
			case 2: /* a two-byte character and DEL: plain bytes */
				body[k++] = want[w++] = (char)0xc3;
				body[k++] = want[w++] = (char)0xa9;
				body[k++] = want[w++] = 0x7f;
				break;
			case 3: /* a space, the lowest plain byte */
				body[k++] = want[w++] = ' ';
				break;
			case 4: /* an escaped quote */
				body[k++] = '\\';
				body[k++] = '"';
				want[w++] = '"';
				break;
			}
			for (int i = 0; i < 20; i++)
				body[k++] = want[w++] = 'z';
			k += (size_t)sprintf(body + k, "\"}}");
			want[w] = '\0';
			len = k;
			copy = exact_copy(body, len);
			rc = pl_scan(copy, len, &f);
			if (kind == 0) {
				if (rc != AP_EINVAL)
					fail_msg("control character at %d accepted", n);
			} else {
				if (rc != 0)
					fail_msg("kind %d at %d refused", kind, n);
				assert_string_equal(f.str[PL_COMMENT_BODY], want);
				pl_fields_release(&f);
			}
			free(copy);
		}
	}
	/* A string that ends 0..40 bytes before the end of the buffer (white space after the
	 * object), and one whose closing quote is missing at every length. */
	for (int n = 0; n < 40; n++) {
		size_t k = (size_t)sprintf(body, "%s%.*s\"}}", head, n,
					   "0123456789012345678901234567890123456789");
		char *copy;

		memset(body + k, ' ', (size_t)n);
		copy = exact_copy(body, k + (size_t)n);
		assert_int_equal(pl_scan(copy, k + (size_t)n, &f), 0);
		assert_int_equal(strlen(f.str[PL_COMMENT_BODY]), n);
		pl_fields_release(&f);
		free(copy);
		k = (size_t)sprintf(body, "%s%.*s", head, n,
				    "0123456789012345678901234567890123456789");
		copy = exact_copy(body, k);
		assert_int_equal(pl_scan(copy, k, &f), AP_EINVAL);
		free(copy);
	}
}

/* Once every wanted field below an object was found, its other keys are not decoded: the
 * first occurrence still wins, and a wanted field of another object is still found. */
static void test_payload_found_fields_close_their_object(void **state)
{
	const char *body = "{\"repository\":{\"id\":5,\"full_name\":\"a/b\","
			   "\"full_name\":\"c/d\",\"id\":6,\"owner\":{\"id\":9}},"
			   "\"repository\":{\"id\":7},\"installation\":{\"x\":1,\"id\":42}}";
	pl_fields f;

	(void)state;
	assert_int_equal(pl_scan(body, strlen(body), &f), 0);
	assert_int_equal(f.id[PL_REPO_ID], 5);
	assert_string_equal(f.str[PL_REPO_FULL_NAME], "a/b");
	assert_int_equal(f.id[PL_INSTALLATION_ID], 42);
	pl_fields_release(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sig_github_vector),
	    cmocka_unit_test(test_sig_rejects_malformed),
	    cmocka_unit_test(test_route_label_trigger_and_cancel),
	    cmocka_unit_test(test_route_comments),
	    cmocka_unit_test(test_route_review_comment),
	    cmocka_unit_test(test_checks_in_order),
	    cmocka_unit_test(test_secret_rotation),
	    cmocka_unit_test(test_payload_rejects_invalid_json),
	    cmocka_unit_test(test_payload_string_positions),
	    cmocka_unit_test(test_payload_found_fields_close_their_object),
	    cmocka_unit_test(test_payload_depth_limit),
	    cmocka_unit_test(test_payload_extracts_and_decodes),
	    cmocka_unit_test(test_payload_first_key_wins_at_every_level),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

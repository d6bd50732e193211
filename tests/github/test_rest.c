/* SPDX-License-Identifier: MIT */
/* tests/github/test_rest.c - JWT, installation tokens, the REST client and the API calls,
 * against the GitHub stand-in (standins/github_stub.py) over real HTTP.
 *
 * Every test runs on the fake clock (common/clock.h), started afresh at the real time (the
 * stand-in's clock) by fx_setup: the client's backoffs, rate-limit waits and write spacing,
 * and a token's age and expiry, move the fake time on instead of sleeping, and the tests
 * assert how long the client waited on it. A limit an earlier test left on installation 1 may
 * cost a later test a fake wait, never a real one. */
#include "common/clock.h"
#include "common/config.h"
#include "common/err.h"
#include "common/redact.h"
#include "gh_test_util.h"
#include "github/api.h"
#include "github/app.h"
#include "github/jwt.h"
#include "github/rest.h"

#include <cjson/cJSON.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static gh_stub stub;

static cJSON *stub_requests(void);
static cJSON *last_request(cJSON *list, const char *method, const char *path);

struct fx {
	ap_config *cfg;
	gh_app *app;
	gh_rest *rest;	/* installation 1 */
	gh_rest *other; /* a test's own client (freed by fx_teardown) */
};

static int group_setup(void **state)
{
	char *body = NULL;
	long st;

	(void)state;
	if (gh_stub_start(&stub))
		return -1;
	st = gh_stub_http(
	    &stub, "POST", "/_stub/seed",
	    "{\"repos\":[{\"full_name\":\"octo/hello\",\"files\":{\"a.txt\":\"hi\\n\"},"
	    "\"branches\":[\"feature\"],"
	    "\"issues\":[{\"title\":\"Crash on empty input\",\"body\":\"Steps\","
	    "\"labels\":[\"autopatch\",\"bug\"]},{\"title\":\"Second\"}]},"
	    /* One repository per installation for the rate-limit tests: their limits are
	     * process-wide per installation and must not hold back the other tests. */
	    /* The POST-not-repeated test's own repository, so its writes count nowhere else. */
	    "{\"full_name\":\"octo/post\",\"branches\":[\"feature\"],"
	    "\"issues\":[{\"title\":\"One\"},{\"title\":\"Two\"}]},"
	    "{\"full_name\":\"octo/rl2\",\"installation\":2},"
	    "{\"full_name\":\"octo/rl3\",\"installation\":3},"
	    "{\"full_name\":\"octo/rl4\",\"installation\":4},"
	    "{\"full_name\":\"octo/rl5\",\"installation\":5},"
	    "{\"full_name\":\"octo/rl6\",\"installation\":6}]}",
	    &body);
	free(body);
	return st == 201 ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	gh_stub_stop(&stub);
	ap_clock__fake(false);
	return 0;
}

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	ap_clock__fake(true);
	assert_int_equal(cfg_new_empty(&f->cfg), 0);
	cfg_set(f->cfg, "APP_ID", stub.app_id);
	cfg_set(f->cfg, "PRIVATE_KEY_PATH", stub.key);
	cfg_set(f->cfg, "GITHUB_API_URL", stub.url);
	cfg_set(f->cfg, "AUTOPATCH_GH_WRITE_SPACING_MS", "50");
	cfg_set(f->cfg, "AUTOPATCH_GH_BACKOFF_MS", "50");
	cfg_set(f->cfg, "AUTOPATCH_GH_SECONDARY_WAIT_S", "1");
	cfg_set(f->cfg, "AUTOPATCH_GH_DEADLINE_S", "30");
	assert_int_equal(gh_app_new(&f->app, f->cfg), 0);
	assert_int_equal(gh_rest_new(&f->rest, f->cfg, gh_app_creds(f->app), 1), 0);
	gh_stub_http(&stub, "POST", "/_stub/config", "{\"token_ttl\":3600,\"clock_offset\":0}",
		     NULL);
	gh_stub_http(&stub, "POST", "/_stub/requests/clear", "{}", NULL);
	gh_stub_http(&stub, "POST", "/_stub/fail/clear", "{}", NULL);
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;

	gh_rest_free(f->rest);
	gh_rest_free(f->other);
	gh_app_free(f->app);
	cfg_free(f->cfg);
	free(f);
	return 0;
}

/* Milliseconds on the fake clock since t0 (an ap_mono_ms()): real time plus the waits. */
static int64_t ms_since(int64_t t0)
{
	return ap_mono_ms() - t0;
}

#define WIRE_MAX 32

/* When each write went on the wire, on the fake clock: a write guard (gh_rest_set_write_guard)
 * that lets every write go and logs ap_wall_ms(). Shared by the clients of several threads. */
struct wire_log {
	pthread_mutex_t lock;
	int n;		      /* writes seen (only the first WIRE_MAX are logged) */
	int64_t at[WIRE_MAX]; /* ap_wall_ms() as each went out, in that order */
};

#define WIRE_LOG_INIT                                                                              \
	{                                                                                          \
		.lock = PTHREAD_MUTEX_INITIALIZER                                                  \
	}

static int wire_log_write(void *ud)
{
	struct wire_log *w = ud;

	pthread_mutex_lock(&w->lock);
	if (w->n < WIRE_MAX)
		w->at[w->n] = ap_wall_ms();
	w->n++;
	pthread_mutex_unlock(&w->lock);
	return 0;
}

/* The shortest time between two writes in a row of w, in ms. */
static int64_t wire_min_gap(const struct wire_log *w)
{
	int64_t gap = INT64_MAX;

	assert_true(w->n >= 2 && w->n <= WIRE_MAX);
	for (int i = 1; i < w->n; i++)
		if (w->at[i] - w->at[i - 1] < gap)
			gap = w->at[i] - w->at[i - 1];
	return gap;
}

static unsigned char *b64url_decode(const char *s, size_t n, size_t *outlen)
{
	char *std = calloc(1, n + 4);
	unsigned char *out = calloc(1, n + 4);
	size_t m = n;
	int got;

	for (size_t i = 0; i < n; i++)
		std[i] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
	while (m % 4)
		std[m++] = '=';
	got = EVP_DecodeBlock(out, (unsigned char *)std, (int)m);
	assert_true(got >= 0);
	*outlen = (size_t)got - (n % 4 == 2 ? 2 : n % 4 == 3 ? 1 : 0);
	free(std);
	return out;
}

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(p, 1, n, f), n);
	fclose(f);
}

/* The JWT verifies with the openssl CLI against the public key, and its claims follow
 * GitHub's rules. A flipped byte in the signed part must fail the same check. */
static void test_jwt_verifies_with_openssl_cli(void **state)
{
	struct fx *f = *state;
	gh_key *key = NULL;
	char *jwt = NULL, *d1, *d2, data[512], sigp[512];
	unsigned char *sig, *claims_raw;
	size_t siglen, clen;
	int64_t now = 1700000000;
	cJSON *claims;

	assert_int_equal(gh_key_load(&key, f->cfg), 0);
	assert_int_equal(gh_jwt_sign(&jwt, key, "12345", now), 0);
	d1 = strchr(jwt, '.');
	d2 = strchr(d1 + 1, '.');
	assert_non_null(d2);
	snprintf(data, sizeof(data), "%s/jwt.data", stub.dir);
	snprintf(sigp, sizeof(sigp), "%s/jwt.sig", stub.dir);
	write_file(data, jwt, (size_t)(d2 - jwt));
	sig = b64url_decode(d2 + 1, strlen(d2 + 1), &siglen);
	assert_int_equal(siglen, 256);
	write_file(sigp, sig, siglen);
	assert_int_equal(gh_sh(NULL, "openssl dgst -sha256 -verify %s -signature %s %s >/dev/null",
			       stub.pub, sigp, data),
			 0);
	jwt[1] ^= 1; /* tamper with the header */
	write_file(data, jwt, (size_t)(d2 - jwt));
	assert_int_not_equal(
	    gh_sh(NULL, "openssl dgst -sha256 -verify %s -signature %s %s >/dev/null 2>&1",
		  stub.pub, sigp, data),
	    0);
	jwt[1] ^= 1;

	claims_raw = b64url_decode(d1 + 1, (size_t)(d2 - d1 - 1), &clen);
	claims = cJSON_ParseWithLength((char *)claims_raw, clen);
	assert_non_null(claims);
	assert_int_equal((int64_t)cJSON_GetObjectItem(claims, "iat")->valuedouble, now - 60);
	assert_true(cJSON_GetObjectItem(claims, "exp")->valuedouble <= now + 600);
	assert_true(cJSON_GetObjectItem(claims, "exp")->valuedouble >
		    cJSON_GetObjectItem(claims, "iat")->valuedouble);
	assert_int_equal((int)cJSON_GetObjectItem(claims, "iss")->valuedouble, 12345);
	{
		size_t hl;
		unsigned char *h = b64url_decode(jwt, (size_t)(d1 - jwt), &hl);

		assert_non_null(strstr((char *)h, "\"alg\":\"RS256\""));
		free(h);
	}
	cJSON_Delete(claims);
	free(claims_raw);
	free(sig);
	free(jwt);
	gh_key_free(key);
}

/* PRIVATE_KEY with literal "\n" (single-line .env) loads; garbage is refused with a sentence. */
static void test_private_key_inline_escaped(void **state)
{
	char *pem = NULL, *esc;
	ap_config *c;
	gh_key *key = NULL;
	size_t j = 0;

	(void)state;
	assert_int_equal(gh_sh(&pem, "cat %s", stub.key), 0);
	esc = calloc(1, strlen(pem) * 2 + 1);
	for (const char *p = pem; *p; p++) {
		if (*p == '\n') {
			esc[j++] = '\\';
			esc[j++] = 'n';
		} else {
			esc[j++] = *p;
		}
	}
	assert_null(strchr(esc, '\n'));
	assert_int_equal(cfg_new_empty(&c), 0);
	cfg_set(c, "PRIVATE_KEY", esc);
	assert_int_equal(gh_key_load(&key, c), 0);
	assert_non_null(key);
	gh_key_free(key);
	cfg_set(c, "PRIVATE_KEY", "-----BEGIN RSA PRIVATE KEY-----\\nnot a key\\n");
	assert_int_equal(gh_key_load(&key, c), AP_EINVAL);
	assert_non_null(strstr(ap_error_last(), "settings page"));
	cfg_free(c);
	free(esc);
	free(pem);
}

/* One mint serves many calls; a token close to expiry is replaced. */
static void test_token_cached_and_refreshed(void **state)
{
	struct fx *f = *state;
	char *t1 = NULL, *t2 = NULL, *t3 = NULL;
	gh_app *app = NULL;

	cfg_set(f->cfg, "AUTOPATCH_GH_TOKEN_MARGIN_S", "5");
	assert_int_equal(gh_app_new(&app, f->cfg), 0);
	gh_stub_http(&stub, "POST", "/_stub/config", "{\"token_ttl\":7}", NULL);
	assert_int_equal(gh_app_token(app, 1, &t1), 0);
	assert_int_equal(gh_app_token(app, 1, &t2), 0);
	assert_string_equal(t1, t2);
	assert_int_equal(strncmp(t1, "ghs_", 4), 0);
	assert_int_equal(gh_stub_count(&stub, "POST", "/access_tokens"), 1);
	/* The token was registered for redaction the moment it arrived. */
	{
		char *red = redact_str(t1);

		assert_null(strstr(red, t1));
		free(red);
	}
	ap_clock__advance(3000); /* 7 s lifetime - 3 s < 5 s margin: now "near expiry" */
	assert_int_equal(gh_app_token(app, 1, &t3), 0);
	assert_string_not_equal(t1, t3);
	assert_int_equal(gh_stub_count(&stub, "POST", "/access_tokens"), 2);
	free(t1);
	free(t2);
	free(t3);
	gh_app_free(app);
}

/* A registration while the server runs: the App signs as the new identity from the next JWT
 * on, the old App's cached tokens are gone, and a key that does not parse changes nothing. */
static void test_identity_swapped_in_place(void **state)
{
	struct fx *f = *state;
	char *pem = NULL, *t1 = NULL, *t2 = NULL, *t3 = NULL, *old_id = strdup(stub.app_id),
	     body[64];
	const gh_creds *creds = gh_app_creds(f->app);
	gh_app *fresh = NULL, *none = NULL;
	cJSON *o = NULL;

	assert_int_equal(gh_sh(&pem, "cat %s", stub.key), 0);
	assert_int_equal(gh_app_token(f->app, 1, &t1), 0);
	assert_int_equal(gh_stub_count(&stub, "POST", "/access_tokens"), 1);
	/* GitHub now knows the App as 77 (the stand-in checks iss). */
	gh_stub_http(&stub, "POST", "/_stub/config", "{\"app_id\":\"77\"}", NULL);
	assert_int_equal(gh_rest_new(&f->other, f->cfg, creds, 0), 0);
	assert_int_equal(gh_rest_call(f->other, "GET", "/app", NULL, &o), AP_EDENIED);
	assert_int_equal(gh_app_set_identity(f->app, "77", "not a key"), AP_EINVAL);
	assert_int_equal(gh_app_token(f->app, 1, &t2), 0); /* unchanged: still cached */
	assert_string_equal(t1, t2);
	assert_int_equal(gh_app_set_identity(f->app, "77", pem), 0);
	assert_ptr_equal(gh_app_creds(f->app), creds); /* the same table, a new identity */
	assert_int_equal(gh_rest_call(f->other, "GET", "/app", NULL, &o), 0);
	cJSON_Delete(o);
	assert_int_equal(gh_app_token(f->app, 1, &t3), 0); /* the old App's token is gone */
	assert_string_not_equal(t1, t3);
	assert_int_equal(gh_stub_count(&stub, "POST", "/access_tokens"), 2);
	/* An App made from a registration's answer, before any APP_ID was set. */
	assert_int_equal(gh_app_new_as(&fresh, f->cfg, "77", pem), 0);
	free(t1);
	assert_int_equal(gh_app_token(fresh, 1, &t1), 0);
	assert_int_equal(gh_app_new_as(&none, f->cfg, "77", ""), AP_EINVAL);
	assert_null(none);
	snprintf(body, sizeof(body), "{\"app_id\":\"%s\"}", old_id);
	gh_stub_http(&stub, "POST", "/_stub/config", body, NULL);
	gh_app_free(fresh);
	free(old_id);
	free(pem);
	free(t1);
	free(t2);
	free(t3);
}

struct token_thread {
	gh_app *app;
	char *tok;
	int rc;
};

static void *token_worker(void *ud)
{
	struct token_thread *t = ud;

	t->rc = gh_app_token(t->app, 1, &t->tok);
	return NULL;
}

/* Workers asking at the same moment share one mint. */
static void test_token_cache_thread_safe(void **state)
{
	struct fx *f = *state;
	struct token_thread t[8];
	pthread_t th[8];

	for (int i = 0; i < 8; i++) {
		t[i] = (struct token_thread){f->app, NULL, -1};
		assert_int_equal(pthread_create(&th[i], NULL, token_worker, &t[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(t[i].rc, 0);
		assert_string_equal(t[i].tok, t[0].tok);
	}
	for (int i = 0; i < 8; i++)
		free(t[i].tok);
	assert_int_equal(gh_stub_count(&stub, "POST", "/access_tokens"), 1);
}

/* GitHub's 401 for a JWT whose iat is "in the future" is fixed once from the Date header. */
static void test_clock_skew_resigned_from_date(void **state)
{
	struct fx *f = *state;
	char *tok = NULL;

	gh_stub_http(&stub, "POST", "/_stub/config", "{\"clock_offset\":-3600}", NULL);
	assert_int_equal(gh_app_token(f->app, 1, &tok), 0);
	assert_int_equal(gh_stub_count(&stub, "POST", "/access_tokens"), 2);
	free(tok);
}

/* A secondary limit with retry-after: 1 is retried once, a second later. */
static void test_secondary_limit_retry_after(void **state)
{
	struct fx *f = *state;
	gh_issue issue = {0};
	int64_t t0;

	gh_stub_http(&stub, "POST", "/_stub/fail",
		     "{\"path\":\"^/repos/octo/hello/issues/1$\",\"status\":403,"
		     "\"retry_after\":1,\"times\":1}",
		     NULL);
	t0 = ap_mono_ms();
	assert_int_equal(gh_issue_get(f->rest, "octo/hello", 1, &issue), 0);
	assert_true(ms_since(t0) >= 1000);
	assert_true(ap_clock__slept_ms() >= 500); /* waited in ap_sleep_ms, not on its own */
	assert_string_equal(issue.title, "Crash on empty input");
	assert_int_equal(issue.n_labels, 2);
	assert_string_equal(issue.labels[0], "autopatch");
	assert_int_equal(gh_stub_count(&stub, "GET", "/repos/octo/hello/issues/1"), 2);
	gh_issue_release(&issue);
}

/* 429 and 403-with-remaining-0 are rate limits; a plain 403 is not retried. */
static void test_rate_limits_and_plain_403(void **state)
{
	struct fx *f = *state;
	gh_repo repo = {0};
	char body[256];
	int64_t t0;

	gh_stub_http(&stub, "POST", "/_stub/fail",
		     "{\"path\":\"^/repos/octo/hello$\",\"status\":429,\"times\":1}", NULL);
	snprintf(body, sizeof(body),
		 "{\"path\":\"^/repos/octo/hello$\",\"status\":403,\"times\":1,"
		 "\"message\":\"API rate limit exceeded\",\"headers\":{\"X-RateLimit-Remaining\":"
		 "\"0\",\"X-RateLimit-Reset\":\"%lld\"}}",
		 (long long)ap_wall_s());
	gh_stub_http(&stub, "POST", "/_stub/fail", body, NULL);
	t0 = ap_mono_ms();
	assert_int_equal(gh_repo_get(f->rest, "octo/hello", &repo), 0);
	/* the 429 waited the secondary 1 s, the exhausted 403 until its reset + 1 s (1 s at
	 * least) */
	assert_true(ms_since(t0) >= 2000);
	assert_string_equal(repo.default_branch, "main");
	assert_true(repo.can_push);
	assert_non_null(strstr(repo.clone_url, "/octo/hello.git"));
	assert_int_equal(gh_stub_count(&stub, "GET", "/repos/octo/hello"), 3);
	gh_repo_release(&repo);

	gh_stub_http(&stub, "POST", "/_stub/fail",
		     "{\"path\":\"^/repos/octo/hello$\",\"status\":403,\"times\":1,"
		     "\"message\":\"Resource not accessible by integration\"}",
		     NULL);
	assert_int_equal(gh_repo_get(f->rest, "octo/hello", &repo), AP_EDENIED);
	assert_non_null(strstr(ap_error_last(), "Resource not accessible by integration"));
}

static void test_5xx_retried_with_backoff(void **state)
{
	struct fx *f = *state;
	gh_repo repo = {0};

	gh_stub_http(&stub, "POST", "/_stub/fail",
		     "{\"path\":\"^/repos/octo/hello$\",\"status\":502,\"times\":2}", NULL);
	assert_int_equal(gh_repo_get(f->rest, "octo/hello", &repo), 0);
	assert_int_equal(gh_stub_count(&stub, "GET", "/repos/octo/hello"), 3);
	assert_true(ap_clock__slept_ms() >= 50 + 100); /* AUTOPATCH_GH_BACKOFF_MS, doubled */
	gh_repo_release(&repo);

	cfg_set(f->cfg, "AUTOPATCH_GH_RETRIES", "1");
	gh_rest_free(f->rest);
	assert_int_equal(gh_rest_new(&f->rest, f->cfg, gh_app_creds(f->app), 1), 0);
	gh_stub_http(&stub, "POST", "/_stub/fail",
		     "{\"path\":\"^/repos/octo/hello$\",\"status\":503,\"times\":5}", NULL);
	assert_int_equal(gh_repo_get(f->rest, "octo/hello", &repo), AP_EHTTP);
	assert_non_null(strstr(ap_error_last(), "503"));
}

static void fail_next(const char *json)
{
	gh_stub_http(&stub, "POST", "/_stub/fail", json, NULL);
}

static size_t comments_with(gh_rest *r, const char *body)
{
	cJSON *list = NULL, *it;
	size_t n = 0;

	assert_int_equal(gh_comments_list(r, "octo/post", 1, &list), 0);
	cJSON_ArrayForEach (it, list) {
		const char *b = cJSON_GetStringValue(cJSON_GetObjectItem(it, "body"));

		n += b && strcmp(b, body) == 0;
	}
	cJSON_Delete(list);
	return n;
}

struct guard_fx {
	int verdict; /* what the guard answers */
	int calls;
};

static int test_guard(void *ud)
{
	struct guard_fx *g = ud;

	g->calls++;
	if (g->verdict)
		return ap_error_set(g->verdict, "lease epoch 1 is no longer current");
	return 0;
}

/* The write guard (issue 14's fencing): asked once per write as it goes on the wire, never
 * for a read; a refusal sends nothing, is not retried, and says why. */
static void test_write_guard_refuses_before_sending(void **state)
{
	struct fx *f = *state;
	struct guard_fx g = {0, 0};
	gh_comment c = {0};
	gh_repo repo = {0};

	gh_stub_http(&stub, "POST", "/_stub/requests/clear", "{}", NULL);
	gh_rest_set_write_guard(f->rest, test_guard, &g);
	assert_int_equal(gh_comment_create(f->rest, "octo/post", 1, "guarded-allowed", &c), 0);
	gh_comment_release(&c);
	assert_int_equal(g.calls, 1);
	assert_int_equal(gh_repo_get(f->rest, "octo/hello", &repo), 0);
	assert_int_equal(g.calls, 1); /* reads are not guarded */

	g.verdict = AP_ESTALE;
	assert_int_equal(gh_comment_create(f->rest, "octo/post", 1, "guarded-refused", &c),
			 AP_ESTALE);
	assert_int_equal(g.calls, 2); /* once: a refusal is not retried */
	assert_non_null(strstr(ap_error_last(), "not sent"));
	assert_non_null(strstr(ap_error_last(), "no longer current"));
	assert_false(gh_rest_maybe_applied(f->rest));
	assert_int_equal(gh_comment_update(f->rest, "octo/post", 1, "guarded-edit", NULL),
			 AP_ESTALE);
	assert_int_equal(gh_stub_count(&stub, "POST", "/repos/octo/post/issues/1/comments"), 1);
	assert_int_equal(gh_stub_count(&stub, "PATCH", "/repos/octo/post/issues/comments"), 0);
	gh_rest_set_write_guard(f->rest, NULL, NULL);
	assert_int_equal(comments_with(f->rest, "guarded-allowed"), 1);
	assert_int_equal(comments_with(f->rest, "guarded-refused"), 0);
	gh_comment_release(&c);
	gh_repo_release(&repo);
}

/* Changed deliberately (issue 11): a POST that creates something (a comment, a pull request)
 * is not repeated after a 5xx or a connection that broke once the request was out, since
 * GitHub may have applied it; the caller gets AP_EUNAVAIL and gh_rest_maybe_applied(). POSTs
 * that are safe to repeat (labels, reactions, minting a token) are retried like reads. */
static void test_5xx_post_not_repeated(void **state)
{
	struct fx *f = *state;
	gh_comment c = {0};
	gh_pull pr = {0};
	gh_pull_new req = GH_PULL_NEW_INIT;
	const char *labels[] = {"x-label"};
	gh_app *app2 = NULL;
	char *tok = NULL;

	/* GitHub applied it and answered 502: one attempt, and the comment exists once. */
	fail_next("{\"path\":\"^/repos/octo/post/issues/1/comments$\",\"method\":\"POST\","
		  "\"status\":502,\"times\":1,\"after\":true}");
	assert_int_equal(gh_comment_create(f->rest, "octo/post", 1, "applied-then-502", &c),
			 AP_EUNAVAIL);
	assert_true(gh_rest_maybe_applied(f->rest));
	assert_non_null(strstr(ap_error_last(), "HTTP 502"));
	assert_non_null(strstr(ap_error_last(), "may have been applied"));
	assert_int_equal(gh_stub_count(&stub, "POST", "/repos/octo/post/issues/1/comments"), 1);
	assert_int_equal(comments_with(f->rest, "applied-then-502"), 1);
	assert_false(gh_rest_maybe_applied(f->rest)); /* the next call clears it */

	/* The connection breaks after the request went out: the same. */
	gh_stub_http(&stub, "POST", "/_stub/requests/clear", "{}", NULL);
	fail_next("{\"path\":\"^/repos/octo/post/issues/1/comments$\",\"method\":\"POST\","
		  "\"times\":1,\"drop\":true,\"after\":true}");
	assert_int_equal(gh_comment_create(f->rest, "octo/post", 1, "applied-then-cut", &c),
			 AP_EUNAVAIL);
	assert_true(gh_rest_maybe_applied(f->rest));
	assert_int_equal(gh_stub_count(&stub, "POST", "/repos/octo/post/issues/1/comments"), 1);
	assert_int_equal(comments_with(f->rest, "applied-then-cut"), 1);

	/* A pull request: a 503 that applied nothing is not repeated either. */
	gh_stub_http(&stub, "POST", "/_stub/requests/clear", "{}", NULL);
	fail_next("{\"path\":\"^/repos/octo/post/pulls$\",\"method\":\"POST\","
		  "\"status\":503,\"times\":1}");
	req.title = "t";
	req.head = "feature";
	req.base = "main";
	assert_int_equal(gh_pull_create(f->rest, "octo/post", &req, &pr), AP_EUNAVAIL);
	assert_true(gh_rest_maybe_applied(f->rest));
	assert_int_equal(gh_stub_count(&stub, "POST", "/repos/octo/post/pulls"), 1);

	/* Safe to repeat: retried with backoff, not flagged. */
	gh_stub_http(&stub, "POST", "/_stub/requests/clear", "{}", NULL);
	fail_next("{\"path\":\"^/repos/octo/post/issues/2/labels$\",\"method\":\"POST\","
		  "\"status\":502,\"times\":2}");
	fail_next("{\"path\":\"^/repos/octo/post/issues/2/reactions$\",\"method\":\"POST\","
		  "\"status\":503,\"times\":1}");
	assert_int_equal(gh_labels_add(f->rest, "octo/post", 2, labels, 1), 0);
	assert_false(gh_rest_maybe_applied(f->rest));
	assert_int_equal(gh_reaction_add_issue(f->rest, "octo/post", 2, "eyes"), 0);
	assert_int_equal(gh_stub_count(&stub, "POST", "/repos/octo/post/issues/2/labels"), 3);
	assert_int_equal(gh_stub_count(&stub, "POST", "/repos/octo/post/issues/2/reactions"), 2);
	/* Minting a token (a fresh App: no cached one). */
	fail_next("{\"path\":\"/access_tokens$\",\"method\":\"POST\",\"status\":502,"
		  "\"times\":1}");
	assert_int_equal(gh_app_new(&app2, f->cfg), 0);
	assert_int_equal(gh_app_token(app2, 1, &tok), 0);
	assert_int_equal(gh_stub_count(&stub, "POST", "/access_tokens"), 2);
	free(tok);
	gh_app_free(app2);
	/* A 5xx to a PATCH is still retried. */
	gh_stub_http(&stub, "POST", "/_stub/requests/clear", "{}", NULL);
	assert_int_equal(gh_comment_create(f->rest, "octo/post", 1, "to-edit", &c), 0);
	fail_next("{\"path\":\"^/repos/octo/post/issues/comments/\",\"method\":\"PATCH\","
		  "\"status\":502,\"times\":1}");
	assert_int_equal(gh_comment_update(f->rest, "octo/post", c.id, "edited", NULL), 0);
	assert_int_equal(gh_stub_count(&stub, "PATCH", "/repos/octo/post/issues/comments/"), 2);
	gh_comment_release(&c);
}

static void test_pagination_returns_all_pages(void **state)
{
	struct fx *f = *state;
	cJSON *list = NULL;

	gh_stub_http(&stub, "POST", "/_stub/comments",
		     "{\"repo\":\"octo/hello\",\"issue\":2,\"count\":250}", NULL);
	gh_stub_http(&stub, "POST", "/_stub/requests/clear", "{}", NULL);
	assert_int_equal(gh_comments_list(f->rest, "octo/hello", 2, &list), 0);
	assert_int_equal(cJSON_GetArraySize(list), 250);
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(list, 0), "body")->valuestring,
			    "comment 1");
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(list, 249), "body")->valuestring,
			    "comment 250");
	assert_int_equal(gh_stub_count(&stub, "GET", "/issues/2/comments"), 3);
	cJSON_Delete(list);
}

static void test_bad_token_is_denied_with_message(void **state)
{
	struct fx *f = *state;
	gh_rest *r = NULL;
	gh_repo repo = {0};

	assert_int_equal(gh_rest_new_token(&r, f->cfg, "ghs_notissuedbythestub000000000000000"), 0);
	assert_int_equal(gh_repo_get(r, "octo/hello", &repo), AP_EDENIED);
	assert_non_null(strstr(ap_error_last(), "Bad credentials"));
	assert_null(strstr(ap_error_last(), "ghs_notissued"));
	gh_rest_free(r);
}

/* A revoked token is replaced once, transparently. */
static void test_revoked_token_reminted(void **state)
{
	struct fx *f = *state;
	gh_repo repo = {0};
	int64_t slept;

	assert_int_equal(gh_repo_get(f->rest, "octo/hello", &repo), 0);
	gh_repo_release(&repo);
	gh_stub_http(&stub, "POST", "/_stub/revoke", "{}", NULL);
	slept = ap_clock__slept_ms();
	/* The new-token grace (up to 5 s of 1 s retries) runs out, then one re-mint. */
	assert_int_equal(gh_repo_get(f->rest, "octo/hello", &repo), 0);
	assert_int_equal(gh_stub_count(&stub, "POST", "/access_tokens"), 2);
	assert_true(ap_clock__slept_ms() - slept >= 4000); /* the token's age is whole seconds */
	gh_repo_release(&repo);
}

static void test_api_calls_round_trip(void **state)
{
	struct fx *f = *state;
	gh_comment c = {0}, c2 = {0};
	gh_pull pr = {0}, found = {0}, got = {0}, upd = {0};
	gh_pull_new req = GH_PULL_NEW_INIT;
	const char *labels[] = {"autopatch:working"};
	struct wire_log wire = WIRE_LOG_INIT;
	char *st = NULL;
	cJSON *state_json, *repo;

	gh_rest_set_write_guard(f->rest, wire_log_write, &wire);
	assert_int_equal(gh_comment_create(f->rest, "octo/hello", 1, "Working on it", &c), 0);
	assert_true(c.id > 0);
	assert_non_null(strstr(c.html_url, "#issuecomment-"));
	assert_int_equal(gh_comment_update(f->rest, "octo/hello", c.id, "Done", &c2), 0);
	assert_string_equal(c2.body, "Done");
	assert_int_equal(gh_labels_add(f->rest, "octo/hello", 1, labels, 1), 0);
	assert_int_equal(gh_reaction_add_issue(f->rest, "octo/hello", 1, "eyes"), 0);
	assert_int_equal(gh_reaction_add_comment(f->rest, "octo/hello", c.id, "rocket"), 0);
	assert_int_equal(gh_reaction_add_issue(f->rest, "octo/hello", 1, "shrug"), AP_EHTTP);

	assert_int_equal(gh_pull_find_by_head(f->rest, "octo/hello", "feature", NULL, &found),
			 AP_ENOTFOUND);
	req.title = "Fix crash";
	req.head = "nonexistent";
	req.base = "main";
	req.body = "Fixes #1";
	assert_int_equal(gh_pull_create(f->rest, "octo/hello", &req, &pr), AP_EHTTP);
	assert_non_null(strstr(ap_error_last(), "Validation Failed"));
	assert_non_null(strstr(ap_error_last(), "PullRequest.head invalid"));
	req.head = "feature";
	/* "feature" equals main: GitHub says there is nothing to compare. */
	assert_int_equal(gh_pull_create(f->rest, "octo/hello", &req, &pr), AP_EHTTP);
	assert_non_null(strstr(ap_error_last(), "No commits between main and feature"));
	assert_int_equal(gh_sh(NULL,
			       "set -e; d=%s/w; rm -rf $d; git init -q $d; cd $d; "
			       "export GIT_CONFIG_GLOBAL=/dev/null; "
			       "git fetch -q %s/stub/git/octo/hello.git feature; "
			       "git checkout -q -b feature FETCH_HEAD; echo x > b.txt; "
			       "git add b.txt; git -c user.name=t -c user.email=t@t commit -qm b; "
			       "git push -q %s/stub/git/octo/hello.git feature",
			       stub.dir, stub.dir, stub.dir),
			 0);
	assert_int_equal(gh_pull_create(f->rest, "octo/hello", &req, &pr), 0);
	assert_true(pr.number > 2);
	assert_true(pr.draft);
	/* What was sent: a draft that maintainers may push to (GH_PULL_NEW_INIT's defaults). */
	{
		cJSON *rl = stub_requests(), *sent;

		sent = cJSON_GetObjectItem(last_request(rl, "POST", "/repos/octo/hello/pulls"),
					   "body");
		assert_true(cJSON_IsTrue(cJSON_GetObjectItem(sent, "draft")));
		assert_true(cJSON_IsTrue(cJSON_GetObjectItem(sent, "maintainer_can_modify")));
		assert_string_equal(cJSON_GetObjectItem(sent, "head")->valuestring, "feature");
		assert_string_equal(cJSON_GetObjectItem(sent, "base")->valuestring, "main");
		cJSON_Delete(rl);
	}
	assert_string_equal(pr.head_ref, "feature");
	assert_int_equal(strlen(pr.head_sha), 40);
	assert_int_equal(gh_pull_find_by_head(f->rest, "octo/hello", "feature", NULL, &found), 0);
	assert_int_equal(found.number, pr.number);
	assert_int_equal(gh_pull_get(f->rest, "octo/hello", pr.number, &got), 0);
	assert_string_equal(got.base_ref, "main");
	assert_string_equal(got.head_repo, "octo/hello");
	assert_int_equal(
	    gh_pull_update(f->rest, "octo/hello", pr.number, NULL, "Fixes #1 (v2)", NULL, &upd), 0);
	assert_string_equal(upd.body, "Fixes #1 (v2)");
	assert_string_equal(upd.title, "Fix crash");

	assert_int_equal(gh_stub_http(&stub, "GET", "/_stub/state", NULL, &st), 200);
	state_json = cJSON_Parse(st);
	repo = cJSON_GetObjectItem(cJSON_GetObjectItem(state_json, "repos"), "octo/hello");
	{
		cJSON *issue = cJSON_GetObjectItem(cJSON_GetObjectItem(repo, "issues"), "1");
		char *labels_json = cJSON_PrintUnformatted(cJSON_GetObjectItem(issue, "labels"));

		/* the seeded labels stay; gh_labels_add appended its own */
		assert_string_equal(labels_json, "[\"autopatch\",\"bug\",\"autopatch:working\"]");
		free(labels_json);
	}
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(repo, "reactions")), 2);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(repo, "pulls")), 1);
	/* Writes were spaced (AUTOPATCH_GH_WRITE_SPACING_MS 50), on the fake clock. */
	gh_rest_set_write_guard(f->rest, NULL, NULL);
	assert_int_equal(wire.n, 10);
	assert_true(wire_min_gap(&wire) >= 50);
	cJSON_Delete(state_json);
	free(st);
	gh_comment_release(&c);
	gh_comment_release(&c2);
	gh_pull_release(&pr);
	gh_pull_release(&found);
	gh_pull_release(&got);
	gh_pull_release(&upd);
}

/* The stub's recorded requests (a cJSON list the caller frees). */
static cJSON *stub_requests(void)
{
	char *reqs = NULL;
	cJSON *rl;

	assert_int_equal(gh_stub_http(&stub, "GET", "/_stub/requests", NULL, &reqs), 200);
	rl = cJSON_Parse(reqs);
	free(reqs);
	assert_non_null(rl);
	return rl;
}

/* The last recorded request with that method and exact path (borrowed from list), or NULL. */
static cJSON *last_request(cJSON *list, const char *method, const char *path)
{
	cJSON *it, *found = NULL;

	cJSON_ArrayForEach (it, list) {
		if (strcmp(cJSON_GetObjectItem(it, "method")->valuestring, method) == 0 &&
		    strcmp(cJSON_GetObjectItem(it, "path")->valuestring, path) == 0)
			found = it;
	}
	return found;
}

/* A client of installation inst with f->cfg's current settings, kept in f->other. */
static gh_rest *client_for(struct fx *f, int64_t inst)
{
	gh_rest_free(f->other);
	f->other = NULL;
	assert_int_equal(gh_rest_new(&f->other, f->cfg, gh_app_creds(f->app), inst), 0);
	return f->other;
}

/* Answer the next GET of path with 200 and x-ratelimit-remaining: 0, reset at reset. */
static void inject_exhausted_ok(const char *path, long long reset)
{
	char body[512];

	snprintf(body, sizeof(body),
		 "{\"path\":\"^%s$\",\"status\":200,\"times\":1,\"body\":{\"ok\":true},"
		 "\"headers\":{\"X-RateLimit-Remaining\":\"0\",\"X-RateLimit-Reset\":\"%lld\"}}",
		 path, reset);
	assert_int_equal(gh_stub_http(&stub, "POST", "/_stub/fail", body, NULL), 201);
}

/* A repository name too long for a request's path fails before anything is sent: a cut path
 * would name another repository (or write to another issue). */
static void test_long_repository_name_is_refused_not_cut(void **state)
{
	struct fx *f = *state;
	static char repo[4096];
	struct wire_log wire = WIRE_LOG_INIT;
	gh_comment c = {0};
	gh_issue issue = {0};

	memset(repo, 'a', sizeof(repo) - 1);
	memcpy(repo, "octo/", 5);
	gh_rest_set_write_guard(f->rest, wire_log_write, &wire);
	assert_int_equal(gh_issue_get(f->rest, repo, 1, &issue), AP_ETOOBIG);
	assert_int_equal(gh_comment_create(f->rest, repo, 1, "Working on it", &c), AP_ETOOBIG);
	assert_int_equal(wire.n, 0);
	gh_rest_set_write_guard(f->rest, NULL, NULL);
}

static void test_deadline_bounds_a_call(void **state)
{
	struct fx *f = *state;
	gh_rest *r;
	int64_t start = ap_wall_s();

	cfg_set(f->cfg, "AUTOPATCH_GH_DEADLINE_S", "2");
	r = client_for(f, 6);
	/* retry-after 30 s cannot fit in a 2 s deadline: give up at once, as a rate limit, and
	 * say when to come back. */
	gh_stub_http(&stub, "POST", "/_stub/fail",
		     "{\"path\":\"^/repos/octo/rl6$\",\"status\":403,\"retry_after\":30}", NULL);
	assert_int_equal(gh_rest_call(r, "GET", "/repos/octo/rl6", NULL, NULL), AP_ERATELIMIT);
	assert_int_equal(ap_clock__slept_ms(), 0);
	assert_non_null(strstr(ap_error_last(), "secondary rate limit"));
	assert_true(gh_rest_retry_after(r) >= start + 30);
	assert_true(gh_rest_retry_after(r) <= ap_wall_s() + 31);
}

/* x-ratelimit-remaining: 0 on a successful answer holds the next request until the reset
 * (+1 s, as GitHub advises). The next request is a write here, so that the write guard sees
 * the (fake) time it goes on the wire at. */
static void test_exhausted_on_2xx_holds_next_request(void **state)
{
	struct fx *f = *state;
	gh_rest *r = client_for(f, 2);
	long long reset = (long long)ap_wall_s() + 2; /* held 2-3 s: the reset, +1 s */
	struct wire_log wire = WIRE_LOG_INIT;
	int64_t t0;

	inject_exhausted_ok("/repos/octo/rl2", reset);
	assert_int_equal(gh_rest_call(r, "GET", "/repos/octo/rl2", NULL, NULL), 0);
	assert_int_equal(gh_rest_retry_after(r), 0);
	assert_int_equal(gh_stub_http(&stub, "POST", "/_stub/fail",
				      "{\"path\":\"^/repos/octo/rl2$\",\"method\":\"PATCH\","
				      "\"status\":200,\"times\":1,\"body\":{\"ok\":true}}",
				      NULL),
			 201);
	gh_rest_set_write_guard(r, wire_log_write, &wire);
	t0 = ap_mono_ms();
	assert_int_equal(gh_rest_call(r, "PATCH", "/repos/octo/rl2", NULL, NULL), 0);
	assert_true(ms_since(t0) >= 1000);
	/* It reached GitHub only after the reset + 1 s. */
	assert_int_equal(wire.n, 1);
	assert_true(wire.at[0] >= (reset + 1) * 1000);
	assert_int_equal(gh_stub_count(&stub, NULL, "/repos/octo/rl2"), 2);
}

/* A reset beyond the deadline: the next call, from any client of the installation, returns
 * AP_ERATELIMIT at once without sending anything, with the reset time for the caller. */
static void test_future_reset_returned_to_caller(void **state)
{
	struct fx *f = *state;
	gh_rest *r = client_for(f, 3), *r2 = NULL;
	long long reset = (long long)ap_wall_s() + 600;

	inject_exhausted_ok("/repos/octo/rl3", reset);
	assert_int_equal(gh_rest_call(r, "GET", "/repos/octo/rl3", NULL, NULL), 0);
	assert_int_equal(gh_rest_call(r, "GET", "/repos/octo/rl3", NULL, NULL), AP_ERATELIMIT);
	assert_int_equal(gh_rest_retry_after(r), reset + 1);
	assert_non_null(strstr(ap_error_last(), "rate limited"));
	/* Another client (another job) of the same installation is held back too. */
	assert_int_equal(gh_rest_new(&r2, f->cfg, gh_app_creds(f->app), 3), 0);
	assert_int_equal(gh_rest_call(r2, "POST", "/repos/octo/rl3/issues/1/comments", NULL, NULL),
			 AP_ERATELIMIT);
	assert_int_equal(gh_rest_retry_after(r2), reset + 1);
	assert_int_equal(ap_clock__slept_ms(), 0); /* neither waited */
	gh_rest_free(r2);
	assert_int_equal(gh_stub_count(&stub, NULL, "/repos/octo/rl3"), 1);
	/* Other installations are not affected. */
	assert_int_equal(gh_rest_call(f->rest, "GET", "/repos/octo/hello", NULL, NULL), 0);
}

/* A secondary limit without retry-after waits at least a minute by default. */
static void test_secondary_default_at_least_a_minute(void **state)
{
	struct fx *f = *state;
	ap_config *cfg = NULL;
	gh_rest *r = NULL;
	int64_t start = ap_wall_s();

	assert_int_equal(cfg_new_empty(&cfg), 0);
	cfg_set(cfg, "GITHUB_API_URL", stub.url);
	cfg_set(cfg, "AUTOPATCH_GH_DEADLINE_S", "30"); /* shorter than the default wait */
	assert_int_equal(gh_rest_new(&r, cfg, gh_app_creds(f->app), 4), 0);
	gh_stub_http(&stub, "POST", "/_stub/fail",
		     "{\"path\":\"^/repos/octo/rl4$\",\"status\":403,\"times\":1}", NULL);
	assert_int_equal(gh_rest_call(r, "GET", "/repos/octo/rl4", NULL, NULL), AP_ERATELIMIT);
	assert_int_equal(ap_clock__slept_ms(), 0);
	assert_true(gh_rest_retry_after(r) >= start + 60);
	assert_true(gh_rest_retry_after(r) <= ap_wall_s() + 62);
	assert_int_equal(gh_stub_count(&stub, "GET", "/repos/octo/rl4"), 1);
	gh_rest_free(r);
	cfg_free(cfg);
}

/* Secondary limits in a row wait longer each time (1 s, then 2 s); a success starts over. */
static void test_secondary_wait_grows_until_success(void **state)
{
	struct fx *f = *state;
	gh_rest *r;
	int64_t t0, slept;

	cfg_set(f->cfg, "AUTOPATCH_GH_SECONDARY_WAIT_S", "1");
	cfg_set(f->cfg, "AUTOPATCH_GH_DEADLINE_S", "3");
	r = client_for(f, 5);
	gh_stub_http(&stub, "POST", "/_stub/fail",
		     "{\"path\":\"^/repos/octo/rl5$\",\"status\":403,\"times\":2}", NULL);
	/* 1 s fits in the 3 s deadline, the doubled 2 s after it does not. */
	t0 = ap_mono_ms();
	assert_int_equal(gh_rest_call(r, "GET", "/repos/octo/rl5", NULL, NULL), AP_ERATELIMIT);
	assert_true(ms_since(t0) >= 1000);
	slept = ap_clock__slept_ms();
	assert_true(slept >= 500 && slept <= 1000); /* the 1 s only */
	assert_int_equal(gh_stub_count(&stub, "GET", "/repos/octo/rl5"), 2);
	assert_true(gh_rest_retry_after(r) >= ap_wall_s() + 1);

	/* With room, the call waits out the 2 s and succeeds. */
	cfg_set(f->cfg, "AUTOPATCH_GH_DEADLINE_S", "10");
	r = client_for(f, 5);
	assert_int_equal(gh_rest_call(r, "GET", "/repos/octo/rl5", NULL, NULL), 0);
	assert_true(ap_clock__slept_ms() - slept >= 1500); /* the 2 s left of the block */
	/* After a success, the next secondary limit waits the base 1 s again (not 4 s). */
	gh_stub_http(&stub, "POST", "/_stub/fail",
		     "{\"path\":\"^/repos/octo/rl5$\",\"status\":429,\"times\":1}", NULL);
	t0 = ap_mono_ms();
	slept = ap_clock__slept_ms();
	assert_int_equal(gh_rest_call(r, "GET", "/repos/octo/rl5", NULL, NULL), 0);
	assert_true(ms_since(t0) >= 1000);
	slept = ap_clock__slept_ms() - slept;
	assert_true(slept >= 500 && slept <= 1000);
}

/* Every request carries GitHub's media type, the API version and a User-Agent. */
static void test_request_headers(void **state)
{
	struct fx *f = *state;
	gh_comment c = {0};
	cJSON *list, *it;
	int n = 0;

	assert_int_equal(gh_rest_call(f->rest, "GET", "/repos/octo/hello", NULL, NULL), 0);
	assert_int_equal(gh_comment_create(f->rest, "octo/hello", 1, "hi", &c), 0);
	gh_comment_release(&c);
	list = stub_requests();
	cJSON_ArrayForEach (it, list) {
		cJSON *h = cJSON_GetObjectItem(it, "headers");
		const char *ua = cJSON_GetStringValue(cJSON_GetObjectItem(h, "user-agent"));

		assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(h, "accept")),
				    "application/vnd.github+json");
		assert_string_equal(
		    cJSON_GetStringValue(cJSON_GetObjectItem(h, "x-github-api-version")),
		    "2022-11-28");
		assert_non_null(ua);
		assert_int_equal(strncmp(ua, "autopatch/", 10), 0);
		assert_int_equal(
		    strncmp(cJSON_GetStringValue(cJSON_GetObjectItem(it, "auth")), "Bearer ", 7),
		    0);
		n++;
	}
	assert_int_equal(n, 3); /* the mint, the GET and the POST */
	cJSON_Delete(list);
}

/* A body larger than AUTOPATCH_GH_MAX_RESPONSE is refused, not retried. */
static void test_response_size_cap(void **state)
{
	struct fx *f = *state;
	char *big = malloc(9000);
	gh_rest *r;
	cJSON *out = NULL;
	size_t n = 0;

	n += (size_t)snprintf(big, 9000,
			      "{\"path\":\"^/repos/octo/hello/big$\",\"status\":200,\"times\":2,"
			      "\"body\":{\"pad\":\"");
	memset(big + n, 'x', 6000);
	n += 6000;
	snprintf(big + n, 9000 - n, "\"}}");
	assert_int_equal(gh_stub_http(&stub, "POST", "/_stub/fail", big, NULL), 201);
	free(big);
	cfg_set(f->cfg, "AUTOPATCH_GH_MAX_RESPONSE", "4096");
	r = client_for(f, 1);
	assert_int_equal(gh_rest_call(r, "GET", "/repos/octo/hello/big", NULL, &out), AP_ETOOBIG);
	assert_null(out);
	assert_int_equal(gh_rest__attempts(r), 1);
	assert_int_equal(gh_stub_count(&stub, "GET", "/repos/octo/hello/big"), 1);
	/* The same answer fits under a larger cap. */
	cfg_set(f->cfg, "AUTOPATCH_GH_MAX_RESPONSE", "8192");
	r = client_for(f, 1);
	assert_int_equal(gh_rest_call(r, "GET", "/repos/octo/hello/big", NULL, &out), 0);
	assert_int_equal(strlen(cJSON_GetObjectItem(out, "pad")->valuestring), 6000);
	cJSON_Delete(out);
}

struct writer {
	gh_app *app;
	const ap_config *cfg;
	struct wire_log *wire;
	int rc;
};

static void *write_worker(void *ud)
{
	struct writer *w = ud;
	gh_rest *r = NULL;

	w->rc = gh_rest_new(&r, w->cfg, gh_app_creds(w->app), 1);
	if (!w->rc)
		gh_rest_set_write_guard(r, wire_log_write, w->wire);
	for (int i = 0; i < 2 && !w->rc; i++) {
		gh_comment c = {0};

		w->rc = gh_comment_create(r, "octo/hello", 2, "from a thread", &c);
		gh_comment_release(&c);
	}
	gh_rest_free(r);
	return NULL;
}

/* Writes from several threads (each with its own client) to one installation take turns and
 * keep the spacing between them (on the fake clock: a fake sleep on one thread moves the time
 * on for all). */
static void test_concurrent_writes_serialized_and_spaced(void **state)
{
	struct fx *f = *state;
	struct writer w[4];
	struct wire_log wire = WIRE_LOG_INIT;
	pthread_t th[4];
	cJSON *list, *it;
	int n = 0;
	char *tok = NULL;

	cfg_set(f->cfg, "AUTOPATCH_GH_WRITE_SPACING_MS", "150");
	assert_int_equal(gh_app_token(f->app, 1, &tok), 0); /* mint before the race */
	free(tok);
	for (int i = 0; i < 4; i++) {
		w[i] = (struct writer){f->app, f->cfg, &wire, -1};
		assert_int_equal(pthread_create(&th[i], NULL, write_worker, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(w[i].rc, 0);
	}
	list = stub_requests();
	cJSON_ArrayForEach (it, list) {
		if (strcmp(cJSON_GetObjectItem(it, "method")->valuestring, "POST") == 0 &&
		    strstr(cJSON_GetObjectItem(it, "path")->valuestring, "/issues/2/comments"))
			n++;
	}
	cJSON_Delete(list);
	assert_int_equal(n, 8);
	assert_int_equal(wire.n, 8);
	assert_true(wire_min_gap(&wire) >= 150);
}

/* A stand-in for the replicas' shared pacer: the first reservation finds the slot taken by
 * "another replica" 300 ms ahead; fail = 1 makes reserve fail (the client must then fall
 * back to its in-process spacing). */
struct fake_pacer {
	int calls, fail;
	int64_t installation, spacing;
};

static int fake_reserve(void *ud, int64_t installation, int64_t spacing_ms, int64_t *wait_ms)
{
	struct fake_pacer *fp = ud;

	fp->installation = installation;
	fp->spacing = spacing_ms;
	*wait_ms = fp->calls++ == 0 ? 300 : 0;
	if (fp->fail)
		return ap_error_set(AP_EUNAVAIL, "database down");
	return 0;
}

static void test_shared_pacer_spaces_writes_across_processes(void **state)
{
	struct fx *f = *state;
	struct fake_pacer fp = {0};
	gh_write_pacer pacer = {fake_reserve, &fp};
	gh_rest *r = NULL;
	int64_t t0;
	gh_comment c = {0};
	char *tok = NULL;

	cfg_set(f->cfg, "AUTOPATCH_GH_WRITE_SPACING_MS", "100");
	assert_int_equal(gh_app_token(f->app, 1, &tok), 0);
	free(tok);
	assert_int_equal(gh_rest_new(&r, f->cfg, gh_app_creds(f->app), 1), 0);
	gh_rest_set_pacer(&pacer);
	t0 = ap_mono_ms();
	assert_int_equal(gh_comment_create(r, "octo/hello", 2, "paced", &c), 0);
	gh_comment_release(&c);
	/* the write waited for the slot the database handed out, reads are not paced */
	assert_true(ms_since(t0) >= 300);
	assert_true(ap_clock__slept_ms() >= 300);
	assert_int_equal(fp.calls, 1);
	assert_int_equal(fp.installation, 1);
	assert_int_equal(fp.spacing, 100);
	assert_int_equal(gh_rest_call(r, "GET", "/repos/octo/hello", NULL, NULL), 0);
	assert_int_equal(fp.calls, 1);
	/* the database unreachable: the write still goes out, spaced in-process */
	fp.fail = 1;
	assert_int_equal(gh_comment_create(r, "octo/hello", 2, "fallback", &c), 0);
	gh_comment_release(&c);
	assert_int_equal(fp.calls, 2);
	gh_rest_set_pacer(NULL);
	gh_rest_free(r);
}

/* A 401 right after a token was minted (replication delay) is retried with the same token,
 * not answered with a second mint. */
static void test_new_token_401_retried_without_mint(void **state)
{
	struct fx *f = *state;
	gh_app *app = NULL;
	gh_rest *r = NULL;
	cJSON *list, *it;
	const char *first = NULL;
	int n = 0;

	assert_int_equal(gh_app_new(&app, f->cfg), 0); /* an empty token cache */
	assert_int_equal(gh_rest_new(&r, f->cfg, gh_app_creds(app), 1), 0);
	gh_stub_http(&stub, "POST", "/_stub/fail",
		     "{\"path\":\"^/repos/octo/hello$\",\"status\":401,\"times\":1,"
		     "\"message\":\"Bad credentials\"}",
		     NULL);
	assert_int_equal(gh_rest_call(r, "GET", "/repos/octo/hello", NULL, NULL), 0);
	assert_int_equal(gh_stub_count(&stub, "POST", "/access_tokens"), 1);
	assert_true(ap_clock__slept_ms() >= 1000); /* retried a second later */
	list = stub_requests();
	cJSON_ArrayForEach (it, list) {
		const char *auth = cJSON_GetStringValue(cJSON_GetObjectItem(it, "auth"));

		if (strcmp(cJSON_GetObjectItem(it, "path")->valuestring, "/repos/octo/hello") != 0)
			continue;
		if (!first)
			first = auth;
		assert_string_equal(auth, first);
		n++;
	}
	assert_int_equal(n, 2);
	cJSON_Delete(list);
	gh_rest_free(r);
	gh_app_free(app);
}

/* A rate limit on minting the installation token reaches the caller with its time too.
 * Last in the list: it holds back the App's JWT calls (every mint) for a few seconds. */
static void test_mint_rate_limit_returned_to_caller(void **state)
{
	struct fx *f = *state;
	gh_rest *r;
	int64_t start = ap_wall_s();

	cfg_set(f->cfg, "AUTOPATCH_GH_DEADLINE_S", "2");
	r = client_for(f, 7);
	gh_stub_http(&stub, "POST", "/_stub/fail",
		     "{\"path\":\"^/app/installations/7/access_tokens$\",\"status\":403,"
		     "\"retry_after\":3,\"times\":1}",
		     NULL);
	assert_int_equal(gh_rest_call(r, "GET", "/repos/octo/hello", NULL, NULL), AP_ERATELIMIT);
	assert_true(gh_rest_retry_after(r) >= start + 3);
	assert_true(gh_rest_retry_after(r) <= ap_wall_s() + 4);
	assert_int_equal(gh_stub_count(&stub, "GET", "/repos/octo/hello"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_jwt_verifies_with_openssl_cli, fx_setup,
					    fx_teardown),
	    cmocka_unit_test_setup_teardown(test_private_key_inline_escaped, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_token_cached_and_refreshed, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_token_cache_thread_safe, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_clock_skew_resigned_from_date, fx_setup,
					    fx_teardown),
	    cmocka_unit_test_setup_teardown(test_secondary_limit_retry_after, fx_setup,
					    fx_teardown),
	    cmocka_unit_test_setup_teardown(test_rate_limits_and_plain_403, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_5xx_retried_with_backoff, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_5xx_post_not_repeated, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_write_guard_refuses_before_sending, fx_setup,
					    fx_teardown),
	    cmocka_unit_test_setup_teardown(test_pagination_returns_all_pages, fx_setup,
					    fx_teardown),
	    cmocka_unit_test_setup_teardown(test_bad_token_is_denied_with_message, fx_setup,
					    fx_teardown),
	    cmocka_unit_test_setup_teardown(test_revoked_token_reminted, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_api_calls_round_trip, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_long_repository_name_is_refused_not_cut, fx_setup,
					    fx_teardown),
	    cmocka_unit_test_setup_teardown(test_deadline_bounds_a_call, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_exhausted_on_2xx_holds_next_request, fx_setup,
					    fx_teardown),
	    cmocka_unit_test_setup_teardown(test_future_reset_returned_to_caller, fx_setup,
					    fx_teardown),
	    cmocka_unit_test_setup_teardown(test_secondary_default_at_least_a_minute, fx_setup,
					    fx_teardown),
	    cmocka_unit_test_setup_teardown(test_secondary_wait_grows_until_success, fx_setup,
					    fx_teardown),
	    cmocka_unit_test_setup_teardown(test_request_headers, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_identity_swapped_in_place, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_response_size_cap, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_concurrent_writes_serialized_and_spaced, fx_setup,
					    fx_teardown),
	    cmocka_unit_test_setup_teardown(test_shared_pacer_spaces_writes_across_processes,
					    fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_new_token_401_retried_without_mint, fx_setup,
					    fx_teardown),
	    cmocka_unit_test_setup_teardown(test_mint_rate_limit_returned_to_caller, fx_setup,
					    fx_teardown),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

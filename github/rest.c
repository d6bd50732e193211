/* SPDX-License-Identifier: MIT */
/* github/rest.c - GitHub REST client: auth, retries, rate limits, spacing, pagination (see
 * rest.h for the policy). */
#include "github/rest.h"

#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/httpc.h"
#include "common/log.h"
#include "common/redact.h"
#include "github/urls.h"

#include <ctype.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define USER_AGENT	  "autopatch/0.1 (+self-hosted GitHub App)"
#define HEADER_VALUE_CAP  2048
#define ERROR_BODY_CAP	  600
#define NEW_TOKEN_GRACE_S 5

/* Response headers the client acts on. */
static const char *const kept_names[] = {
    "date",
    "link",
    "retry-after",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "x-ratelimit-limit",
    "x-ratelimit-used",
    "x-ratelimit-resource",
    "x-github-request-id",
};
_Static_assert(sizeof(kept_names) / sizeof(kept_names[0]) <= HTTPC_HEADERS_MAX,
	       "httpc_headers keeps at most HTTPC_HEADERS_MAX names");

struct gh_rest {
	const ap_config *cfg;
	const gh_creds *creds;
	int64_t inst;	   /* installation, 0 = the App itself (JWT) */
	char *fixed_token; /* gh_rest_new_token() */
	char *base;	   /* API base without trailing slash */
	CURL *curl;
	int64_t retries;     /* extra attempts after the first */
	int64_t backoff_ms;  /* first backoff for 5xx/network */
	int64_t secondary_s; /* first wait for a secondary limit without retry-after */
	int64_t spacing_ms;  /* between writes of one installation */
	int64_t deadline_s;  /* per call, retries included */
	int64_t max_resp;    /* response body cap */
	long status;
	httpc_headers hdrs; /* kept_names of the last response */
	int64_t attempts;
	unsigned rng;
	bool sent;	    /* the last attempt sent (part of) its request */
	bool maybe_applied; /* the last call was a POST GitHub may have applied, not repeated */
	int64_t retry_at;   /* Unix seconds; set when the last call ended with AP_ERATELIMIT */
	gh_write_guard_fn guard; /* asked right before a write goes on the wire (may be NULL) */
	void *guard_ud;
};

/* Process-wide state of one installation (key: installation id, 0 = the App's JWT, -1 = fixed
 * tokens), shared by every client acting as it, because GitHub counts limits per token/App:
 * - writes take turns (write_lock) and keep the spacing GitHub asks for;
 * - a rate limit seen by one client (a 403/429, or x-ratelimit-remaining: 0 on any answer,
 *   2xx included) holds back the next request of every client until it lifts;
 * - secondary limits without retry-after wait longer each time until a request succeeds.
 * Entries are never freed (one per installation the process ever talked to). */
struct inst_state {
	int64_t key;
	pthread_mutex_t write_lock; /* held for a whole write call */
	int64_t last_write_ms;	    /* monotonic; under write_lock */
	int64_t blocked_until_ms;   /* wall clock; under states_lock */
	int secondary_streak;	    /* under states_lock */
	struct inst_state *next;
};

static pthread_mutex_t states_lock = PTHREAD_MUTEX_INITIALIZER;
static struct inst_state *states;
static const gh_write_pacer *shared_pacer; /* set at start-up (gh_rest_set_pacer) */

void gh_rest_set_pacer(const gh_write_pacer *p)
{
	pthread_mutex_lock(&states_lock);
	shared_pacer = p;
	pthread_mutex_unlock(&states_lock);
}

/* How long a write of slot must wait for its turn: the shared pacer's slot when there is one,
 * else the in-process spacing after this process's last write. */
static int64_t write_wait_ms(gh_rest *r, struct inst_state *slot)
{
	const gh_write_pacer *p;
	int64_t wait = 0;

	pthread_mutex_lock(&states_lock);
	p = shared_pacer;
	pthread_mutex_unlock(&states_lock);
	if (p && r->spacing_ms > 0) {
		if (p->reserve(p->ud, slot->key, r->spacing_ms, &wait) == 0)
			return wait;
		ap_warn("shared GitHub write pacing unavailable (%s): spacing in this process",
			ap_error_last());
		ap_error_clear();
	}
	if (slot->last_write_ms)
		wait = slot->last_write_ms + r->spacing_ms - ap_mono_ms();
	return wait;
}

static struct inst_state *state_for(int64_t key)
{
	struct inst_state *s;

	pthread_mutex_lock(&states_lock);
	for (s = states; s; s = s->next)
		if (s->key == key)
			break;
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (s) {
			s->key = key;
			pthread_mutex_init(&s->write_lock, NULL);
			s->next = states;
			states = s;
		}
	}
	pthread_mutex_unlock(&states_lock);
	return s;
}

/* Wall-clock ms until which requests of s must wait (0 when not blocked). */
static int64_t blocked_until(struct inst_state *s)
{
	int64_t t;

	pthread_mutex_lock(&states_lock);
	t = s->blocked_until_ms;
	pthread_mutex_unlock(&states_lock);
	return t;
}

/* Hold back every request of s until wall-clock until_ms (a later block wins). */
static void block_until(struct inst_state *s, int64_t until_ms)
{
	pthread_mutex_lock(&states_lock);
	if (until_ms > s->blocked_until_ms)
		s->blocked_until_ms = until_ms;
	pthread_mutex_unlock(&states_lock);
}

static int read_settings(gh_rest *r, const ap_config *cfg)
{
	int rc;

	rc = cfg_int(cfg, "AUTOPATCH_GH_RETRIES", 0, 20, &r->retries);
	if (!rc)
		rc = cfg_int(cfg, "AUTOPATCH_GH_BACKOFF_MS", 1, 600000, &r->backoff_ms);
	if (!rc)
		rc = cfg_int(cfg, "AUTOPATCH_GH_SECONDARY_WAIT_S", 0, 3600, &r->secondary_s);
	if (!rc)
		rc = cfg_int(cfg, "AUTOPATCH_GH_WRITE_SPACING_MS", 0, 60000, &r->spacing_ms);
	if (!rc)
		rc = cfg_int(cfg, "AUTOPATCH_GH_DEADLINE_S", 1, 86400, &r->deadline_s);
	if (!rc)
		rc = cfg_bytes(cfg, "AUTOPATCH_GH_MAX_RESPONSE", 4096, 1 << 30, &r->max_resp);
	return rc;
}

static int rest_alloc(gh_rest **out, const ap_config *cfg, const char *base)
{
	gh_rest *r;
	size_t n;
	int rc;

	*out = NULL;
	rc = httpc_global_init();
	if (rc)
		return rc;
	r = calloc(1, sizeof(*r));
	if (!r)
		return ap_error_set(AP_ENOMEM, "out of memory");
	r->cfg = cfg;
	httpc_headers_init(&r->hdrs, kept_names, sizeof(kept_names) / sizeof(kept_names[0]),
			   HEADER_VALUE_CAP);
	rc = read_settings(r, cfg);
	if (rc)
		goto err_free;
	r->base = strdup(base);
	r->curl = curl_easy_init();
	if (!r->base || !r->curl) {
		rc = ap_error_set(AP_ENOMEM, "out of memory creating the HTTP client");
		goto err_free;
	}
	n = strlen(r->base);
	while (n > 0 && r->base[n - 1] == '/')
		r->base[--n] = '\0';
	r->rng = (unsigned)ap_wall_ms() ^ (unsigned)(uintptr_t)r;
	*out = r;
	return 0;
err_free:
	gh_rest_free(r);
	return rc;
}

int gh_rest_new(gh_rest **out, const ap_config *cfg, const gh_creds *creds, int64_t installation_id)
{
	int rc;

	if (!creds || !creds->token || !creds->api_url)
		return ap_error_set(AP_EINVAL, "gh_rest_new needs credentials");
	rc = rest_alloc(out, cfg, creds->api_url);
	if (rc)
		return rc;
	(*out)->creds = creds;
	(*out)->inst = installation_id;
	return 0;
}

int gh_rest_new_token(gh_rest **out, const ap_config *cfg, const char *token)
{
	gh_urls urls;
	int rc;

	*out = NULL;
	rc = gh_urls_get(cfg, &urls);
	if (rc)
		return rc;
	rc = rest_alloc(out, cfg, urls.api);
	if (rc)
		return rc;
	(*out)->fixed_token = strdup(token);
	if (!(*out)->fixed_token) {
		gh_rest_free(*out);
		*out = NULL;
		return ap_error_set(AP_ENOMEM, "out of memory");
	}
	return 0;
}

int gh_rest_new_anon(gh_rest **out, const ap_config *cfg)
{
	return gh_rest_new_token(out, cfg, "");
}

void gh_rest_free(gh_rest *r)
{
	if (!r)
		return;
	httpc_headers_clear(&r->hdrs);
	curl_easy_cleanup(r->curl);
	free(r->base);
	if (r->fixed_token) {
		memset(r->fixed_token, 0, strlen(r->fixed_token));
		free(r->fixed_token);
	}
	free(r);
}

int64_t gh_rest_retry_after(const gh_rest *r)
{
	return r->retry_at;
}

int64_t gh_rest__attempts(const gh_rest *r)
{
	return r->attempts;
}

bool gh_rest_maybe_applied(const gh_rest *r)
{
	return r->maybe_applied;
}

static const char *gh_rest_last_header(const gh_rest *r, const char *name)
{
	return httpc_header(&r->hdrs, name);
}

/* Append GitHub's `message` and `errors` (objects or strings) to e. */
static void describe_github_error(ap_buf *e, const char *body, size_t len)
{
	cJSON *doc = cJSON_ParseWithLength(body, len), *msg, *errs, *it;

	if (!doc) {
		if (len)
			ap_buf_addf(e, ": %.*s", (int)(len > 200 ? 200 : len), body);
		return;
	}
	msg = cJSON_GetObjectItemCaseSensitive(doc, "message");
	if (cJSON_IsString(msg))
		ap_buf_addf(e, ": %.*s", ERROR_BODY_CAP / 2, msg->valuestring);
	errs = cJSON_GetObjectItemCaseSensitive(doc, "errors");
	if (cJSON_IsArray(errs)) {
		const char *sep = " (";

		cJSON_ArrayForEach (it, errs) {
			if (e->len > ERROR_BODY_CAP)
				break;
			if (cJSON_IsString(it)) {
				ap_buf_addf(e, "%s%s", sep, it->valuestring);
			} else if (cJSON_IsObject(it)) {
				const char *res = cJSON_GetStringValue(
				    cJSON_GetObjectItemCaseSensitive(it, "resource"));
				const char *fld = cJSON_GetStringValue(
				    cJSON_GetObjectItemCaseSensitive(it, "field"));
				const char *code = cJSON_GetStringValue(
				    cJSON_GetObjectItemCaseSensitive(it, "code"));
				const char *m = cJSON_GetStringValue(
				    cJSON_GetObjectItemCaseSensitive(it, "message"));

				ap_buf_addf(e, "%s%s%s%s%s%s%s", sep, res ? res : "",
					    res && fld ? "." : "", fld ? fld : "",
					    code ? (res || fld ? " " : "") : "", code ? code : "",
					    "");
				if (m)
					ap_buf_addf(e, "%s%s", res || fld || code ? ": " : "", m);
			}
			sep = "; ";
		}
		if (strcmp(sep, "; ") == 0)
			ap_buf_adds(e, ")");
	}
	cJSON_Delete(doc);
}

/* Record the error for a non-2xx answer. Returns the code. */
static int http_error(gh_rest *r, int code, const char *method, const char *path, ap_buf *body)
{
	ap_buf e = AP_BUF_INIT(2048);
	char *red;

	ap_buf_addf(&e, "GitHub %s %s: HTTP %ld", method, path, r->status);
	describe_github_error(&e, body->data ? body->data : "", body->len);
	if (r->maybe_applied)
		ap_buf_adds(&e, " (it may have been applied; not repeated)");
	red = redact_str(ap_buf_str(&e));
	code = ap_error_set(code, "%s", red ? red : "GitHub request failed");
	free(red);
	ap_buf_release(&e);
	return code;
}

static bool message_matches(ap_buf *body, const char *needle)
{
	return body->data && strcasestr(body->data, needle) != NULL;
}

/* x-ratelimit-reset of the last answer as wall-clock ms (+1 s for clock drift, as GitHub
 * advises) when x-ratelimit-remaining is 0, else 0. */
static int64_t primary_reset_ms(gh_rest *r)
{
	const char *rem = gh_rest_last_header(r, "x-ratelimit-remaining");
	const char *reset = gh_rest_last_header(r, "x-ratelimit-reset");
	char *end;
	long long t;

	if (!rem || strcmp(rem, "0") != 0 || !reset)
		return 0;
	t = strtoll(reset, &end, 10);
	if (end == reset || *end || t <= 0)
		return 0;
	return ((int64_t)t + 1) * 1000;
}

/* Milliseconds to wait before the next attempt for a 403/429, or -1 when the answer is not a
 * rate limit (a plain permission error). Secondary limits without a retry-after wait
 * AUTOPATCH_GH_SECONDARY_WAIT_S, doubling with each one in a row for the installation (GitHub:
 * "wait at least one minute", longer if limits continue). */
static int64_t rate_limit_wait(gh_rest *r, struct inst_state *st, ap_buf *body)
{
	const char *ra = gh_rest_last_header(r, "retry-after");
	int64_t reset = primary_reset_ms(r), w;
	long long s;

	if (ra && *ra) {
		if (httpc_retry_after_seconds(ra, &s))
			return s * 1000;
		/* An HTTP-date retry-after. */
		time_t t = curl_getdate(ra, NULL);

		if (t > 0) {
			int64_t now = ap_wall_s();

			return t > now ? ((int64_t)t - now) * 1000 : 0;
		}
	}
	if (reset) {
		w = reset - ap_wall_ms();
		return w > 1000 ? w : 1000;
	}
	if (r->status == 429 || message_matches(body, "secondary rate limit") ||
	    message_matches(body, "abuse detection")) {
		w = r->secondary_s * 1000;
		pthread_mutex_lock(&states_lock);
		for (int i = 0; i < st->secondary_streak && i < 10; i++)
			w *= 2;
		st->secondary_streak++;
		pthread_mutex_unlock(&states_lock);
		return w;
	}
	return -1;
}

/* A 2xx: the secondary streak ends; remaining 0 still holds back the next request. */
static void note_success(gh_rest *r, struct inst_state *st)
{
	int64_t reset = primary_reset_ms(r);

	pthread_mutex_lock(&states_lock);
	st->secondary_streak = 0;
	pthread_mutex_unlock(&states_lock);
	if (reset > ap_wall_ms()) {
		ap_warn("GitHub: the rate limit is used up until %lld; holding back further "
			"requests",
			(long long)(reset / 1000));
		block_until(st, reset);
	}
}

static int64_t backoff_ms(gh_rest *r, int n)
{
	int64_t w = r->backoff_ms;

	for (int i = 0; i < n && i < 16; i++)
		w *= 2;
	if (w > 60000)
		w = 60000;
	return w + (int64_t)(rand_r(&r->rng) % (unsigned)(w / 2 + 1));
}

static bool is_skew_rejection(ap_buf *body)
{
	return message_matches(body, "'Issued at' claim") ||
	       message_matches(body, "'Expiration time' claim");
}

static int build_url(gh_rest *r, const char *path, ap_buf *url)
{
	size_t blen = strlen(r->base);

	if (path[0] == '/')
		return ap_buf_addf(url, "%s%s", r->base, path);
	/* Absolute URLs (Link headers) must stay on the API origin so the token never travels
	 * elsewhere. */
	if (strncmp(path, r->base, blen) == 0 && (path[blen] == '/' || path[blen] == '?'))
		return ap_buf_adds(url, path);
	return ap_error_set(AP_EDENIED, "refusing a GitHub URL outside %s", r->base);
}

static int auth_header(gh_rest *r, ap_buf *h, bool *new_token)
{
	char *tok = NULL;
	int rc;

	*new_token = false;
	if (r->fixed_token && !*r->fixed_token)
		return 0; /* gh_rest_new_anon(): no Authorization at all */
	if (r->fixed_token)
		return ap_buf_addf(h, "Authorization: Bearer %s", r->fixed_token);
	rc = r->creds->token(r->creds->ud, r->inst, &tok);
	if (rc)
		return rc;
	if (r->inst && r->creds->token_age &&
	    r->creds->token_age(r->creds->ud, r->inst) < NEW_TOKEN_GRACE_S)
		*new_token = true;
	rc = ap_buf_addf(h, "Authorization: Bearer %s", tok);
	memset(tok, 0, strlen(tok));
	free(tok);
	return rc;
}

void gh_rest_set_write_guard(gh_rest *r, gh_write_guard_fn fn, void *ud)
{
	r->guard = fn;
	r->guard_ud = ud;
}

struct prereq {
	gh_rest *r;
	int rc; /* the guard's refusal, 0 when it let the request go */
};

/* libcurl's last call before it sends the request (connection up, nothing written yet). */
static int prereq_guard(void *ud, char *primary_ip, char *local_ip, int primary_port,
			int local_port)
{
	struct prereq *p = ud;

	(void)primary_ip;
	(void)local_ip;
	(void)primary_port;
	(void)local_port;
	p->rc = p->r->guard(p->r->guard_ud);
	return p->rc ? CURL_PREREQFUNC_ABORT : CURL_PREREQFUNC_OK;
}

static bool is_write(const char *method)
{
	return strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0;
}

/* The request headers: GitHub's media type and API version, JSON, no Expect, and auth when
 * it is not empty. NULL when out of memory. */
static struct curl_slist *request_headers(const char *auth)
{
	static const char *const fixed[] = {
	    "Accept: application/vnd.github+json",
	    "X-GitHub-Api-Version: 2022-11-28",
	    "Content-Type: application/json",
	    "Expect:",
	};
	struct curl_slist *hl = NULL, *tmp;

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		tmp = curl_slist_append(hl, fixed[i]);
		if (!tmp)
			goto err_nomem;
		hl = tmp;
	}
	if (*auth) {
		tmp = curl_slist_append(hl, auth);
		if (!tmp)
			goto err_nomem;
		hl = tmp;
	}
	return hl;
err_nomem:
	curl_slist_free_all(hl);
	return NULL;
}

/* The error of an exchange that got no usable response: refused before sending (pre_rc), an
 * answer over the cap or lost (sink_rc), a transfer error (cc, cerr). 0 when there is none. */
static int exchange_error(gh_rest *r, const char *method, const char *url, int pre_rc, int sink_rc,
			  CURLcode cc, const char *cerr)
{
	char *red;
	int rc = 0;

	if (pre_rc) {
		char why[AP_ERROR_MSG_MAX];

		snprintf(why, sizeof(why), "%s", ap_error_last());
		rc = ap_error_set(pre_rc, "GitHub %s %s: not sent: %s", method, url, why);
		r->sent = false;
		r->status = 0;
	} else if (sink_rc == AP_ETOOBIG) {
		rc = ap_error_set(AP_ETOOBIG, "GitHub %s: the response passed %lld bytes", method,
				  (long long)r->max_resp);
	} else if (sink_rc) {
		rc = sink_rc;
		r->status = 0;
	} else if (cc != CURLE_OK) {
		red = redact_str(cerr[0] ? cerr : curl_easy_strerror(cc));
		rc = ap_error_set(cc == CURLE_OPERATION_TIMEDOUT ? AP_ETIMEOUT : AP_EUNAVAIL,
				  "GitHub %s %s: %s", method, url, red ? red : "network error");
		free(red);
		r->status = 0;
	}
	return rc;
}

/* One HTTP exchange. Returns 0 when a response arrived (any status), else a negative code.
 * once: a request that must not be sent twice. libcurl silently re-sends a request whose
 * reused connection died before an answer, and GitHub may have applied it by then, so such a
 * request always gets a fresh connection (which libcurl never retries). */
static int attempt(gh_rest *r, const char *method, const char *url, const char *payload,
		   const char *auth, int64_t timeout_ms, bool once, ap_buf *resp)
{
	struct curl_slist *hl = request_headers(auth);
	httpc_body sink = HTTPC_BODY_INIT(resp);
	char cerr[CURL_ERROR_SIZE] = "";
	struct prereq pre = {r, 0};
	CURLcode cc;
	int rc;

	if (!hl)
		return ap_error_set(AP_ENOMEM, "out of memory");

	curl_easy_reset(r->curl);
	ap_buf_reset(resp);
	httpc_headers_clear(&r->hdrs);
	r->status = 0;
	curl_easy_setopt(r->curl, CURLOPT_URL, url);
	curl_easy_setopt(r->curl, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(r->curl, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(r->curl, CURLOPT_USERAGENT, USER_AGENT);
	curl_easy_setopt(r->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(r->curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(r->curl, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(r->curl, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(r->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(r->curl, CURLOPT_CONNECTTIMEOUT_MS,
			 timeout_ms < 10000 ? timeout_ms : 10000);
	curl_easy_setopt(r->curl, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(r->curl, CURLOPT_ERRORBUFFER, cerr);
	httpc_headers_sink(r->curl, &r->hdrs);
	httpc_body_sink(r->curl, &sink);
	curl_easy_setopt(r->curl, CURLOPT_ACCEPT_ENCODING, "");
	if (once)
		curl_easy_setopt(r->curl, CURLOPT_FRESH_CONNECT, 1L);
	if (payload) {
		curl_easy_setopt(r->curl, CURLOPT_POSTFIELDS, payload);
		curl_easy_setopt(r->curl, CURLOPT_POSTFIELDSIZE, (long)strlen(payload));
	} else if (strcmp(method, "GET") != 0) {
		curl_easy_setopt(r->curl, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(r->curl, CURLOPT_POSTFIELDSIZE, 0L);
	}
	if (r->guard && is_write(method)) {
		curl_easy_setopt(r->curl, CURLOPT_PREREQFUNCTION, prereq_guard);
		curl_easy_setopt(r->curl, CURLOPT_PREREQDATA, &pre);
	}
	r->attempts++;
	cc = curl_easy_perform(r->curl);
	curl_easy_getinfo(r->curl, CURLINFO_RESPONSE_CODE, &r->status);
	{
		long req_size = 0;

		curl_easy_getinfo(r->curl, CURLINFO_REQUEST_SIZE, &req_size);
		r->sent = req_size > 0;
	}
	rc = exchange_error(r, method, url, pre.rc, sink.rc, cc, cerr);
	curl_slist_free_all(hl);
	return rc;
}

/* One call's state across its attempts (call()). */
struct call_st {
	gh_rest *r;
	const char *method, *path;
	bool once; /* a POST that must not be repeated once GitHub may have applied it */
	int64_t deadline;
	struct inst_state *st;
	ap_buf *resp;
	int tries, net_n;
	bool skew_fixed, token_refreshed, new_token;
};

/* A step's answer besides 0 (done) and a negative code (done, failed): try again. */
#define CALL_AGAIN 1

/* A rate limit this or another client saw: wait it out (CALL_AGAIN), or hand it back to the
 * caller (with the time in gh_rest_retry_after) when it outlasts the deadline. 0: no limit. */
static int hold_for_rate_limit(struct call_st *c, int64_t left)
{
	int64_t wait = blocked_until(c->st) - ap_wall_ms();

	if (wait <= 0)
		return 0;
	if (wait >= left) {
		c->r->retry_at = (blocked_until(c->st) + 999) / 1000;
		return ap_error_set(AP_ERATELIMIT,
				    "GitHub %s %s: rate limited for %llds more, past the call's "
				    "deadline; retry at %lld",
				    c->method, c->path, (long long)((wait + 999) / 1000),
				    (long long)c->r->retry_at);
	}
	ap_info("GitHub %s %s: waiting %lld ms for the rate limit", c->method, c->path,
		(long long)wait);
	ap_sleep_ms(wait);
	return CALL_AGAIN; /* the deadline and the block are checked again */
}

/* The attempt failed on the network (AP_EUNAVAIL / AP_ETIMEOUT): a POST GitHub may have
 * applied is not repeated; anything else is retried with backoff while tries and time last. */
static int after_network_error(struct call_st *c, int rc)
{
	int64_t wait;

	if (c->once && c->r->sent) {
		/* GitHub may have received and applied it: the caller looks first. */
		char why[AP_ERROR_MSG_MAX];

		snprintf(why, sizeof(why), "%s", ap_error_last());
		c->r->maybe_applied = true;
		return ap_error_set(rc, "%s (it may have been applied; not repeated)", why);
	}
	if (rc == AP_ETIMEOUT && ap_mono_ms() >= c->deadline)
		return rc;
	if (c->net_n >= c->r->retries)
		return rc;
	wait = backoff_ms(c->r, c->net_n++);
	if (ap_mono_ms() + wait >= c->deadline)
		return rc;
	ap_warn("GitHub %s %s: %s; retrying in %lld ms", c->method, c->path, ap_error_last(),
		(long long)wait);
	ap_sleep_ms(wait);
	return CALL_AGAIN;
}

/* HTTP 5xx: retried with backoff, unless the call must not be repeated. */
static int after_server_error(struct call_st *c)
{
	gh_rest *r = c->r;
	int64_t wait;

	if (c->once) {
		r->maybe_applied = true;
		return http_error(r, AP_EUNAVAIL, c->method, c->path, c->resp);
	}
	if (c->tries >= r->retries)
		return http_error(r, AP_EHTTP, c->method, c->path, c->resp);
	wait = backoff_ms(r, c->tries++);
	if (ap_mono_ms() + wait >= c->deadline)
		return http_error(r, AP_ETIMEOUT, c->method, c->path, c->resp);
	ap_warn("GitHub %s %s: HTTP %ld; retrying in %lld ms", c->method, c->path, r->status,
		(long long)wait);
	ap_sleep_ms(wait);
	return CALL_AGAIN;
}

/* HTTP 401: an App JWT refused for clock skew is re-signed with the server's time once; a
 * brand-new installation token gets a moment to replicate; an older one is refreshed once. */
static int after_unauthorized(struct call_st *c)
{
	gh_rest *r = c->r;
	const char *date = gh_rest_last_header(r, "date");

	if (r->inst == 0 && !r->fixed_token && !c->skew_fixed && date &&
	    is_skew_rejection(c->resp)) {
		time_t t = curl_getdate(date, NULL);

		c->skew_fixed = true;
		if (t > 0) {
			ap_warn("GitHub rejected the App JWT for clock skew; re-signing with the "
				"server's time");
			if (r->creds->set_server_time)
				r->creds->set_server_time(r->creds->ud, t);
			return CALL_AGAIN;
		}
	}
	if (r->inst != 0 && !r->fixed_token) {
		if (c->new_token && r->creds->token_age &&
		    r->creds->token_age(r->creds->ud, r->inst) < NEW_TOKEN_GRACE_S) {
			ap_sleep_ms(1000);
			return CALL_AGAIN;
		}
		if (!c->token_refreshed) {
			c->token_refreshed = true;
			if (r->creds->invalidate)
				r->creds->invalidate(r->creds->ud, r->inst);
			return CALL_AGAIN;
		}
	}
	return http_error(r, AP_EDENIED, c->method, c->path, c->resp);
}

/* HTTP 403/429: a rate limit holds back every client of the installation until it lifts
 * (the wait happens at the top of the loop); a plain 403 is a refusal. */
static int after_rate_limited(struct call_st *c)
{
	gh_rest *r = c->r;
	int64_t wait = rate_limit_wait(r, c->st, c->resp);

	if (wait < 0)
		return http_error(r, AP_EDENIED, c->method, c->path, c->resp);
	block_until(c->st, ap_wall_ms() + wait);
	if (c->tries >= r->retries || ap_mono_ms() + wait >= c->deadline) {
		r->retry_at = (blocked_until(c->st) + 999) / 1000;
		return http_error(r, AP_ERATELIMIT, c->method, c->path, c->resp);
	}
	c->tries++;
	ap_warn("GitHub %s %s: rate limited (HTTP %ld); waiting %lld ms", c->method, c->path,
		r->status, (long long)wait);
	return CALL_AGAIN;
}

/* What the answer's status means: 0 (2xx), CALL_AGAIN, or the error. */
static int judge_status(struct call_st *c)
{
	long status = c->r->status;

	if (status >= 200 && status < 300) {
		note_success(c->r, c->st);
		return 0;
	}
	if (status >= 500)
		return after_server_error(c);
	if (status == 401)
		return after_unauthorized(c);
	if (status == 403 || status == 429)
		return after_rate_limited(c);
	return http_error(c->r, status == 404 ? AP_ENOTFOUND : AP_EHTTP, c->method, c->path,
			  c->resp);
}

/* Before an attempt: the installation's write pacing, then the auth header (a token minted
 * if needed). 0, or the error that ends the call (never retried here). */
static int before_attempt(struct call_st *c, struct inst_state *slot, ap_buf *auth, int64_t left)
{
	gh_rest *r = c->r;
	int rc;

	if (slot) {
		int64_t wait = write_wait_ms(r, slot);

		ap_sleep_ms(wait > left ? left : wait);
	}
	ap_buf_reset(auth);
	rc = auth_header(r, auth, &c->new_token);
	if (rc == AP_ERATELIMIT && !r->fixed_token) {
		/* Minting the token hit the App's (JWT) limit: hand back its time. */
		struct inst_state *app_st = state_for(0);

		r->retry_at = app_st ? (blocked_until(app_st) + 999) / 1000 : 0;
	}
	return rc;
}

/* The request loop: retries, rate limits, token refresh and clock skew. once: a POST that must
 * not be repeated once GitHub may have applied it (see rest.h). */
static int call(gh_rest *r, const char *method, const char *path, const cJSON *body, bool once,
		ap_buf *resp)
{
	struct call_st c = {.r = r, .method = method, .path = path, .once = once, .resp = resp};
	ap_buf url = AP_BUF_INIT(8192), auth = AP_BUF_INIT(8192);
	struct inst_state *slot = NULL;
	char *payload = NULL;
	int64_t left;
	int rc;

	c.deadline = ap_mono_ms() + r->deadline_s * 1000;
	r->retry_at = 0;
	r->maybe_applied = false;
	c.st = state_for(r->fixed_token ? -1 : r->inst);
	if (!c.st)
		return ap_error_set(AP_ENOMEM, "out of memory");
	if ((rc = build_url(r, path, &url)))
		goto out;
	if (body && !(payload = cJSON_PrintUnformatted(body))) {
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto out;
	}
	/* Writes of one installation go one at a time, paced (write_wait_ms). */
	if (is_write(method) && (r->inst != 0 || r->fixed_token)) {
		slot = c.st;
		pthread_mutex_lock(&slot->write_lock);
	}
	do {
		left = c.deadline - ap_mono_ms();
		if (left <= 0) {
			rc = ap_error_set(AP_ETIMEOUT, "GitHub %s %s: deadline of %llds passed",
					  method, path, (long long)r->deadline_s);
			break;
		}
		if ((rc = hold_for_rate_limit(&c, left)))
			continue;
		if ((rc = before_attempt(&c, slot, &auth, left)))
			break;
		rc = attempt(r, method, ap_buf_str(&url), payload, ap_buf_str(&auth),
			     c.deadline - ap_mono_ms() > 0 ? c.deadline - ap_mono_ms() : 1, once,
			     resp);
		if (slot)
			slot->last_write_ms = ap_mono_ms();
		if (rc == AP_EUNAVAIL || rc == AP_ETIMEOUT)
			rc = after_network_error(&c, rc);
		else if (rc == 0)
			rc = judge_status(&c);
	} while (rc == CALL_AGAIN);
	if (slot)
		pthread_mutex_unlock(&slot->write_lock);
out:
	cJSON_free(payload);
	if (auth.data)
		memset(auth.data, 0, auth.len);
	ap_buf_release(&auth);
	ap_buf_release(&url);
	return rc;
}

static int parse_body(const char *method, const char *path, ap_buf *resp, cJSON **out)
{
	const char *p = resp->data;
	size_t n = resp->len;

	*out = NULL;
	while (n && isspace((unsigned char)*p)) {
		p++;
		n--;
	}
	if (!n)
		return 0;
	*out = cJSON_ParseWithLength(p, n);
	if (!*out)
		return ap_error_set(AP_EINVAL, "GitHub %s %s: the response is not JSON", method,
				    path);
	return 0;
}

static int call_parse(gh_rest *r, const char *method, const char *path, const cJSON *body,
		      bool once, cJSON **out)
{
	ap_buf resp = AP_BUF_INIT((size_t)r->max_resp);
	int rc;

	if (out)
		*out = NULL;
	rc = call(r, method, path, body, once, &resp);
	if (!rc && out)
		rc = parse_body(method, path, &resp, out);
	ap_buf_release(&resp);
	return rc;
}

int gh_rest_call(gh_rest *r, const char *method, const char *path, const cJSON *body, cJSON **out)
{
	return call_parse(r, method, path, body, strcmp(method, "POST") == 0, out);
}

int gh_rest_call_idempotent(gh_rest *r, const char *method, const char *path, const cJSON *body,
			    cJSON **out)
{
	return call_parse(r, method, path, body, false, out);
}

/* The URL of rel="next" in a Link header (malloc'd), or NULL. */
static char *link_next(const char *link)
{
	const char *p = link;

	while (p && *p) {
		const char *lt = strchr(p, '<'), *gt, *end;

		if (!lt)
			break;
		gt = strchr(lt, '>');
		if (!gt)
			break;
		end = strchr(gt, ',');
		if (!end)
			end = gt + strlen(gt);
		for (const char *q = gt; q + 10 <= end; q++)
			if (strncmp(q, "rel=\"next\"", 10) == 0)
				return strndup(lt + 1, (size_t)(gt - lt - 1));
		p = *end ? end + 1 : end;
	}
	return NULL;
}

int gh_rest_get_all(gh_rest *r, const char *path, size_t max_items, cJSON **out)
{
	ap_buf first = AP_BUF_INIT(8192);
	cJSON *all, *page = NULL, *it;
	char *next = NULL;
	size_t count = 0;
	int rc;

	*out = NULL;
	if (!max_items)
		max_items = 10000;
	all = cJSON_CreateArray();
	if (!all)
		return ap_error_set(AP_ENOMEM, "out of memory");
	rc = ap_buf_addf(&first, "%s%s", path,
			 strstr(path, "per_page=") ? ""
			 : strchr(path, '?')	   ? "&per_page=100"
						   : "?per_page=100");
	if (rc)
		goto out;
	next = strdup(ap_buf_str(&first));
	if (!next)
		rc = ap_error_set(AP_ENOMEM, "out of memory");
	while (next && !rc) {
		const char *link;

		rc = gh_rest_call(r, "GET", next, NULL, &page);
		if (rc)
			break;
		if (page && !cJSON_IsArray(page)) {
			rc = ap_error_set(AP_EINVAL, "GitHub GET %s: expected a list", path);
			break;
		}
		while (page && (it = cJSON_DetachItemFromArray(page, 0)) != NULL) {
			if (++count > max_items) {
				cJSON_Delete(it);
				rc = ap_error_set(AP_ETOOBIG, "GitHub GET %s: more than %zu items",
						  path, max_items);
				break;
			}
			cJSON_AddItemToArray(all, it);
		}
		cJSON_Delete(page);
		page = NULL;
		free(next);
		link = gh_rest_last_header(r, "link");
		next = link ? link_next(link) : NULL;
	}
out:
	free(next);
	ap_buf_release(&first);
	if (rc) {
		cJSON_Delete(all);
		return rc;
	}
	*out = all;
	return 0;
}

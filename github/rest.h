/* SPDX-License-Identifier: MIT */
/* github/rest.h - a well-behaved GitHub REST client on libcurl.
 *
 * Every request: base GITHUB_API_URL, Accept: application/vnd.github+json,
 * X-GitHub-Api-Version: 2022-11-28, a User-Agent, Authorization with the installation token
 * (or the App JWT for app-level calls). Responses are read into a capped buffer
 * (AUTOPATCH_GH_MAX_RESPONSE, default 16 MiB) and parsed with cJSON.
 *
 * Retries: 5xx and network errors with exponential backoff and jitter (AUTOPATCH_GH_RETRIES,
 * default 5; AUTOPATCH_GH_BACKOFF_MS, default 1000) — except for a POST made with
 * gh_rest_call(): creating a comment or a pull request twice makes two, and a 5xx or a
 * connection that failed after the request was sent may mean GitHub applied it. Such a POST is
 * not repeated: the call fails (a 5xx as AP_EUNAVAIL, a network failure as AP_EUNAVAIL or
 * AP_ETIMEOUT) and gh_rest_maybe_applied() is true; the caller looks the object up (by its
 * marker, its head branch) before posting again. A POST whose connection failed before
 * anything was sent is retried like any call, and so is one made with
 * gh_rest_call_idempotent() (a token, labels, a reaction). Primary rate limit (403/429 with
 * x-ratelimit-remaining: 0) waits until x-ratelimit-reset; secondary limits (403/429 with
 * retry-after, or a "secondary rate limit" message) wait retry-after, else
 * AUTOPATCH_GH_SECONDARY_WAIT_S (default 60) seconds, doubling with each secondary limit in a
 * row for the installation until a request succeeds. Rate-limit state is process-wide per
 * installation: `x-ratelimit-remaining: 0` on any answer (2xx included) or a 403/429 limit
 * holds back the next request of every client of that installation until the limit lifts.
 * A wait that would pass the call's deadline is not slept: the call fails at once with
 * AP_ERATELIMIT and gh_rest_retry_after() says when to try again. A 401 on a brand-new
 * installation token is retried for up to 5 s; a 401 on an older one mints a new token once;
 * a JWT rejected for clock skew is re-signed with the offset from the Date header.
 *
 * Writes (POST/PATCH/PUT/DELETE) to one installation are serialized process-wide and spaced by
 * AUTOPATCH_GH_WRITE_SPACING_MS (default 1000); with a shared pacer (gh_rest_set_pacer:
 * replicas on one database) the spacing holds across every process writing as the
 * installation. Every call has a deadline
 * (AUTOPATCH_GH_DEADLINE_S, default 120) covering all its retries and waits.
 *
 * Errors carry GitHub's `message` and `errors` in the error text:
 * 404 → AP_ENOTFOUND, 401/403 → AP_EDENIED, other 4xx and 5xx after the retries → AP_EHTTP
 * (a 5xx to a POST that is not repeated → AP_EUNAVAIL, see above), rate limit outlasting
 * the retries or the deadline → AP_ERATELIMIT, network failure → AP_EUNAVAIL, deadline →
 * AP_ETIMEOUT. All error text is redacted.
 */
#ifndef AP_GH_REST_H
#define AP_GH_REST_H

#include "common/config.h"
#include "github/creds.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct gh_rest gh_rest;

/* A client acting as installation_id with creds (gh_app_creds() for the App);
 * installation_id 0 means "as the App itself" (JWT auth, for /app endpoints). creds is
 * borrowed and must outlive the client. A client is
 * used by one thread at a time; create one per worker/job. *out is freed with
 * gh_rest_free(). */
int gh_rest_new(gh_rest **out, const ap_config *cfg, const gh_creds *creds,
		int64_t installation_id);

/* A client that sends a fixed token (tests, `doctor` with a personal token). token is copied. */
int gh_rest_new_token(gh_rest **out, const ap_config *cfg, const char *token);

/* A client that sends no Authorization header: for the endpoints that authenticate by what
 * is in the request (POST /app-manifests/{code}/conversions). */
int gh_rest_new_anon(gh_rest **out, const ap_config *cfg);

/* Accepts NULL. */
void gh_rest_free(gh_rest *r);

/* One request. method is "GET", "POST", "PATCH", "PUT" or "DELETE"; path starts with "/"
 * (query string allowed) or is an absolute URL under the API base (a Link). body may be NULL.
 * On 2xx returns 0 and, if out is not NULL, *out is the parsed body (NULL for an empty body
 * or 204); the caller frees it with cJSON_Delete(). */
int gh_rest_call(gh_rest *r, const char *method, const char *path, const cJSON *body, cJSON **out);

/* gh_rest_call() for a POST that GitHub applies at most once in effect however often it is
 * sent (minting an installation token, adding labels, adding a reaction): retried after a 5xx
 * or a network failure like the other methods. */
int gh_rest_call_idempotent(gh_rest *r, const char *method, const char *path, const cJSON *body,
			    cJSON **out);

/* After a failed call: true when it was a POST that GitHub may have applied (it answered 5xx,
 * or the connection failed after the request was sent) and that the client therefore did not
 * repeat. Look the object up before posting it again. False after any other outcome. */
bool gh_rest_maybe_applied(const gh_rest *r);

/* GET path and every following page (Link rel="next"), concatenating the arrays into one
 * array in *out (caller frees). Stops with AP_ETOOBIG past max_items (0 = 10000). */
int gh_rest_get_all(gh_rest *r, const char *path, size_t max_items, cJSON **out);

/* After a call that returned AP_ERATELIMIT: the Unix time (seconds, wall clock) from which
 * the installation may call again (the rate limit's reset, retry-after, or the secondary-limit
 * wait). Callers re-queue their work for then rather than fail it. 0 after any other
 * outcome. */
int64_t gh_rest_retry_after(const gh_rest *r);

/* Write pacing shared by several processes (the replicas of a shared queue): reserve takes
 * the installation's next write slot (slots spacing_ms apart, all processes together) and sets
 * *wait_ms to how long to sleep before the write. Thread-safe. */
typedef struct gh_write_pacer {
	int (*reserve)(void *ud, int64_t installation, int64_t spacing_ms, int64_t *wait_ms);
	void *ud;
} gh_write_pacer;

/* Use p (borrowed; it must outlive every client) for the spacing of writes instead of the
 * in-process clock; NULL goes back to the in-process spacing. Call at start-up, before
 * clients are made. A reserve that fails falls back to the in-process spacing for that write. */
void gh_rest_set_pacer(const gh_write_pacer *p);

/* Asked on the calling thread right before each write (POST/PATCH/PUT/DELETE) of this client
 * goes on the wire: after any pacing wait and the token, with the connection up and nothing
 * sent. Non-zero refuses it: nothing is sent, the call fails with that code (not retried) and
 * the guard's error text. The job's lease fencing, so that a run frozen or delayed between
 * its own fence check and the write sends nothing once another run owns the job. ud is
 * borrowed; fn NULL removes the guard. */
typedef int (*gh_write_guard_fn)(void *ud);
void gh_rest_set_write_guard(gh_rest *r, gh_write_guard_fn fn, void *ud);

/* For tests only: how many HTTP attempts this client has made (retries included). */
int64_t gh_rest__attempts(const gh_rest *r);

#endif

/* SPDX-License-Identifier: MIT */
/* server/console.c - the job console on the admin listener (see console.h); the App
 * registration and the sign-in are server/registration.c and server/signin.c. */
#include "server/console.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/redact.h"
#include "server/assets.h"
#include "server/form.h"
#include "server/registration.h"
#include "server/session.h"
#include "server/signin.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PAGE_CAP       (8 * 1024 * 1024)
#define LIST_JOBS      200
#define TRAJ_CAP       (64 * 1024 * 1024)
#define SESSIONS_MAX   1024
#define SSE_TICK_MS    250
#define SSE_PING_MS    15000
#define SSE_LIFE_MS    (30 * 60 * 1000)
#define SSE_BATCH      100
#define URL_MAX	       2048
#define COOKIE_SESSION "ap_session"

/* One live-update stream (GET /jobs/N/events). */
struct sse {
	console *c;
	queue *q;
	struct MHD_Connection *conn;
	int64_t job, last, started, pinged;
	ap_buf pending;
	size_t off;
	bool done, parked;
	struct sse *next; /* in c->parked, under c->sse_lock */
};

struct console {
	console_config cfg;
	char *strs[9]; /* the copies cfg's strings point to */
	reg *reg;
	signin *signin;
	sess_store *sessions;
	pthread_mutex_t sse_lock;
	struct sse *parked;
	atomic_int streams;
	atomic_bool stopping;
	pthread_t ticker;
	bool ticker_started;
};

/* What one request is answered with. */
struct page {
	int status;
	const char *type;
	ap_buf body;
	char cookies[3][512];
	int ncookies;
	char location[URL_MAX];
	const char *disposition;
};

/* Who is asking (filled by who()). */
struct viewer {
	bool known;
	char sid[SESS_HEX + 1];
	sess_info info;
};

/* --- HTML helpers ------------------------------------------------------------------------ */

static void esc(ap_buf *b, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '<':
			ap_buf_adds(b, "&lt;");
			break;
		case '>':
			ap_buf_adds(b, "&gt;");
			break;
		case '&':
			ap_buf_adds(b, "&amp;");
			break;
		case '"':
			ap_buf_adds(b, "&quot;");
			break;
		case '\'':
			ap_buf_adds(b, "&#39;");
			break;
		default:
			ap_buf_add(b, s, 1);
		}
	}
}

static void escf(ap_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void escf(ap_buf *b, const char *fmt, ...)
{
	char tmp[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	esc(b, tmp);
}

static const char *jstr(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsString(v) ? v->valuestring : "";
}

static double jnum(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static bool jhas(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return v && !cJSON_IsNull(v);
}

static void page_init(struct page *p, int status)
{
	memset(p, 0, sizeof(*p));
	p->status = status;
	p->type = "text/html; charset=utf-8";
	ap_buf_init(&p->body, PAGE_CAP);
}

static void head(struct page *p, const char *title, const struct viewer *v)
{
	ap_buf_adds(&p->body, "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
			      "<meta name=\"viewport\" content=\"width=device-width\"><title>");
	esc(&p->body, title);
	ap_buf_adds(&p->body, " - autopatch</title><link rel=\"stylesheet\" "
			      "href=\"/assets/console.css\"></head><body><header><p><a "
			      "href=\"/\">autopatch</a></p>");
	if (v && v->known && strcmp(v->info.login, "operator") != 0) {
		ap_buf_adds(&p->body, "<div class=\"who\">Signed in as <strong>");
		esc(&p->body, v->info.login);
		ap_buf_adds(&p->body, "</strong> <form class=\"inline\" method=\"post\" "
				      "action=\"/logout\"><input type=\"hidden\" name=\"csrf\" "
				      "value=\"");
		esc(&p->body, v->info.csrf);
		ap_buf_adds(&p->body, "\"><button type=\"submit\">Sign out</button></form></div>");
	}
	ap_buf_adds(&p->body, "</header><main>");
}

static void foot(struct page *p)
{
	ap_buf_adds(
	    &p->body,
	    "</main><script src=\"/assets/console-live.js\" defer></script></body></html>\n");
}

/* A whole page that says what went wrong and what to do. */
static void problem(struct page *p, int status, const char *title, const char *what,
		    const char *todo, const struct viewer *v)
{
	page_init(p, status);
	head(p, title, v);
	ap_buf_adds(&p->body, "<h1>");
	esc(&p->body, title);
	ap_buf_adds(&p->body, "</h1><div class=\"problem\" role=\"alert\"><p>");
	esc(&p->body, what);
	ap_buf_adds(&p->body, "</p><p><strong>What to do:</strong> ");
	esc(&p->body, todo);
	ap_buf_adds(&p->body, "</p></div>");
	foot(p);
}

static void redirect(struct page *p, const char *location)
{
	page_init(p, 303);
	snprintf(p->location, sizeof(p->location), "%s", location);
	ap_buf_adds(&p->body, "<!doctype html><title>See other</title><a href=\"");
	esc(&p->body, location);
	ap_buf_adds(&p->body, "\">continue</a>\n");
}

static void add_cookie(struct page *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add_cookie(struct page *p, const char *fmt, ...)
{
	va_list ap;

	if (p->ncookies >= 3)
		return;
	va_start(ap, fmt);
	vsnprintf(p->cookies[p->ncookies++], sizeof(p->cookies[0]), fmt, ap);
	va_end(ap);
}

static enum MHD_Result send_page(console *c, struct MHD_Connection *conn, struct page *p)
{
	struct MHD_Response *r;
	enum MHD_Result ret;
	char csp[1024];

	r = MHD_create_response_from_buffer(p->body.len, (void *)ap_buf_str(&p->body),
					    MHD_RESPMEM_MUST_COPY);
	if (!r) {
		ap_buf_release(&p->body);
		return MHD_NO;
	}
	/* The registration form posts to GitHub; nothing else leaves this origin. */
	snprintf(csp, sizeof(csp),
		 "default-src 'self'; form-action 'self' %s; frame-ancestors 'none'; "
		 "base-uri 'none'",
		 c->cfg.web_url);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, p->type);
	MHD_add_response_header(r, "Content-Security-Policy", csp);
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	for (int i = 0; i < p->ncookies; i++)
		MHD_add_response_header(r, MHD_HTTP_HEADER_SET_COOKIE, p->cookies[i]);
	if (p->location[0])
		MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, p->location);
	if (p->disposition)
		MHD_add_response_header(r, "Content-Disposition", p->disposition);
	if (p->status == 401)
		MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					"GitHub-OAuth realm=\"autopatch console\"");
	ret = MHD_queue_response(conn, (unsigned)p->status, r);
	MHD_destroy_response(r);
	ap_buf_release(&p->body);
	return ret;
}

static const char *arg(struct MHD_Connection *conn, const char *name)
{
	return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, name);
}

/* --- who is asking ----------------------------------------------------------------------- */

/* The session the request carries; without sign-in, an operator session is made on the first
 * visit (its cookie goes out with p). */
static void who(console *c, struct MHD_Connection *conn, struct page *p, struct viewer *v)
{
	const char *hdr = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Cookie");
	int64_t now = ap_wall_ms();

	memset(v, 0, sizeof(*v));
	if (form_cookie(hdr, COOKIE_SESSION, v->sid, sizeof(v->sid)) == 0 &&
	    sess_get(c->sessions, v->sid, now, &v->info) == 0) {
		v->known = true;
		return;
	}
	v->sid[0] = '\0';
	if (c->cfg.sign_in)
		return;
	if (sess_create(c->sessions, "operator", NULL, true, c->cfg.session_ms, now, v->sid) ||
	    sess_get(c->sessions, v->sid, now, &v->info)) {
		v->sid[0] = '\0';
		return;
	}
	v->known = true;
	add_cookie(p, COOKIE_SESSION "=%s; Path=/; Max-Age=%lld; HttpOnly; Secure; SameSite=Lax",
		   v->sid, (long long)(c->cfg.session_ms / 1000));
}

/* Whether v may see the jobs of repo: the operator sees all; a user those they can push to
 * (GitHub's answer, cached in the session). A failed question is "no", and not cached. */
static bool can_see(console *c, const struct viewer *v, const char *repo)
{
	int64_t now = ap_wall_ms();
	char *token = NULL;
	bool yes = false;

	if (!v->known)
		return false;
	if (v->info.operator)
		return true;
	if (sess_perm_get(c->sessions, v->sid, repo, now, &yes) == 0)
		return yes;
	if (sess_token(c->sessions, v->sid, now, &token) != 0)
		return false;
	if (c->cfg.gh.can_push(c->cfg.gh.ud, token, repo, &yes) == 0)
		sess_perm_put(c->sessions, v->sid, repo, yes, now);
	else
		ap_warn("console: cannot ask GitHub whether %s can push to %s: %s", v->info.login,
			repo, ap_error_last());
	OPENSSL_cleanse(token, strlen(token));
	free(token);
	return yes;
}

static void need_sign_in(console *c, struct page *p)
{
	page_init(p, 401);
	head(p, "Sign in", NULL);
	ap_buf_adds(&p->body, "<h1>Sign in</h1><p>This console shows the jobs of the "
			      "repositories you can push to.</p>");
	ap_buf_adds(&p->body, "<p><a class=\"button\" href=\"/login\">Sign in with GitHub</a></p>");
	foot(p);
	(void)c;
}

bool console_may_read_metrics(console *c, struct MHD_Connection *conn)
{
	const char *hdr = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Cookie");
	char sid[SESS_HEX + 1];
	sess_info info;

	if (!c->cfg.sign_in)
		return true;
	return form_cookie(hdr, COOKIE_SESSION, sid, sizeof(sid)) == 0 &&
	       sess_get(c->sessions, sid, ap_wall_ms(), &info) == 0 && info.operator;
}

/* --- the job list ------------------------------------------------------------------------ */

static void age(ap_buf *b, int64_t ms)
{
	int64_t s = ms / 1000;

	if (s < 60)
		ap_buf_addf(b, "%llds", (long long)s);
	else if (s < 3600)
		ap_buf_addf(b, "%lldm", (long long)(s / 60));
	else if (s < 86400)
		ap_buf_addf(b, "%lldh %lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
	else
		ap_buf_addf(b, "%lldd", (long long)(s / 86400));
}

static const char *states[] = {"queued", "running", "succeeded", "failed", "cancelled"};

static void job_list(console *c, struct MHD_Connection *conn, queue *q, struct page *p,
		     const struct viewer *v)
{
	const char *want_state = arg(conn, "state"), *want_repo = arg(conn, "repo");
	cJSON *jobs = NULL, *j;
	int64_t now = ap_wall_ms();
	q_stats st;
	int shown = 0;

	if (q_get_stats(q, &st) || q_jobs_json(q, 0, LIST_JOBS, &jobs)) {
		problem(p, 500, "Database unavailable", ap_error_last(),
			"check AUTOPATCH_DB and the server's log, then reload", v);
		return;
	}
	page_init(p, 200);
	head(p, "Jobs", v);
	ap_buf_adds(&p->body, "<h1>Jobs</h1>");
	if (v->info.operator)
		ap_buf_addf(&p->body,
			    "<p>queued %lld &middot; running %lld &middot; succeeded %lld "
			    "&middot; failed %lld &middot; cancelled %lld</p>",
			    (long long)st.queued, (long long)st.running, (long long)st.succeeded,
			    (long long)st.failed, (long long)st.cancelled);
	ap_buf_adds(&p->body, "<form method=\"get\" action=\"/\" aria-label=\"Filter jobs\">"
			      "<label for=\"f-state\">State</label> <select id=\"f-state\" "
			      "name=\"state\"><option value=\"\">any</option>");
	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
		ap_buf_addf(&p->body, "<option%s>%s</option>",
			    want_state && strcmp(want_state, states[i]) == 0 ? " selected" : "",
			    states[i]);
	ap_buf_adds(&p->body, "</select> <label for=\"f-repo\">Repository</label> <input "
			      "id=\"f-repo\" name=\"repo\" placeholder=\"owner/name\" value=\"");
	esc(&p->body, want_repo);
	ap_buf_adds(&p->body, "\"> <button type=\"submit\">Filter</button></form>");
	ap_buf_adds(&p->body, "<table><caption class=\"visually-hidden\">Jobs, newest "
			      "first</caption><thead><tr><th scope=\"col\">Job</th><th "
			      "scope=\"col\">State</th><th scope=\"col\">Repository</th><th "
			      "scope=\"col\">Issue</th><th scope=\"col\">Stage</th><th "
			      "scope=\"col\">Age</th><th scope=\"col\">Tokens</th><th "
			      "scope=\"col\">Cost</th><th scope=\"col\">Result or error</th></tr>"
			      "</thead><tbody>");
	cJSON_ArrayForEach(j, jobs)
	{
		const char *repo = jstr(j, "repo"), *state = jstr(j, "state");
		const char *res = *jstr(j, "result") ? jstr(j, "result") : jstr(j, "error");

		if (want_state && *want_state && strcmp(want_state, state) != 0)
			continue;
		if (want_repo && *want_repo && strcmp(want_repo, repo) != 0)
			continue;
		if (!can_see(c, v, repo))
			continue;
		shown++;
		ap_buf_addf(&p->body, "<tr><td><a href=\"/jobs/%.0f\">#%.0f</a></td>",
			    jnum(j, "id"), jnum(j, "id"));
		ap_buf_addf(&p->body, "<td class=\"state-%s\">", state);
		esc(&p->body, state);
		ap_buf_adds(&p->body, "</td><td>");
		esc(&p->body, repo);
		ap_buf_addf(&p->body, "</td><td>%.0f</td><td>", jnum(j, "issue"));
		esc(&p->body, jstr(j, "stage"));
		ap_buf_adds(&p->body, "</td><td>");
		age(&p->body, now - (int64_t)jnum(j, "created_ms"));
		ap_buf_adds(&p->body, "</td><td>");
		if (jhas(j, "tokens"))
			ap_buf_addf(&p->body, "%.0f", jnum(j, "tokens"));
		ap_buf_adds(&p->body, "</td><td>");
		esc(&p->body, jstr(j, "cost"));
		ap_buf_adds(&p->body, "</td><td>");
		esc(&p->body, res);
		ap_buf_adds(&p->body, "</td></tr>");
	}
	ap_buf_adds(&p->body, "</tbody></table>");
	if (!shown)
		ap_buf_adds(&p->body, "<p>No jobs to show.</p>");
	foot(p);
	cJSON_Delete(jobs);
}

/* --- one job ----------------------------------------------------------------------------- */

static void pre(ap_buf *b, const char *text)
{
	ap_buf_adds(b, "<pre>");
	esc(b, text);
	ap_buf_adds(b, "</pre>");
}

static void button(ap_buf *b, int64_t id, const char *what, const char *label,
		   const struct viewer *v)
{
	ap_buf_addf(b,
		    "<form class=\"inline\" method=\"post\" action=\"/jobs/%lld/%s\"><input "
		    "type=\"hidden\" name=\"csrf\" value=\"",
		    (long long)id, what);
	esc(b, v->info.csrf);
	ap_buf_addf(b, "\"><button type=\"submit\">%s</button></form> ", label);
}

/* The sections built from the trajectory's lines. */
static void trajectory_sections(ap_buf *b, const char *path, int64_t id)
{
	ap_buf text = AP_BUF_INIT(TRAJ_CAP);
	ap_buf calls = AP_BUF_INIT(PAGE_CAP), tools = AP_BUF_INIT(PAGE_CAP),
	       cmds = AP_BUF_INIT(PAGE_CAP), tests = AP_BUF_INIT(PAGE_CAP);
	char *line, *next;
	cJSON *end = NULL, *verdict = NULL;
	int ncalls = 0, ntools = 0, ncmds = 0, ntests = 0;

	if (fs_read_file(&text, path, 0)) {
		ap_buf_adds(b, "<h2>Trajectory</h2><p>The trajectory cannot be read: ");
		esc(b, ap_error_last());
		ap_buf_adds(b, "</p>");
		ap_error_clear();
		goto out;
	}
	for (line = text.data; line && *line; line = next) {
		cJSON *e;
		const char *type;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		e = cJSON_Parse(line);
		if (!e)
			continue;
		type = jstr(e, "type");
		if (strcmp(type, "llm_usage") == 0) {
			ncalls++;
			ap_buf_addf(&calls,
				    "<tr><td>%d</td><td>%.0f</td><td>%.0f</td><td>%.0f ms</td>"
				    "<td>%.0f</td><td>",
				    ncalls, jnum(e, "tokens_in"), jnum(e, "tokens_out"),
				    jnum(e, "millis"), jnum(e, "attempts"));
			esc(&calls, jstr(e, "stop"));
			ap_buf_adds(&calls, "</td></tr>");
		} else if (strcmp(type, "tool_result") == 0) {
			ntools++;
			ap_buf_addf(&tools, "<details><summary>%d. <code>", ntools);
			esc(&tools, jstr(e, "name"));
			ap_buf_addf(&tools, "</code> (%.0f ms)%s</summary><h3>Arguments</h3>",
				    jnum(e, "millis"),
				    cJSON_IsTrue(cJSON_GetObjectItem(e, "is_error")) ? ", error"
										     : "");
			pre(&tools, jstr(e, "arguments"));
			ap_buf_adds(&tools, "<h3>Result (redacted)</h3>");
			pre(&tools, jstr(e, "result"));
			ap_buf_adds(&tools, "</details>");
		} else if (strcmp(type, "tester_run") == 0 || strcmp(type, "sandbox_exec") == 0) {
			ncmds++;
			ap_buf_addf(&cmds, "<details><summary>%d. <code>", ncmds);
			esc(&cmds, jstr(e, "command"));
			ap_buf_addf(
			    &cmds, "</code>: exit %.0f%s, %.0f ms</summary><p>in <code>",
			    jnum(e, "exit"),
			    cJSON_IsTrue(cJSON_GetObjectItem(e, "timed_out")) ? " (timed out)" : "",
			    jnum(e, "millis"));
			esc(&cmds, jstr(e, "dir"));
			ap_buf_adds(&cmds, "</code></p><h3>Output</h3>");
			pre(&cmds, jstr(e, "stdout"));
			if (*jstr(e, "stderr")) {
				ap_buf_adds(&cmds, "<h3>Errors</h3>");
				pre(&cmds, jstr(e, "stderr"));
			}
			ap_buf_adds(&cmds, "</details>");
		} else if (strcmp(type, "tester_tests") == 0) {
			const cJSON *t;

			ntests++;
			ap_buf_addf(&tests, "<h3>Run %d, in <code>", ntests);
			esc(&tests, jstr(e, "dir"));
			ap_buf_adds(&tests, "</code></h3><table class=\"tests\"><thead><tr><th "
					    "scope=\"col\">Test</th><th scope=\"col\">Result</th>"
					    "</tr></thead><tbody>");
			cJSON_ArrayForEach(t, cJSON_GetObjectItem(e, "tests"))
			{
				ap_buf_adds(&tests, "<tr><td>");
				esc(&tests, jstr(t, "name"));
				ap_buf_addf(&tests, "</td><td class=\"%s\">",
					    strcmp(jstr(t, "status"), "passed") == 0 ? "passed"
										     : "failed");
				esc(&tests, jstr(t, "status"));
				ap_buf_adds(&tests, "</td></tr>");
			}
			ap_buf_adds(&tests, "</tbody></table>");
		} else if (strcmp(type, "verdict") == 0) {
			cJSON_Delete(verdict);
			verdict = e;
			continue;
		} else if (strcmp(type, "end") == 0) {
			cJSON_Delete(end);
			end = e;
			continue;
		}
		cJSON_Delete(e);
	}
	ap_buf_adds(b, "<h2>Model calls</h2>");
	if (ncalls)
		ap_buf_addf(b,
			    "<table><thead><tr><th scope=\"col\">Call</th><th scope=\"col\">Tokens "
			    "in</th><th scope=\"col\">Tokens out</th><th scope=\"col\">Latency</th>"
			    "<th scope=\"col\">Attempts</th><th scope=\"col\">Stop</th></tr>"
			    "</thead><tbody>%s</tbody></table>",
			    ap_buf_str(&calls));
	else
		ap_buf_adds(b, "<p>None.</p>");
	ap_buf_adds(b, "<h2>Tool calls</h2>");
	ap_buf_adds(b, ntools ? ap_buf_str(&tools) : "<p>None.</p>");
	ap_buf_adds(b, "<h2>Sandbox commands</h2>");
	ap_buf_adds(b, ncmds ? ap_buf_str(&cmds) : "<p>None.</p>");
	ap_buf_adds(b, "<h2>Tester runs</h2>");
	ap_buf_adds(b, ntests ? ap_buf_str(&tests) : "<p>No per-test results were recorded.</p>");
	if (verdict) {
		ap_buf_adds(b, "<h2>Verdict</h2><p>");
		ap_buf_adds(b, cJSON_IsTrue(cJSON_GetObjectItem(verdict, "proven"))
				   ? "<strong>Proven</strong>: "
				   : "<strong>Not proven</strong>: ");
		esc(b, jstr(verdict, "reason"));
		ap_buf_adds(b, "</p>");
	}
	ap_buf_adds(b, "<h2>Diff</h2>");
	if (end && *jstr(end, "diff"))
		pre(b, jstr(end, "diff"));
	else
		ap_buf_adds(b, "<p>No diff (yet).</p>");
	ap_buf_adds(b, "<h2>Evidence</h2>");
	if (end && *jstr(end, "evidence"))
		pre(b, jstr(end, "evidence"));
	else
		ap_buf_adds(b, "<p>No evidence (yet): nothing is proven.</p>");
	ap_buf_addf(b,
		    "<p><a href=\"/jobs/%lld/trajectory\" download>Download the trajectory "
		    "(JSONL)</a></p>",
		    (long long)id);
out:
	cJSON_Delete(end);
	cJSON_Delete(verdict);
	ap_buf_release(&text);
	ap_buf_release(&calls);
	ap_buf_release(&tools);
	ap_buf_release(&cmds);
	ap_buf_release(&tests);
}

/* The job id in /jobs/N[/rest]: N > 0, and rest points at what follows N. */
static int64_t job_id(const char *url, const char **rest)
{
	char *end;
	long long id;

	if (strncmp(url, "/jobs/", 6) != 0 || url[6] < '1' || url[6] > '9')
		return 0;
	errno = 0;
	id = strtoll(url + 6, &end, 10);
	if (errno || id <= 0)
		return 0;
	*rest = end;
	return id;
}

/* The job, when v may see it; else a problem page is in p and NULL comes back. */
static cJSON *visible_job(console *c, queue *q, int64_t id, struct page *p, const struct viewer *v)
{
	cJSON *jobs = NULL, *j;

	if (q_jobs_json(q, id, 1, &jobs)) {
		problem(p, 500, "Database unavailable", ap_error_last(),
			"check AUTOPATCH_DB and the server's log, then reload", v);
		return NULL;
	}
	j = cJSON_DetachItemFromArray(jobs, 0);
	cJSON_Delete(jobs);
	if (!j) {
		problem(p, 404, "No such job", "There is no job with this number.",
			"go back to the job list", v);
		return NULL;
	}
	if (!can_see(c, v, jstr(j, "repo"))) {
		cJSON_Delete(j);
		problem(p, 403, "Not your job",
			"This job belongs to a repository you cannot push to.",
			"sign in as a user with push access, or ask the operator", v);
		return NULL;
	}
	return j;
}

static void job_page(console *c, queue *q, int64_t id, struct page *p, const struct viewer *v)
{
	cJSON *j = visible_job(c, q, id, p, v), *e;
	const char *state, *pr;
	char *traj = NULL;
	int64_t last = 0;
	bool live;

	if (!j)
		return;
	state = jstr(j, "state");
	live = strcmp(state, "queued") == 0 || strcmp(state, "running") == 0;
	pr = *jstr(j, "pr_url")				  ? jstr(j, "pr_url")
	     : strncmp(jstr(j, "result"), "http", 4) == 0 ? jstr(j, "result")
							  : "";
	page_init(p, 200);
	{
		char title[512];

		snprintf(title, sizeof(title), "Job %lld: %s#%.0f", (long long)id, jstr(j, "repo"),
			 jnum(j, "issue"));
		head(p, title, v);
		ap_buf_adds(&p->body, "<h1>");
		esc(&p->body, title);
		ap_buf_adds(&p->body, "</h1>");
	}
	ap_buf_addf(&p->body, "<dl><dt>State</dt><dd class=\"state-%s\" id=\"job-state\">", state);
	esc(&p->body, state);
	if (cJSON_IsTrue(cJSON_GetObjectItem(j, "cancel_requested")) && live)
		ap_buf_adds(&p->body, " (cancel requested)");
	ap_buf_adds(&p->body, "</dd><dt>Stage</dt><dd>");
	esc(&p->body, jstr(j, "stage"));
	ap_buf_adds(&p->body, "</dd><dt>Trigger</dt><dd>");
	esc(&p->body, jstr(j, "trigger"));
	ap_buf_addf(&p->body, "</dd><dt>Attempts</dt><dd>%.0f</dd><dt>Created</dt><dd>",
		    jnum(j, "attempts"));
	esc(&p->body, jstr(j, "created"));
	ap_buf_adds(&p->body, "</dd><dt>Updated</dt><dd>");
	esc(&p->body, jstr(j, "updated"));
	ap_buf_adds(&p->body, "</dd>");
	if (jhas(j, "tokens"))
		ap_buf_addf(&p->body, "<dt>Tokens</dt><dd>%.0f</dd>", jnum(j, "tokens"));
	if (*jstr(j, "cost")) {
		ap_buf_adds(&p->body, "<dt>Cost</dt><dd>");
		esc(&p->body, jstr(j, "cost"));
		ap_buf_adds(&p->body, "</dd>");
	}
	if (*pr) {
		ap_buf_adds(&p->body, "<dt>Pull request</dt><dd><a id=\"pr-link\" href=\"");
		esc(&p->body, pr);
		ap_buf_adds(&p->body, "\">");
		esc(&p->body, pr);
		ap_buf_adds(&p->body, "</a></dd>");
	}
	if (*jstr(j, "error")) {
		ap_buf_adds(&p->body, "<dt>Error</dt><dd>");
		esc(&p->body, jstr(j, "error"));
		ap_buf_adds(&p->body, "</dd>");
	}
	ap_buf_adds(&p->body, "</dl><p>");
	if (live)
		button(&p->body, id, "cancel", "Cancel this job", v);
	else if (strcmp(state, "failed") == 0 || strcmp(state, "cancelled") == 0)
		button(&p->body, id, "retry", "Retry this job", v);
	ap_buf_adds(&p->body, "</p><h2>Timeline</h2><p id=\"live-status\" aria-live=\"polite\">"
			      "</p><table><thead><tr><th scope=\"col\">Time</th><th "
			      "scope=\"col\">Stage</th><th scope=\"col\">Event</th></tr></thead>");
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "events")) last++;
	ap_buf_addf(&p->body, "<tbody id=\"events\" data-job=\"%lld\" data-live=\"%d\">",
		    (long long)id, live ? 1 : 0);
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "events"))
	{
		ap_buf_adds(&p->body, "<tr><td>");
		esc(&p->body, jstr(e, "time"));
		ap_buf_adds(&p->body, "</td><td>");
		esc(&p->body, jstr(e, "stage"));
		ap_buf_adds(&p->body, "</td><td>");
		esc(&p->body, jstr(e, "message"));
		ap_buf_adds(&p->body, "</td></tr>");
	}
	ap_buf_adds(&p->body, "</tbody></table>");
	if (q_state_get(q, id, "trajectory", &traj) == 0 && traj)
		trajectory_sections(&p->body, traj, id);
	else
		ap_buf_adds(&p->body, "<h2>Trajectory</h2><p>This job has no trajectory yet.</p>");
	free(traj);
	foot(p);
	cJSON_Delete(j);
}

/* --- live updates (Server-Sent Events) --------------------------------------------------- */

/* Park the stream until the ticker wakes it (its connection is suspended meanwhile). */
static void park(struct sse *s)
{
	console *c = s->c;

	pthread_mutex_lock(&c->sse_lock);
	MHD_suspend_connection(s->conn);
	s->parked = true;
	s->next = c->parked;
	c->parked = s;
	pthread_mutex_unlock(&c->sse_lock);
}

static void *ticker_main(void *arg)
{
	console *c = arg;

	for (;;) {
		struct timespec ts = {0, SSE_TICK_MS * 1000000L};
		bool quit;

		nanosleep(&ts, NULL);
		pthread_mutex_lock(&c->sse_lock);
		for (struct sse *s = c->parked; s; s = s->next) {
			s->parked = false;
			MHD_resume_connection(s->conn);
		}
		c->parked = NULL;
		quit = atomic_load(&c->stopping) && atomic_load(&c->streams) == 0;
		pthread_mutex_unlock(&c->sse_lock);
		if (quit)
			break;
	}
	return NULL;
}

/* Fill s->pending with what the client has not seen: new events, the end, or a ping. */
static void sse_refill(struct sse *s)
{
	cJSON *events = NULL, *e;
	int64_t now = ap_wall_ms();
	char state[32];

	ap_buf_reset(&s->pending);
	s->off = 0;
	if (atomic_load(&s->c->stopping) || now - s->started > SSE_LIFE_MS) {
		s->done = true;
		return;
	}
	if (q_events_since(s->q, s->job, s->last, SSE_BATCH, &events, &s->last) == 0) {
		cJSON_ArrayForEach(e, events)
		{
			char *text = cJSON_PrintUnformatted(e);

			if (text)
				ap_buf_addf(&s->pending, "id: %.0f\ndata: %s\n\n", jnum(e, "id"),
					    text);
			free(text);
		}
		cJSON_Delete(events);
	}
	if (s->pending.len) {
		s->pinged = now;
		return;
	}
	if (q_job_state(s->q, s->job, state, sizeof(state)) != 0 ||
	    (strcmp(state, "queued") != 0 && strcmp(state, "running") != 0)) {
		ap_buf_addf(&s->pending, "event: end\ndata: {\"state\":\"%s\"}\n\n", state);
		s->done = true;
		return;
	}
	if (now - s->pinged >= SSE_PING_MS) {
		ap_buf_adds(&s->pending, ": keep-alive\n\n");
		s->pinged = now;
	}
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct sse *s = cls;
	size_t n;

	(void)pos;
	if (s->off >= s->pending.len) {
		if (s->done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		sse_refill(s);
		if (s->pending.len == 0) {
			if (s->done)
				return MHD_CONTENT_READER_END_OF_STREAM;
			park(s);
			return 0;
		}
	}
	n = s->pending.len - s->off;
	if (n > max)
		n = max;
	memcpy(buf, s->pending.data + s->off, n);
	s->off += n;
	return (ssize_t)n;
}

static void sse_free(void *cls)
{
	struct sse *s = cls;
	console *c = s->c;

	pthread_mutex_lock(&c->sse_lock);
	for (struct sse **pp = &c->parked; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	pthread_mutex_unlock(&c->sse_lock);
	ap_buf_release(&s->pending);
	free(s);
	atomic_fetch_sub(&c->streams, 1);
}

static enum MHD_Result job_events(console *c, struct MHD_Connection *conn, queue *q, int64_t id,
				  const struct viewer *v)
{
	const char *after = arg(conn, "after"),
		   *last_id = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Last-Event-ID");
	struct MHD_Response *r;
	struct page p;
	struct sse *s;
	cJSON *j = visible_job(c, q, id, &p, v);
	enum MHD_Result ret;

	if (!j)
		return send_page(c, conn, &p);
	cJSON_Delete(j);
	s = calloc(1, sizeof(*s));
	if (!s)
		return MHD_NO;
	s->c = c;
	s->q = q;
	s->conn = conn;
	s->job = id;
	s->last = after ? strtoll(after, NULL, 10) : 0;
	if (last_id && strtoll(last_id, NULL, 10) > s->last)
		s->last = strtoll(last_id, NULL, 10);
	if (s->last < 0)
		s->last = 0;
	s->started = s->pinged = ap_wall_ms();
	ap_buf_init(&s->pending, 1024 * 1024);
	/* A first line at once, so the client knows the stream is open. */
	ap_buf_adds(&s->pending, "retry: 2000\n\n");
	atomic_fetch_add(&c->streams, 1);
	r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, sse_read, s, sse_free);
	if (!r) {
		sse_free(s);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	MHD_add_response_header(r, "X-Accel-Buffering", "no");
	ret = MHD_queue_response(conn, 200, r);
	MHD_destroy_response(r);
	return ret;
}

void console_stop_streams(console *c, int64_t wait_ms)
{
	if (!c)
		return;
	atomic_store(&c->stopping, true);
	for (int64_t waited = 0; waited < wait_ms; waited += 10) {
		bool idle;

		pthread_mutex_lock(&c->sse_lock);
		idle = c->parked == NULL;
		pthread_mutex_unlock(&c->sse_lock);
		if (idle && atomic_load(&c->streams) == 0)
			break;
		usleep(10000);
	}
}

/* --- the trajectory download, the buttons ----------------------------------------------- */

static enum MHD_Result trajectory_file(console *c, struct MHD_Connection *conn, queue *q,
				       int64_t id, const struct viewer *v)
{
	struct MHD_Response *r;
	struct page p;
	struct stat sb;
	char *path = NULL, disp[128];
	cJSON *j = visible_job(c, q, id, &p, v);
	enum MHD_Result ret;
	int fd;

	if (!j)
		return send_page(c, conn, &p);
	cJSON_Delete(j);
	if (q_state_get(q, id, "trajectory", &path) != 0 || !path) {
		problem(&p, 404, "No trajectory", "This job has not written a trajectory yet.",
			"wait until the job has started working", v);
		return send_page(c, conn, &p);
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	free(path);
	if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		if (fd >= 0)
			close(fd);
		problem(&p, 404, "No trajectory", "The job's trajectory file is gone.",
			"check AUTOPATCH_DATA_DIR", v);
		return send_page(c, conn, &p);
	}
	r = MHD_create_response_from_fd((uint64_t)sb.st_size, fd);
	if (!r) {
		close(fd);
		return MHD_NO;
	}
	snprintf(disp, sizeof(disp), "attachment; filename=\"job-%lld-trajectory.jsonl\"",
		 (long long)id);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-ndjson");
	MHD_add_response_header(r, "Content-Disposition", disp);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	ret = MHD_queue_response(conn, 200, r);
	MHD_destroy_response(r);
	return ret;
}

static bool csrf_ok(console *c, const struct viewer *v, const char *body, size_t len)
{
	char token[SESS_HEX + 1];

	return v->known && form_get(body, len, "csrf", token, sizeof(token)) == 0 &&
	       sess_csrf_ok(c->sessions, v->sid, token, ap_wall_ms());
}

static void job_action(console *c, queue *q, int64_t id, const char *what, struct page *p,
		       const struct viewer *v)
{
	cJSON *j = visible_job(c, q, id, p, v);
	char why[160], where[64];
	int rc;

	if (!j)
		return;
	snprintf(why, sizeof(why), "%s from the console by %s",
		 strcmp(what, "cancel") == 0 ? "cancel requested" : "retried", v->info.login);
	if (strcmp(what, "cancel") == 0) {
		rc = q_cancel(q, jstr(j, "repo"), (int64_t)jnum(j, "issue"), why, ap_wall_ms(),
			      NULL);
	} else {
		rc = q_retry(q, id, why, ap_wall_ms());
		if (!rc && c->cfg.queued)
			c->cfg.queued(c->cfg.ud);
	}
	cJSON_Delete(j);
	if (rc) {
		problem(p, rc == AP_EDUPLICATE || rc == AP_EINVAL ? 409 : 500,
			strcmp(what, "cancel") == 0 ? "Cannot cancel" : "Cannot retry",
			ap_error_last(), "reload the job's page to see its state", v);
		return;
	}
	ap_info("console: job %lld: %s", (long long)id, why);
	snprintf(where, sizeof(where), "/jobs/%lld", (long long)id);
	redirect(p, where);
}

/* --- registration and sign-in (server/registration.c, server/signin.c decide) ------------- */

/* Draw what a flow answered: its redirect and cookies, or its problem. */
static void show(struct page *p, const flow_answer *a, const struct viewer *v)
{
	if (a->status == 303)
		redirect(p, a->location);
	else
		problem(p, a->status, a->title, a->what, a->todo, v);
	for (int i = 0; i < a->ncookies; i++)
		add_cookie(p, "%s", a->cookies[i]);
}

static void setup_page(console *c, struct MHD_Connection *conn, struct page *p,
		       const struct viewer *v)
{
	const char *org = arg(conn, "org");
	flow_answer a = {0};
	reg_form f;

	if (reg_begin(c->reg, org, &f, &a)) {
		show(p, &a, v);
		return;
	}
	page_init(p, 200);
	head(p, "Register the GitHub App", v);
	ap_buf_adds(&p->body, "<h1>Register the GitHub App</h1><p>GitHub creates the App from "
			      "autopatch's manifest, then sends you back here; autopatch stores "
			      "its credentials and starts accepting its webhooks at once.</p>"
			      "<p>Webhooks will go to <code>");
	esc(&p->body, f.hook);
	ap_buf_adds(&p->body, "</code>.</p><form method=\"get\" action=\"/setup\"><label "
			      "for=\"org\">Organization (leave empty for your own account)</label> "
			      "<input id=\"org\" name=\"org\" value=\"");
	esc(&p->body, org);
	ap_buf_adds(&p->body, "\"> <button type=\"submit\">Use this owner</button></form>");
	ap_buf_adds(&p->body, "<form id=\"register\" method=\"post\" action=\"");
	esc(&p->body, f.action);
	ap_buf_adds(&p->body, "\"><input type=\"hidden\" name=\"manifest\" value=\"");
	esc(&p->body, f.manifest);
	ap_buf_adds(&p->body, "\"><p><button class=\"primary\" type=\"submit\">Register on ");
	if (org && *org)
		escf(&p->body, "the %s organization", org);
	else
		ap_buf_adds(&p->body, "my account");
	ap_buf_adds(&p->body, "</button></p></form><p>This link works for one hour.</p>");
	foot(p);
	free(f.manifest);
}

static void setup_callback(console *c, struct MHD_Connection *conn, struct page *p,
			   const struct viewer *v)
{
	flow_answer a = {0};

	reg_finish(c->reg, arg(conn, "code"), arg(conn, "state"), &a);
	show(p, &a, v);
}

/* A registration stored a new App: sign-in uses its OAuth credentials from now on. */
static void on_registered(void *ud, const reg_app *app)
{
	console *c = ud;

	signin_set_client(c->signin, app->client_id, app->client_secret);
	c->cfg.registered(c->cfg.ud, app);
}

static void login_start(console *c, struct page *p)
{
	flow_answer a = {0};

	signin_start(c->signin, &a);
	show(p, &a, NULL);
}

static void login_callback(console *c, struct MHD_Connection *conn, struct page *p)
{
	const char *hdr = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Cookie");
	char sid[SESS_HEX + 1];
	flow_answer a = {0};

	signin_finish(c->signin, c->sessions, c->cfg.session_ms, arg(conn, "code"),
		      arg(conn, "state"), hdr, sid, &a);
	show(p, &a, NULL);
	if (sid[0])
		add_cookie(
		    p, COOKIE_SESSION "=%s; Path=/; Max-Age=%lld; HttpOnly; Secure; SameSite=Lax",
		    sid, (long long)(c->cfg.session_ms / 1000));
}

/* --- routing ----------------------------------------------------------------------------- */

static enum MHD_Result asset(struct MHD_Connection *conn, const char *text, const char *type)
{
	struct MHD_Response *r =
	    MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "max-age=300");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	ret = MHD_queue_response(conn, 200, r);
	MHD_destroy_response(r);
	return ret;
}

enum MHD_Result console_handle(console *c, struct MHD_Connection *conn, queue *q, const char *url,
			       const char *method, const char *body, size_t len)
{
	bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
	bool post = strcmp(method, "POST") == 0;
	const char *rest = "";
	struct viewer v;
	struct page p;
	int64_t id;

	if (get && strcmp(url, "/assets/console.css") == 0)
		return asset(conn, asset_console, "text/css; charset=utf-8");
	if (get && strcmp(url, "/assets/console-live.js") == 0)
		return asset(conn, asset_console_live, "text/javascript; charset=utf-8");
	memset(&p, 0, sizeof(p));
	if (get && strcmp(url, "/login") == 0) {
		login_start(c, &p);
		return send_page(c, conn, &p);
	}
	if (get && strcmp(url, "/login/callback") == 0) {
		login_callback(c, conn, &p);
		return send_page(c, conn, &p);
	}
	id = job_id(url, &rest);
	if (!(get && (strcmp(url, "/") == 0 || strcmp(url, "/setup") == 0 ||
		      strcmp(url, "/setup/callback") == 0 ||
		      (id && (!*rest || strcmp(rest, "/events") == 0 ||
			      strcmp(rest, "/trajectory") == 0)))) &&
	    !(post && (strcmp(url, "/logout") == 0 ||
		       (id && (strcmp(rest, "/cancel") == 0 || strcmp(rest, "/retry") == 0))))) {
		problem(&p, 404, "Not found", "There is no page here.", "go to the job list at /",
			NULL);
		return send_page(c, conn, &p);
	}
	/* Cookies of a new operator session go out with the page (p is reset by page_init, so
	 * they are kept aside). */
	{
		struct page cookies;

		memset(&cookies, 0, sizeof(cookies));
		who(c, conn, &cookies, &v);
		if (!v.known) {
			need_sign_in(c, &p);
			return send_page(c, conn, &p);
		}
		if (post && !csrf_ok(c, &v, body, len)) {
			problem(&p, 403, "Refused",
				"The form did not carry this session's token (CSRF protection).",
				"reload the page and press the button again", &v);
		} else if (post && strcmp(url, "/logout") == 0) {
			sess_end(c->sessions, v.sid);
			redirect(&p, "/");
			add_cookie(&p, COOKIE_SESSION "=; Path=/; Max-Age=0; HttpOnly; Secure; "
						      "SameSite=Lax");
		} else if (post) {
			job_action(c, q, id, rest + 1, &p, &v);
		} else if (id && strcmp(rest, "/events") == 0) {
			return job_events(c, conn, q, id, &v);
		} else if (id && strcmp(rest, "/trajectory") == 0) {
			return trajectory_file(c, conn, q, id, &v);
		} else if (id) {
			job_page(c, q, id, &p, &v);
		} else if (strcmp(url, "/setup") == 0) {
			setup_page(c, conn, &p, &v);
		} else if (strcmp(url, "/setup/callback") == 0) {
			setup_callback(c, conn, &p, &v);
		} else {
			job_list(c, conn, q, &p, &v);
		}
		for (int i = 0; i < cookies.ncookies; i++)
			add_cookie(&p, "%s", cookies.cookies[i]);
	}
	return send_page(c, conn, &p);
}

/* --- life cycle -------------------------------------------------------------------------- */

static const char *keep(console *c, int i, const char *s)
{
	if (!s)
		return NULL;
	c->strs[i] = strdup(s);
	return c->strs[i];
}

static int new_signin(console *c, const console_config *cfg)
{
	signin_config sc = {
	    .console_url = c->cfg.console_url,
	    .web_url = c->cfg.web_url,
	    .client_id = cfg->client_id,
	    .client_secret = cfg->client_secret,
	    .operators = c->cfg.operators,
	    .exchange = cfg->gh.oauth_exchange,
	    .user_login = cfg->gh.user_login,
	    .in_org = cfg->gh.in_org,
	    .ud = cfg->gh.ud,
	};

	return signin_new(&c->signin, &sc);
}

int console_new(console **out, const console_config *cfg)
{
	console *c;
	int rc;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return ap_error_set(AP_ENOMEM, "out of memory");
	c->cfg = *cfg;
	c->cfg.public_url = keep(c, 0, cfg->public_url);
	c->cfg.console_url = keep(c, 1, cfg->console_url);
	c->cfg.web_url = keep(c, 2, cfg->web_url ? cfg->web_url : "https://github.com");
	c->cfg.webhook_path = keep(c, 3, cfg->webhook_path ? cfg->webhook_path : "/");
	c->cfg.credentials_file = keep(c, 4, cfg->credentials_file);
	c->cfg.operators = keep(c, 5, cfg->operators);
	c->cfg.client_id = c->cfg.client_secret = NULL;
	pthread_mutex_init(&c->sse_lock, NULL);
	if ((rc = reg_new(&c->reg,
			  &(reg_config){
			      .offered = !c->cfg.sign_in,
			      .public_url = c->cfg.public_url,
			      .console_url = c->cfg.console_url,
			      .web_url = c->cfg.web_url,
			      .webhook_path = c->cfg.webhook_path,
			      .credentials_file = c->cfg.credentials_file,
			      .convert = c->cfg.gh.manifest_convert,
			      .convert_ud = c->cfg.gh.ud,
			      .registered = on_registered,
			      .ud = c,
			  })) ||
	    (rc = new_signin(c, cfg)) || (rc = sess_store_new(&c->sessions, SESSIONS_MAX)))
		goto fail;
	if (pthread_create(&c->ticker, NULL, ticker_main, c) != 0) {
		rc = ap_error_set(AP_EIO, "cannot start the console's stream thread");
		goto fail;
	}
	c->ticker_started = true;
	*out = c;
	return 0;
fail:
	console_free(c);
	return rc;
}

void console_free(console *c)
{
	if (!c)
		return;
	if (c->ticker_started) {
		atomic_store(&c->stopping, true);
		pthread_join(c->ticker, NULL);
	}
	reg_free(c->reg);
	signin_free(c->signin);
	sess_store_free(c->sessions);
	pthread_mutex_destroy(&c->sse_lock);
	for (size_t i = 0; i < sizeof(c->strs) / sizeof(c->strs[0]); i++)
		free(c->strs[i]);
	free(c);
}

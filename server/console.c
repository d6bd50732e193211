/* SPDX-License-Identifier: MIT */
/* server/console.c - the job console on the admin listener (see console.h); the App
 * registration and the sign-in are server/registration.c and server/signin.c. */
#include "server/console.h"

#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/fs.h"
#include "common/jsonnum.h"
#include "common/log.h"
#include "common/redact.h"
#include "server/assets.h"
#include "server/form.h"
#include "server/queue_view.h"
#include "server/registration.h"
#include "server/session.h"
#include "server/signin.h"

#include <ctype.h>
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
#define LIST_PAGE      100  /* jobs a page of the list shows */
#define OUT_SHOWN      2000 /* bytes of an output shown before "show all" */
#define TRAJ_CAP       (64 * 1024 * 1024)
#define SESSIONS_MAX   1024
#define SSE_TICK_MS    250
#define SSE_PING_MS    15000
#define SSE_LIFE_MS    (30 * 60 * 1000)
#define SSE_BATCH      100
#define SSE_LIST       500 /* changed jobs one list update carries at most */
#define SSE_FIELDS     4   /* the job's fields are checked every 4 ticks (1 s) */
#define URL_MAX	       2048
#define COOKIE_SESSION "ap_session"

/* Who is asking (filled by who()). */
struct viewer {
	bool known;
	char sid[SESS_HEX + 1];
	sess_info info;
};

/* One live-update stream (GET /jobs/N/events, or GET /events for the list). */
struct sse {
	console *c;
	queue *q;
	struct MHD_Connection *conn;
	int64_t job;  /* 0: the job list */
	int64_t last; /* the last event id sent (the list: the newest of any job) */
	int64_t started, pinged;
	struct viewer v;	   /* the list's rows are those v may see */
	char state[16], repo[320]; /* the list's filters ("" for any) */
	char *sent;		   /* the job's fields as last sent (JSON) */
	int ticks;
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
	char csp[1024]; /* the Content-Security-Policy of every page (names web_url) */
};

/* What one request is answered with. */
struct page {
	int status;
	const char *type;
	ap_buf body;
	char cookies[3][FLOW_COOKIE_MAX];
	int ncookies;
	char location[URL_MAX];
	const char *disposition;
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

/* Formatted text, escaped. It is only shown: text past the page's cap is left out like any
 * other (the page is capped), never cut in the middle of a sentence without a mark. */
static void escf(ap_buf *b, const char *fmt, ...)
{
	ap_buf tmp = AP_BUF_INIT(PAGE_CAP);
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = ap_buf_vaddf(&tmp, fmt, ap);
	va_end(ap);
	if (rc) {
		ap_error_clear();
		esc(b, "(text too long to show)");
	} else
		esc(b, ap_buf_str(&tmp));
	ap_buf_release(&tmp);
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
	/* Fits: a flow's location is at most FLOW_URL_MAX (the same size), ours are "/jobs/N". */
	snprintf(p->location, sizeof(p->location), "%s", location);
	ap_buf_adds(&p->body, "<!doctype html><title>See other</title><a href=\"");
	esc(&p->body, location);
	ap_buf_adds(&p->body, "\">continue</a>\n");
}

static void add_cookie(struct page *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add_cookie(struct page *p, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (p->ncookies >= 3)
		return;
	va_start(ap, fmt);
	n = vsnprintf(p->cookies[p->ncookies], sizeof(p->cookies[0]), fmt, ap);
	va_end(ap);
	/* A cut cookie sets another value: leave it out (ours are a 64-byte id and attributes;
	 * a flow's are at most FLOW_COOKIE_MAX, the same size). */
	if (n < 0 || (size_t)n >= sizeof(p->cookies[0])) {
		ap_warn("console: a Set-Cookie of %d bytes is too long; left out", n);
		return;
	}
	p->ncookies++;
}

static enum MHD_Result send_page(console *c, struct MHD_Connection *conn, struct page *p)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(p->body.len, (void *)ap_buf_str(&p->body),
					    MHD_RESPMEM_MUST_COPY);
	if (!r) {
		ap_buf_release(&p->body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, p->type);
	MHD_add_response_header(r, "Content-Security-Policy", c->csp);
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
	int64_t s = ms < 0 ? 0 : ms / 1000;

	if (s < 60)
		ap_buf_addf(b, "%llds", (long long)s);
	else if (s < 3600)
		ap_buf_addf(b, "%lldm %llds", (long long)(s / 60), (long long)(s % 60));
	else if (s < 86400)
		ap_buf_addf(b, "%lldh %lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
	else
		ap_buf_addf(b, "%lldd", (long long)(s / 86400));
}

static const char *states[] = {"queued", "running", "succeeded", "failed", "cancelled"};

static bool is_live(const char *state)
{
	return strcmp(state, "queued") == 0 || strcmp(state, "running") == 0;
}

/* How long the job has run: until its last update once finished, else until now. */
static int64_t duration_ms(const cJSON *j, int64_t now)
{
	int64_t from = (int64_t)ap_json_num(j, "created_ms");

	return (is_live(ap_json_str(j, "state")) ? now : (int64_t)ap_json_num(j, "updated_ms")) -
	       from;
}

/* The stage as shown: a finished job's says where it ended. */
static void stage_text(ap_buf *b, const cJSON *j)
{
	const char *stage = ap_json_str(j, "stage");

	if (is_live(ap_json_str(j, "state"))) {
		esc(b, *stage ? stage : "-");
		return;
	}
	ap_buf_adds(b, "finished");
	if (*stage) {
		ap_buf_adds(b, " (in ");
		esc(b, stage);
		ap_buf_adds(b, ")");
	}
}

/* The issue's address on GitHub (GITHUB_URL/owner/name/issues/N; a PR's number redirects). */
static void issue_url(console *c, ap_buf *b, const cJSON *j)
{
	esc(b, c->cfg.web_url);
	ap_buf_adds(b, "/");
	esc(b, ap_json_str(j, "repo"));
	ap_buf_addf(b, "/issues/%.0f", ap_json_num(j, "issue"));
}

static const char *pr_of(const cJSON *j)
{
	if (*ap_json_str(j, "pr_url"))
		return ap_json_str(j, "pr_url");
	return strncmp(ap_json_str(j, "result"), "http", 4) == 0 ? ap_json_str(j, "result") : "";
}

/* One row of the list (the page and the live stream render it alike). */
static void list_row(console *c, ap_buf *b, const cJSON *j, int64_t now)
{
	const char *state = ap_json_str(j, "state"), *pr = pr_of(j);
	double id = ap_json_num(j, "id");

	ap_buf_addf(b, "<tr id=\"job-%.0f\"><td><a href=\"/jobs/%.0f\">#%.0f</a></td>", id, id, id);
	ap_buf_addf(b, "<td class=\"title\"><a href=\"/jobs/%.0f\">", id);
	if (*ap_json_str(j, "title"))
		esc(b, ap_json_str(j, "title"));
	else
		ap_buf_addf(b, "Issue %.0f", ap_json_num(j, "issue"));
	ap_buf_adds(b, "</a></td><td>");
	esc(b, ap_json_str(j, "repo"));
	ap_buf_adds(b, "</td><td><a class=\"issue-link\" href=\"");
	issue_url(c, b, j);
	ap_buf_addf(b, "\">issue #%.0f</a>", ap_json_num(j, "issue"));
	if (*pr) {
		ap_buf_adds(b, "<br><a class=\"pr-link\" href=\"");
		esc(b, pr);
		ap_buf_adds(b, "\">pull request</a>");
	}
	ap_buf_adds(b, "</td><td class=\"state state-");
	esc(b, state);
	ap_buf_adds(b, "\">");
	esc(b, state);
	if (*ap_json_str(j, "error") && !is_live(state)) {
		ap_buf_adds(b, "<span class=\"reason\">: ");
		esc(b, ap_json_str(j, "error"));
		ap_buf_adds(b, "</span>");
	}
	ap_buf_adds(b, "</td><td class=\"stage\">");
	stage_text(b, j);
	ap_buf_adds(b, "</td><td>");
	age(b, now - (int64_t)ap_json_num(j, "created_ms"));
	ap_buf_adds(b, "</td><td>");
	age(b, duration_ms(j, now));
	ap_buf_adds(b, "</td><td>");
	esc(b, *ap_json_str(j, "cost") ? ap_json_str(j, "cost") : "-");
	ap_buf_adds(b, "</td></tr>");
}

/* The list's query string without before (its filters), for links and the live stream. */
static void filter_query(ap_buf *b, const char *state, const char *repo)
{
	ap_buf_adds(b, "state=");
	for (const char *s = state ? state : ""; *s; s++)
		ap_buf_addf(b, isalnum((unsigned char)*s) ? "%c" : "%%%02X", (unsigned char)*s);
	ap_buf_adds(b, "&amp;repo=");
	for (const char *s = repo ? repo : ""; *s; s++)
		ap_buf_addf(b,
			    isalnum((unsigned char)*s) || *s == '-' || *s == '_' || *s == '.'
				? "%c"
				: "%%%02X",
			    (unsigned char)*s);
}

static void counts_html(ap_buf *b, const q_stats *st)
{
	ap_buf_addf(b,
		    "<p id=\"counts\">queued <span id=\"count-queued\">%lld</span> &middot; "
		    "running <span id=\"count-running\">%lld</span> &middot; succeeded <span "
		    "id=\"count-succeeded\">%lld</span> &middot; failed <span "
		    "id=\"count-failed\">%lld</span> &middot; cancelled <span "
		    "id=\"count-cancelled\">%lld</span></p>",
		    (long long)st->queued, (long long)st->running, (long long)st->succeeded,
		    (long long)st->failed, (long long)st->cancelled);
}

static void filter_form(ap_buf *b, const char *want_state, const char *want_repo)
{
	ap_buf_adds(b, "<form method=\"get\" action=\"/\" aria-label=\"Filter jobs\">"
		       "<label for=\"f-state\">State</label> <select id=\"f-state\" "
		       "name=\"state\"><option value=\"\">any</option>");
	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
		ap_buf_addf(b, "<option%s>%s</option>",
			    want_state && strcmp(want_state, states[i]) == 0 ? " selected" : "",
			    states[i]);
	ap_buf_adds(b, "</select> <label for=\"f-repo\">Repository</label> <input "
		       "id=\"f-repo\" name=\"repo\" placeholder=\"owner/name\" value=\"");
	esc(b, want_repo);
	ap_buf_adds(b, "\"> <button type=\"submit\">Filter</button></form>");
}

static void job_list(console *c, struct MHD_Connection *conn, queue *q, struct page *p,
		     const struct viewer *v)
{
	const char *want_state = arg(conn, "state"), *want_repo = arg(conn, "repo"),
		   *before = arg(conn, "before");
	q_job_filter f = {.state = want_state,
			  .repo = want_repo,
			  .before = before ? strtoll(before, NULL, 10) : 0,
			  .limit = LIST_PAGE};
	cJSON *jobs = NULL, *j;
	int64_t now = ap_wall_ms(), total = 0, last_event = 0, oldest = 0;
	q_stats st;
	int shown = 0, rows = 0;

	if (f.before < 0)
		f.before = 0;
	if (q_get_stats(q, &st) || q_jobs_page(q, &f, &jobs, &total, &last_event)) {
		problem(p, 500, "Database unavailable", ap_error_last(),
			"check AUTOPATCH_DB and the server's log, then reload", v);
		return;
	}
	page_init(p, 200);
	head(p, "Jobs", v);
	ap_buf_adds(&p->body, "<h1>Jobs</h1>");
	if (v->info.operator)
		counts_html(&p->body, &st);
	filter_form(&p->body, want_state, want_repo);
	ap_buf_addf(&p->body,
		    "<p>Jobs matching the filter: <span id=\"matching\">%lld</span>%s</p>",
		    (long long)total, f.before ? " (this is an older page)" : "");
	ap_buf_adds(&p->body,
		    "<table><caption class=\"visually-hidden\">Jobs, newest first</caption><thead>"
		    "<tr><th scope=\"col\">Job</th><th scope=\"col\">Issue</th><th "
		    "scope=\"col\">Repository</th><th scope=\"col\">Links</th><th "
		    "scope=\"col\">State</th><th scope=\"col\">Stage</th><th "
		    "scope=\"col\">Age</th><th scope=\"col\">Duration</th><th "
		    "scope=\"col\">Cost</th></tr></thead>");
	ap_buf_addf(&p->body,
		    "<tbody id=\"jobs\" data-last=\"%lld\" data-first=\"%d\" data-query=\"",
		    (long long)last_event, f.before ? 0 : 1);
	filter_query(&p->body, want_state, want_repo);
	ap_buf_adds(&p->body, "\">");
	cJSON_ArrayForEach (j, jobs) {
		rows++;
		oldest = (int64_t)ap_json_num(j, "id");
		if (!can_see(c, v, ap_json_str(j, "repo")))
			continue;
		shown++;
		list_row(c, &p->body, j, now);
	}
	ap_buf_adds(&p->body, "</tbody></table>");
	if (!shown)
		ap_buf_adds(&p->body, "<p id=\"no-jobs\">No jobs to show.</p>");
	ap_buf_adds(&p->body, "<nav aria-label=\"Pages\"><p>");
	if (f.before) {
		ap_buf_adds(&p->body, "<a href=\"/?");
		filter_query(&p->body, want_state, want_repo);
		ap_buf_adds(&p->body, "\">Newest jobs</a> ");
	}
	if (rows == LIST_PAGE) {
		ap_buf_adds(&p->body, "<a rel=\"next\" href=\"/?");
		filter_query(&p->body, want_state, want_repo);
		ap_buf_addf(&p->body, "&amp;before=%lld\">Older jobs</a>", (long long)oldest);
	}
	ap_buf_adds(&p->body, "</p></nav>");
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

/* A long output cut to OUT_SHOWN bytes, with a "show all" link to the whole text (a plain
 * link: /jobs/N/output serves it; the script loads it in place). */
static void capped(ap_buf *b, int64_t id, int line, const char *field, const char *text)
{
	size_t len = strlen(text), cut;
	char *part;

	if (len <= OUT_SHOWN) {
		pre(b, text);
		return;
	}
	cut = ap_utf8_cut(text, OUT_SHOWN);
	part = strndup(text, cut);
	ap_buf_adds(b, "<pre>");
	esc(b, part ? part : "");
	ap_buf_addf(b,
		    "</pre><p class=\"cut\">Showing %zu of %zu bytes. <a class=\"show-all\" "
		    "href=\"/jobs/%lld/output?line=%d&amp;field=%s\">Show all %s</a></p>",
		    cut, len, (long long)id, line, field, field);
	free(part);
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

/* What the page shows of the trajectory, read in one pass. runs[kind][side]: the last Tester
 * run of the reproduction test (0) and the suite (1), on the pristine (0) and patched (1)
 * code. */
struct traj_view {
	bool read;
	ap_buf calls, tools, cmds, tests;
	int ncalls, ntools, ncmds, ntests;
	cJSON *end, *verdict, *runs[2][2];
};

static void traj_view_release(struct traj_view *t)
{
	ap_buf_release(&t->calls);
	ap_buf_release(&t->tools);
	ap_buf_release(&t->cmds);
	ap_buf_release(&t->tests);
	cJSON_Delete(t->end);
	cJSON_Delete(t->verdict);
	for (int k = 0; k < 2; k++)
		for (int s = 0; s < 2; s++)
			cJSON_Delete(t->runs[k][s]);
}

static void keep_json(cJSON **slot, cJSON *e)
{
	cJSON_Delete(*slot);
	*slot = e;
}

static void view_call(struct traj_view *t, const cJSON *e)
{
	t->ncalls++;
	ap_buf_addf(&t->calls,
		    "<tr><td>%d</td><td>%.0f</td><td>%.0f</td><td>%.0f ms</td><td>%.0f</td><td>",
		    t->ncalls, ap_json_num(e, "tokens_in"), ap_json_num(e, "tokens_out"),
		    ap_json_num(e, "millis"), ap_json_num(e, "attempts"));
	esc(&t->calls, ap_json_str(e, "stop"));
	ap_buf_adds(&t->calls, "</td></tr>");
}

static void view_tool(struct traj_view *t, const cJSON *e, int64_t id, int line)
{
	t->ntools++;
	ap_buf_addf(&t->tools, "<details class=\"item\"><summary>%d. <code>", t->ntools);
	esc(&t->tools, ap_json_str(e, "name"));
	ap_buf_addf(&t->tools, "</code> (%.0f ms)%s</summary><h4>Arguments</h4>",
		    ap_json_num(e, "millis"),
		    cJSON_IsTrue(cJSON_GetObjectItem(e, "is_error")) ? ", error" : "");
	capped(&t->tools, id, line, "arguments", ap_json_str(e, "arguments"));
	ap_buf_adds(&t->tools, "<h4>Result (redacted)</h4>");
	capped(&t->tools, id, line, "result", ap_json_str(e, "result"));
	ap_buf_adds(&t->tools, "</details>");
}

static void view_cmd(struct traj_view *t, const cJSON *e, int64_t id, int line)
{
	t->ncmds++;
	ap_buf_addf(&t->cmds, "<details class=\"item\"><summary>%d. <code>", t->ncmds);
	esc(&t->cmds, ap_json_str(e, "command"));
	ap_buf_addf(&t->cmds, "</code>: exit %.0f%s, %.0f ms</summary><p>in <code>",
		    ap_json_num(e, "exit"),
		    cJSON_IsTrue(cJSON_GetObjectItem(e, "timed_out")) ? " (timed out)" : "",
		    ap_json_num(e, "millis"));
	esc(&t->cmds, ap_json_str(e, "dir"));
	ap_buf_adds(&t->cmds, "</code></p><h4>Output</h4>");
	capped(&t->cmds, id, line, "stdout", ap_json_str(e, "stdout"));
	if (*ap_json_str(e, "stderr")) {
		ap_buf_adds(&t->cmds, "<h4>Errors</h4>");
		capped(&t->cmds, id, line, "stderr", ap_json_str(e, "stderr"));
	}
	ap_buf_adds(&t->cmds, "</details>");
}

static void view_tests(struct traj_view *t, const cJSON *e)
{
	const cJSON *x;
	int passed = 0, other = 0;

	cJSON_ArrayForEach (x, cJSON_GetObjectItem(e, "tests")) {
		if (strcmp(ap_json_str(x, "status"), "passed") == 0)
			passed++;
		else
			other++;
	}
	t->ntests++;
	ap_buf_addf(&t->tests, "<details class=\"item\"><summary>Run %d, in <code>", t->ntests);
	esc(&t->tests, ap_json_str(e, "dir"));
	ap_buf_addf(&t->tests,
		    "</code>: %d passed, %d not</summary><table class=\"tests\"><thead><tr><th "
		    "scope=\"col\">Test</th><th scope=\"col\">Result</th></tr></thead><tbody>",
		    passed, other);
	cJSON_ArrayForEach (x, cJSON_GetObjectItem(e, "tests")) {
		ap_buf_adds(&t->tests, "<tr><td>");
		esc(&t->tests, ap_json_str(x, "name"));
		ap_buf_addf(&t->tests, "</td><td class=\"%s\">",
			    strcmp(ap_json_str(x, "status"), "passed") == 0 ? "passed" : "failed");
		esc(&t->tests, ap_json_str(x, "status"));
		ap_buf_adds(&t->tests, "</td></tr>");
	}
	ap_buf_adds(&t->tests, "</tbody></table></details>");
}

/* Read the trajectory at path into t (t->read says whether it could be). */
static void traj_view_load(struct traj_view *t, const char *path, int64_t id)
{
	ap_buf text = AP_BUF_INIT(TRAJ_CAP);
	char *line, *next;
	int n = 0;

	memset(t, 0, sizeof(*t));
	ap_buf_init(&t->calls, PAGE_CAP);
	ap_buf_init(&t->tools, PAGE_CAP);
	ap_buf_init(&t->cmds, PAGE_CAP);
	ap_buf_init(&t->tests, PAGE_CAP);
	if (!path || fs_read_file(&text, path, 0)) {
		ap_error_clear();
		goto out;
	}
	t->read = true;
	for (line = text.data; line && *line; line = next) {
		cJSON *e;
		const char *type;

		n++;
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (!(e = cJSON_Parse(line)))
			continue;
		type = ap_json_str(e, "type");
		if (strcmp(type, "llm_usage") == 0) {
			view_call(t, e);
		} else if (strcmp(type, "tool_result") == 0) {
			view_tool(t, e, id, n);
		} else if (strcmp(type, "tester_run") == 0 || strcmp(type, "sandbox_exec") == 0) {
			int kind = strcmp(ap_json_str(e, "kind"), "repro") == 0	  ? 0
				   : strcmp(ap_json_str(e, "kind"), "suite") == 0 ? 1
										  : -1;

			view_cmd(t, e, id, n);
			if (kind >= 0) {
				keep_json(
				    &t->runs[kind]
					    [strstr(ap_json_str(e, "dir"), "/pristine") ? 0 : 1],
				    e);
				continue;
			}
		} else if (strcmp(type, "tester_tests") == 0) {
			view_tests(t, e);
		} else if (strcmp(type, "verdict") == 0) {
			keep_json(&t->verdict, e);
			continue;
		} else if (strcmp(type, "end") == 0) {
			keep_json(&t->end, e);
			continue;
		}
		cJSON_Delete(e);
	}
out:
	ap_buf_release(&text);
}

/* The outcome in one sentence (with the PR's link when there is one). */
static void outcome(ap_buf *b, const cJSON *j, const struct traj_view *t)
{
	const char *state = ap_json_str(j, "state"), *pr = pr_of(j), *err = ap_json_str(j, "error");
	const char *why = t->verdict ? ap_json_str(t->verdict, "reason") : "";

	if (strcmp(state, "queued") == 0) {
		ap_buf_adds(b, "<p id=\"outcome\" class=\"outcome\">Waiting in the queue for a "
			       "worker.</p>");
		return;
	}
	if (strcmp(state, "running") == 0) {
		ap_buf_adds(b, "<p id=\"outcome\" class=\"outcome\">Working on it: ");
		esc(b, *ap_json_str(j, "stage") ? ap_json_str(j, "stage") : "starting");
		ap_buf_adds(b, ".</p>");
		return;
	}
	ap_buf_adds(b, "<p id=\"outcome\" class=\"outcome outcome-");
	esc(b, state);
	ap_buf_adds(b, "\">");
	if (strcmp(state, "succeeded") == 0 && *pr) {
		ap_buf_adds(b,
			    t->end && !cJSON_IsTrue(cJSON_GetObjectItem(t->end, "proven"))
				? "A pull request was opened, marked not proven: "
				: "Proven fix: the reproduction test failed before the patch and "
				  "passes after it, and the test suite holds. ");
		if (t->end && !cJSON_IsTrue(cJSON_GetObjectItem(t->end, "proven")))
			escf(b, "%s. ", *why ? why : "see the evidence");
		ap_buf_adds(b, "Pull request: <a id=\"pr-link\" href=\"");
		esc(b, pr);
		ap_buf_adds(b, "\">");
		esc(b, pr);
		ap_buf_adds(b, "</a></p>");
		return;
	}
	if (strcmp(state, "succeeded") == 0) {
		ap_buf_adds(b, "Finished: ");
		esc(b, *ap_json_str(j, "result") ? ap_json_str(j, "result")
						 : "no pull request was needed");
	} else if (strcmp(state, "cancelled") == 0) {
		ap_buf_adds(b, "Cancelled: ");
		esc(b, *err ? err : "stopped before it finished");
	} else if (t->end && cJSON_IsTrue(cJSON_GetObjectItem(t->end, "env_failure"))) {
		ap_buf_adds(b, "Environment failure (not the patch's fault): ");
		esc(b, *ap_json_str(t->end, "failure") ? ap_json_str(t->end, "failure") : err);
		ap_buf_adds(b, ". What to change: the repository's set-up or test command "
			       "(.autopatch.yml) or the sandbox image, then retry.");
	} else {
		ap_buf_adds(b, "Refused, no pull request: ");
		esc(b, *why && strcmp(why, "proven") != 0 ? why : *err ? err : "not proven");
		ap_buf_adds(b, ".");
	}
	ap_buf_adds(b, "</p>");
}

/* The summary list; the live script updates the fields with an id. */
static void summary(ap_buf *b, const cJSON *j, const struct traj_view *t, int64_t now)
{
	const char *state = ap_json_str(j, "state");

	ap_buf_adds(b, "<dl class=\"summary\"><dt>State</dt><dd id=\"job-state\" class=\"state-");
	esc(b, state);
	ap_buf_adds(b, "\">");
	esc(b, state);
	if (cJSON_IsTrue(cJSON_GetObjectItem(j, "cancel_requested")) && is_live(state))
		ap_buf_adds(b, " (cancel requested)");
	ap_buf_adds(b, "</dd><dt>Stage</dt><dd id=\"job-stage\">");
	stage_text(b, j);
	ap_buf_adds(b, "</dd><dt>Cost</dt><dd id=\"job-cost\">");
	esc(b, *ap_json_str(j, "cost") ? ap_json_str(j, "cost") : "-");
	ap_buf_adds(b, "</dd><dt>Tokens</dt><dd id=\"job-tokens\">");
	if (jhas(j, "tokens"))
		ap_buf_addf(b, "%.0f", ap_json_num(j, "tokens"));
	else
		ap_buf_adds(b, "-");
	ap_buf_adds(b, "</dd><dt>Duration</dt><dd id=\"job-duration\">");
	age(b, duration_ms(j, now));
	ap_buf_adds(b, "</dd><dt>Rounds</dt><dd id=\"job-rounds\">");
	if (t->end)
		ap_buf_addf(b, "%.0f", ap_json_num(t->end, "iterations"));
	else
		ap_buf_adds(b, "-");
	ap_buf_addf(b, "</dd><dt>Model calls</dt><dd id=\"job-calls\">%.0f</dd>",
		    ap_json_num(j, "model_calls"));
	ap_buf_addf(b, "<dt>Attempts</dt><dd>%.0f</dd><dt>Trigger</dt><dd>",
		    ap_json_num(j, "attempts"));
	esc(b, ap_json_str(j, "trigger"));
	ap_buf_adds(b, "</dd></dl>");
}

static void run_cell(ap_buf *b, const cJSON *run)
{
	ap_buf_adds(b, "<td>");
	if (!run) {
		ap_buf_adds(b, "not run</td>");
		return;
	}
	ap_buf_addf(b, "exit %.0f%s", ap_json_num(run, "exit"),
		    cJSON_IsTrue(cJSON_GetObjectItem(run, "timed_out")) ? " (timed out)" : "");
	if (jhas(run, "passed"))
		ap_buf_addf(b, ": %.0f passed, %.0f failed, %.0f skipped, %.0f errors",
			    ap_json_num(run, "passed"), ap_json_num(run, "failed"),
			    ap_json_num(run, "skipped"), ap_json_num(run, "errors"));
	ap_buf_adds(b, "</td>");
}

static void evidence_table(ap_buf *b, const struct traj_view *t, int64_t id)
{
	static const char *const what[] = {"Reproduction test", "Test suite"};

	ap_buf_adds(b, "<h2>Evidence</h2>");
	if (!t->runs[0][0] && !t->runs[0][1] && !t->runs[1][0] && !t->runs[1][1]) {
		ap_buf_adds(b, "<p>No evidence (yet): nothing is proven.</p>");
	} else {
		ap_buf_adds(b, "<table class=\"evidence\"><thead><tr><th scope=\"col\">Run</th><th "
			       "scope=\"col\">Before the patch</th><th scope=\"col\">After the "
			       "patch</th></tr></thead><tbody>");
		for (int k = 0; k < 2; k++) {
			ap_buf_addf(b, "<tr><th scope=\"row\">%s</th>", what[k]);
			run_cell(b, t->runs[k][0]);
			run_cell(b, t->runs[k][1]);
			ap_buf_adds(b, "</tr>");
		}
		ap_buf_adds(b, "</tbody></table>");
	}
	if (t->end && *ap_json_str(t->end, "evidence")) {
		ap_buf_adds(b, "<details id=\"evidence-text\"><summary>The evidence as the pull "
			       "request states it</summary>");
		capped(b, id, 0, "evidence", ap_json_str(t->end, "evidence"));
		ap_buf_adds(b, "</details>");
	}
}

/* The details, folded: one <details> per kind, each item folded again. */
static void details(ap_buf *b, const struct traj_view *t, int64_t id)
{
	ap_buf_adds(b, "<h2>Details</h2><h3>Model calls</h3>");
	if (t->ncalls)
		ap_buf_addf(
		    b,
		    "<details class=\"group\"><summary>%d model calls</summary><table><thead>"
		    "<tr><th scope=\"col\">Call</th><th scope=\"col\">Tokens in</th><th "
		    "scope=\"col\">Tokens out</th><th scope=\"col\">Latency</th><th "
		    "scope=\"col\">Attempts</th><th scope=\"col\">Stop</th></tr></thead>"
		    "<tbody>%s</tbody></table></details>",
		    t->ncalls, ap_buf_str(&t->calls));
	else
		ap_buf_adds(b, "<p>None.</p>");
	ap_buf_adds(b, "<h3>Tool calls</h3>");
	if (t->ntools)
		ap_buf_addf(b,
			    "<details class=\"group\"><summary>%d tool calls</summary>%s</details>",
			    t->ntools, ap_buf_str(&t->tools));
	else
		ap_buf_adds(b, "<p>None.</p>");
	ap_buf_adds(b, "<h3>Sandbox commands</h3>");
	if (t->ncmds)
		ap_buf_addf(b,
			    "<details class=\"group\"><summary>%d sandbox commands</summary>%s"
			    "</details>",
			    t->ncmds, ap_buf_str(&t->cmds));
	else
		ap_buf_adds(b, "<p>None.</p>");
	ap_buf_adds(b, "<h3>Tester runs</h3>");
	if (t->ntests)
		ap_buf_addf(b,
			    "<details class=\"group\"><summary>%d Tester runs with per-test "
			    "results</summary>%s</details>",
			    t->ntests, ap_buf_str(&t->tests));
	else
		ap_buf_adds(b, "<p>No per-test results were recorded.</p>");
	ap_buf_addf(b,
		    "<p><a href=\"/jobs/%lld/trajectory\" download>Download the trajectory "
		    "(JSONL)</a></p>",
		    (long long)id);
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
	if (!can_see(c, v, ap_json_str(j, "repo"))) {
		cJSON_Delete(j);
		problem(p, 403, "Not your job",
			"This job belongs to a repository you cannot push to.",
			"sign in as a user with push access, or ask the operator", v);
		return NULL;
	}
	return j;
}

static void timeline(ap_buf *b, const cJSON *j, int64_t id, bool live)
{
	const cJSON *e;
	int64_t last = 0;

	/* The last event rendered: the live stream resumes after it (each event once). */
	cJSON_ArrayForEach (e, cJSON_GetObjectItem(j, "events")) {
		if (ap_json_num(e, "id") > last)
			last = (int64_t)ap_json_num(e, "id");
	}
	ap_buf_adds(b, "<h2>Timeline</h2><p id=\"live-status\" aria-live=\"polite\"></p><table "
		       "class=\"timeline\"><thead><tr><th scope=\"col\">Time</th><th "
		       "scope=\"col\">Stage</th><th scope=\"col\">Event</th></tr></thead>");
	ap_buf_addf(b,
		    "<tbody id=\"events\" data-job=\"%lld\" data-live=\"%d\" data-last=\"%lld\">",
		    (long long)id, live ? 1 : 0, (long long)last);
	cJSON_ArrayForEach (e, cJSON_GetObjectItem(j, "events")) {
		ap_buf_addf(b, "<tr data-event=\"%.0f\"><td><time datetime=\"",
			    ap_json_num(e, "id"));
		esc(b, ap_json_str(e, "time"));
		ap_buf_adds(b, "\">");
		/* HH:MM:SS of 2026-01-02T03:04:05.678Z (the date is in the attribute) */
		if (strlen(ap_json_str(e, "time")) >= 19)
			ap_buf_add(b, ap_json_str(e, "time") + 11, 8);
		ap_buf_adds(b, "</time></td><td>");
		esc(b, ap_json_str(e, "stage"));
		ap_buf_adds(b, "</td><td>");
		esc(b, ap_json_str(e, "message"));
		ap_buf_adds(b, "</td></tr>");
	}
	ap_buf_adds(b, "</tbody></table>");
}

static void job_page(console *c, queue *q, int64_t id, struct page *p, const struct viewer *v)
{
	cJSON *j = visible_job(c, q, id, p, v);
	struct traj_view t;
	const char *state;
	char *traj = NULL, title[1200];
	bool live;

	if (!j)
		return;
	state = ap_json_str(j, "state");
	live = is_live(state);
	if (q_state_get(q, id, "trajectory", &traj) != 0)
		ap_error_clear();
	traj_view_load(&t, traj, id);
	free(traj);
	page_init(p, 200);
	if (*ap_json_str(j, "title"))
		ap_excerpt(title, sizeof(title), ap_json_str(j, "title")); /* only shown */
	else
		snprintf(title, sizeof(title), "Issue %.0f", ap_json_num(j, "issue"));
	head(p, title, v);
	ap_buf_adds(&p->body, "<h1 id=\"issue-title\">");
	esc(&p->body, title);
	ap_buf_adds(&p->body, "</h1><p class=\"issue-ref\"><a id=\"issue-link\" href=\"");
	issue_url(c, &p->body, j);
	ap_buf_adds(&p->body, "\">");
	esc(&p->body, ap_json_str(j, "repo"));
	ap_buf_addf(&p->body, "#%.0f</a> &middot; job %lld</p>", ap_json_num(j, "issue"),
		    (long long)id);
	outcome(&p->body, j, &t);
	summary(&p->body, j, &t, ap_wall_ms());
	ap_buf_adds(&p->body, "<p>");
	if (live)
		button(&p->body, id, "cancel", "Cancel this job", v);
	else if (strcmp(state, "failed") == 0 || strcmp(state, "cancelled") == 0)
		button(&p->body, id, "retry", "Retry this job", v);
	ap_buf_adds(&p->body, "</p>");
	timeline(&p->body, j, id, live);
	evidence_table(&p->body, &t, id);
	ap_buf_adds(&p->body, "<h2>Diff</h2>");
	if (t.end && *ap_json_str(t.end, "diff"))
		capped(&p->body, id, 0, "diff", ap_json_str(t.end, "diff"));
	else
		ap_buf_adds(&p->body, "<p>No diff (yet).</p>");
	if (t.read)
		details(&p->body, &t, id);
	else
		ap_buf_adds(&p->body, "<h2>Details</h2><p>This job has no trajectory yet.</p>");
	traj_view_release(&t);
	foot(p);
	cJSON_Delete(j);
}

/* GET /jobs/N/output?line=L&field=F: one field of the trajectory's line L (0: the last "end"
 * line) in full, as plain text: what "show all" links to. */
static void job_output(console *c, struct MHD_Connection *conn, queue *q, int64_t id,
		       struct page *p, const struct viewer *v)
{
	static const char *const fields[] = {"stdout", "stderr", "arguments",
					     "result", "diff",	 "evidence"};
	const char *field = arg(conn, "field"), *ls = arg(conn, "line");
	long line = ls ? strtol(ls, NULL, 10) : -1;
	ap_buf text = AP_BUF_INIT(TRAJ_CAP);
	cJSON *j = visible_job(c, q, id, p, v), *found = NULL;
	char *path = NULL, *l, *next;
	bool known = false;
	long n = 0;

	if (!j)
		return;
	cJSON_Delete(j);
	for (size_t i = 0; field && i < sizeof(fields) / sizeof(fields[0]); i++)
		known = known || strcmp(field, fields[i]) == 0;
	if (!known || line < 0) {
		problem(p, 400, "Bad request", "The link names no output of this job.",
			"follow a \"Show all\" link of the job's page", v);
		return;
	}
	if (q_state_get(q, id, "trajectory", &path) != 0 || !path ||
	    fs_read_file(&text, path, 0) != 0) {
		ap_error_clear();
		free(path);
		problem(p, 404, "No trajectory", "This job has no trajectory to read.",
			"wait until the job has started working", v);
		return;
	}
	free(path);
	for (l = text.data; l && *l; l = next) {
		cJSON *e;

		n++;
		next = strchr(l, '\n');
		if (next)
			*next++ = '\0';
		if ((line && n != line) || !(e = cJSON_Parse(l)))
			continue;
		if (line || strcmp(ap_json_str(e, "type"), "end") == 0) {
			cJSON_Delete(found);
			found = e;
		} else {
			cJSON_Delete(e);
		}
		if (line)
			break;
	}
	ap_buf_release(&text);
	if (!found || !cJSON_IsString(cJSON_GetObjectItem(found, field))) {
		cJSON_Delete(found);
		problem(p, 404, "No such output", "This line of the trajectory has no such output.",
			"follow a \"Show all\" link of the job's page", v);
		return;
	}
	page_init(p, 200);
	p->type = "text/plain; charset=utf-8";
	ap_buf_adds(&p->body, ap_json_str(found, field));
	cJSON_Delete(found);
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

/* One SSE message: an optional id and event name, and data (one line of JSON). */
static void sse_message(struct sse *s, int64_t id, const char *event, cJSON *data)
{
	char *text = cJSON_PrintUnformatted(data);

	if (text) {
		if (id > 0)
			ap_buf_addf(&s->pending, "id: %lld\n", (long long)id);
		if (event)
			ap_buf_addf(&s->pending, "event: %s\n", event);
		ap_buf_addf(&s->pending, "data: %s\n\n", text);
	}
	free(text);
	cJSON_Delete(data);
}

/* The job page's fields (state, stage, counters, outcome), sent when they changed. */
static void sse_job_fields(struct sse *s, int64_t now)
{
	q_job_filter f = {.id = s->job, .limit = 1};
	cJSON *jobs = NULL, *j, *o;
	ap_buf b = AP_BUF_INIT(4096);
	char *text;

	if (q_jobs_page(s->q, &f, &jobs, NULL, NULL) != 0 || !(j = cJSON_GetArrayItem(jobs, 0))) {
		ap_error_clear();
		cJSON_Delete(jobs);
		return;
	}
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "state", ap_json_str(j, "state"));
	stage_text(&b, j);
	cJSON_AddStringToObject(o, "stage", ap_buf_str(&b));
	ap_buf_reset(&b);
	cJSON_AddStringToObject(o, "cost", *ap_json_str(j, "cost") ? ap_json_str(j, "cost") : "-");
	if (jhas(j, "tokens"))
		cJSON_AddNumberToObject(o, "tokens", ap_json_num(j, "tokens"));
	else
		cJSON_AddStringToObject(o, "tokens", "-");
	cJSON_AddNumberToObject(o, "calls", ap_json_num(j, "model_calls"));
	age(&b, duration_ms(j, now));
	cJSON_AddStringToObject(o, "duration", ap_buf_str(&b));
	ap_buf_release(&b);
	cJSON_Delete(jobs);
	text = cJSON_PrintUnformatted(o);
	if (text && (!s->sent || strcmp(text, s->sent) != 0)) {
		free(s->sent);
		s->sent = text;
		sse_message(s, 0, "job", o);
		return;
	}
	free(text);
	cJSON_Delete(o);
}

/* The job page's stream: new timeline events (each with its id), changed fields, the end. */
static void sse_refill_job(struct sse *s, int64_t now)
{
	cJSON *events = NULL, *e;
	char state[32];
	bool fresh = false;

	if (q_events_since(s->q, s->job, s->last, SSE_BATCH, &events, &s->last) == 0) {
		cJSON_ArrayForEach (e, events) {
			sse_message(s, (int64_t)ap_json_num(e, "id"), NULL,
				    cJSON_Duplicate(e, true));
			fresh = true;
		}
		cJSON_Delete(events);
	}
	if (fresh || ++s->ticks % SSE_FIELDS == 0)
		sse_job_fields(s, now);
	if (fresh)
		return;
	if (q_job_state(s->q, s->job, state, sizeof(state)) != 0 || !is_live(state)) {
		cJSON *o = cJSON_CreateObject();

		cJSON_AddStringToObject(o, "state", state);
		sse_message(s, 0, "end", o);
		s->done = true;
	}
}

static bool list_match(const struct sse *s, const cJSON *j)
{
	return (!s->state[0] || strcmp(s->state, ap_json_str(j, "state")) == 0) &&
	       (!s->repo[0] || strcmp(s->repo, ap_json_str(j, "repo")) == 0);
}

/* The list's stream: each job with an event after the last one seen, as its row's HTML
 * (match: whether it passes the page's filters), oldest first; then the counts, carrying the
 * new watermark as the message id. */
static void sse_refill_list(struct sse *s, int64_t now)
{
	/* The newest SSE_LIST changed jobs: a stream opened far behind (or with ?after=0)
	 * costs one bounded batch, and the watermark moves on past the rest. */
	q_job_filter f = {.changed_after = s->last, .limit = SSE_LIST};
	cJSON *jobs = NULL, *o;
	int64_t mark = 0;
	ap_buf row = AP_BUF_INIT(PAGE_CAP);
	q_stats st;
	int n;

	if (q_jobs_page(s->q, &f, &jobs, NULL, &mark) != 0) {
		ap_error_clear();
		return;
	}
	n = cJSON_GetArraySize(jobs);
	for (int i = n - 1; i >= 0; i--) {
		cJSON *j = cJSON_GetArrayItem(jobs, i);

		if (!can_see(s->c, &s->v, ap_json_str(j, "repo")))
			continue;
		ap_buf_reset(&row);
		list_row(s->c, &row, j, now);
		o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "id", ap_json_num(j, "id"));
		cJSON_AddBoolToObject(o, "match", list_match(s, j));
		cJSON_AddStringToObject(o, "html", ap_buf_str(&row));
		sse_message(s, 0, "job", o);
	}
	ap_buf_release(&row);
	cJSON_Delete(jobs);
	if (mark <= s->last)
		return;
	s->last = mark;
	o = cJSON_CreateObject();
	if (s->v.info.operator&& q_get_stats(s->q, &st) == 0) {
		cJSON_AddNumberToObject(o, "queued", (double)st.queued);
		cJSON_AddNumberToObject(o, "running", (double)st.running);
		cJSON_AddNumberToObject(o, "succeeded", (double)st.succeeded);
		cJSON_AddNumberToObject(o, "failed", (double)st.failed);
		cJSON_AddNumberToObject(o, "cancelled", (double)st.cancelled);
	}
	sse_message(s, mark, "counts", o);
}

/* Fill s->pending with what the client has not seen, or a ping. */
static void sse_refill(struct sse *s)
{
	int64_t now = ap_wall_ms();

	ap_buf_reset(&s->pending);
	s->off = 0;
	if (atomic_load(&s->c->stopping) || now - s->started > SSE_LIFE_MS) {
		s->done = true;
		return;
	}
	if (s->job)
		sse_refill_job(s, now);
	else
		sse_refill_list(s, now);
	if (s->pending.len) {
		s->pinged = now;
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
	free(s->sent);
	free(s);
	atomic_fetch_sub(&c->streams, 1);
}

/* Whether the stream's ?state= and ?repo= filters fit their fields. */
static bool sse_filters_fit(struct MHD_Connection *conn)
{
	const char *state = arg(conn, "state"), *repo = arg(conn, "repo");

	return (!state || strlen(state) < sizeof(((struct sse *)0)->state)) &&
	       (!repo || strlen(repo) < sizeof(((struct sse *)0)->repo));
}

/* GET /jobs/N/events (job > 0) or /events (the list, filtered by ?state and ?repo). The
 * stream resumes after the larger of ?after (the last event id the page rendered) and the
 * Last-Event-ID header (the last one this browser received, on a reconnect): nothing is sent
 * twice, nothing skipped. */
static enum MHD_Result sse_open(console *c, struct MHD_Connection *conn, queue *q, int64_t job,
				const struct viewer *v)
{
	const char *after = arg(conn, "after"),
		   *last_id = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Last-Event-ID");
	struct MHD_Response *r;
	struct page p;
	struct sse *s;
	enum MHD_Result ret;

	if (job) {
		cJSON *j = visible_job(c, q, job, &p, v);

		if (!j)
			return send_page(c, conn, &p);
		cJSON_Delete(j);
	}
	if (!sse_filters_fit(conn)) {
		problem(&p, 400, "Bad request", "The state or repository filter is too long.",
			"Open the job list from its link.", v);
		return send_page(c, conn, &p);
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return MHD_NO;
	s->c = c;
	s->q = q;
	s->conn = conn;
	s->job = job;
	s->v = *v;
	/* Fit: sse_filters_fit() said so (a cut repository would filter for another). */
	snprintf(s->state, sizeof(s->state), "%s", arg(conn, "state") ? arg(conn, "state") : "");
	snprintf(s->repo, sizeof(s->repo), "%s", arg(conn, "repo") ? arg(conn, "repo") : "");
	s->last = after ? strtoll(after, NULL, 10) : 0;
	if (last_id && strtoll(last_id, NULL, 10) > s->last)
		s->last = strtoll(last_id, NULL, 10);
	if (s->last < 0)
		s->last = 0;
	s->started = s->pinged = ap_wall_ms();
	ap_buf_init(&s->pending, 4 * 1024 * 1024);
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
	/* Fits: 37 bytes of text and a login of at most SESS_LOGIN_MAX (64). */
	snprintf(why, sizeof(why), "%s from the console by %s",
		 strcmp(what, "cancel") == 0 ? "cancel requested" : "retried", v->info.login);
	if (strcmp(what, "cancel") == 0) {
		rc = q_cancel(q, ap_json_str(j, "repo"), (int64_t)ap_json_num(j, "issue"), why,
			      ap_wall_ms(), NULL);
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
	if (!(get &&
	      (strcmp(url, "/") == 0 || strcmp(url, "/setup") == 0 ||
	       strcmp(url, "/setup/callback") == 0 || strcmp(url, "/events") == 0 ||
	       (id && (!*rest || strcmp(rest, "/events") == 0 || strcmp(rest, "/output") == 0 ||
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
			return sse_open(c, conn, q, id, &v);
		} else if (strcmp(url, "/events") == 0) {
			return sse_open(c, conn, q, 0, &v);
		} else if (id && strcmp(rest, "/output") == 0) {
			job_output(c, conn, q, id, &p, &v);
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
	/* The registration form posts to GitHub; nothing else leaves this origin. */
	if (!c->cfg.web_url) {
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto fail;
	}
	if (ap_fmt(c->csp, sizeof(c->csp),
		   "default-src 'self'; form-action 'self' %s; frame-ancestors 'none'; "
		   "base-uri 'none'",
		   c->cfg.web_url)) {
		rc = ap_error_set(
		    AP_EINVAL, "GITHUB_URL is too long for the console's security policy (at most "
			       "900 bytes): use GitHub's address");
		goto fail;
	}
	if ((rc = reg_new(&c->reg,
			  &(reg_config){
			      .offered = !c->cfg.sign_in,
			      .public_url = c->cfg.public_url,
			      .console_url = c->cfg.console_url,
			      .web_url = c->cfg.web_url,
			      .webhook_path = c->cfg.webhook_path,
			      .credentials_file = c->cfg.credentials_file,
			      .convert = c->cfg.gh.manifest_convert,
			      .new_app_url = c->cfg.gh.new_app_url,
			      .install_url = c->cfg.gh.install_url,
			      .gh_ud = c->cfg.gh.ud,
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

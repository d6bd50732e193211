/* SPDX-License-Identifier: MIT */
/* server/webhook.c - verify, parse and route one delivery (see webhook.h). Pure: the fuzzer
 * runs exactly this code. */
#include "server/webhook.h"

#include "common/err.h"
#include "server/payload.h"
#include "server/sig.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *trigger_names[] = {"label", "comment", "pr_feedback"};

const char *wh_trigger_name(enum job_trigger t)
{
	if ((unsigned)t < sizeof(trigger_names) / sizeof(trigger_names[0]))
		return trigger_names[t];
	return "unknown";
}

int wh_trigger_parse(const char *name)
{
	for (size_t i = 0; name && i < sizeof(trigger_names) / sizeof(trigger_names[0]); i++)
		if (strcmp(name, trigger_names[i]) == 0)
			return (int)i;
	return -1;
}

void wh_decision_release(wh_decision *d)
{
	if (!d)
		return;
	free(d->feedback);
	d->feedback = NULL;
	free(d->title);
	d->title = NULL;
}

/* A reason is only shown and logged. Every one fits d->reason: our own sentences, with the
 * outside names in them capped by a precision ("%.64s", a repository "%.200s"). */
static int reject(wh_decision *d, int status, const char *reason)
{
	d->action = WH_REJECT;
	d->status = status;
	snprintf(d->reason, sizeof(d->reason), "%s", reason);
	return 0;
}

static int ignore(wh_decision *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int ignore(wh_decision *d, const char *fmt, ...)
{
	va_list ap;

	d->action = WH_IGNORE;
	d->status = 200;
	va_start(ap, fmt);
	vsnprintf(d->reason, sizeof(d->reason), fmt, ap);
	va_end(ap);
	return 0;
}

static int valid_token(const char *s, size_t max, int (*ok)(int c))
{
	size_t n = 0;

	if (!s || !*s)
		return 0;
	for (; s[n]; n++)
		if (n >= max || !ok((unsigned char)s[n]))
			return 0;
	return 1;
}

static int delivery_char(int c)
{
	return isalnum(c) || c == '-' || c == '_' || c == '.';
}

static int event_char(int c)
{
	return (c >= 'a' && c <= 'z') || c == '_';
}

/* "application/json", optionally followed by parameters ("; charset=utf-8"). */
static int json_content_type(const char *ct)
{
	static const char want[] = "application/json";
	size_t n = sizeof(want) - 1;

	while (ct && (*ct == ' ' || *ct == '\t'))
		ct++;
	if (!ct || strncasecmp(ct, want, n) != 0)
		return 0;
	return ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ' || ct[n] == '\t';
}

static int trusted_association(const char *a)
{
	return a && (strcmp(a, "OWNER") == 0 || strcmp(a, "MEMBER") == 0 ||
		     strcmp(a, "COLLABORATOR") == 0);
}

/* If body is "/autopatch" alone or followed by whitespace, return the text after it (leading
 * and trailing whitespace trimmed, in a malloc'd copy capped at WH_FEEDBACK_MAX) via *out.
 * Returns 1 when it is a command, 0 when not, AP_ENOMEM. */
static int command_text(const char *body, char **out)
{
	static const char cmd[] = "/autopatch";
	size_t n = sizeof(cmd) - 1, len;
	const char *p = body;

	*out = NULL;
	while (*p && isspace((unsigned char)*p))
		p++;
	if (strncmp(p, cmd, n) != 0 || (p[n] && !isspace((unsigned char)p[n])))
		return 0;
	p += n;
	while (*p && isspace((unsigned char)*p))
		p++;
	len = strlen(p);
	while (len && isspace((unsigned char)p[len - 1]))
		len--;
	if (len > WH_FEEDBACK_MAX)
		len = WH_FEEDBACK_MAX;
	*out = strndup(p, len);
	return *out ? 1 : AP_ENOMEM;
}

/* The length of title to keep: at most WH_TITLE_MAX bytes, cut on a UTF-8 boundary. */
static size_t wh_title_len(const char *title)
{
	size_t len = strlen(title);

	if (len <= WH_TITLE_MAX)
		return len;
	len = WH_TITLE_MAX;
	while (len && ((unsigned char)title[len] & 0xC0) == 0x80)
		len--;
	return len;
}

static int set_target(wh_decision *d, const pl_fields *f, int64_t issue)
{
	const char *full = f->str[PL_REPO_FULL_NAME], *title;

	if (!full || !*full || strlen(full) > WH_REPO_MAX || !strchr(full, '/') || issue <= 0)
		return 0;
	snprintf(d->repo, sizeof(d->repo), "%s", full); /* length checked */
	d->repo_id = f->id[PL_REPO_ID];
	d->issue = issue;
	/* The title the console shows; only a hint (the pipeline reads the issue itself). */
	title = f->str[PL_ISSUE_TITLE] ? f->str[PL_ISSUE_TITLE] : f->str[PL_PR_TITLE];
	free(d->title);
	d->title = title ? strndup(title, wh_title_len(title)) : NULL;
	return 1;
}

static int route_issues(const pl_fields *f, const char *action, const wh_config *cfg,
			wh_decision *d)
{
	const char *name = f->str[PL_LABEL_NAME];
	int labeled = strcmp(action, "labeled") == 0;

	if (!labeled && strcmp(action, "unlabeled") != 0)
		return ignore(d, "issues.%.64s is not a trigger", action);
	if (!name || strcmp(name, cfg->label) != 0)
		return ignore(d, "label \"%.60s\" is not the trigger label", name ? name : "");
	if (!set_target(d, f, f->id[PL_ISSUE_NUMBER]))
		return ignore(d, "payload has no repository or issue number");
	d->action = labeled ? WH_TRIGGER : WH_CANCEL;
	d->status = labeled ? 202 : 200;
	d->trigger = JOB_TRIGGER_LABEL;
	snprintf(d->reason, sizeof(d->reason), "%s %.200s#%lld", labeled ? "label" : "unlabel",
		 d->repo, (long long)d->issue);
	return 0;
}

static int route_comment(const pl_fields *f, const char *action, wh_decision *d)
{
	const char *body = f->str[PL_COMMENT_BODY];
	char *text = NULL;
	int rc;

	if (strcmp(action, "created") != 0)
		return ignore(d, "issue_comment.%.64s is not a trigger", action);
	if (!body || (rc = command_text(body, &text)) == 0)
		return ignore(d, "comment is not an /autopatch command");
	if (rc < 0)
		return rc;
	if (!trusted_association(f->str[PL_COMMENT_ASSOCIATION])) {
		free(text);
		return ignore(d, "commenter is not an owner, member or collaborator");
	}
	if (!set_target(d, f, f->id[PL_ISSUE_NUMBER])) {
		free(text);
		return ignore(d, "payload has no repository or issue number");
	}
	d->comment_id = f->id[PL_COMMENT_ID];
	if (strcmp(text, "stop") == 0) {
		free(text);
		d->action = WH_CANCEL;
		d->status = 200;
		snprintf(d->reason, sizeof(d->reason), "stop %.200s#%lld", d->repo,
			 (long long)d->issue);
		return 0;
	}
	d->action = WH_TRIGGER;
	d->status = 202;
	d->trigger =
	    f->object[PL_ISSUE_PULL_REQUEST] ? JOB_TRIGGER_PR_FEEDBACK : JOB_TRIGGER_COMMENT;
	d->feedback = text;
	snprintf(d->reason, sizeof(d->reason), "%s %.200s#%lld", wh_trigger_name(d->trigger),
		 d->repo, (long long)d->issue);
	return 0;
}

static int route_review_comment(const pl_fields *f, const char *action, wh_decision *d)
{
	const char *body = f->str[PL_COMMENT_BODY];
	const char *ref = f->str[PL_PR_HEAD_REF];
	char *text = NULL;
	int rc;

	if (strcmp(action, "created") != 0)
		return ignore(d, "pull_request_review_comment.%.64s is not a trigger", action);
	if (!body || !trusted_association(f->str[PL_COMMENT_ASSOCIATION]))
		return ignore(d, "reviewer is not an owner, member or collaborator");
	if (!ref || strncmp(ref, "autopatch/", 10) != 0)
		return ignore(d, "review comment on a pull request autopatch did not open");
	if (!set_target(d, f, f->id[PL_PR_NUMBER]))
		return ignore(d, "payload has no repository or pull request number");
	/* The whole comment is feedback; a leading "/autopatch" is optional here. */
	rc = command_text(body, &text);
	if (rc < 0)
		return rc;
	if (rc == 0) {
		size_t len = strlen(body);

		text = strndup(body, len > WH_FEEDBACK_MAX ? WH_FEEDBACK_MAX : len);
		if (!text)
			return AP_ENOMEM;
	}
	d->action = WH_TRIGGER;
	d->status = 202;
	d->trigger = JOB_TRIGGER_PR_FEEDBACK;
	d->feedback = text;
	d->comment_id = f->id[PL_COMMENT_ID];
	snprintf(d->reason, sizeof(d->reason), "review feedback %.200s#%lld", d->repo,
		 (long long)d->issue);
	return 0;
}

static int route(const wh_config *cfg, const char *event, const pl_fields *f, wh_decision *d)
{
	const char *stype = f->str[PL_SENDER_TYPE];
	const char *action = f->str[PL_ACTION];

	if (strcmp(event, "ping") == 0)
		return ignore(d, "ping");
	if (stype && strcmp(stype, "Bot") == 0)
		return ignore(d, "sender is a bot");
	if (!action)
		return ignore(d, "%.64s has no action", event);
	if (strcmp(event, "issues") != 0 && strcmp(event, "issue_comment") != 0 &&
	    strcmp(event, "pull_request_review_comment") != 0)
		return ignore(d, "event %.64s is not routed", event);
	d->installation_id = f->id[PL_INSTALLATION_ID];
	if (!d->installation_id)
		return ignore(d, "payload has no installation");
	if (strcmp(event, "issues") == 0)
		return route_issues(f, action, cfg, d);
	if (strcmp(event, "issue_comment") == 0)
		return route_comment(f, action, d);
	return route_review_comment(f, action, d);
}

int wh_handle(const wh_config *cfg, const wh_request *req, wh_decision *out)
{
	pl_fields fields;
	int verified = 0, rc;

	*out = (wh_decision)WH_DECISION_INIT;
	if (!req->method || strcmp(req->method, "POST") != 0)
		return reject(out, 405, "only POST is accepted here");
	if (req->body_too_big || req->len > WH_BODY_MAX)
		return reject(out, 413, "payload is larger than 25 MiB");
	if (!req->event || !req->delivery || !req->signature)
		return reject(out, 400,
			      "required headers missing: X-GitHub-Event, X-GitHub-Delivery, "
			      "X-Hub-Signature-256");
	if (!valid_token(req->delivery, WH_DELIVERY_MAX, delivery_char))
		return reject(out, 400, "X-GitHub-Delivery is not a delivery id");
	if (!valid_token(req->event, WH_EVENT_MAX, event_char))
		return reject(out, 400, "X-GitHub-Event is not an event name");
	if (!json_content_type(req->content_type))
		return reject(out, 415, "content type must be application/json");
	for (size_t i = 0; i < 2; i++)
		if (!verified && cfg->secrets[i] &&
		    sig_verify(cfg->secrets[i], req->body, req->len, req->signature) == 0)
			verified = 1;
	if (!verified)
		return reject(out, 401, "signature does not match the payload and secret");

	rc = pl_scan(req->body, req->len, &fields);
	if (rc == AP_EINVAL)
		return reject(out, 400, "payload is not a valid JSON object");
	if (rc == 0) {
		rc = route(cfg, req->event, &fields, out);
		pl_fields_release(&fields);
	}
	if (rc) {
		wh_decision_release(out);
		*out = (wh_decision)WH_DECISION_INIT;
		reject(out, 500, "out of memory");
	}
	return rc;
}

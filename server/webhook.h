/* SPDX-License-Identifier: MIT */
/* server/webhook.h - one webhook delivery from headers and raw body to a decision.
 *
 * wh_handle() is pure (no I/O, no database, no globals) so the fuzzer and the unit tests drive
 * the same code the server runs. Checks run in the order the HTTP contract promises: method
 * (405), size (413), required headers (400), content type (415), signature (401), and only
 * then JSON parsing (400) and routing. Routing (docs/architecture.md, "In"):
 *   - issues.labeled with the trigger label               -> trigger JOB_TRIGGER_LABEL
 *   - issues.unlabeled with the trigger label             -> cancel
 *   - issue_comment.created "/autopatch [text]" by OWNER, MEMBER or COLLABORATOR:
 *       "/autopatch stop"                                 -> cancel
 *       on a pull request                                 -> trigger JOB_TRIGGER_PR_FEEDBACK
 *       on an issue                                       -> trigger JOB_TRIGGER_COMMENT
 *   - pull_request_review_comment.created by OWNER, MEMBER or COLLABORATOR on a pull request
 *     whose head branch starts with "autopatch/" (ours)  -> trigger JOB_TRIGGER_PR_FEEDBACK
 *   - a sender of type "Bot", a payload without installation.id, ping and every other
 *     event or action                                     -> ignore (200)
 */
#ifndef AP_WEBHOOK_H
#define AP_WEBHOOK_H

#include "job/job.h"

#include <stddef.h>
#include <stdint.h>

/* GitHub caps payloads at 25 MB; a little more than 25 MiB is refused while streaming. */
#define WH_BODY_MAX ((size_t)25 * 1024 * 1024)
/* Caps on header values we keep (a GUID, an event name). */
#define WH_DELIVERY_MAX 100
#define WH_EVENT_MAX	64
/* Caps on routed fields copied out of the payload. */
#define WH_REPO_MAX	256
#define WH_FEEDBACK_MAX (64 * 1024)
#define WH_TITLE_MAX	1024

typedef struct wh_config {
	const char *secrets[2]; /* current, then previous (rotation); NULL entries skipped */
	const char *label;	/* the trigger label, e.g. "autopatch" */
} wh_config;

/* One request as received. Header values are NULL when absent. body need not be
 * NUL-terminated. body_too_big is set by the transport when it stopped buffering. */
typedef struct wh_request {
	const char *method;
	const char *event;	  /* X-GitHub-Event */
	const char *delivery;	  /* X-GitHub-Delivery */
	const char *signature;	  /* X-Hub-Signature-256 */
	const char *content_type; /* Content-Type */
	const char *body;
	size_t len;
	int body_too_big;
} wh_request;

enum wh_action {
	WH_REJECT,  /* answer status with reason; nothing is stored */
	WH_IGNORE,  /* verified and stored as a delivery; no job (200) */
	WH_TRIGGER, /* verified; start a job unless one is active for (repo, issue) */
	WH_CANCEL,  /* verified; cancel the active job of (repo, issue) */
};

typedef struct wh_decision {
	enum wh_action action;
	int status;	  /* HTTP status for WH_REJECT; 200 or 202 otherwise (the suggestion) */
	char reason[256]; /* why (rejection message, ignore reason, trigger summary) */
	char repo[WH_REPO_MAX + 1]; /* "owner/name" for trigger and cancel */
	int64_t repo_id;
	int64_t installation_id;
	int64_t issue;
	enum job_trigger trigger;
	char *feedback;	    /* malloc'd for comment triggers, else NULL */
	int64_t comment_id; /* the triggering comment, 0 for labels */
	char *title;	    /* the issue's (or PR's) title, malloc'd, at most WH_TITLE_MAX
			     * bytes; NULL when the payload has none */
} wh_decision;

#define WH_DECISION_INIT                                                                           \
	{                                                                                          \
		WH_REJECT, 0, "", "", 0, 0, 0, JOB_TRIGGER_LABEL, NULL, 0, NULL                    \
	}

/* Decide what to do with req. Always fills *out (release it with wh_decision_release);
 * returns 0, or AP_ENOMEM (then *out is a 500 rejection). */
int wh_handle(const wh_config *cfg, const wh_request *req, wh_decision *out);

/* Free what a decision owns; the struct may be reused after WH_DECISION_INIT. */
void wh_decision_release(wh_decision *d);

/* The name of a trigger as stored and shown ("label", "comment", "pr_feedback"), and back.
 * wh_trigger_parse returns -1 for an unknown name. */
const char *wh_trigger_name(enum job_trigger t);
int wh_trigger_parse(const char *name);

#endif

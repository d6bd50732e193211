/* SPDX-License-Identifier: MIT */
/* github/api.h - the GitHub calls autopatch makes, on top of gh_rest.
 *
 * `repo` is always "owner/name". Single objects come back as small value structs whose
 * strings the struct owns (release with the matching *_release(), which accepts a zeroed
 * struct); lists come back as cJSON arrays in GitHub's documented shape (caller
 * cJSON_Delete()s). Errors as in rest.h (AP_ENOTFOUND for 404, AP_EHTTP with GitHub's message
 * for 422 ...).
 */
#ifndef AP_GH_API_H
#define AP_GH_API_H

#include "github/rest.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct gh_repo {
	int64_t id;
	char *full_name;      /* "owner/name" */
	char *default_branch; /* "main" */
	char *clone_url;      /* https URL without credentials */
	char *html_url;
	bool private_repo;
	bool can_push; /* permissions.push (false when GitHub omits permissions) */
} gh_repo;

typedef struct gh_issue {
	int64_t number;
	char *title;
	char *body;  /* "" when GitHub sends null */
	char *state; /* "open" or "closed" */
	char *html_url;
	char *user_login;
	char **labels; /* n_labels label names */
	size_t n_labels;
	bool is_pull; /* the issue is a pull request */
} gh_issue;

typedef struct gh_comment {
	int64_t id;
	char *html_url;
	char *body;
} gh_comment;

typedef struct gh_pull {
	int64_t number;
	char *html_url;
	char *state;	/* "open" or "closed" */
	char *head_ref; /* branch name */
	char *head_sha;
	char *head_repo;      /* "owner/name" of the head repository ("" if deleted) */
	char *head_clone_url; /* clone URL of the head repository ("" if deleted) */
	char *base_ref;
	char *title;
	char *body;
	bool draft;
} gh_pull;

/* What to open. Strings are borrowed. */
typedef struct gh_pull_new {
	const char *title;
	const char *head; /* branch in the same repository ("autopatch/issue-7") */
	const char *base; /* usually the default branch */
	const char *body;
	bool draft;
	bool maintainer_can_modify;
} gh_pull_new;

#define GH_PULL_NEW_INIT                                                                           \
	{                                                                                          \
		NULL, NULL, NULL, NULL, true, true                                                 \
	}

void gh_repo_release(gh_repo *r);
void gh_issue_release(gh_issue *i);
void gh_comment_release(gh_comment *c);
void gh_pull_release(gh_pull *p);

/* GET /repos/{repo}. */
int gh_repo_get(gh_rest *r, const char *repo, gh_repo *out);

/* GET /repos/{repo}/issues/{number}. */
int gh_issue_get(gh_rest *r, const char *repo, int64_t number, gh_issue *out);

/* GET /repos/{repo}/issues/{number}/comments, all pages, oldest first. */
int gh_comments_list(gh_rest *r, const char *repo, int64_t number, cJSON **out);

/* POST /repos/{repo}/issues/{number}/comments. out may be NULL. Never sent twice by the
 * client: after a 5xx or a connection that failed once the request was out, it returns
 * AP_EUNAVAIL (or AP_ETIMEOUT) with gh_rest_maybe_applied(r) true — the comment may exist;
 * find it (by a marker in its body) before posting again. */
int gh_comment_create(gh_rest *r, const char *repo, int64_t number, const char *body,
		      gh_comment *out);

/* PATCH /repos/{repo}/issues/comments/{comment_id}. out may be NULL. */
int gh_comment_update(gh_rest *r, const char *repo, int64_t comment_id, const char *body,
		      gh_comment *out);

/* POST /repos/{repo}/issues/{number}/labels with n names. Safe to repeat: retried after a 5xx
 * like a read. */
int gh_labels_add(gh_rest *r, const char *repo, int64_t number, const char *const *names, size_t n);

/* POST .../issues/{number}/reactions; content is one of + 1 -1 laugh confused heart hooray
 * rocket eyes. GitHub answers 200 when the reaction already existed: also 0. */
int gh_reaction_add_issue(gh_rest *r, const char *repo, int64_t number, const char *content);

/* POST .../issues/comments/{comment_id}/reactions. */
int gh_reaction_add_comment(gh_rest *r, const char *repo, int64_t comment_id, const char *content);

/* POST /repos/{repo}/pulls. A 422 (head missing, PR already exists) is AP_EHTTP with GitHub's
 * message; use gh_pull_find_by_head() first to never open a second PR, and again after a
 * failure with gh_rest_maybe_applied(r) true (a 5xx or a cut connection is not repeated, as
 * for gh_comment_create()). */
int gh_pull_create(gh_rest *r, const char *repo, const gh_pull_new *req, gh_pull *out);

/* PATCH /repos/{repo}/pulls/{number}; NULL fields are left unchanged. out may be NULL. */
int gh_pull_update(gh_rest *r, const char *repo, int64_t number, const char *title,
		   const char *body, const char *state, gh_pull *out);

/* GET /repos/{repo}/pulls/{number}. */
int gh_pull_get(gh_rest *r, const char *repo, int64_t number, gh_pull *out);

/* The pull request whose head is branch in repo (GET /repos/{repo}/pulls?head=owner:branch
 * &state=...). state is "open" or "all" (NULL = "open"). When several match, the newest.
 * AP_ENOTFOUND when there is none. */
int gh_pull_find_by_head(gh_rest *r, const char *repo, const char *branch, const char *state,
			 gh_pull *out);

#endif

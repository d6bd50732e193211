/* SPDX-License-Identifier: MIT */
/* github/api.c - the REST calls autopatch makes, mapped to small structs (see api.h). */
#include "github/api.h"

#include "common/buf.h"
#include "common/err.h"
#include "common/jsonnum.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_CAP 2048

/* A copy of a string member, "" when missing or null. NULL only on ENOMEM. */
static char *dup_str(const cJSON *obj, const char *name)
{
	const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(obj, name));

	return strdup(v ? v : "");
}

static int64_t get_int(const cJSON *obj, const char *name)
{
	return ap_json_int_or(obj, name, 0);
}

static bool get_bool(const cJSON *obj, const char *name)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, name));
}

/* repo must look like owner/name with no path tricks, since it is pasted into URLs. */
static int check_repo(const char *repo)
{
	const char *slash = repo ? strchr(repo, '/') : NULL;

	if (!slash || slash == repo || !slash[1] || strchr(slash + 1, '/') ||
	    strpbrk(repo, "?#% \t\r\n\\") || strstr(repo, ".."))
		return ap_error_set(AP_EINVAL, "\"%s\" is not an owner/name repository",
				    repo ? repo : "(null)");
	return 0;
}

static int path_fmt(ap_buf *p, const char *repo, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int path_fmt(ap_buf *p, const char *repo, const char *fmt, ...)
{
	va_list ap;
	int rc;

	rc = check_repo(repo);
	if (rc)
		return rc;
	rc = ap_buf_addf(p, "/repos/%s", repo);
	if (rc)
		return rc;
	va_start(ap, fmt);
	rc = ap_buf_vaddf(p, fmt, ap);
	va_end(ap);
	return rc;
}

/* URL-encode one path segment or query value. */
static int add_escaped(ap_buf *p, const char *s)
{
	char *e = curl_easy_escape(NULL, s, 0);
	int rc;

	if (!e)
		return ap_error_set(AP_ENOMEM, "out of memory");
	rc = ap_buf_adds(p, e);
	curl_free(e);
	return rc;
}

void gh_repo_release(gh_repo *r)
{
	if (!r)
		return;
	free(r->full_name);
	free(r->default_branch);
	free(r->clone_url);
	free(r->html_url);
	memset(r, 0, sizeof(*r));
}

void gh_issue_release(gh_issue *i)
{
	if (!i)
		return;
	free(i->title);
	free(i->body);
	free(i->state);
	free(i->html_url);
	free(i->user_login);
	for (size_t k = 0; k < i->n_labels; k++)
		free(i->labels[k]);
	free(i->labels);
	memset(i, 0, sizeof(*i));
}

void gh_comment_release(gh_comment *c)
{
	if (!c)
		return;
	free(c->html_url);
	free(c->body);
	memset(c, 0, sizeof(*c));
}

void gh_pull_release(gh_pull *p)
{
	if (!p)
		return;
	free(p->html_url);
	free(p->state);
	free(p->head_ref);
	free(p->head_sha);
	free(p->head_repo);
	free(p->head_clone_url);
	free(p->base_ref);
	free(p->title);
	free(p->body);
	memset(p, 0, sizeof(*p));
}

static int fill_repo(const cJSON *j, gh_repo *out)
{
	const cJSON *perm = cJSON_GetObjectItemCaseSensitive(j, "permissions");

	out->id = get_int(j, "id");
	out->full_name = dup_str(j, "full_name");
	out->default_branch = dup_str(j, "default_branch");
	out->clone_url = dup_str(j, "clone_url");
	out->html_url = dup_str(j, "html_url");
	out->private_repo = get_bool(j, "private");
	out->can_push = perm && get_bool(perm, "push");
	if (!out->full_name || !out->default_branch || !out->clone_url || !out->html_url) {
		gh_repo_release(out);
		return ap_error_set(AP_ENOMEM, "out of memory");
	}
	return 0;
}

static int fill_issue(const cJSON *j, gh_issue *out)
{
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(j, "labels"), *it;
	int n = cJSON_GetArraySize(labels);

	out->number = get_int(j, "number");
	out->title = dup_str(j, "title");
	out->body = dup_str(j, "body");
	out->state = dup_str(j, "state");
	out->html_url = dup_str(j, "html_url");
	out->user_login = dup_str(cJSON_GetObjectItemCaseSensitive(j, "user"), "login");
	out->is_pull = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(j, "pull_request"));
	if (n > 0) {
		out->labels = calloc((size_t)n, sizeof(char *));
		if (!out->labels)
			goto err_nomem;
		cJSON_ArrayForEach (it, labels) {
			/* Labels are objects in GitHub's answers, strings in some payloads. */
			char *name =
			    cJSON_IsString(it) ? strdup(it->valuestring) : dup_str(it, "name");

			if (!name)
				goto err_nomem;
			out->labels[out->n_labels++] = name;
		}
	}
	if (!out->title || !out->body || !out->state || !out->html_url || !out->user_login)
		goto err_nomem;
	return 0;
err_nomem:
	gh_issue_release(out);
	return ap_error_set(AP_ENOMEM, "out of memory");
}

static int fill_comment(const cJSON *j, gh_comment *out)
{
	out->id = get_int(j, "id");
	out->html_url = dup_str(j, "html_url");
	out->body = dup_str(j, "body");
	if (!out->html_url || !out->body) {
		gh_comment_release(out);
		return ap_error_set(AP_ENOMEM, "out of memory");
	}
	return 0;
}

static int fill_pull(const cJSON *j, gh_pull *out)
{
	const cJSON *head = cJSON_GetObjectItemCaseSensitive(j, "head");
	const cJSON *base = cJSON_GetObjectItemCaseSensitive(j, "base");
	const cJSON *hrepo = cJSON_GetObjectItemCaseSensitive(head, "repo");

	out->number = get_int(j, "number");
	out->html_url = dup_str(j, "html_url");
	out->state = dup_str(j, "state");
	out->title = dup_str(j, "title");
	out->body = dup_str(j, "body");
	out->draft = get_bool(j, "draft");
	out->head_ref = dup_str(head, "ref");
	out->head_sha = dup_str(head, "sha");
	out->head_repo = dup_str(hrepo, "full_name");
	out->head_clone_url = dup_str(hrepo, "clone_url");
	out->base_ref = dup_str(base, "ref");
	if (!out->html_url || !out->state || !out->title || !out->body || !out->head_ref ||
	    !out->head_sha || !out->head_repo || !out->head_clone_url || !out->base_ref) {
		gh_pull_release(out);
		return ap_error_set(AP_ENOMEM, "out of memory");
	}
	return 0;
}

/* Run one call and hand its JSON object to fill (when out is not NULL). rc is the result of
 * building path and body: when it is an error, no call is made and rc is returned. Either way
 * body and path are freed. idem: a POST that is safe to repeat (gh_rest_call_idempotent). */
static int call_fill(gh_rest *r, int rc, const char *method, ap_buf *path, cJSON *body, bool idem,
		     void *out, int (*fill)(const cJSON *, void *))
{
	cJSON *resp = NULL;

	if (!rc && idem)
		rc = gh_rest_call_idempotent(r, method, ap_buf_str(path), body, out ? &resp : NULL);
	else if (!rc)
		rc = gh_rest_call(r, method, ap_buf_str(path), body, out ? &resp : NULL);
	if (!rc && out) {
		if (!cJSON_IsObject(resp))
			rc = ap_error_set(AP_EINVAL, "GitHub %s %s: expected an object", method,
					  ap_buf_str(path));
		else
			rc = fill(resp, out);
	}
	cJSON_Delete(resp);
	cJSON_Delete(body);
	ap_buf_release(path);
	return rc;
}

static int fill_repo_v(const cJSON *j, void *o)
{
	return fill_repo(j, o);
}

static int fill_issue_v(const cJSON *j, void *o)
{
	return fill_issue(j, o);
}

static int fill_comment_v(const cJSON *j, void *o)
{
	return fill_comment(j, o);
}

static int fill_pull_v(const cJSON *j, void *o)
{
	return fill_pull(j, o);
}

int gh_repo_get(gh_rest *r, const char *repo, gh_repo *out)
{
	ap_buf p = AP_BUF_INIT(PATH_CAP);
	int rc;

	memset(out, 0, sizeof(*out));
	rc = path_fmt(&p, repo, "%s", "");
	return call_fill(r, rc, "GET", &p, NULL, false, out, fill_repo_v);
}

int gh_issue_get(gh_rest *r, const char *repo, int64_t number, gh_issue *out)
{
	ap_buf p = AP_BUF_INIT(PATH_CAP);
	int rc;

	memset(out, 0, sizeof(*out));
	rc = path_fmt(&p, repo, "/issues/%lld", (long long)number);
	return call_fill(r, rc, "GET", &p, NULL, false, out, fill_issue_v);
}

int gh_comments_list(gh_rest *r, const char *repo, int64_t number, cJSON **out)
{
	ap_buf p = AP_BUF_INIT(PATH_CAP);
	int rc;

	*out = NULL;
	rc = path_fmt(&p, repo, "/issues/%lld/comments", (long long)number);
	if (!rc)
		rc = gh_rest_get_all(r, ap_buf_str(&p), 0, out);
	ap_buf_release(&p);
	return rc;
}

static cJSON *body_object(const char *key, const char *value)
{
	cJSON *o = cJSON_CreateObject();

	if (o && !cJSON_AddStringToObject(o, key, value)) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* call_fill with a {key: value} body. */
static int call_body(gh_rest *r, int rc, const char *method, ap_buf *path, const char *key,
		     const char *value, bool idem, void *out, int (*fill)(const cJSON *, void *))
{
	cJSON *b = rc ? NULL : body_object(key, value);

	if (!rc && !b)
		rc = ap_error_set(AP_ENOMEM, "out of memory");
	return call_fill(r, rc, method, path, b, idem, out, fill);
}

int gh_comment_create(gh_rest *r, const char *repo, int64_t number, const char *body,
		      gh_comment *out)
{
	ap_buf p = AP_BUF_INIT(PATH_CAP);
	int rc;

	if (out)
		memset(out, 0, sizeof(*out));
	rc = path_fmt(&p, repo, "/issues/%lld/comments", (long long)number);
	return call_body(r, rc, "POST", &p, "body", body, false, out, fill_comment_v);
}

int gh_comment_update(gh_rest *r, const char *repo, int64_t comment_id, const char *body,
		      gh_comment *out)
{
	ap_buf p = AP_BUF_INIT(PATH_CAP);
	int rc;

	if (out)
		memset(out, 0, sizeof(*out));
	rc = path_fmt(&p, repo, "/issues/comments/%lld", (long long)comment_id);
	return call_body(r, rc, "PATCH", &p, "body", body, false, out, fill_comment_v);
}

int gh_labels_add(gh_rest *r, const char *repo, int64_t number, const char *const *names, size_t n)
{
	ap_buf p = AP_BUF_INIT(PATH_CAP);
	cJSON *b = cJSON_CreateObject(), *arr;
	int rc;

	arr = b ? cJSON_AddArrayToObject(b, "labels") : NULL;
	for (size_t i = 0; arr && i < n; i++) {
		cJSON *s = cJSON_CreateString(names[i]);

		if (!s) {
			arr = NULL;
			break;
		}
		cJSON_AddItemToArray(arr, s);
	}
	if (!arr)
		rc = ap_error_set(AP_ENOMEM, "out of memory");
	else
		rc = path_fmt(&p, repo, "/issues/%lld/labels", (long long)number);
	return call_fill(r, rc, "POST", &p, b, true, NULL, NULL); /* a set: safe to repeat */
}

static int reaction(gh_rest *r, const char *repo, const char *what, int64_t id, const char *content)
{
	ap_buf p = AP_BUF_INIT(PATH_CAP);
	int rc;

	rc = path_fmt(&p, repo, "/issues/%s%lld/reactions", what, (long long)id);
	/* GitHub answers 200 for a reaction that exists: safe to repeat. */
	return call_body(r, rc, "POST", &p, "content", content, true, NULL, NULL);
}

int gh_reaction_add_issue(gh_rest *r, const char *repo, int64_t number, const char *content)
{
	return reaction(r, repo, "", number, content);
}

int gh_reaction_add_comment(gh_rest *r, const char *repo, int64_t comment_id, const char *content)
{
	return reaction(r, repo, "comments/", comment_id, content);
}

int gh_pull_create(gh_rest *r, const char *repo, const gh_pull_new *req, gh_pull *out)
{
	ap_buf p = AP_BUF_INIT(PATH_CAP);
	cJSON *b = cJSON_CreateObject();
	int rc;

	memset(out, 0, sizeof(*out));
	if (!b || !cJSON_AddStringToObject(b, "title", req->title ? req->title : "") ||
	    !cJSON_AddStringToObject(b, "head", req->head ? req->head : "") ||
	    !cJSON_AddStringToObject(b, "base", req->base ? req->base : "") ||
	    !cJSON_AddStringToObject(b, "body", req->body ? req->body : "") ||
	    !cJSON_AddBoolToObject(b, "draft", req->draft) ||
	    !cJSON_AddBoolToObject(b, "maintainer_can_modify", req->maintainer_can_modify))
		rc = ap_error_set(AP_ENOMEM, "out of memory");
	else
		rc = path_fmt(&p, repo, "/pulls");
	return call_fill(r, rc, "POST", &p, b, false, out, fill_pull_v);
}

int gh_pull_update(gh_rest *r, const char *repo, int64_t number, const char *title,
		   const char *body, const char *state, gh_pull *out)
{
	ap_buf p = AP_BUF_INIT(PATH_CAP);
	cJSON *b = cJSON_CreateObject();
	int rc;

	if (out)
		memset(out, 0, sizeof(*out));
	if (!b || (title && !cJSON_AddStringToObject(b, "title", title)) ||
	    (body && !cJSON_AddStringToObject(b, "body", body)) ||
	    (state && !cJSON_AddStringToObject(b, "state", state)))
		rc = ap_error_set(AP_ENOMEM, "out of memory");
	else
		rc = path_fmt(&p, repo, "/pulls/%lld", (long long)number);
	return call_fill(r, rc, "PATCH", &p, b, false, out, fill_pull_v);
}

int gh_pull_get(gh_rest *r, const char *repo, int64_t number, gh_pull *out)
{
	ap_buf p = AP_BUF_INIT(PATH_CAP);
	int rc;

	memset(out, 0, sizeof(*out));
	rc = path_fmt(&p, repo, "/pulls/%lld", (long long)number);
	return call_fill(r, rc, "GET", &p, NULL, false, out, fill_pull_v);
}

int gh_pull_find_by_head(gh_rest *r, const char *repo, const char *branch, const char *state,
			 gh_pull *out)
{
	ap_buf p = AP_BUF_INIT(PATH_CAP), head = AP_BUF_INIT(PATH_CAP);
	cJSON *list = NULL, *best = NULL, *it;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = check_repo(repo);
	if (!rc)
		rc = ap_buf_add(&head, repo, (size_t)(strchr(repo, '/') - repo));
	if (!rc)
		rc = ap_buf_addf(&head, ":%s", branch);
	if (!rc)
		rc = path_fmt(&p, repo, "/pulls?state=%s&head=", state ? state : "open");
	if (!rc)
		rc = add_escaped(&p, ap_buf_str(&head));
	if (!rc)
		rc = gh_rest_get_all(r, ap_buf_str(&p), 1000, &list);
	if (rc)
		goto out;
	cJSON_ArrayForEach (it, list) {
		const cJSON *h = cJSON_GetObjectItemCaseSensitive(it, "head");
		const char *ref = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(h, "ref"));

		/* Trust but verify the server-side filter: only this exact branch counts. */
		if (!ref || strcmp(ref, branch) != 0)
			continue;
		if (!best || get_int(it, "number") > get_int(best, "number"))
			best = it;
	}
	if (!best)
		rc = ap_error_set(AP_ENOTFOUND, "no pull request from %s in %s", branch, repo);
	else
		rc = fill_pull(best, out);
out:
	cJSON_Delete(list);
	ap_buf_release(&p);
	ap_buf_release(&head);
	return rc;
}

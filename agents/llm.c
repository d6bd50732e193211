/* SPDX-License-Identifier: MIT */
/* agents/llm.c - OpenAI-compatible and Anthropic providers (see llm.h). */
#include "agents/llm.h"

#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/httpc.h"
#include "common/jsonnum.h"
#include "common/log.h"
#include "common/redact.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LLM_RESPONSE_CAP	(8u << 20)
#define LLM_HEADER_CAP		(64u << 10)
#define LLM_MAX_CALLS_PER_REPLY 64
#define LLM_KEY_CAP		992 /* bytes of an API key */

struct llm {
	char *provider; /* "openai" | "anthropic" */
	char *model;
	char *url;	  /* full endpoint of a chat call */
	char *models_url; /* the provider's model list (llm_probe) */
	char *api_key;	  /* may be NULL for local servers */
	char *describe;
	int64_t timeout_s;
	int64_t retries;
	int64_t max_tokens;
	traj *traj;
};

/* ---- conversation ---------------------------------------------------------------------- */

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void call_release(llm_tool_call *c)
{
	free(c->id);
	free(c->name);
	free(c->arguments);
}

static void msg_release(llm_msg *m)
{
	free(m->text);
	for (size_t i = 0; i < m->ncalls; i++)
		call_release(&m->calls[i]);
	free(m->calls);
	free(m->tool_call_id);
	free(m->tool_name);
}

static llm_msg *conv_push(llm_conv *c)
{
	if (c->n == c->alloc) {
		size_t na = c->alloc ? c->alloc * 2 : 16;
		llm_msg *nm = realloc(c->msgs, na * sizeof(*nm));
		if (!nm)
			return NULL;
		c->msgs = nm;
		c->alloc = na;
	}
	llm_msg *m = &c->msgs[c->n];
	memset(m, 0, sizeof(*m));
	return m;
}

int llm_conv_set_system(llm_conv *c, const char *system)
{
	char *s = strdup(system);
	if (!s)
		return AP_ENOMEM;
	free(c->system);
	c->system = s;
	return 0;
}

int llm_conv_add_user(llm_conv *c, const char *text)
{
	llm_msg *m = conv_push(c);
	if (!m || !(m->text = strdup(text)))
		return AP_ENOMEM;
	m->role = LLM_USER;
	c->n++;
	return 0;
}

int llm_conv_add_reply(llm_conv *c, llm_reply *r)
{
	llm_msg *m = conv_push(c);
	if (!m)
		return AP_ENOMEM;
	m->role = LLM_ASSISTANT;
	m->text = r->text;
	m->calls = r->calls;
	m->ncalls = r->ncalls;
	r->text = NULL;
	r->calls = NULL;
	r->ncalls = 0;
	c->n++;
	return 0;
}

int llm_conv_add_tool_result(llm_conv *c, const char *call_id, const char *name, const char *text,
			     bool is_error)
{
	llm_msg *m = conv_push(c);
	if (!m)
		return AP_ENOMEM;
	m->role = LLM_TOOL;
	m->text = strdup(text ? text : "");
	m->tool_call_id = strdup(call_id ? call_id : "");
	m->tool_name = strdup(name ? name : "");
	m->is_error = is_error;
	if (!m->text || !m->tool_call_id || !m->tool_name) {
		msg_release(m);
		return AP_ENOMEM;
	}
	c->n++;
	return 0;
}

void llm_conv_release(llm_conv *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		msg_release(&c->msgs[i]);
	free(c->msgs);
	free(c->system);
	memset(c, 0, sizeof(*c));
}

void llm_reply_release(llm_reply *r)
{
	if (!r)
		return;
	free(r->text);
	for (size_t i = 0; i < r->ncalls; i++)
		call_release(&r->calls[i]);
	free(r->calls);
	free(r->stop);
	memset(r, 0, sizeof(*r));
}

/* ---- request bodies -------------------------------------------------------------------- */

/* Tool arguments as a JSON object for Anthropic's tool_use.input: malformed text the model
 * sent earlier is replayed as {"_raw": text} so the conversation stays valid. */
static cJSON *args_object(const char *args)
{
	cJSON *o = args ? cJSON_Parse(args) : NULL;
	if (o && cJSON_IsObject(o))
		return o;
	cJSON_Delete(o);
	o = cJSON_CreateObject();
	if (o && args && *args)
		cJSON_AddStringToObject(o, "_raw", args);
	return o;
}

static cJSON *openai_messages(const llm_conv *conv)
{
	cJSON *arr = cJSON_CreateArray();
	if (conv->system) {
		cJSON *m = cJSON_CreateObject();
		cJSON_AddStringToObject(m, "role", "system");
		cJSON_AddStringToObject(m, "content", conv->system);
		cJSON_AddItemToArray(arr, m);
	}
	for (size_t i = 0; i < conv->n; i++) {
		const llm_msg *src = &conv->msgs[i];
		cJSON *m = cJSON_CreateObject();
		switch (src->role) {
		case LLM_USER:
			cJSON_AddStringToObject(m, "role", "user");
			cJSON_AddStringToObject(m, "content", src->text ? src->text : "");
			break;
		case LLM_ASSISTANT:
			cJSON_AddStringToObject(m, "role", "assistant");
			if (src->text)
				cJSON_AddStringToObject(m, "content", src->text);
			else
				cJSON_AddNullToObject(m, "content");
			if (src->ncalls) {
				cJSON *calls = cJSON_AddArrayToObject(m, "tool_calls");
				for (size_t k = 0; k < src->ncalls; k++) {
					cJSON *c = cJSON_CreateObject();
					cJSON_AddStringToObject(c, "id", src->calls[k].id);
					cJSON_AddStringToObject(c, "type", "function");
					cJSON *f = cJSON_AddObjectToObject(c, "function");
					cJSON_AddStringToObject(f, "name", src->calls[k].name);
					cJSON_AddStringToObject(
					    f, "arguments",
					    src->calls[k].arguments ? src->calls[k].arguments : "");
					cJSON_AddItemToArray(calls, c);
				}
			}
			break;
		case LLM_TOOL:
			cJSON_AddStringToObject(m, "role", "tool");
			cJSON_AddStringToObject(m, "tool_call_id", src->tool_call_id);
			cJSON_AddStringToObject(m, "content", src->text);
			break;
		}
		cJSON_AddItemToArray(arr, m);
	}
	return arr;
}

/* Anthropic wants alternating user/assistant turns: consecutive tool results (and a user
 * text right after them) are merged into one user message of content blocks. */
static cJSON *anthropic_messages(const llm_conv *conv)
{
	cJSON *arr = cJSON_CreateArray();
	cJSON *user_blocks = NULL; /* the open user message's content array */
	for (size_t i = 0; i < conv->n; i++) {
		const llm_msg *src = &conv->msgs[i];
		if (src->role == LLM_ASSISTANT) {
			user_blocks = NULL;
			cJSON *m = cJSON_CreateObject();
			cJSON_AddStringToObject(m, "role", "assistant");
			cJSON *content = cJSON_AddArrayToObject(m, "content");
			if (src->text && *src->text) {
				cJSON *b = cJSON_CreateObject();
				cJSON_AddStringToObject(b, "type", "text");
				cJSON_AddStringToObject(b, "text", src->text);
				cJSON_AddItemToArray(content, b);
			}
			for (size_t k = 0; k < src->ncalls; k++) {
				cJSON *b = cJSON_CreateObject();
				cJSON_AddStringToObject(b, "type", "tool_use");
				cJSON_AddStringToObject(b, "id", src->calls[k].id);
				cJSON_AddStringToObject(b, "name", src->calls[k].name);
				cJSON_AddItemToObject(b, "input",
						      args_object(src->calls[k].arguments));
				cJSON_AddItemToArray(content, b);
			}
			if (cJSON_GetArraySize(content) == 0) {
				cJSON *b = cJSON_CreateObject();
				cJSON_AddStringToObject(b, "type", "text");
				cJSON_AddStringToObject(b, "text", "(no text)");
				cJSON_AddItemToArray(content, b);
			}
			cJSON_AddItemToArray(arr, m);
			continue;
		}
		if (!user_blocks) {
			cJSON *m = cJSON_CreateObject();
			cJSON_AddStringToObject(m, "role", "user");
			user_blocks = cJSON_AddArrayToObject(m, "content");
			cJSON_AddItemToArray(arr, m);
		}
		cJSON *b = cJSON_CreateObject();
		if (src->role == LLM_TOOL) {
			cJSON_AddStringToObject(b, "type", "tool_result");
			cJSON_AddStringToObject(b, "tool_use_id", src->tool_call_id);
			cJSON_AddStringToObject(b, "content", src->text);
			if (src->is_error)
				cJSON_AddTrueToObject(b, "is_error");
		} else {
			cJSON_AddStringToObject(b, "type", "text");
			cJSON_AddStringToObject(b, "text", src->text ? src->text : "");
		}
		cJSON_AddItemToArray(user_blocks, b);
	}
	return arr;
}

char *llm_build_request(const char *provider, const char *model, int max_tokens,
			const llm_conv *conv, const llm_tool *tools, size_t ntools)
{
	bool anthropic = strcmp(provider, "anthropic") == 0;
	cJSON *root = cJSON_CreateObject();
	char *text = NULL;
	if (!root)
		return NULL;
	cJSON_AddStringToObject(root, "model", model);
	cJSON_AddNumberToObject(root, "max_tokens", max_tokens);
	if (anthropic) {
		if (conv->system)
			cJSON_AddStringToObject(root, "system", conv->system);
		cJSON_AddItemToObject(root, "messages", anthropic_messages(conv));
	} else {
		cJSON_AddItemToObject(root, "messages", openai_messages(conv));
	}
	if (ntools) {
		cJSON *arr = cJSON_AddArrayToObject(root, "tools");
		for (size_t i = 0; i < ntools; i++) {
			cJSON *schema = cJSON_Parse(tools[i].schema);
			if (!schema)
				goto out; /* our own schemas: a programmer error, caught by tests */
			cJSON *t = cJSON_CreateObject();
			if (anthropic) {
				cJSON_AddStringToObject(t, "name", tools[i].name);
				cJSON_AddStringToObject(t, "description", tools[i].description);
				cJSON_AddItemToObject(t, "input_schema", schema);
			} else {
				cJSON_AddStringToObject(t, "type", "function");
				cJSON *f = cJSON_AddObjectToObject(t, "function");
				cJSON_AddStringToObject(f, "name", tools[i].name);
				cJSON_AddStringToObject(f, "description", tools[i].description);
				cJSON_AddItemToObject(f, "parameters", schema);
			}
			cJSON_AddItemToArray(arr, t);
		}
	}
	text = cJSON_PrintUnformatted(root);
	/* cJSON prints strings as given; invalid bytes can only be inside them. */
	if (text && !ap_utf8_valid(text, strlen(text))) {
		char *valid = ap_utf8_clean_dup(text, strlen(text));

		free(text);
		text = valid;
	}
out:
	cJSON_Delete(root);
	return text;
}

/* ---- response parsing ------------------------------------------------------------------ */

static const char *str_of(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int64_t num_of(const cJSON *o, const char *key)
{
	int64_t n = ap_json_int_or(o, key, 0);

	return n >= 0 ? n : 0;
}

/* A token count the provider reported: key (plus the optional extra keys, which count only
 * when present), or -1 when key is missing, not a number, or 0 (no real call uses no tokens:
 * a server that sends zeros did not count). */
static int64_t reported(const cJSON *usage, const char *key, const char *extra1, const char *extra2)
{
	int64_t n;

	if (!cJSON_IsObject(usage) || !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(usage, key)))
		return -1;
	n = num_of(usage, key);
	if (extra1)
		n += num_of(usage, extra1);
	if (extra2)
		n += num_of(usage, extra2);
	return n > 0 ? n : -1;
}

static int add_call(llm_reply *out, const char *id, const char *name, const char *args)
{
	if (out->ncalls >= LLM_MAX_CALLS_PER_REPLY)
		return ap_error_set(AP_EINVAL, "model sent more than %d tool calls in one reply",
				    LLM_MAX_CALLS_PER_REPLY);
	llm_tool_call *n = realloc(out->calls, (out->ncalls + 1) * sizeof(*n));
	if (!n)
		return AP_ENOMEM;
	out->calls = n;
	llm_tool_call *c = &n[out->ncalls];
	c->id = strdup(id);
	c->name = strdup(name);
	c->arguments = strdup(args);
	out->ncalls++;
	if (!c->id || !c->name || !c->arguments)
		return AP_ENOMEM;
	return 0;
}

static int parse_openai(const cJSON *root, llm_reply *out)
{
	const cJSON *choices = cJSON_GetObjectItemCaseSensitive(root, "choices");
	const cJSON *ch = cJSON_IsArray(choices) ? cJSON_GetArrayItem(choices, 0) : NULL;
	const cJSON *msg = ch ? cJSON_GetObjectItemCaseSensitive(ch, "message") : NULL;
	if (!cJSON_IsObject(msg))
		return ap_error_set(AP_EINVAL, "model response has no choices[0].message");
	const char *fr = str_of(ch, "finish_reason");
	out->stop = strdup(fr ? fr : "");
	const char *content = str_of(msg, "content");
	if (content && *content)
		out->text = strdup(content);
	const cJSON *calls = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls");
	const cJSON *c;
	char synth[32];
	int i = 0, rc;
	cJSON_ArrayForEach (c, calls) {
		const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "function");
		const char *name = str_of(f, "name");
		const char *id = str_of(c, "id");
		const cJSON *a = cJSON_GetObjectItemCaseSensitive(f, "arguments");
		if (!name)
			return ap_error_set(AP_EINVAL, "model tool call without a function name");
		/* Some servers (older llama.cpp) omit ids: make one so results can refer to it. */
		if (!id) {
			snprintf(synth, sizeof(synth), "call_%d", i);
			id = synth;
		}
		char *args_text = NULL;
		if (cJSON_IsString(a))
			args_text = strdup(a->valuestring);
		else if (a)
			args_text = cJSON_PrintUnformatted(a); /* Ollama sends an object */
		else
			args_text = strdup("{}");
		if (!args_text)
			return AP_ENOMEM;
		rc = add_call(out, id, name, args_text);
		free(args_text);
		if (rc)
			return rc;
		i++;
	}
	const cJSON *usage = cJSON_GetObjectItemCaseSensitive(root, "usage");
	out->tokens_in = reported(usage, "prompt_tokens", NULL, NULL);
	out->tokens_out = reported(usage, "completion_tokens", NULL, NULL);
	return 0;
}

static int parse_anthropic(const cJSON *root, llm_reply *out)
{
	const cJSON *content = cJSON_GetObjectItemCaseSensitive(root, "content");
	if (!cJSON_IsArray(content))
		return ap_error_set(AP_EINVAL, "model response has no content array");
	const char *sr = str_of(root, "stop_reason");
	out->stop = strdup(sr ? sr : "");
	ap_buf text = AP_BUF_INIT(LLM_RESPONSE_CAP);
	const cJSON *b;
	int rc = 0;
	cJSON_ArrayForEach (b, content) {
		const char *type = str_of(b, "type");
		if (!type)
			continue;
		if (strcmp(type, "text") == 0 && str_of(b, "text")) {
			if (text.len)
				ap_buf_adds(&text, "\n");
			ap_buf_adds(&text, str_of(b, "text"));
		} else if (strcmp(type, "tool_use") == 0) {
			const char *id = str_of(b, "id"), *name = str_of(b, "name");
			const cJSON *input = cJSON_GetObjectItemCaseSensitive(b, "input");
			if (!id || !name) {
				rc = ap_error_set(AP_EINVAL,
						  "model tool_use block without id or name");
				goto out;
			}
			char *args = input ? cJSON_PrintUnformatted(input) : strdup("{}");
			if (!args) {
				rc = AP_ENOMEM;
				goto out;
			}
			rc = add_call(out, id, name, args);
			free(args);
			if (rc)
				goto out;
		}
	}
	if (text.len)
		out->text = ap_buf_take(&text);
	const cJSON *usage = cJSON_GetObjectItemCaseSensitive(root, "usage");
	out->tokens_in = reported(usage, "input_tokens", "cache_read_input_tokens",
				  "cache_creation_input_tokens");
	out->tokens_out = reported(usage, "output_tokens", NULL, NULL);
out:
	ap_buf_release(&text);
	return rc;
}

int llm_parse_response(const char *provider, const char *body, size_t len, llm_reply *out)
{
	cJSON *root = cJSON_ParseWithLength(body, len);
	int rc;
	if (!root || !cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return ap_error_set(AP_EINVAL, "model response is not a JSON object");
	}
	if (strcmp(provider, "anthropic") == 0)
		rc = parse_anthropic(root, out);
	else
		rc = parse_openai(root, out);
	cJSON_Delete(root);
	if (rc)
		llm_reply_release(out);
	return rc;
}

/* ---- HTTP ------------------------------------------------------------------------------ */

int llm_backoff_seconds(int attempt, const char *retry_after)
{
	long long v;

	if (httpc_retry_after_seconds(retry_after, &v))
		return v > 60 ? 60 : (int)v;
	int s = 1 << (attempt > 5 ? 5 : attempt - 1);
	return s > 30 ? 30 : s;
}

/* The answer headers a model call acts on. */
static const char *const answer_headers[] = {"retry-after"};

typedef struct http_ctx {
	ap_buf body;	    /* capped at LLM_RESPONSE_CAP */
	httpc_headers hdrs; /* answer_headers */
	CURLcode cc;	    /* of the transfer, for messages */
} http_ctx;

static void http_ctx_init(http_ctx *h)
{
	ap_buf_init(&h->body, LLM_RESPONSE_CAP);
	httpc_headers_init(&h->hdrs, answer_headers, 1, 31);
	h->cc = CURLE_OK;
}

static void http_ctx_release(http_ctx *h)
{
	ap_buf_release(&h->body);
	httpc_headers_clear(&h->hdrs);
}

/* One POST of body to url, or a GET when body is NULL, within timeout_s. Returns 0 with
 * *status set, or a transport error. */
static int http_request(const llm *m, const char *url, const char *body, long timeout_s,
			http_ctx *h, long *status)
{
	httpc_body sink = HTTPC_BODY_INIT(&h->body);
	CURL *c = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	char line[LLM_KEY_CAP + 32]; /* "Authorization: Bearer " + a key: never cut (llm_new) */
	int rc = 0;
	if (!c)
		return AP_ENOMEM;
	if (body)
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	if (strcmp(m->provider, "anthropic") == 0) {
		hdrs = curl_slist_append(hdrs, "anthropic-version: 2023-06-01");
		if (m->api_key) {
			snprintf(line, sizeof(line), "x-api-key: %s", m->api_key);
			hdrs = curl_slist_append(hdrs, line);
		}
	} else if (m->api_key) {
		snprintf(line, sizeof(line), "Authorization: Bearer %s", m->api_key);
		hdrs = curl_slist_append(hdrs, line);
	}
	explicit_bzero(line, sizeof(line));
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
	}
	httpc_body_sink(c, &sink);
	httpc_headers_sink(c, &h->hdrs);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 20L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_USERAGENT, "autopatch");
	CURLcode cc = curl_easy_perform(c);
	h->cc = cc;
	if (cc == CURLE_OK) {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	} else if (sink.rc == AP_ENOMEM) {
		rc = sink.rc;
	} else if (sink.rc == AP_ETOOBIG || cc == CURLE_WRITE_ERROR) {
		rc = ap_error_set(AP_ETOOBIG, "model response larger than %u bytes",
				  LLM_RESPONSE_CAP);
	} else if (cc == CURLE_OPERATION_TIMEDOUT) {
		rc = ap_error_set(AP_ETIMEOUT, "model request timed out after %ld s", timeout_s);
	} else if (cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST) {
		rc = ap_error_set(AP_EUNAVAIL, "cannot reach the model server: %s",
				  curl_easy_strerror(cc));
	} else {
		rc = ap_error_set(AP_EIO, "model request failed: %s", curl_easy_strerror(cc));
	}
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(c);
	return rc;
}

static bool retryable(long status)
{
	return status == 429 || status == 529 || status >= 500;
}

static void log_traj_response(llm *m, int attempt, long status, const http_ctx *h, int64_t millis)
{
	if (!m->traj)
		return;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "attempt", attempt);
	cJSON_AddNumberToObject(o, "status", (double)status);
	cJSON_AddNumberToObject(o, "millis", (double)millis);
	cJSON *parsed = cJSON_ParseWithLength(ap_buf_str(&h->body), h->body.len);
	if (parsed)
		cJSON_AddItemToObject(o, "body", parsed);
	else
		cJSON_AddStringToObject(o, "body_text", ap_buf_str(&h->body));
	traj_event(m->traj, "llm_response", o);
}

/* The trajectory's "llm_request" event: the model and the request body. */
static void trace_request(llm *m, const char *body)
{
	if (!m->traj)
		return;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "model", llm_describe(m));
	cJSON *parsed = cJSON_Parse(body);
	if (parsed)
		cJSON_AddItemToObject(o, "body", parsed);
	traj_event(m->traj, "llm_request", o);
}

/* The trajectory's "llm_retry" event: attempt failed with status, the next in wait s. */
static void trace_retry(llm *m, int attempt, long status, int wait)
{
	if (!m->traj)
		return;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "attempt", attempt);
	cJSON_AddNumberToObject(o, "status", (double)status);
	cJSON_AddNumberToObject(o, "retry_in_s", wait);
	traj_event(m->traj, "llm_retry", o);
}

/* The trajectory's "llm_usage" event (rc 0: what the call used) or "llm_error" event. */
static void trace_outcome(llm *m, const llm_reply *out, int rc)
{
	if (rc == 0 && m->traj) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddBoolToObject(o, "estimated", out->usage_estimated);
		cJSON_AddNumberToObject(o, "tokens_in", (double)out->tokens_in);
		cJSON_AddNumberToObject(o, "tokens_out", (double)out->tokens_out);
		cJSON_AddNumberToObject(o, "millis", (double)out->millis);
		cJSON_AddNumberToObject(o, "attempts", out->attempts);
		cJSON_AddStringToObject(o, "stop", out->stop ? out->stop : "");
		cJSON_AddNumberToObject(o, "tool_calls", (double)out->ncalls);
		traj_event(m->traj, "llm_usage", o);
	}
	if (rc && m->traj) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "error", ap_error_last());
		traj_event(m->traj, "llm_error", o);
	}
}

/* The error of a call the model server answered with a status that is not a success, after
 * attempt attempts: a rate limit (429, 529) or an HTTP error, with the start of the answer. */
static int http_failure(const http_ctx *h, long status, int attempt)
{
	char *snippet = redact_mem(ap_buf_str(&h->body), h->body.len > 300 ? 300 : h->body.len);
	int rc = ap_error_set(status == 429 || status == 529 ? AP_ERATELIMIT : AP_EHTTP,
			      "model server answered HTTP %ld after %d attempt(s): %s", status,
			      attempt, snippet ? snippet : "");

	free(snippet);
	return rc;
}

int llm_chat(llm *m, const llm_conv *conv, const llm_tool *tools, size_t ntools, llm_reply *out)
{
	char *body =
	    llm_build_request(m->provider, m->model, (int)m->max_tokens, conv, tools, ntools);
	int64_t t0 = traj_millis(m->traj);
	int rc = 0;
	long status = 0;
	if (!body)
		return ap_error_set(AP_ENOMEM, "cannot build the model request");
	memset(out, 0, sizeof(*out));
	trace_request(m, body);
	for (int attempt = 1;; attempt++) {
		http_ctx h;
		int64_t ta = traj_millis(m->traj);
		http_ctx_init(&h);
		status = 0;
		rc = http_request(m, m->url, body, (long)m->timeout_s, &h, &status);
		out->attempts = attempt;
		if (rc == 0)
			log_traj_response(m, attempt, status, &h, traj_millis(m->traj) - ta);
		if (rc == 0 && status >= 200 && status < 300) {
			rc = llm_parse_response(m->provider, ap_buf_str(&h.body), h.body.len, out);
			out->attempts = attempt;
			http_ctx_release(&h);
			break;
		}
		bool again =
		    (rc == 0 && retryable(status)) || rc == AP_ETIMEOUT || rc == AP_EUNAVAIL;
		if (!again || attempt > m->retries) {
			if (rc == 0)
				rc = http_failure(&h, status, attempt);
			http_ctx_release(&h);
			break;
		}
		int wait = llm_backoff_seconds(attempt, httpc_header(&h.hdrs, "retry-after"));
		ap_warn("model call attempt %d: %s%ld; retrying in %d s", attempt,
			rc ? "transport error " : "HTTP ", rc ? (long)rc : status, wait);
		trace_retry(m, attempt, status, wait);
		http_ctx_release(&h);
		rc = 0;
		ap_sleep_ms((int64_t)wait * 1000);
	}
	out->millis = traj_millis(m->traj) - t0;
	/* A provider that reports no usage is charged the most the call could have used: every
	 * byte of the request as an input token, and the whole output cap. */
	if (rc == 0 && out->tokens_in < 0) {
		out->tokens_in = (int64_t)strlen(body);
		out->usage_estimated = true;
	}
	if (rc == 0 && out->tokens_out < 0) {
		out->tokens_out = m->max_tokens;
		out->usage_estimated = true;
	}
	free(body);
	trace_outcome(m, out, rc);
	return rc;
}

/* ---- setup ----------------------------------------------------------------------------- */

const char *llm_model_of(const ap_config *cfg)
{
	const char *model = cfg_str(cfg, "AUTOPATCH_LLM_MODEL");

	if (model)
		return model;
	return strcmp(cfg_str(cfg, "AUTOPATCH_LLM_PROVIDER"), "anthropic") == 0
		   ? "claude-sonnet-4-20250514"
		   : "gpt-4o";
}

int llm_call_bound(const llm *m, const llm_conv *conv, const llm_tool *tools, size_t ntools,
		   int64_t *tokens_in, int64_t *tokens_out)
{
	char *body =
	    llm_build_request(m->provider, m->model, (int)m->max_tokens, conv, tools, ntools);

	*tokens_in = 0;
	*tokens_out = 0;
	if (!body)
		return ap_error_set(AP_ENOMEM, "cannot build the model request");
	*tokens_in = (int64_t)strlen(body);
	*tokens_out = m->max_tokens;
	free(body);
	return 0;
}

static bool is_local(const char *url)
{
	return strstr(url, "://127.") || strstr(url, "://localhost") || strstr(url, "://[::1]");
}

int llm_new(llm **out, const ap_config *cfg)
{
	const char *provider = cfg_str(cfg, "AUTOPATCH_LLM_PROVIDER");
	bool anthropic = strcmp(provider, "anthropic") == 0;
	int rc;
	if (!anthropic && strcmp(provider, "openai") != 0)
		return ap_error_set(AP_EINVAL,
				    "AUTOPATCH_LLM_PROVIDER must be openai or anthropic, not '%s'",
				    provider);
	rc = httpc_global_init();
	if (rc)
		return rc;
	llm *m = calloc(1, sizeof(*m));
	if (!m)
		return AP_ENOMEM;
	/* The provider-specific defaults of these three (the table has none): here only. */
	const char *base = cfg_str(cfg, "AUTOPATCH_LLM_BASE_URL");
	const char *model = llm_model_of(cfg);
	const char *key = cfg_str(cfg, "AUTOPATCH_LLM_API_KEY");
	if (!base)
		base = anthropic ? "https://api.anthropic.com" : "https://api.openai.com/v1";
	if (!key)
		key = cfg_str(cfg, anthropic ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY");
	if (!key && !is_local(base)) {
		rc = ap_error_set(AP_EINVAL,
				  "no model API key: set AUTOPATCH_LLM_API_KEY (or %s) or point "
				  "AUTOPATCH_LLM_BASE_URL at a local server",
				  anthropic ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY");
		goto fail;
	}
	/* The key goes into a header line of LLM_KEY_CAP + 32 bytes (http_request): a longer one
	 * would be cut, and a cut key fails as "unauthorized" with no hint why. */
	if (key && strlen(key) > LLM_KEY_CAP) {
		rc = ap_error_set(AP_EINVAL,
				  "the model API key is longer than %d bytes: check "
				  "AUTOPATCH_LLM_API_KEY (or %s)",
				  LLM_KEY_CAP, anthropic ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY");
		goto fail;
	}
	size_t blen = strlen(base);
	while (blen && base[blen - 1] == '/')
		blen--;
	/* Anthropic's base URL may leave out the /v1 that OpenAI-compatible ones include. */
	const char *v1 =
	    anthropic && !(blen >= 3 && strncmp(base + blen - 3, "/v1", 3) == 0) ? "/v1" : "";
	const char *suffix = anthropic ? "/messages" : "/chat/completions";
	size_t ulen = blen + strlen(v1) + strlen(suffix) + 1;
	size_t mlen = blen + strlen(v1) + sizeof("/models");
	m->url = malloc(ulen);
	m->models_url = malloc(mlen);
	if (!m->url || !m->models_url) {
		rc = AP_ENOMEM;
		goto fail;
	}
	snprintf(m->url, ulen, "%.*s%s%s", (int)blen, base, v1, suffix);
	snprintf(m->models_url, mlen, "%.*s%s/models", (int)blen, base, v1);
	m->provider = strdup(provider);
	m->model = strdup(model);
	m->api_key = dup_or_null(key);
	if (!m->provider || !m->model || (key && !m->api_key)) {
		rc = AP_ENOMEM;
		goto fail;
	}
	if (key)
		redact_add_secret(key);
	if ((rc = cfg_int(cfg, "AUTOPATCH_LLM_TIMEOUT", 1, 3600, &m->timeout_s)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_LLM_RETRIES", 0, 20, &m->retries)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_LLM_MAX_OUTPUT_TOKENS", 16, 1 << 20, &m->max_tokens)))
		goto fail;
	size_t dl = strlen(provider) + strlen(model) + 2;
	m->describe = malloc(dl);
	if (!m->describe) {
		rc = AP_ENOMEM;
		goto fail;
	}
	snprintf(m->describe, dl, "%s/%s", provider, model);
	*out = m;
	return 0;
fail:
	llm_free(m);
	return rc;
}

void llm_free(llm *m)
{
	if (!m)
		return;
	free(m->provider);
	free(m->model);
	free(m->url);
	free(m->models_url);
	if (m->api_key) {
		explicit_bzero(m->api_key, strlen(m->api_key));
		free(m->api_key);
	}
	free(m->describe);
	free(m);
}

void llm_set_trajectory(llm *m, traj *t)
{
	m->traj = t;
}

const char *llm_describe(const llm *m)
{
	return m->describe;
}

const char *llm_models_url(const llm *m)
{
	return m->models_url;
}

int llm_probe(llm *m, int timeout_s, long *status)
{
	http_ctx h;
	long st = 0;
	int rc;

	http_ctx_init(&h);
	rc = http_request(m, m->models_url, NULL, timeout_s, &h, &st);
	http_ctx_release(&h);
	if (status)
		*status = st;
	if (rc == AP_ETOOBIG)
		return rc; /* it answered; the sentence says how much */
	if (rc)
		return ap_error_set(rc, "cannot reach %s (%s)", m->models_url,
				    curl_easy_strerror(h.cc));
	if (st == 401 || st == 403)
		return ap_error_set(AP_EDENIED, "%s refused the API key (HTTP %ld)", m->models_url,
				    st);
	if (st < 200 || st > 299)
		return ap_error_set(AP_EHTTP, "%s answered HTTP %ld", m->models_url, st);
	return 0;
}

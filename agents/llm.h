/* SPDX-License-Identifier: MIT */
/* agents/llm.h - model providers behind one call: chat(messages, tools) -> text, tool calls,
 * usage.
 *
 * Providers: "openai" (chat completions with tools; any OpenAI-compatible server: OpenAI,
 * vLLM, llama.cpp server, Ollama) and "anthropic" (Messages API with tool_use / tool_result).
 * Every call has a deadline, retries with backoff on 429, 5xx and 529 (honouring retry-after),
 * caps the response size, records token usage and appends the request and the response
 * (redacted) to the trajectory when one is attached.
 *
 * Settings: AUTOPATCH_LLM_PROVIDER (openai), AUTOPATCH_LLM_BASE_URL, AUTOPATCH_LLM_MODEL,
 * AUTOPATCH_LLM_API_KEY (else OPENAI_API_KEY / ANTHROPIC_API_KEY), AUTOPATCH_LLM_TIMEOUT
 * (seconds per request, 120), AUTOPATCH_LLM_RETRIES (4), AUTOPATCH_LLM_MAX_OUTPUT_TOKENS (4096).
 */
#ifndef AP_LLM_H
#define AP_LLM_H

#include "agents/traj.h"
#include "common/config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct llm llm;

enum llm_role { LLM_USER, LLM_ASSISTANT, LLM_TOOL };

/* One tool call proposed by the model. arguments is the raw JSON text the model sent (it may
 * be malformed: the tools layer checks it). */
typedef struct llm_tool_call {
	char *id;
	char *name;
	char *arguments;
} llm_tool_call;

/* A tool offered to the model: schema is a JSON-schema object as text. */
typedef struct llm_tool {
	const char *name;
	const char *description;
	const char *schema;
} llm_tool;

/* One message of the conversation; all strings owned by the llm_conv that holds it. */
typedef struct llm_msg {
	enum llm_role role;
	char *text;	      /* user text, assistant text (may be NULL), tool result */
	llm_tool_call *calls; /* assistant only */
	size_t ncalls;
	char *tool_call_id; /* tool result only */
	char *tool_name;    /* tool result only */
	bool is_error;	    /* tool result only */
} llm_msg;

/* A conversation: the system prompt plus messages, owning every string. */
typedef struct llm_conv {
	char *system;
	llm_msg *msgs;
	size_t n, alloc;
} llm_conv;

#define LLM_CONV_INIT                                                                              \
	{                                                                                          \
		NULL, NULL, 0, 0                                                                   \
	}

typedef struct llm_reply {
	char *text; /* NULL when the model sent only tool calls */
	llm_tool_call *calls;
	size_t ncalls;
	char *stop;	      /* provider's stop/finish reason as sent */
	int64_t tokens_in;    /* as reported; llm_parse_response: -1 when not reported */
	int64_t tokens_out;   /* as reported; llm_parse_response: -1 when not reported */
	bool usage_estimated; /* llm_chat: the provider reported no usage (or zeros), so the
			       * missing counts are the most the call could have used: the
			       * request's size in bytes as input, max_tokens as output */
	int64_t millis;	      /* wall time including retries */
	int attempts;	      /* HTTP requests made (1 without retries) */
} llm_reply;

#define LLM_REPLY_INIT                                                                             \
	{                                                                                          \
		0                                                                                  \
	}

/* Read the settings and prepare a client. AP_EINVAL with a sentence for a bad provider, a
 * missing model or (for a non-local base URL) a missing key. Free with llm_free(). */
int llm_new(llm **out, const ap_config *cfg);
void llm_free(llm *m);

/* Attach a trajectory (borrowed; may be NULL) that receives each request and response. */
void llm_set_trajectory(llm *m, traj *t);

/* "provider/model", owned by m. */
const char *llm_describe(const llm *m);

/* The URL of the provider's model list (GET <base>/models; Anthropic adds /v1 when the base
 * URL lacks it), owned by m. */
const char *llm_models_url(const llm *m);

/* Whether the endpoint answers and takes the key: one GET of llm_models_url() with the key,
 * no retries, within timeout_s. 0 on a 2xx answer; AP_EDENIED on 401/403, AP_EHTTP on another
 * status, AP_ETOOBIG for an answer over the response cap, and a transport error (AP_EUNAVAIL,
 * AP_ETIMEOUT, AP_EIO) when it cannot be reached, each with a sentence naming the URL. *status (may
 * be NULL) is the HTTP status or 0. Not recorded in the trajectory. */
int llm_probe(llm *m, int timeout_s, long *status);

/* One model call. On success fills *out (release with llm_reply_release()). Fails with
 * AP_ERATELIMIT when 429/529 outlasted the retries, AP_EHTTP for other error statuses,
 * AP_ETIMEOUT, AP_EUNAVAIL (cannot connect), AP_ETOOBIG (response over the cap), AP_EINVAL
 * (response not in the provider's format). */
int llm_chat(llm *m, const llm_conv *conv, const llm_tool *tools, size_t ntools, llm_reply *out);
void llm_reply_release(llm_reply *r);

/* The model the settings name: AUTOPATCH_LLM_MODEL, else the provider's default (gpt-4o,
 * claude-sonnet-4-20250514). Borrowed from cfg or static. */
const char *llm_model_of(const ap_config *cfg);

/* The most the next llm_chat() with these arguments can use: *tokens_in = the request's size
 * in bytes (no tokenizer makes more tokens than bytes), *tokens_out = the output cap. 0 or
 * AP_ENOMEM. */
int llm_call_bound(const llm *m, const llm_conv *conv, const llm_tool *tools, size_t ntools,
		   int64_t *tokens_in, int64_t *tokens_out);

/* Conversation building. Strings are copied. */
int llm_conv_set_system(llm_conv *c, const char *system);
int llm_conv_add_user(llm_conv *c, const char *text);
/* Moves the reply's text and calls into the conversation (the reply keeps stop/usage). */
int llm_conv_add_reply(llm_conv *c, llm_reply *r);
int llm_conv_add_tool_result(llm_conv *c, const char *call_id, const char *name, const char *text,
			     bool is_error);
void llm_conv_release(llm_conv *c);

/* Wire format, exposed for unit tests: build the request body for a provider ("openai" or
 * "anthropic"; malloc'd JSON text) and parse a response body into *out (a token count the
 * response does not report, or reports as 0, is -1 there). The body is valid UTF-8 whatever
 * the conversation holds (a command's output, a file, a test's name, a model's own broken
 * text): invalid bytes become U+FFFD, as a provider refuses a body that is not UTF-8. */
char *llm_build_request(const char *provider, const char *model, int max_tokens,
			const llm_conv *conv, const llm_tool *tools, size_t ntools);
int llm_parse_response(const char *provider, const char *body, size_t len, llm_reply *out);

/* Seconds to wait before retry number attempt (1-based) given the retry-after header value
 * (may be NULL): the header wins when it is a number of seconds, capped at 60. */
int llm_backoff_seconds(int attempt, const char *retry_after);

#endif

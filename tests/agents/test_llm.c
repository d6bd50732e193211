/* SPDX-License-Identifier: MIT */
/* tests/agents/test_llm.c - provider wire formats: request bodies, response parsing, backoff,
 * settings. */
#include "agents/llm.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/fs.h"
#include "common/redact.h"

#include <cjson/cJSON.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static const llm_tool TOOLS[] = {
    {"read_file", "read", "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}}}"},
};

/* system, user, assistant with two calls, two tool results, a user nudge */
static void make_conv(llm_conv *c)
{
	llm_reply r = LLM_REPLY_INIT;
	assert_int_equal(llm_conv_set_system(c, "You are the Planner"), 0);
	assert_int_equal(llm_conv_add_user(c, "issue text"), 0);
	r.text = strdup("looking");
	r.calls = calloc(2, sizeof(*r.calls));
	r.ncalls = 2;
	r.calls[0] =
	    (llm_tool_call){strdup("call_1"), strdup("read_file"), strdup("{\"path\":\"a\"}")};
	r.calls[1] = (llm_tool_call){strdup("call_2"), strdup("read_file"), strdup("{bad json")};
	assert_int_equal(llm_conv_add_reply(c, &r), 0);
	assert_null(r.text);
	assert_int_equal(r.ncalls, 0);
	llm_reply_release(&r);
	assert_int_equal(llm_conv_add_tool_result(c, "call_1", "read_file", "1 a", false), 0);
	assert_int_equal(llm_conv_add_tool_result(c, "call_2", "read_file", "bad args", true), 0);
	assert_int_equal(llm_conv_add_user(c, "go on"), 0);
}

static void test_openai_request(void **state)
{
	(void)state;
	llm_conv c = LLM_CONV_INIT;
	make_conv(&c);
	char *body = llm_build_request("openai", "m1", 256, &c, TOOLS, 1);
	assert_non_null(body);
	cJSON *j = cJSON_Parse(body);
	assert_string_equal(cJSON_GetObjectItem(j, "model")->valuestring, "m1");
	assert_int_equal(cJSON_GetObjectItem(j, "max_tokens")->valueint, 256);
	cJSON *msgs = cJSON_GetObjectItem(j, "messages");
	assert_int_equal(cJSON_GetArraySize(msgs), 6);
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 0), "role")->valuestring,
			    "system");
	cJSON *asst = cJSON_GetArrayItem(msgs, 2);
	cJSON *calls = cJSON_GetObjectItem(asst, "tool_calls");
	assert_int_equal(cJSON_GetArraySize(calls), 2);
	cJSON *c1 = cJSON_GetArrayItem(calls, 1);
	assert_string_equal(cJSON_GetObjectItem(c1, "type")->valuestring, "function");
	/* arguments are replayed verbatim as a string, even when malformed */
	assert_string_equal(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(c1, "function"), "arguments")->valuestring,
	    "{bad json");
	cJSON *tool = cJSON_GetArrayItem(msgs, 3);
	assert_string_equal(cJSON_GetObjectItem(tool, "role")->valuestring, "tool");
	assert_string_equal(cJSON_GetObjectItem(tool, "tool_call_id")->valuestring, "call_1");
	cJSON *t0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "tools"), 0);
	assert_string_equal(cJSON_GetObjectItem(t0, "type")->valuestring, "function");
	assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(t0, "function"), "parameters"));
	cJSON_Delete(j);
	free(body);
	llm_conv_release(&c);
}

/* A tool result or a model's text with bytes that are not UTF-8 (a box's output, a token cut in
 * two by a local server) gives a request a provider accepts: valid UTF-8, U+FFFD in their
 * place. */
static void test_request_is_valid_utf8(void **state)
{
	(void)state;
	static const char *const providers[] = {"openai", "anthropic"};
	for (size_t i = 0; i < 2; i++) {
		llm_conv c = LLM_CONV_INIT;
		llm_reply r = LLM_REPLY_INIT;
		make_conv(&c);
		r.text = strdup("half a character: \xe2\x82");
		assert_int_equal(llm_conv_add_reply(&c, &r), 0);
		llm_reply_release(&r);
		assert_int_equal(
		    llm_conv_add_user(&c, "test \xff\xfe\x80\xc0\xaf\xed\xa0\x80 failed"), 0);
		char *body = llm_build_request(providers[i], "m1", 256, &c, TOOLS, 1);
		assert_non_null(body);
		assert_true(ap_utf8_valid(body, strlen(body)));
		cJSON *j = cJSON_Parse(body);
		assert_non_null(j);
		assert_non_null(strstr(
		    body, "half a character: " AP_UTF8_REPLACEMENT AP_UTF8_REPLACEMENT "\""));
		assert_non_null(strstr(body, "test " AP_UTF8_REPLACEMENT AP_UTF8_REPLACEMENT));
		cJSON_Delete(j);
		free(body);
		llm_conv_release(&c);
	}
}

static void test_anthropic_request(void **state)
{
	(void)state;
	llm_conv c = LLM_CONV_INIT;
	make_conv(&c);
	char *body = llm_build_request("anthropic", "m2", 100, &c, TOOLS, 1);
	cJSON *j = cJSON_Parse(body);
	assert_string_equal(cJSON_GetObjectItem(j, "system")->valuestring, "You are the Planner");
	cJSON *msgs = cJSON_GetObjectItem(j, "messages");
	/* user, assistant, user(tool_result, tool_result, text): turns alternate */
	assert_int_equal(cJSON_GetArraySize(msgs), 3);
	cJSON *asst = cJSON_GetArrayItem(msgs, 1);
	cJSON *blocks = cJSON_GetObjectItem(asst, "content");
	assert_int_equal(cJSON_GetArraySize(blocks), 3);
	cJSON *use = cJSON_GetArrayItem(blocks, 1);
	assert_string_equal(cJSON_GetObjectItem(use, "type")->valuestring, "tool_use");
	assert_string_equal(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(use, "input"), "path")->valuestring, "a");
	/* malformed arguments are kept as an object so the conversation stays valid */
	cJSON *bad = cJSON_GetObjectItem(cJSON_GetArrayItem(blocks, 2), "input");
	assert_true(cJSON_IsObject(bad));
	cJSON *user = cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 2), "content");
	assert_int_equal(cJSON_GetArraySize(user), 3);
	cJSON *r1 = cJSON_GetArrayItem(user, 1);
	assert_string_equal(cJSON_GetObjectItem(r1, "type")->valuestring, "tool_result");
	assert_string_equal(cJSON_GetObjectItem(r1, "tool_use_id")->valuestring, "call_2");
	assert_true(cJSON_IsTrue(cJSON_GetObjectItem(r1, "is_error")));
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(user, 2), "type")->valuestring,
			    "text");
	cJSON *t0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "tools"), 0);
	assert_non_null(cJSON_GetObjectItem(t0, "input_schema"));
	cJSON_Delete(j);
	free(body);
	llm_conv_release(&c);
}

static void test_parse_openai(void **state)
{
	(void)state;
	const char *body =
	    "{\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"finish_reason\":\"tool_calls\","
	    "\"message\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":"
	    "\"call_x\",\"type\":\"function\",\"function\":{\"name\":\"run\",\"arguments\":"
	    "\"{\\\"command\\\":\\\"ls\\\"}\"}}]}}],\"usage\":{\"prompt_tokens\":12,"
	    "\"completion_tokens\":3,\"total_tokens\":15}}";
	llm_reply r = LLM_REPLY_INIT;
	assert_int_equal(llm_parse_response("openai", body, strlen(body), &r), 0);
	assert_null(r.text);
	assert_int_equal(r.ncalls, 1);
	assert_string_equal(r.calls[0].id, "call_x");
	assert_string_equal(r.calls[0].name, "run");
	assert_string_equal(r.calls[0].arguments, "{\"command\":\"ls\"}");
	assert_string_equal(r.stop, "tool_calls");
	assert_int_equal(r.tokens_in, 12);
	assert_int_equal(r.tokens_out, 3);
	llm_reply_release(&r);
}

static void test_parse_anthropic(void **state)
{
	(void)state;
	const char *body =
	    "{\"id\":\"msg_1\",\"type\":\"message\",\"content\":[{\"type\":\"text\",\"text\":"
	    "\"hi\"},{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"read_file\",\"input\":"
	    "{\"path\":\"x\"}}],\"stop_reason\":\"tool_use\",\"usage\":{\"input_tokens\":7,"
	    "\"output_tokens\":2}}";
	llm_reply r = LLM_REPLY_INIT;
	assert_int_equal(llm_parse_response("anthropic", body, strlen(body), &r), 0);
	assert_string_equal(r.text, "hi");
	assert_int_equal(r.ncalls, 1);
	assert_string_equal(r.calls[0].id, "toolu_1");
	assert_string_equal(r.calls[0].arguments, "{\"path\":\"x\"}");
	assert_string_equal(r.stop, "tool_use");
	assert_int_equal(r.tokens_in, 7);
	assert_int_equal(r.tokens_out, 2);
	llm_reply_release(&r);
}

static void test_parse_rejects_garbage(void **state)
{
	(void)state;
	llm_reply r = LLM_REPLY_INIT;
	assert_int_equal(llm_parse_response("openai", "nope", 4, &r), AP_EINVAL);
	assert_int_equal(llm_parse_response("openai", "{\"choices\":[]}", 14, &r), AP_EINVAL);
	assert_int_equal(llm_parse_response("anthropic", "{\"content\":3}", 13, &r), AP_EINVAL);
	const char *nameless = "{\"content\":[{\"type\":\"tool_use\",\"id\":\"t\"}]}";
	assert_int_equal(llm_parse_response("anthropic", nameless, strlen(nameless), &r),
			 AP_EINVAL);
	assert_null(r.calls);
}

static void test_backoff(void **state)
{
	(void)state;
	assert_int_equal(llm_backoff_seconds(1, NULL), 1);
	assert_int_equal(llm_backoff_seconds(2, NULL), 2);
	assert_int_equal(llm_backoff_seconds(3, NULL), 4);
	assert_int_equal(llm_backoff_seconds(9, NULL), 30);
	assert_int_equal(llm_backoff_seconds(1, "7"), 7);
	assert_int_equal(llm_backoff_seconds(1, "7 "), 7);
	assert_int_equal(llm_backoff_seconds(1, "3600"), 60);
	/* an HTTP date or junk falls back to exponential backoff */
	assert_int_equal(llm_backoff_seconds(2, "Wed, 21 Oct 2015 07:28:00 GMT"), 2);
}

static void test_settings(void **state)
{
	(void)state;
	ap_config *cfg;
	llm *m = NULL;
	assert_int_equal(cfg_new_empty(&cfg), 0);
	cfg_set(cfg, "AUTOPATCH_LLM_PROVIDER", "gemini");
	assert_int_equal(llm_new(&m, cfg), AP_EINVAL);
	cfg_set(cfg, "AUTOPATCH_LLM_PROVIDER", "anthropic");
	/* a remote server without a key is refused with a sentence naming the settings */
	assert_int_equal(llm_new(&m, cfg), AP_EINVAL);
	assert_non_null(strstr(ap_error_last(), "ANTHROPIC_API_KEY"));
	cfg_set(cfg, "ANTHROPIC_API_KEY", "sk-ant-test-1234567890");
	cfg_set(cfg, "AUTOPATCH_LLM_MODEL", "claude-x");
	assert_int_equal(llm_new(&m, cfg), 0);
	assert_string_equal(llm_describe(m), "anthropic/claude-x");
	assert_string_equal(llm_models_url(m), "https://api.anthropic.com/v1/models");
	llm_free(m);
	{
		/* A key too long for its header line stops start-up instead of being cut, and
		 * the message does not repeat it. */
		char key[994];

		memset(key, 'k', sizeof(key) - 1);
		key[sizeof(key) - 1] = '\0';
		cfg_set(cfg, "ANTHROPIC_API_KEY", key);
		assert_int_equal(llm_new(&m, cfg), AP_EINVAL);
		assert_non_null(strstr(ap_error_last(), "longer than 992 bytes"));
		assert_null(strstr(ap_error_last(), "kkkk"));
		key[992] = '\0';
		cfg_set(cfg, "ANTHROPIC_API_KEY", key);
		assert_int_equal(llm_new(&m, cfg), 0);
		llm_free(m);
		cfg_set(cfg, "ANTHROPIC_API_KEY", "sk-ant-test-1234567890");
	}
	cfg_set(cfg, "AUTOPATCH_LLM_PROVIDER", "openai");
	cfg_set(cfg, "AUTOPATCH_LLM_BASE_URL", "http://127.0.0.1:1/v1");
	assert_int_equal(llm_new(&m, cfg), 0); /* local server: no key needed */
	assert_string_equal(llm_models_url(m), "http://127.0.0.1:1/v1/models");
	llm_free(m);
	cfg_free(cfg);
}

static void test_trajectory_is_redacted_jsonl(void **state)
{
	(void)state;
	char path[] = "/tmp/ap-traj-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	traj *t = NULL;
	assert_int_equal(redact_add_secret("hunter2-very-secret"), 0);
	assert_int_equal(traj_open(&t, path), 0);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "text", "the key is hunter2-very-secret, ok");
	traj_event(t, "tool_result", o);
	traj_event(t, "end", NULL);
	traj_free(t);
	ap_buf text = AP_BUF_INIT(1 << 20);
	assert_int_equal(fs_read_file(&text, path, 0), 0);
	unlink(path);
	assert_true(text.len > 0);
	char *buf = text.data;
	assert_null(strstr(buf, "hunter2-very-secret"));
	assert_non_null(strstr(buf, "the key is ***, ok"));
	char *nl = strchr(buf, '\n');
	assert_non_null(nl);
	*nl = '\0';
	cJSON *line = cJSON_Parse(buf);
	assert_non_null(line);
	assert_string_equal(cJSON_GetObjectItem(line, "type")->valuestring, "tool_result");
	assert_true(cJSON_IsNumber(cJSON_GetObjectItem(line, "t")));
	cJSON_Delete(line);
	cJSON *end = cJSON_Parse(nl + 1);
	assert_string_equal(cJSON_GetObjectItem(end, "type")->valuestring, "end");
	cJSON_Delete(end);
	ap_buf_release(&text);
	redact__clear();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_openai_request),
	    cmocka_unit_test(test_request_is_valid_utf8),
	    cmocka_unit_test(test_anthropic_request),
	    cmocka_unit_test(test_parse_openai),
	    cmocka_unit_test(test_parse_anthropic),
	    cmocka_unit_test(test_parse_rejects_garbage),
	    cmocka_unit_test(test_backoff),
	    cmocka_unit_test(test_settings),
	    cmocka_unit_test(test_trajectory_is_redacted_jsonl),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

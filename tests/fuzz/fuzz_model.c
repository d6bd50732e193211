/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz_model.c - model responses are outside data: parse arbitrary bytes as an
 * OpenAI or Anthropic response (first byte picks), and when that succeeds, put the reply in a
 * conversation and build the next request in both wire formats. No crash, no leak, and every
 * built request is JSON. */
#include "agents/llm.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const llm_tool TOOLS[] = {
    {"read_file", "read", "{\"type\":\"object\"}"},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const char *provider = (data[0] & 1) ? "anthropic" : "openai";
	llm_reply r = LLM_REPLY_INIT;
	if (llm_parse_response(provider, (const char *)data + 1, size - 1, &r) != 0)
		return 0;
	llm_conv c = LLM_CONV_INIT;
	llm_conv_set_system(&c, "system");
	llm_conv_add_user(&c, "user");
	size_t ncalls = r.ncalls;
	char *first_id = ncalls ? strdup(r.calls[0].id) : NULL;
	llm_conv_add_reply(&c, &r);
	if (first_id)
		llm_conv_add_tool_result(&c, first_id, "read_file", "result", true);
	free(first_id);
	const char *providers[] = {"openai", "anthropic"};
	for (int i = 0; i < 2; i++) {
		char *body = llm_build_request(providers[i], "m", 16, &c, TOOLS, 1);
		if (!body)
			abort();
		cJSON *j = cJSON_Parse(body);
		if (!j)
			abort();
		cJSON_Delete(j);
		free(body);
	}
	llm_conv_release(&c);
	llm_reply_release(&r);
	return 0;
}

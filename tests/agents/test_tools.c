/* SPDX-License-Identifier: MIT */
/* tests/agents/test_tools.c - tool schemas, strict argument checks, path refusal and the
 * fixed argv each tool runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agents/tools.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/fs.h"

static bool offered(enum tool_set set, const char *name)
{
	size_t n;
	const llm_tool *t = tools_offered(set, &n);
	for (size_t i = 0; i < n; i++)
		if (strcmp(t[i].name, name) == 0)
			return true;
	return false;
}

static void test_planner_gets_read_only_tools(void **state)
{
	(void)state;
	size_t n;
	tools_offered(TOOLS_PLANNER, &n);
	assert_int_equal(n, 3);
	assert_true(offered(TOOLS_PLANNER, "list_files"));
	assert_true(offered(TOOLS_PLANNER, "read_file"));
	assert_true(offered(TOOLS_PLANNER, "search_code"));
	const char *writers[] = {"write_file", "replace_in_file", "run", "finish"};
	for (size_t i = 0; i < 4; i++) {
		assert_false(offered(TOOLS_PLANNER, writers[i]));
		assert_true(offered(TOOLS_BUILDER, writers[i]));
	}
	/* and the Planner cannot call them by name either */
	char *why = NULL;
	assert_null(tools_check_args(TOOLS_PLANNER, "run", "{\"command\":\"ls\"}", &why));
	assert_non_null(strstr(why, "unknown tool 'run'"));
	free(why);
}

static void test_schemas_are_valid_json_objects(void **state)
{
	(void)state;
	size_t n;
	const llm_tool *t = tools_offered(TOOLS_BUILDER, &n);
	for (size_t i = 0; i < n; i++) {
		cJSON *s = cJSON_Parse(t[i].schema);
		assert_non_null(s);
		assert_string_equal(cJSON_GetObjectItem(s, "type")->valuestring, "object");
		assert_true(cJSON_IsFalse(cJSON_GetObjectItem(s, "additionalProperties")));
		assert_true(strlen(t[i].description) > 10);
		cJSON_Delete(s);
	}
}

static void expect_refused(enum tool_set set, const char *name, const char *args,
			   const char *fragment)
{
	char *why = NULL;
	cJSON *o = tools_check_args(set, name, args, &why);
	if (o)
		fail_msg("%s %s was accepted", name, args);
	assert_non_null(why);
	if (!strstr(why, fragment))
		fail_msg("'%s' lacks '%s'", why, fragment);
	free(why);
}

static void test_strict_argument_checks(void **state)
{
	(void)state;
	expect_refused(TOOLS_BUILDER, "read_file", "{not json", "must be a JSON object");
	expect_refused(TOOLS_BUILDER, "read_file", "[1]", "must be a JSON object");
	expect_refused(TOOLS_BUILDER, "read_file", "{} trailing", "must be a JSON object");
	expect_refused(TOOLS_BUILDER, "read_file", "{}", "missing required argument 'path'");
	expect_refused(TOOLS_BUILDER, "read_file", "{\"path\":42}", "'path' must be a string");
	expect_refused(TOOLS_BUILDER, "read_file", "{\"path\":\"a\",\"x\":1}",
		       "unknown argument 'x'");
	expect_refused(TOOLS_BUILDER, "read_file", "{\"path\":\"a\",\"max_lines\":1.5}",
		       "must be an integer");
	expect_refused(TOOLS_BUILDER, "read_file", "{\"path\":\"a\",\"max_lines\":100000}",
		       "between 1 and 500");
	expect_refused(TOOLS_BUILDER, "search_code", "{\"pattern\":\"x\",\"regex\":\"yes\"}",
		       "true or false");
	expect_refused(TOOLS_BUILDER, "search_code", "{\"pattern\":\"\"}", "bytes long");
	expect_refused(TOOLS_BUILDER, "nope", "{}", "unknown tool 'nope'");
	expect_refused(TOOLS_BUILDER, "finish", "{\"test_path\":\"t.py\"}",
		       "missing required argument");
	/* test_id: optional, a string (the test as its runner names it) */
	expect_refused(TOOLS_BUILDER, "finish",
		       "{\"test_path\":\"t.py\",\"test_command\":\"x\",\"summary\":\"s\","
		       "\"test_id\":7}",
		       "must be a string");
	expect_refused(TOOLS_BUILDER, "finish",
		       "{\"test_path\":\"t.py\",\"test_command\":\"x\",\"summary\":\"s\","
		       "\"test_id\":\"\"}",
		       "bytes long");

	char *why = NULL;
	cJSON *o = tools_check_args(TOOLS_BUILDER, "finish",
				    "{\"test_path\":\"t.go\",\"test_command\":\"go test ./size\","
				    "\"summary\":\"s\",\"test_id\":\"size::TestX\"}",
				    &why);
	assert_non_null(o);
	assert_null(why);
	cJSON_Delete(o);
	o = tools_check_args(TOOLS_BUILDER, "read_file",
			     "{\"path\":\"src/a.c\",\"start_line\":3,\"max_lines\":10}", &why);
	assert_non_null(o);
	assert_null(why);
	cJSON_Delete(o);
	o = tools_check_args(TOOLS_PLANNER, "list_files", "", &why); /* no arguments at all */
	assert_non_null(o);
	cJSON_Delete(o);
	o = tools_check_args(TOOLS_PLANNER, "list_files", "{\"path\":\".\"}", &why);
	assert_non_null(o);
	cJSON_Delete(o);
}

static void test_path_confinement_on_the_host(void **state)
{
	(void)state;
	assert_null(tools_path_refusal("calc.py"));
	assert_null(tools_path_refusal("tests/test_x.py"));
	assert_null(tools_path_refusal("a..b/c"));
	assert_non_null(tools_path_refusal(""));
	assert_non_null(tools_path_refusal("/etc/passwd"));
	assert_non_null(tools_path_refusal("../x"));
	assert_non_null(tools_path_refusal("a/../../x"));
	assert_non_null(tools_path_refusal("a/.."));
	assert_non_null(tools_path_refusal("a//../b"));
	assert_non_null(tools_path_refusal("~/x"));
	assert_non_null(tools_path_refusal(".git/config"));
	assert_non_null(tools_path_refusal("sub/.git/hooks/pre-commit"));
	expect_refused(TOOLS_BUILDER, "write_file", "{\"path\":\"../x\",\"content\":\"\"}",
		       "'..' path components");
	expect_refused(TOOLS_BUILDER, "write_file", "{\"path\":\"/tmp/x\",\"content\":\"\"}",
		       "absolute paths");
	expect_refused(TOOLS_BUILDER, "finish",
		       "{\"test_path\":\"/t.py\",\"test_command\":\"x\",\"summary\":\"s\"}",
		       "absolute paths");
}

/* Model text must be one whole argv element (or stdin), never part of the script. */
static void test_argv_keeps_model_text_out_of_scripts(void **state)
{
	(void)state;
	const char *evil = "x\"; rm -rf / #$(id)`id`";
	tool_ctx ctx = TOOL_CTX_INIT;
	tool_argv a;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "pattern", evil);
	cJSON_AddStringToObject(o, "path", "src");
	assert_int_equal(tools_build_argv(&ctx, "search_code", o, &a), 0);
	assert_string_equal(a.argv[0], "sh");
	assert_string_equal(a.argv[1], "-c");
	assert_null(strstr(a.argv[2], "rm -rf"));
	assert_string_equal(a.argv[4], "/tmp/workspace");
	assert_string_equal(a.argv[5], evil);
	assert_string_equal(a.argv[6], "src");
	assert_string_equal(a.argv[8], "-F"); /* fixed string unless regex:true */
	tools_argv_free(&a);
	cJSON_Delete(o);

	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "path", evil);
	cJSON_AddStringToObject(o, "content", evil);
	assert_int_equal(tools_build_argv(&ctx, "write_file", o, &a), 0);
	assert_null(strstr(a.argv[2], "rm -rf"));
	assert_string_equal(a.argv[5], evil);
	assert_null(a.argv[6]);
	assert_int_equal(a.stdin_len, strlen(evil));
	assert_memory_equal(a.stdin_data, evil, strlen(evil));
	tools_argv_free(&a);
	cJSON_Delete(o);

	/* run: the command is the shell string by design, and the timeout is capped */
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "command", "make test");
	cJSON_AddNumberToObject(o, "timeout_s", 600);
	ctx.run_timeout_s = 100;
	assert_int_equal(tools_build_argv(&ctx, "run", o, &a), 0);
	assert_string_equal(a.argv[2], "make test");
	assert_int_equal(a.timeout_s, 100);
	tools_argv_free(&a);
	cJSON_Delete(o);
}

static void test_replace_once(void **state)
{
	(void)state;
	int n;
	char *r = tools_replace_once("a b a", "b", "XY", &n);
	assert_string_equal(r, "a XY a");
	assert_int_equal(n, 1);
	free(r);
	assert_null(tools_replace_once("a b a", "a", "c", &n));
	assert_int_equal(n, 2);
	assert_null(tools_replace_once("a b a", "zz", "c", &n));
	assert_int_equal(n, 0);
	r = tools_replace_once("line1\nline2\n", "line2\n", "", &n);
	assert_string_equal(r, "line1\n");
	free(r);
}

static void test_head_tail(void **state)
{
	(void)state;
	char big[1000];
	memset(big, 'm', sizeof(big));
	memcpy(big, "HEAD", 4);
	memcpy(big + sizeof(big) - 4, "TAIL", 4);
	char *s = tools_head_tail(big, sizeof(big), 100);
	assert_non_null(strstr(s, "HEAD"));
	assert_non_null(strstr(s, "TAIL"));
	assert_non_null(strstr(s, "900 bytes omitted"));
	assert_true(strlen(s) < 160);
	free(s);
	s = tools_head_tail("short", 5, 100);
	assert_string_equal(s, "short");
	free(s);
}

#define FFFD AP_UTF8_REPLACEMENT

/* What a box prints is shown as text: invalid bytes and NULs replaced, cut between characters,
 * within the cap even when replacing makes it longer. */
static void test_head_tail_of_untrusted_bytes(void **state)
{
	(void)state;
	char *s = tools_head_tail("ok\xff\xfe\0\xed\xa0\x80!", 9, 100);
	assert_string_equal(s, "ok" FFFD FFFD FFFD FFFD FFFD FFFD "!");
	free(s);
	/* 40 invalid bytes are 120 bytes of text: more than the cap of 100 */
	char junk[40];
	memset(junk, 0xff, sizeof(junk));
	s = tools_head_tail(junk, sizeof(junk), 100);
	assert_true(ap_utf8_valid(s, strlen(s)));
	assert_non_null(strstr(s, "bytes omitted"));
	assert_true(strlen(s) <= 100 + 40);
	free(s);
	/* a cut never splits a character: 1000 euro signs, cap 100 */
	char euros[3000];
	for (size_t i = 0; i < sizeof(euros); i += 3)
		memcpy(euros + i, "\xe2\x82\xac", 3);
	s = tools_head_tail(euros, sizeof(euros), 100);
	assert_true(ap_utf8_valid(s, strlen(s)));
	assert_null(strstr(s, FFFD));
	assert_non_null(strstr(s, "[... 2904 bytes omitted ...]"));
	free(s);
}

/* A command's output with such bytes makes a trajectory line that a strict parser accepts. */
static void test_traj_line_of_untrusted_bytes(void **state)
{
	(void)state;
	char path[] = "/tmp/ap-test-tools-XXXXXX";
	int fd = mkstemp(path);
	traj *tj = NULL;
	ap_buf text = AP_BUF_INIT(1u << 20);
	static const char out[] = "name \xff\xfe \x80 \xc0\xaf \xed\xa0\x80 \0 end";
	sbx_result r = SBX_RESULT_INIT;
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(traj_open(&tj, path), 0);
	r.out = (char *)out;
	r.out_len = sizeof(out) - 1;
	r.err = (char *)"\xfe";
	r.err_len = 1;
	tools_traj_command(tj, "sandbox_exec", "pytest \xff", "/tmp/workspace", &r);
	/* a tool result as agent_tool() records it: the text straight into cJSON */
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "name", "run");
	cJSON_AddStringToObject(o, "result", "exit status: 1\n\xff\xfe\x80\xc0\xaf\xed\xa0\x80");
	traj_event(tj, "tool_result", o);
	traj_free(tj);
	assert_int_equal(fs_read_file(&text, path, 0), 0);
	unlink(path);
	assert_true(ap_utf8_valid(text.data, text.len));
	char *nl = strchr(text.data, '\n');
	assert_non_null(nl);
	*nl = '\0';
	cJSON *e = cJSON_Parse(text.data);
	assert_non_null(e);
	assert_string_equal(cJSON_GetObjectItem(e, "stdout")->valuestring,
			    "name " FFFD FFFD " " FFFD " " FFFD FFFD " " FFFD FFFD FFFD " " FFFD
			    " end");
	assert_string_equal(cJSON_GetObjectItem(e, "stderr")->valuestring, FFFD);
	assert_string_equal(cJSON_GetObjectItem(e, "command")->valuestring, "pytest " FFFD);
	cJSON_Delete(e);
	e = cJSON_Parse(nl + 1);
	assert_non_null(e);
	assert_string_equal(cJSON_GetObjectItem(e, "result")->valuestring,
			    "exit status: 1\n" FFFD FFFD FFFD FFFD FFFD FFFD FFFD FFFD);
	cJSON_Delete(e);
	ap_buf_release(&text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_planner_gets_read_only_tools),
	    cmocka_unit_test(test_schemas_are_valid_json_objects),
	    cmocka_unit_test(test_strict_argument_checks),
	    cmocka_unit_test(test_path_confinement_on_the_host),
	    cmocka_unit_test(test_argv_keeps_model_text_out_of_scripts),
	    cmocka_unit_test(test_replace_once),
	    cmocka_unit_test(test_head_tail),
	    cmocka_unit_test(test_head_tail_of_untrusted_bytes),
	    cmocka_unit_test(test_traj_line_of_untrusted_bytes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

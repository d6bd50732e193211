/* SPDX-License-Identifier: MIT */
/* tests/common/test_common.c - buffer caps, errors, the settings table, configuration
 * parsing, the fixed tables (slots) and the clocks (deadlines, the fake clock). */
#include "common/buf.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/err.h"
#include "common/jsonnum.h"
#include "common/redact.h"
#include "common/slots.h"

#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

static void test_buf_cap_refuses_overflow(void **state)
{
	ap_buf b = AP_BUF_INIT(8);

	(void)state;
	assert_int_equal(ap_buf_adds(&b, "12345"), 0);
	assert_int_equal(ap_buf_adds(&b, "6789"), AP_ETOOBIG);
	assert_string_equal(ap_buf_str(&b), "12345");
	assert_int_equal(ap_buf_addf(&b, "%d", 678), 0);
	assert_string_equal(ap_buf_str(&b), "12345678");
	assert_int_equal(ap_buf_add(&b, "x", 1), AP_ETOOBIG);
	ap_buf_release(&b);
}

static void test_fmt_fails_instead_of_cutting(void **state)
{
	char small[8];

	(void)state;
	assert_int_equal(ap_fmt(small, sizeof(small), "%s/%d", "ab", 12), 0);
	assert_string_equal(small, "ab/12");
	assert_int_equal(ap_fmt(small, sizeof(small), "%s", "1234567"), 0); /* exactly fits */
	assert_int_equal(ap_fmt(small, sizeof(small), "%s/x", "/tmp/dir"), AP_ETOOBIG);
	assert_non_null(strstr(ap_error_last(), "would be cut at 7 bytes"));
	ap_error_clear();
}

static void test_excerpt_marks_the_cut(void **state)
{
	char small[8];

	(void)state;
	assert_false(ap_excerpt(small, sizeof(small), "1234567")); /* exactly fits */
	assert_string_equal(small, "1234567");
	assert_true(ap_excerpt(small, sizeof(small), "12345678"));
	assert_string_equal(small, "1234...");
	/* "ab" then a 3-byte character that would straddle the cut: it goes whole. */
	assert_true(ap_excerpt(small, sizeof(small), "ab\xe2\x82\xac\xe2\x82\xacxyz"));
	assert_string_equal(small, "ab...");
}

/* An error message past AP_ERROR_MSG_MAX - 1 bytes ends in "...", never cut silently; one
 * that fits is kept as it is. */
static void test_error_message_marks_its_cut(void **state)
{
	static char big[AP_ERROR_MSG_MAX + 100];
	size_t n;

	(void)state;
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(ap_error_set(AP_EINVAL, "why: %s", big), AP_EINVAL);
	n = strlen(ap_error_last());
	assert_true(n <= AP_ERROR_MSG_MAX - 1 && n > AP_ERROR_MSG_MAX - 8);
	assert_string_equal(ap_error_last() + n - 3, "...");
	assert_memory_equal(ap_error_last(), "why: xxx", 8);
	big[AP_ERROR_MSG_MAX - 6] = '\0'; /* "why: " + this = AP_ERROR_MSG_MAX - 1 bytes */
	ap_error_set(AP_EINVAL, "why: %s", big);
	assert_int_equal(strlen(ap_error_last()), AP_ERROR_MSG_MAX - 1);
	assert_int_equal(ap_error_last()[AP_ERROR_MSG_MAX - 2], 'x');
	/* Two-byte characters across the cut: it falls between two of them. */
	for (size_t i = 0; i + 2 < sizeof(big); i += 2)
		memcpy(big + i, "\xc3\xa9", 2);
	big[sizeof(big) - 2] = '\0';
	ap_error_set(AP_EINVAL, "x%s", big); /* byte 1020 is inside a character */
	n = strlen(ap_error_last());
	assert_string_equal(ap_error_last() + n - 3, "...");
	assert_true(ap_utf8_valid(ap_error_last(), n));
	ap_error_clear();
}

static void test_buf_take_transfers_ownership(void **state)
{
	ap_buf b = AP_BUF_INIT(64);
	char *s;

	(void)state;
	s = ap_buf_take(&b);
	assert_string_equal(s, "");
	free(s);
	ap_buf_addf(&b, "job %d", 7);
	s = ap_buf_take(&b);
	assert_string_equal(s, "job 7");
	assert_null(b.data);
	free(s);
}

static void test_buf_truncate_keeps_a_c_string(void **state)
{
	ap_buf b = AP_BUF_INIT(64);

	(void)state;
	ap_buf_truncate(&b, 0); /* nothing appended yet: still empty, still no allocation */
	assert_null(b.data);
	assert_int_equal(ap_buf_adds(&b, "hello world"), 0);
	ap_buf_truncate(&b, 5);
	assert_int_equal(b.len, 5);
	assert_string_equal(ap_buf_str(&b), "hello");
	assert_int_equal(ap_buf_adds(&b, "!"), 0);
	assert_string_equal(ap_buf_str(&b), "hello!");
	ap_buf_reset(&b);
	assert_string_equal(ap_buf_str(&b), "");
	ap_buf_release(&b);
}

/* A buffer whose len was moved by hand past its NUL stops a debug build at the next call
 * (buf.c's check_invariants) instead of handing out text beyond len. */
static void test_buf_invariants_are_asserted(void **state)
{
	int status = 0;
	pid_t pid;

	(void)state;
#ifdef NDEBUG
	skip();
#endif
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		ap_buf b = AP_BUF_INIT(64);

		signal(SIGABRT, SIG_DFL);
		dup2(open("/dev/null", O_WRONLY), 2); /* the assert's message */
		ap_buf_adds(&b, "abcdef");
		b.len = 3; /* what ap_buf_truncate is for */
		ap_buf_adds(&b, "x");
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGABRT);
}

#define FFFD AP_UTF8_REPLACEMENT

/* Bytes from a box: \xff\xfe, a lone continuation byte, an overlong '/', a UTF-16 surrogate
 * encoded in UTF-8, a lead byte cut short, a NUL, and a U+FFFD that was in the input. */
static const char BAD[] = "a\xff\xfe b\x80 c\xc0\xaf d\xed\xa0\x80 e\xe2\x82 f\0g " FFFD "!";

static char *clean_str(const char *s, size_t n, enum ap_utf8_mode mode)
{
	size_t len = ap_utf8_clean(NULL, 0, s, n, mode, NULL), used = 0;
	char *out = malloc(len + 1);

	assert_non_null(out);
	assert_int_equal(ap_utf8_clean(out, len, s, n, mode, &used), len);
	assert_int_equal(used, n);
	out[len] = '\0';
	assert_true(ap_utf8_valid(out, len));
	return out;
}

static void test_utf8_decode_and_encode(void **state)
{
	size_t used;
	char u[4];

	(void)state;
	assert_int_equal(ap_utf8_decode("A", 1, &used), 'A');
	assert_int_equal(used, 1);
	assert_int_equal(ap_utf8_decode("\xe2\x82\xac", 3, &used), 0x20AC);
	assert_int_equal(used, 3);
	assert_int_equal(ap_utf8_decode("\xf0\x9f\x98\x80", 4, &used), 0x1F600);
	assert_int_equal(used, 4);
	/* invalid: one replacement per byte, the next byte is not swallowed */
	static const char *const bad[] = {"\x80",     "\xc0\xaf",	  "\xed\xa0\x80",
					  "\xe2\x82", "\xf4\x90\x80\x80", "\xff",
					  "\xe2(\xac"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(ap_utf8_decode(bad[i], strlen(bad[i]), &used), 0xFFFD);
		assert_int_equal(used, 1);
	}
	assert_int_equal(ap_utf8_encode(u, 0x20AC), 3);
	assert_memory_equal(u, "\xe2\x82\xac", 3);
	assert_int_equal(ap_utf8_encode(u, 0x1F600), 4);
	assert_int_equal(ap_utf8_encode(u, '~'), 1);
}

static void test_utf8_clean_replaces_what_is_not_text(void **state)
{
	char *s;

	(void)state;
	assert_true(ap_utf8_valid("", 0));
	assert_true(ap_utf8_valid("plain \xe2\x82\xac " FFFD, strlen("plain \xe2\x82\xac " FFFD)));
	assert_false(ap_utf8_valid("a\0b", 3));
	assert_false(ap_utf8_valid(BAD, sizeof(BAD) - 1));
	s = clean_str(BAD, sizeof(BAD) - 1, AP_UTF8_REPLACE);
	assert_string_equal(s, "a" FFFD FFFD " b" FFFD " c" FFFD FFFD " d" FFFD FFFD FFFD
			       " e" FFFD FFFD " f" FFFD "g " FFFD "!");
	free(s);
	/* distinct: the bytes stay visible, and a U+FFFD of the input is told apart */
	s = clean_str(BAD, sizeof(BAD) - 1, AP_UTF8_DISTINCT);
	assert_string_equal(s,
			    "a" FFFD "ff" FFFD "fe b" FFFD "80 c" FFFD "c0" FFFD "af d" FFFD
			    "ed" FFFD "a0" FFFD "80 e" FFFD "e2" FFFD "82 f" FFFD "00g " FFFD "~!");
	free(s);
	char *x = clean_str("x\xff", 2, AP_UTF8_DISTINCT),
	     *y = clean_str("x" FFFD "ff", 6, AP_UTF8_DISTINCT);
	assert_string_not_equal(x, y);
	free(x);
	free(y);
	/* valid text is left as it is */
	s = clean_str("caf\xc3\xa9 \xf0\x9f\x98\x80", 10, AP_UTF8_DISTINCT);
	assert_string_equal(s, "caf\xc3\xa9 \xf0\x9f\x98\x80");
	free(s);
	s = ap_utf8_clean_dup("ok\0no", 5);
	assert_string_equal(s, "ok" FFFD "no");
	free(s);
}

static void test_utf8_clean_writes_whole_characters(void **state)
{
	char out[16];
	size_t used;

	(void)state;
	/* a three-byte character that does not fit is left out, and counted as not consumed */
	assert_int_equal(ap_utf8_clean(out, 4, "ab\xe2\x82\xac", 5, AP_UTF8_REPLACE, &used), 2);
	assert_int_equal(used, 2);
	assert_int_equal(ap_utf8_clean(out, 5, "ab\xe2\x82\xac", 5, AP_UTF8_REPLACE, &used), 5);
	assert_int_equal(used, 5);
	/* so is a replacement */
	assert_int_equal(ap_utf8_clean(out, 3, "a\xff", 2, AP_UTF8_REPLACE, &used), 1);
	assert_int_equal(used, 1);
	assert_int_equal(ap_utf8_clean(out, 5, "a\xff", 2, AP_UTF8_DISTINCT, &used), 1);
	assert_int_equal(ap_utf8_clean(out, 6, "a\xff", 2, AP_UTF8_DISTINCT, &used), 6);
	assert_memory_equal(out, "a" FFFD "ff", 6);
	assert_int_equal(ap_utf8_clean(out, 0, "abc", 3, AP_UTF8_REPLACE, &used), 0);
	assert_int_equal(used, 0);
}

/* Passed through a variable so tests/e2e/test_settings_documented.py does not take it for a
 * setting the code reads. */
static const char *const not_a_setting = "AUTOPATCH_NO_SUCH_SETTING";

static void test_config_env_file_and_overrides(void **state)
{
	char path[] = "/tmp/ap-cfg-XXXXXX";
	int fd = mkstemp(path);
	ap_config *c;
	int64_t n;
	FILE *f;

	(void)state;
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	fputs("# comment\nexport PORT=4000\nWEBHOOK_SECRET=\"a b\\nc\"\nAUTOPATCH_LABEL=x # c\n"
	      "AUTOPATCH_GIT_NAME=file\n",
	      f);
	fclose(f);
	setenv("AUTOPATCH_GIT_NAME", "env", 1);
	assert_int_equal(cfg_load(&c, path), 0);
	assert_string_equal(cfg_str(c, "WEBHOOK_SECRET"), "a b\nc");
	assert_string_equal(cfg_str(c, "AUTOPATCH_LABEL"), "x");
	assert_string_equal(cfg_str(c, "AUTOPATCH_GIT_NAME"), "env");
	assert_int_equal(cfg_int(c, "PORT", 1, 65535, &n), 0);
	assert_int_equal(n, 4000);
	cfg_set(c, "PORT", "80a");
	assert_int_equal(cfg_int(c, "PORT", 1, 65535, &n), AP_EINVAL);
	assert_string_equal(ap_error_last(), "PORT=\"80a\" is not a whole number: set it to one");
	assert_int_equal(n, 3000); /* the default, even on error */
	cfg_set(c, "PORT", "70000");
	assert_int_equal(cfg_int(c, "PORT", 1, 65535, &n), AP_EINVAL);
	assert_string_equal(ap_error_last(), "PORT=70000 is out of range: use 1 to 65535");
	cfg_set(c, "AUTOPATCH_SANDBOX_MEMORY", "2m");
	assert_int_equal(cfg_bytes(c, "AUTOPATCH_SANDBOX_MEMORY", 0, INT64_MAX, &n), 0);
	assert_int_equal(n, 2 << 20);
	cfg_free(c);
	unlink(path);
	unsetenv("AUTOPATCH_GIT_NAME");
}

/* Unset and empty settings read the table's default; explicitly set ones their value. */
static void test_config_defaults_come_from_the_table(void **state)
{
	ap_config *c;
	int64_t n;
	bool b = true;

	(void)state;
	assert_int_equal(cfg_new_empty(&c), 0);
	assert_string_equal(cfg_str(c, "AUTOPATCH_SANDBOX_IMAGE"), "autopatch-sandbox:latest");
	assert_string_equal(cfg_str(c, "DOCKER_HOST"), "unix:///var/run/docker.sock");
	assert_false(cfg_is_set(c, "DOCKER_HOST"));
	assert_null(cfg_str(c, "APP_ID"));
	assert_int_equal(cfg_int(c, "PORT", 1, 65535, &n), 0);
	assert_int_equal(n, 3000);
	assert_int_equal(cfg_bytes(c, "AUTOPATCH_GH_MAX_RESPONSE", 4096, 1 << 30, &n), 0);
	assert_int_equal(n, 16 << 20);
	assert_int_equal(cfg_bool(c, "AUTOPATCH_ALLOW_WORKFLOW_CHANGES", &b), 0);
	assert_false(b);
	cfg_set(c, "AUTOPATCH_LABEL", "");
	assert_false(cfg_is_set(c, "AUTOPATCH_LABEL"));
	assert_string_equal(cfg_str(c, "AUTOPATCH_LABEL"), "autopatch");
	cfg_set(c, "AUTOPATCH_LABEL", "fix-me");
	assert_true(cfg_is_set(c, "AUTOPATCH_LABEL"));
	assert_string_equal(cfg_str(c, "AUTOPATCH_LABEL"), "fix-me");
	cfg_set(c, "AUTOPATCH_ALLOW_WORKFLOW_CHANGES", "maybe");
	assert_int_equal(cfg_bool(c, "AUTOPATCH_ALLOW_WORKFLOW_CHANGES", &b), AP_EINVAL);
	assert_string_equal(
	    ap_error_last(),
	    "AUTOPATCH_ALLOW_WORKFLOW_CHANGES=\"maybe\" is not a boolean: use true or false");
	cfg_set(c, "AUTOPATCH_GH_MAX_RESPONSE", "12q");
	assert_int_equal(cfg_bytes(c, "AUTOPATCH_GH_MAX_RESPONSE", 4096, 1 << 30, &n), AP_EINVAL);
	assert_string_equal(ap_error_last(), "AUTOPATCH_GH_MAX_RESPONSE=\"12q\" is not a size: use "
					     "bytes or a k/m/g suffix (512m)");
	cfg_free(c);
}

/* Every row: a unique upper-case name, a doc line, and a default its accessor can parse (the
 * numeric kinds always have one). */
static void test_config_table_is_well_formed(void **state)
{
	size_t n;
	const cfg_setting *s = cfg_settings(&n);
	ap_config *c;
	int64_t v;
	bool b;

	(void)state;
	assert_true(n > 40);
	assert_int_equal(cfg_new_empty(&c), 0);
	for (size_t i = 0; i < n; i++) {
		assert_true(strspn(s[i].name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") ==
			    strlen(s[i].name));
		assert_ptr_equal(cfg_setting_find(s[i].name), &s[i]);
		assert_true(s[i].doc && s[i].doc[0]);
		switch (s[i].kind) {
		case CFG_INT:
			assert_int_equal(cfg_int(c, s[i].name, INT64_MIN, INT64_MAX, &v), 0);
			break;
		case CFG_BYTES:
			assert_int_equal(cfg_bytes(c, s[i].name, 0, INT64_MAX, &v), 0);
			break;
		case CFG_BOOL:
			assert_int_equal(cfg_bool(c, s[i].name, &b), 0);
			break;
		case CFG_STR:
			assert_ptr_equal(cfg_str(c, s[i].name), s[i].def);
			break;
		}
	}
	assert_null(cfg_setting_find(not_a_setting));
	cfg_free(c);
}

enum misuse { UNKNOWN_STR, UNKNOWN_SET, UNKNOWN_INT, WRONG_KIND, NOT_ENV_ONLY, BAD_RANGE };

/* Run one misuse of the accessors in a child; it must abort (a programmer error). */
static void expect_bug(enum misuse what)
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		ap_config *c;
		int64_t n;
		FILE *null = freopen("/dev/null", "w", stderr);

		(void)null;
		if (cfg_new_empty(&c))
			_exit(3);
		switch (what) {
		case UNKNOWN_STR:
			(void)cfg_str(c, not_a_setting);
			break;
		case UNKNOWN_SET:
			cfg_set(c, not_a_setting, "1");
			break;
		case UNKNOWN_INT:
			cfg_int(c, not_a_setting, 0, 1, &n);
			break;
		case WRONG_KIND:
			cfg_int(c, "AUTOPATCH_LABEL", 0, 1, &n);
			break;
		case NOT_ENV_ONLY:
			(void)cfg_env("AUTOPATCH_LABEL");
			break;
		case BAD_RANGE: /* the default 3000 is outside the caller's range */
			cfg_int(c, "PORT", 1, 100, &n);
			break;
		}
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGABRT);
}

static void test_config_name_not_in_table_is_a_bug(void **state)
{
	(void)state;
	expect_bug(UNKNOWN_STR);
	expect_bug(UNKNOWN_SET);
	expect_bug(UNKNOWN_INT);
	expect_bug(WRONG_KIND);
	expect_bug(NOT_ENV_ONLY);
	expect_bug(BAD_RANGE);
}

static void test_config_env_only_reads_the_environment(void **state)
{
	(void)state;
	unsetenv("AUTOPATCH_ENV_FILE");
	assert_null(cfg_env("AUTOPATCH_ENV_FILE"));
	setenv("AUTOPATCH_ENV_FILE", "/etc/autopatch/env", 1);
	assert_string_equal(cfg_env("AUTOPATCH_ENV_FILE"), "/etc/autopatch/env");
	unsetenv("AUTOPATCH_ENV_FILE");
}

/* The CFG_SECRET rows are what cfg_register_secrets() hands to the redaction layer. */
static void test_config_registers_the_secret_rows(void **state)
{
	ap_config *c;
	char *out;

	(void)state;
	redact__clear();
	assert_int_equal(cfg_new_empty(&c), 0);
	cfg_set(c, "WEBHOOK_SECRET", "hook-secret-123456");
	cfg_set(c, "OPENAI_API_KEY", "model-key-abcdef");
	cfg_set(c, "AUTOPATCH_LABEL", "plain-label-value");
	assert_int_equal(cfg_register_secrets(c), 0);
	out = redact_str("hook-secret-123456 model-key-abcdef plain-label-value");
	assert_string_equal(out, "*** *** plain-label-value");
	free(out);
	redact__clear();
	cfg_free(c);
}

static void test_config_malformed_line_names_line(void **state)
{
	char path[] = "/tmp/ap-cfg-XXXXXX";
	int fd = mkstemp(path);
	ap_config *c;

	(void)state;
	assert_int_equal(write(fd, "A=1\nnot a setting\n", 18), 18);
	close(fd);
	assert_int_equal(cfg_load(&c, path), AP_EINVAL);
	assert_non_null(strstr(ap_error_last(), "line 2"));
	unlink(path);
}

static void test_json_int_refuses_what_int64_cannot_hold(void **state)
{
	cJSON *o = cJSON_Parse("{\"a\": 42, \"b\": 1e300, \"c\": 1.5, \"d\": -7, \"e\": \"9\","
			       "\"f\": 9007199254740993e3, \"g\": -1e19}");
	int64_t n = 5;

	(void)state;
	assert_non_null(o);
	assert_true(ap_json_int(cJSON_GetObjectItem(o, "a"), &n));
	assert_int_equal(n, 42);
	assert_true(ap_json_int(cJSON_GetObjectItem(o, "d"), &n));
	assert_int_equal(n, -7);
	n = 5;
	assert_false(ap_json_int(cJSON_GetObjectItem(o, "b"), &n));
	assert_false(ap_json_int(cJSON_GetObjectItem(o, "c"), &n));
	assert_false(ap_json_int(cJSON_GetObjectItem(o, "e"), &n));
	assert_false(ap_json_int(cJSON_GetObjectItem(o, "f"), &n));
	assert_false(ap_json_int(cJSON_GetObjectItem(o, "g"), &n));
	assert_false(ap_json_int(NULL, &n));
	assert_int_equal(n, 5);
	assert_int_equal(ap_json_int_or(o, "b", -1), -1);
	assert_int_equal(ap_json_int_or(o, "missing", 3), 3);
	cJSON_Delete(o);
}

/* An integer added as written: exact past 2^53, where a double would round it. */
static void test_json_str_and_num_default_on_another_type(void **state)
{
	cJSON *o = cJSON_Parse("{\"s\":\"x\",\"n\":2.5,\"z\":null,\"a\":[1]}");

	(void)state;
	assert_non_null(o);
	assert_string_equal(ap_json_str(o, "s"), "x");
	assert_string_equal(ap_json_str(o, "n"), "");
	assert_string_equal(ap_json_str(o, "missing"), "");
	assert_string_equal(ap_json_str(NULL, "s"), "");
	assert_true(ap_json_num(o, "n") == 2.5);
	assert_true(ap_json_num(o, "s") == 0);
	assert_true(ap_json_num(o, "z") == 0);
	assert_true(ap_json_num(o, "a") == 0);
	cJSON_Delete(o);
}

static void test_json_add_int_is_exact(void **state)
{
	cJSON *o = cJSON_CreateObject();
	char *text;

	(void)state;
	assert_true(ap_json_add_int(o, "job", INT64_C(9007199254740993)));
	assert_true(ap_json_add_int(o, "neg", -42));
	text = cJSON_PrintUnformatted(o);
	assert_string_equal(text, "{\"job\":9007199254740993,\"neg\":-42}");
	free(text);
	cJSON_Delete(o);
}

/* A table of two zeroed entries of the asked size behind a mutex; cap 0 is refused with the
 * caller's sentence; free accepts NULL. */
static void test_slots_new_zeroed_entries_and_refusal(void **state)
{
	struct obj {
		ap_slots t;
		int extra;
	} *o = NULL;
	void *out = (void *)1;

	(void)state;
	assert_int_equal(
	    ap_slots_new(&out, sizeof(struct obj), 0, 16, "a table needs room for one"), AP_EINVAL);
	assert_null(out);
	assert_string_equal(ap_error_last(), "a table needs room for one");
	assert_int_equal(ap_slots_new((void **)&o, sizeof(*o), 2, 24, "x"), 0);
	assert_int_equal(o->t.cap, 2);
	assert_int_equal(o->extra, 0);
	for (int i = 0; i < 2; i++) {
		const unsigned char *e = ap_slots_at(&o->t, i);

		for (int b = 0; b < 24; b++)
			assert_int_equal(e[b], 0);
	}
	assert_ptr_equal(ap_slots_at(&o->t, 1), (char *)ap_slots_at(&o->t, 0) + 24);
	memset(ap_slots_at(&o->t, 1), 0xab, 24);
	assert_int_equal(pthread_mutex_lock(&o->t.lock), 0);
	assert_int_equal(pthread_mutex_unlock(&o->t.lock), 0);
	ap_slots_free(&o->t);
	ap_slots_free(NULL);
}

/* Deadlines: normalised (tv_nsec below a second, also when the milliseconds carry into it),
 * not before now + ms on the clock asked for, and a timed wait on them returns after them. */
static void test_clock_deadline_in(void **state)
{
	struct timespec before, ts, after;
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
	int64_t t0, waited;

	(void)state;
	for (int64_t ms = 0; ms < 3000; ms += 97) {
		clock_gettime(CLOCK_MONOTONIC, &before);
		ap_deadline_in(&ts, CLOCK_MONOTONIC, ms);
		clock_gettime(CLOCK_MONOTONIC, &after);
		assert_true(ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000L);
		int64_t got = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
		assert_true(got >=
			    (int64_t)before.tv_sec * 1000000000 + before.tv_nsec + ms * 1000000);
		assert_true(got <=
			    (int64_t)after.tv_sec * 1000000000 + after.tv_nsec + ms * 1000000);
	}
	ap_deadline_in(&ts, CLOCK_REALTIME, -5); /* a negative wait is no wait */
	clock_gettime(CLOCK_REALTIME, &after);
	assert_true(ts.tv_sec < after.tv_sec ||
		    (ts.tv_sec == after.tv_sec && ts.tv_nsec <= after.tv_nsec));
	/* The default condition clock is CLOCK_REALTIME. */
	t0 = ap_mono_ms();
	pthread_mutex_lock(&mu);
	ap_deadline_in(&ts, CLOCK_REALTIME, 120);
	while (pthread_cond_timedwait(&cv, &mu, &ts) == 0)
		;
	pthread_mutex_unlock(&mu);
	waited = ap_mono_ms() - t0;
	assert_true(waited >= 110 && waited < 5000);
	/* Wall milliseconds agree with time(2). */
	assert_true(ap_wall_ms() / 1000 - (int64_t)time(NULL) <= 1);
	assert_true((int64_t)time(NULL) - ap_wall_ms() / 1000 <= 1);
}

static int64_t real_ms(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *fake_sleeper(void *ud)
{
	(void)ud;
	for (int i = 0; i < 1000; i++)
		ap_sleep_ms(7);
	return NULL;
}

/* The fake clock: advancing and sleeping move both clocks on at once, by exactly that much
 * beyond the real time that passed; a sleep takes no real time and is counted (from any
 * thread); restarting starts again at the real time; deadlines stay real; off gives back the
 * real clocks and real sleeps. The bounds on real time are loose: the machine may be busy. */
static void test_clock_fake(void **state)
{
	int64_t real0, wall0, mono0, real, dw, dm;
	pthread_t th[4];
	struct timespec ts;

	(void)state;
	ap_clock__fake(true);
	assert_int_equal(ap_clock__slept_ms(), 0);
	real0 = real_ms(CLOCK_MONOTONIC);
	wall0 = ap_wall_ms();
	mono0 = ap_mono_ms();
	assert_true(llabs(wall0 - real_ms(CLOCK_REALTIME)) <= 1000); /* starts at the real time */
	ap_clock__advance(3600 * 1000);
	ap_sleep_ms(90 * 1000);
	ap_sleep_ms(0);
	ap_sleep_ms(-5);
	dw = ap_wall_ms() - wall0;
	dm = ap_mono_ms() - mono0;
	real = real_ms(CLOCK_MONOTONIC) - real0;
	assert_true(real < 5000); /* the 90 s sleep was not slept */
	/* both clocks moved on by the advance and the sleep, plus the real time that passed */
	assert_true(dw >= 3690 * 1000 && dw <= 3690 * 1000 + real + 1);
	assert_true(dm >= 3690 * 1000 && dm <= 3690 * 1000 + real + 1);
	assert_int_equal(ap_clock__slept_ms(), 90 * 1000); /* sleeps only, not the advance */
	assert_true(ap_wall_s() - (int64_t)time(NULL) >= 3689);
	/* ap_deadline_in stays on the real clock */
	ap_deadline_in(&ts, CLOCK_REALTIME, 0);
	assert_true(llabs(((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000) -
			  real_ms(CLOCK_REALTIME)) <= 1000);

	/* Sleeps on other threads move the one clock on; none is lost. */
	mono0 = ap_mono_ms();
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&th[i], NULL, fake_sleeper, NULL), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(ap_clock__slept_ms(), 90 * 1000 + 4 * 1000 * 7);
	assert_true(ap_mono_ms() - mono0 >= 4 * 1000 * 7);

	/* Restarting begins again at the real time, with nothing slept. */
	ap_clock__fake(true);
	assert_int_equal(ap_clock__slept_ms(), 0);
	assert_true(llabs(ap_wall_ms() - real_ms(CLOCK_REALTIME)) <= 1000);
	assert_true(llabs(ap_mono_ms() - real_ms(CLOCK_MONOTONIC)) <= 500);
	ap_clock__advance(5000);
	ap_sleep_ms(5000);

	/* Off: the real clocks again, and a sleep sleeps. */
	ap_clock__fake(false);
	assert_int_equal(ap_clock__slept_ms(), 0);
	assert_true(llabs(ap_wall_ms() - real_ms(CLOCK_REALTIME)) <= 500);
	assert_true(llabs(ap_mono_ms() - real_ms(CLOCK_MONOTONIC)) <= 500);
	assert_true(llabs(ap_wall_s() - (int64_t)time(NULL)) <= 1);
	real0 = real_ms(CLOCK_MONOTONIC);
	ap_sleep_ms(60);
	real = real_ms(CLOCK_MONOTONIC) - real0;
	assert_true(real >= 59 && real < 5000);
	assert_int_equal(ap_clock__slept_ms(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_buf_cap_refuses_overflow),
	    cmocka_unit_test(test_fmt_fails_instead_of_cutting),
	    cmocka_unit_test(test_excerpt_marks_the_cut),
	    cmocka_unit_test(test_error_message_marks_its_cut),
	    cmocka_unit_test(test_buf_take_transfers_ownership),
	    cmocka_unit_test(test_buf_truncate_keeps_a_c_string),
	    cmocka_unit_test(test_buf_invariants_are_asserted),
	    cmocka_unit_test(test_utf8_decode_and_encode),
	    cmocka_unit_test(test_utf8_clean_replaces_what_is_not_text),
	    cmocka_unit_test(test_utf8_clean_writes_whole_characters),
	    cmocka_unit_test(test_config_env_file_and_overrides),
	    cmocka_unit_test(test_config_defaults_come_from_the_table),
	    cmocka_unit_test(test_config_table_is_well_formed),
	    cmocka_unit_test(test_config_name_not_in_table_is_a_bug),
	    cmocka_unit_test(test_config_env_only_reads_the_environment),
	    cmocka_unit_test(test_config_registers_the_secret_rows),
	    cmocka_unit_test(test_config_malformed_line_names_line),
	    cmocka_unit_test(test_json_int_refuses_what_int64_cannot_hold),
	    cmocka_unit_test(test_slots_new_zeroed_entries_and_refusal),
	    cmocka_unit_test(test_json_str_and_num_default_on_another_type),
	    cmocka_unit_test(test_json_add_int_is_exact),
	    cmocka_unit_test(test_clock_deadline_in),
	    cmocka_unit_test(test_clock_fake),
	};
	return cmocka_run_group_tests_name("common", tests, NULL, NULL);
}

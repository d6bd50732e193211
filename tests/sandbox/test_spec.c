/* SPDX-License-Identifier: MIT */
/* tests/sandbox/test_spec.c - a box spec becomes a create body with every hardening field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "sandbox/docker_api.h"
#include "sandbox/internal.h"

static sbx_spec full_spec(void)
{
	sbx_spec s = SBX_SPEC_INIT;

	s.image = "img:1";
	s.runtime = "runsc";
	s.repo_dir = "/srv/checkout";
	s.job_label = "job-7";
	s.memory_bytes = 3LL << 30;
	s.nano_cpus = 1500000000;
	s.pids = 99;
	s.tmp_bytes = 64LL << 20;
	s.workspace_bytes = 512LL << 20;
	s.nofile = 1234;
	s.fsize_bytes = 77LL << 20;
	s.wall_seconds = 321;
	return s;
}

static cJSON *get(const cJSON *o, const char *k)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	if (!v)
		fail_msg("field %s is missing", k);
	return v;
}

static double num(const cJSON *o, const char *k)
{
	cJSON *v = get(o, k);

	assert_true(cJSON_IsNumber(v));
	return v->valuedouble;
}

static const char *str(const cJSON *o, const char *k)
{
	cJSON *v = get(o, k);

	assert_true(cJSON_IsString(v));
	return v->valuestring;
}

static const cJSON *ulimit(const cJSON *hc, const char *name)
{
	const cJSON *u;

	cJSON_ArrayForEach(u, get(hc, "Ulimits")) if (strcmp(str(u, "Name"), name) == 0) return u;
	fail_msg("ulimit %s missing", name);
	return NULL;
}

static void test_spec_every_hardening_field(void **state)
{
	sbx_spec s = full_spec();
	cJSON *b = NULL, *hc, *caps, *sec, *tmpfs, *binds, *labels, *env, *cmd;
	const cJSON *u, *e;

	(void)state;
	assert_int_equal(sbx__create_body(&s, "owner-x", 321, "none", NULL, false, &b), 0);
	assert_string_equal(str(b, "Image"), "img:1");
	assert_string_equal(str(b, "User"), "10001:10001");
	assert_string_equal(str(b, "WorkingDir"), "/tmp/workspace");
	assert_true(cJSON_IsTrue(get(b, "NetworkDisabled")));
	assert_true(cJSON_IsFalse(get(b, "Tty")));
	assert_true(cJSON_IsFalse(get(b, "OpenStdin")));
	cmd = get(b, "Cmd");
	assert_string_equal(cJSON_GetArrayItem(cmd, 0)->valuestring, "sleep");
	assert_string_equal(cJSON_GetArrayItem(cmd, 1)->valuestring, "321");

	labels = get(b, "Labels");
	assert_string_equal(str(labels, "autopatch.owner"), "owner-x");
	assert_string_equal(str(labels, "autopatch.job"), "job-7");
	assert_string_equal(str(labels, "autopatch.creator"), dk_creator_self());

	/* The environment holds only fixed values: nothing from the host. */
	env = get(b, "Env");
	cJSON_ArrayForEach(e, env)
	{
		assert_true(cJSON_IsString(e));
		assert_true(strncmp(e->valuestring, "HOME=", 5) == 0 ||
			    strncmp(e->valuestring, "CI=", 3) == 0 ||
			    strncmp(e->valuestring, "TMPDIR=", 7) == 0 ||
			    strncmp(e->valuestring, "LANG=", 5) == 0);
	}

	hc = get(b, "HostConfig");
	assert_string_equal(str(hc, "NetworkMode"), "none");
	assert_true(cJSON_IsTrue(get(hc, "ReadonlyRootfs")));
	assert_true(cJSON_IsFalse(get(hc, "Privileged")));
	assert_true(cJSON_IsTrue(get(hc, "Init")));
	assert_true(cJSON_IsFalse(get(hc, "AutoRemove")));
	caps = get(hc, "CapDrop");
	assert_int_equal(cJSON_GetArraySize(caps), 1);
	assert_string_equal(cJSON_GetArrayItem(caps, 0)->valuestring, "ALL");
	assert_null(cJSON_GetObjectItemCaseSensitive(hc, "CapAdd"));
	sec = get(hc, "SecurityOpt");
	assert_string_equal(cJSON_GetArrayItem(sec, 0)->valuestring, "no-new-privileges:true");
	assert_true(num(hc, "Memory") == (double)(3LL << 30));
	assert_true(num(hc, "MemorySwap") == num(hc, "Memory"));
	assert_true(num(hc, "NanoCpus") == 1500000000.0);
	assert_true(num(hc, "PidsLimit") == 99);
	u = ulimit(hc, "nofile");
	assert_true(num(u, "Soft") == 1234 && num(u, "Hard") == 1234);
	u = ulimit(hc, "core");
	assert_true(num(u, "Soft") == 0 && num(u, "Hard") == 0);
	u = ulimit(hc, "fsize");
	assert_true(num(u, "Soft") == (double)(77LL << 20) && num(u, "Hard") == num(u, "Soft"));
	tmpfs = get(hc, "Tmpfs");
	assert_non_null(strstr(str(tmpfs, "/tmp"), "size=67108864"));
	assert_non_null(strstr(str(tmpfs, "/tmp"), "noexec"));
	assert_non_null(strstr(str(tmpfs, "/tmp"), "nosuid"));
	assert_non_null(strstr(str(tmpfs, "/tmp/workspace"), "size=536870912"));
	assert_non_null(strstr(str(tmpfs, "/tmp/workspace"), "nosuid"));
	assert_non_null(strstr(str(tmpfs, "/tmp/workspace"), "nodev"));
	assert_non_null(strstr(str(tmpfs, "/tmp/workspace"), "uid=10001,gid=10001"));
	/* HOME and the Tester's trees: exec-able (built tests run there), but capped, nosuid */
	assert_non_null(strstr(str(tmpfs, "/tmp/trees"), "nosuid,nodev,exec,size="));
	assert_non_null(strstr(str(tmpfs, "/tmp/trees"), "uid=10001,gid=10001"));
	assert_null(strstr(str(tmpfs, "/tmp/trees"), "size=0,"));
	assert_int_equal(cJSON_GetArraySize(tmpfs), 3);
	assert_string_equal(str(get(hc, "LogConfig"), "Type"), "none");
	assert_string_equal(str(hc, "Runtime"), "runsc");
	assert_string_equal(str(hc, "IpcMode"), "private");
	binds = get(hc, "Binds");
	assert_int_equal(cJSON_GetArraySize(binds), 1);
	assert_string_equal(cJSON_GetArrayItem(binds, 0)->valuestring, "/srv/checkout:/repo:ro");
	/* The Docker socket is never mounted, nor anything else. */
	assert_null(cJSON_GetObjectItemCaseSensitive(hc, "Mounts"));
	assert_null(cJSON_GetObjectItemCaseSensitive(hc, "Devices"));
	assert_null(cJSON_GetObjectItemCaseSensitive(b, "Volumes"));
	cJSON_Delete(b);
}

static void test_spec_no_repo_and_pool_sleep(void **state)
{
	sbx_spec s = full_spec();
	cJSON *b = NULL;

	(void)state;
	s.repo_dir = NULL;
	assert_int_equal(sbx__create_body(&s, "o", 0, "none", NULL, false, &b), 0);
	assert_int_equal(cJSON_GetArraySize(get(get(b, "HostConfig"), "Binds")), 0);
	assert_string_equal(cJSON_GetArrayItem(get(b, "Cmd"), 1)->valuestring, "infinity");
	cJSON_Delete(b);
}

static void test_spec_podman_spelling(void **state)
{
	sbx_spec s = full_spec();
	cJSON *b = NULL;
	const char *ws;

	(void)state;
	assert_int_equal(sbx__create_body(&s, "o", 5, "none", NULL, true, &b), 0);
	ws = str(get(get(b, "HostConfig"), "Tmpfs"), "/tmp/workspace");
	assert_non_null(strstr(ws, ",U"));
	assert_null(strstr(ws, "uid="));
	cJSON_Delete(b);
}

static void test_spec_refuses_bad_repo_paths(void **state)
{
	sbx_spec s = full_spec();
	cJSON *b = NULL;

	(void)state;
	s.repo_dir = "relative/dir";
	assert_int_equal(sbx__create_body(&s, "o", 1, "none", NULL, false, &b), AP_EINVAL);
	assert_null(b);
	/* A ':' would let the path add bind options (or a second target). */
	s.repo_dir = "/a:/var/run/docker.sock";
	assert_int_equal(sbx__create_body(&s, "o", 1, "none", NULL, false, &b), AP_EINVAL);
	assert_null(b);
}

static void test_default_owner_is_stable(void **state)
{
	char a[32], b[32], c[32];

	(void)state;
	assert_int_equal(sbx__default_owner("/var/lib/autopatch.db", a, sizeof(a)), 0);
	assert_int_equal(sbx__default_owner("/var/lib/autopatch.db", b, sizeof(b)), 0);
	assert_int_equal(sbx__default_owner("/other.db", c, sizeof(c)), 0);
	assert_string_equal(a, b);
	assert_string_not_equal(a, c);
	assert_int_equal(strlen(a), 16);
}

static void test_creator_identity(void **state)
{
	(void)state;
	assert_true(dk_creator_alive(dk_creator_self()));
	assert_false(dk_creator_alive("999999999:1"));
	assert_false(dk_creator_alive("garbage"));
	assert_false(dk_creator_alive(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_spec_every_hardening_field),
	    cmocka_unit_test(test_spec_no_repo_and_pool_sleep),
	    cmocka_unit_test(test_spec_refuses_bad_repo_paths),
	    cmocka_unit_test(test_spec_podman_spelling),
	    cmocka_unit_test(test_default_owner_is_stable),
	    cmocka_unit_test(test_creator_identity),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

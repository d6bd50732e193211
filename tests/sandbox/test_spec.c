/* SPDX-License-Identifier: MIT */
/* tests/sandbox/test_spec.c - a box spec becomes a create body with every hardening field. */
#include "common/err.h"
#include "sandbox/backend.h"
#include "sandbox/docker_api.h"
#include "sandbox/internal.h"
#include "sandbox/sandbox.h"

#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

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
	s.volume_bytes = 8LL << 20;
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

	cJSON_ArrayForEach (u, get(hc, "Ulimits"))
		if (strcmp(str(u, "Name"), name) == 0)
			return u;
	fail_msg("ulimit %s missing", name);
	return NULL;
}

static void test_spec_every_hardening_field(void **state)
{
	sbx_spec s = full_spec();
	cJSON *b = NULL, *hc, *caps, *sec, *tmpfs, *binds, *labels, *env, *cmd;
	const cJSON *u, *e;

	(void)state;
	assert_int_equal(sbx__create_body(&s, "owner-x", 321, "none", NULL, NULL, false, &b), 0);
	assert_string_equal(str(b, "Image"), "img:1");
	assert_string_equal(str(b, "User"), "10001:10001");
	assert_string_equal(str(b, "WorkingDir"), "/tmp/workspace");
	/* "none" alone: NetworkDisabled would leave the box without /etc/hosts (no localhost) */
	assert_null(cJSON_GetObjectItemCaseSensitive(b, "NetworkDisabled"));
	assert_true(cJSON_IsFalse(get(b, "Tty")));
	assert_true(cJSON_IsFalse(get(b, "OpenStdin")));
	cmd = get(b, "Cmd");
	assert_string_equal(cJSON_GetArrayItem(cmd, 0)->valuestring, "sleep");
	assert_string_equal(cJSON_GetArrayItem(cmd, 1)->valuestring, "321");

	labels = get(b, "Labels");
	assert_string_equal(str(labels, "autopatch.owner"), "owner-x");
	assert_string_equal(str(labels, "autopatch.job"), "job-7");
	assert_string_equal(str(labels, "autopatch.creator"), sbx_creator_self());

	/* The environment holds only fixed values: nothing from the host. */
	env = get(b, "Env");
	cJSON_ArrayForEach (e, env) {
		assert_true(cJSON_IsString(e));
		assert_true(strncmp(e->valuestring, "HOME=", 5) == 0 ||
			    strncmp(e->valuestring, "CI=", 3) == 0 ||
			    strncmp(e->valuestring, "TMPDIR=", 7) == 0 ||
			    strncmp(e->valuestring, "LANG=", 5) == 0 ||
			    strcmp(e->valuestring, "PIP_BREAK_SYSTEM_PACKAGES=1") == 0);
	}

	hc = get(b, "HostConfig");
	assert_string_equal(str(hc, "NetworkMode"), "none");
	/* the host's resolv.conf stays out of a box without network */
	assert_string_equal(cJSON_GetArrayItem(get(hc, "Dns"), 0)->valuestring, "127.0.0.1");
	assert_int_equal(cJSON_GetArraySize(get(hc, "Dns")), 1);
	assert_string_equal(cJSON_GetArrayItem(get(hc, "DnsSearch"), 0)->valuestring, ".");
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
	assert_int_equal(sbx__create_body(&s, "o", 0, "none", NULL, NULL, false, &b), 0);
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
	assert_int_equal(sbx__create_body(&s, "o", 5, "none", NULL, NULL, true, &b), 0);
	ws = str(get(get(b, "HostConfig"), "Tmpfs"), "/tmp/workspace");
	assert_non_null(strstr(ws, ",U"));
	assert_null(strstr(ws, "uid="));
	assert_string_equal(ws, "rw,nosuid,nodev,exec,size=536870912,mode=0755,U");
	cJSON_Delete(b);
	/* Docker's spelling of the same mount, whole. */
	assert_int_equal(sbx__create_body(&s, "o", 5, "none", NULL, NULL, false, &b), 0);
	assert_string_equal(str(get(get(b, "HostConfig"), "Tmpfs"), "/tmp/workspace"),
			    "rw,nosuid,nodev,exec,size=536870912,mode=0755,uid=10001,gid=10001");
	cJSON_Delete(b);
}

static void test_spec_refuses_bad_repo_paths(void **state)
{
	sbx_spec s = full_spec();
	cJSON *b = NULL;

	(void)state;
	s.repo_dir = "relative/dir";
	assert_int_equal(sbx__create_body(&s, "o", 1, "none", NULL, NULL, false, &b), AP_EINVAL);
	assert_null(b);
	/* A ':' would let the path add bind options (or a second target). */
	s.repo_dir = "/a:/var/run/docker.sock";
	assert_int_equal(sbx__create_body(&s, "o", 1, "none", NULL, NULL, false, &b), AP_EINVAL);
	assert_null(b);
}

/* An image's VOLUMEs become tmpfs mounts owned by the box user, capped, noexec. */
static void test_spec_covers_image_volumes(void **state)
{
	static const char *const vols[] = {"/data", "/var/cache/app", NULL};
	sbx_spec s = full_spec();
	cJSON *b = NULL, *tmpfs;

	(void)state;
	assert_int_equal(sbx__create_body(&s, "o", 5, "none", NULL, vols, false, &b), 0);
	tmpfs = get(get(b, "HostConfig"), "Tmpfs");
	assert_int_equal(cJSON_GetArraySize(tmpfs), 5); /* /tmp, workspace, trees */
	for (const char *const *v = vols; *v; v++) {
		const char *o = str(tmpfs, *v);

		assert_non_null(strstr(o, "size=8388608"));
		assert_non_null(strstr(o, "uid=10001,gid=10001"));
		assert_non_null(strstr(o, "noexec"));
		assert_non_null(strstr(o, "nosuid"));
		assert_non_null(strstr(o, "nodev"));
		assert_non_null(strstr(o, "mode=0755"));
	}
	assert_null(cJSON_GetObjectItemCaseSensitive(get(b, "HostConfig"), "Mounts"));
	cJSON_Delete(b);
	assert_int_equal(sbx__create_body(&s, "o", 5, "none", NULL, vols, true, &b), 0);
	assert_non_null(strstr(str(get(get(b, "HostConfig"), "Tmpfs"), "/data"), ",U"));
	cJSON_Delete(b);
}

/* An inspect answer with these VOLUME paths (NULL-terminated). */
static cJSON *image_with(const char *const *paths)
{
	cJSON *img = cJSON_CreateObject(), *cfg = cJSON_AddObjectToObject(img, "Config"), *vols;

	cJSON_AddStringToObject(img, "Id", "sha256:0123");
	vols = cJSON_AddObjectToObject(cfg, "Volumes");
	for (; *paths; paths++)
		cJSON_AddItemToObject(vols, *paths, cJSON_CreateObject());
	return img;
}

static void test_image_volumes_are_cleaned(void **state)
{
	static const char *const paths[] = {"/data/", "//data", "/tmp", "/var//lib/x/", NULL};
	static const char *const none[] = {NULL};
	cJSON *img = image_with(paths);
	char **out = NULL;

	(void)state;
	assert_int_equal(sbx__image_volumes(img, "img:1", &out), 0);
	assert_non_null(out);
	assert_string_equal(out[0], "/data");
	assert_string_equal(out[1], "/var/lib/x");
	assert_null(out[2]);
	sbx__volumes_free(out);
	cJSON_Delete(img);
	/* nothing declared, or only /tmp (the box's capped /tmp covers it) */
	img = image_with(none);
	assert_int_equal(sbx__image_volumes(img, "img:1", &out), 0);
	assert_null(out);
	cJSON_Delete(img);
	img = cJSON_Parse("{\"Id\":\"sha256:1\",\"Config\":{\"Volumes\":null}}");
	assert_int_equal(sbx__image_volumes(img, "img:1", &out), 0);
	assert_null(out);
	cJSON_Delete(img);
	img = cJSON_Parse("{\"Id\":\"sha256:1\",\"Config\":{\"Volumes\":{\"/tmp/\":{}}}}");
	assert_int_equal(sbx__image_volumes(img, "img:1", &out), 0);
	assert_null(out);
	cJSON_Delete(img);
}

static void test_image_volumes_refused_with_a_sentence(void **state)
{
	static const struct {
		const char *path, *why;
	} bad[] = {
	    {"/", "replace the box's whole read-only root filesystem"},
	    {"//", "replace the box's whole read-only root filesystem"},
	    {"/repo", "the read-only repository at /repo"},
	    {"/repo/sub", "the read-only repository at /repo"},
	    {"/tmp/workspace", "the workspace at /tmp/workspace"},
	    {"/tmp/workspace/node_modules", "the workspace at /tmp/workspace"},
	    {"/proc", "kernel or device filesystem"},
	    {"/dev/shm", "kernel or device filesystem"},
	    {"/sys/fs/cgroup", "kernel or device filesystem"},
	    {"data", "not an absolute path"},
	    {"/a/../repo", "\"..\" component"},
	    {"/a/./b", "\"..\" component"},
	    {"/a:b", "characters other than"}, /* shown as /a?b */
	};
	char **out = NULL, many[SBX_MAX_VOLUMES + 1][16];
	const char *paths[SBX_MAX_VOLUMES + 2];
	cJSON *img;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *one[] = {"/fine", bad[i].path, NULL};

		img = image_with(one);
		assert_int_equal(sbx__image_volumes(img, "repo/img:2", &out), AP_EDENIED);
		assert_null(out);
		if (!strstr(ap_error_last(), bad[i].why) ||
		    !strstr(ap_error_last(), strchr(bad[i].path, ':') ? "/a?b" : bad[i].path) ||
		    !strstr(ap_error_last(), "the sandbox image repo/img:2 declares VOLUME"))
			fail_msg("%s: %s", bad[i].path, ap_error_last());
		cJSON_Delete(img);
	}
	/* what the image wrote is shown tamed: no newline, no markup, no mention */
	{
		const char *one[] = {"/a b\n**@x**", NULL};

		img = image_with(one);
		assert_int_equal(sbx__image_volumes(img, "img", &out), AP_EDENIED);
		assert_non_null(strstr(ap_error_last(), "declares VOLUME /a?b????x??, which"));
		cJSON_Delete(img);
	}
	for (int i = 0; i <= SBX_MAX_VOLUMES; i++) {
		snprintf(many[i], sizeof(many[i]), "/v%d", i);
		paths[i] = many[i];
	}
	paths[SBX_MAX_VOLUMES + 1] = NULL;
	img = image_with(paths);
	assert_int_equal(sbx__image_volumes(img, "img", &out), AP_EDENIED);
	assert_non_null(strstr(ap_error_last(), "more than 16 VOLUMEs"));
	cJSON_Delete(img);
	paths[SBX_MAX_VOLUMES] = NULL; /* exactly the maximum is fine */
	img = image_with(paths);
	assert_int_equal(sbx__image_volumes(img, "img", &out), 0);
	sbx__volumes_free(out);
	cJSON_Delete(img);
	img = cJSON_Parse("{\"Config\":{\"Volumes\":[\"/data\"]}}");
	assert_int_equal(sbx__image_volumes(img, "img", &out), AP_EDENIED);
	cJSON_Delete(img);
}

static void test_created_container_mounts_are_checked(void **state)
{
	cJSON *c;

	(void)state;
	c = cJSON_Parse("{\"Mounts\":[]}");
	assert_int_equal(sbx__check_mounts(c, "img"), 0);
	cJSON_Delete(c);
	c = cJSON_Parse("{\"Mounts\":[{\"Type\":\"bind\",\"Destination\":\"/repo\"},"
			"{\"Type\":\"tmpfs\",\"Destination\":\"/data\"}]}");
	assert_int_equal(sbx__check_mounts(c, "img"), 0);
	cJSON_Delete(c);
	c = cJSON_Parse("{\"Mounts\":[{\"Type\":\"volume\",\"Name\":\"b7c6\","
			"\"Source\":\"/var/lib/docker/volumes/b7c6/_data\","
			"\"Destination\":\"/data\"}]}");
	assert_int_equal(sbx__check_mounts(c, "img:3"), AP_EDENIED);
	assert_non_null(strstr(ap_error_last(), "mounted a volume at /data"));
	assert_non_null(strstr(ap_error_last(), "img:3"));
	cJSON_Delete(c);
	c = cJSON_Parse("{\"Mounts\":[{\"Type\":\"bind\","
			"\"Destination\":\"/var/run/docker.sock\"}]}");
	assert_int_equal(sbx__check_mounts(c, "img"), AP_EDENIED);
	cJSON_Delete(c);
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

static void test_default_owner_refuses_a_long_db_path(void **state)
{
	char out[32], db[PATH_MAX * 2 + 16];

	(void)state;
	memset(db, 'x', sizeof(db) - 1);
	db[0] = '/';
	db[sizeof(db) - 1] = '\0';
	/* A cut path would give two databases one owner id. */
	assert_int_equal(sbx__default_owner(db, out, sizeof(out)), AP_ETOOBIG);
	assert_non_null(strstr(ap_error_last(), "AUTOPATCH_DB"));
	ap_error_clear();
}

static void test_long_job_label_is_refused(void **state)
{
	sbx_engine e;
	sbx_box *b = (sbx_box *)&e; /* must be reset to NULL */
	char label[sizeof(b->job) + 1];

	(void)state;
	memset(&e, 0, sizeof(e));
	memset(label, 'j', sizeof(label) - 1);
	label[sizeof(label) - 1] = '\0';
	/* Refused before any box is made or taken from the pool (the engine here has none). */
	assert_int_equal(sbx_acquire(&e, label, &b), AP_ETOOBIG);
	assert_null(b);
	assert_non_null(strstr(ap_error_last(), "job label"));
	ap_error_clear();
}

static void test_creator_identity(void **state)
{
	(void)state;
	assert_true(sbx_creator_alive(sbx_creator_self()));
	assert_false(sbx_creator_alive("999999999:1"));
	assert_false(sbx_creator_alive("garbage"));
	assert_false(sbx_creator_alive(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_spec_every_hardening_field),
	    cmocka_unit_test(test_spec_no_repo_and_pool_sleep),
	    cmocka_unit_test(test_spec_refuses_bad_repo_paths),
	    cmocka_unit_test(test_spec_podman_spelling),
	    cmocka_unit_test(test_spec_covers_image_volumes),
	    cmocka_unit_test(test_image_volumes_are_cleaned),
	    cmocka_unit_test(test_image_volumes_refused_with_a_sentence),
	    cmocka_unit_test(test_created_container_mounts_are_checked),
	    cmocka_unit_test(test_default_owner_is_stable),
	    cmocka_unit_test(test_default_owner_refuses_a_long_db_path),
	    cmocka_unit_test(test_long_job_label_is_refused),
	    cmocka_unit_test(test_creator_identity),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* tests/job/test_environment.c - the flavour chosen from `image:` or the checkout (links not
 * followed), the environment cache key (what changes it and what does not), the command ->
 * flavour map, and `setup:` as a command or a list with agent_network and cache_key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/config.h"
#include "common/err.h"
#include "common/fs.h"
#include "job/environment.h"
#include "job/repo_config.h"

static char dir[256];
static ap_config *cfg;

static void put(const char *rel, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/ap-test-env-XXXXXX");
	assert_non_null(mkdtemp(dir));
	return cfg_new_empty(&cfg);
}

static int teardown(void **state)
{
	(void)state;
	fs_rm_rf(dir);
	cfg_free(cfg);
	return 0;
}

static void choose(env_choice *c, const char *image)
{
	assert_int_equal(env_choose_image(c, cfg, dir, image, NULL), 0);
}

static void test_flavour_from_the_checkout(void **state)
{
	env_choice c;
	char path[512], target[512];

	(void)state;
	choose(&c, NULL);
	assert_string_equal(c.flavor, "python");
	assert_string_equal(c.image, "autopatch-sandbox:latest");
	assert_non_null(strstr(c.why, "the default"));
	put("Makefile", "test:\n\tmake -C src\n");
	choose(&c, NULL);
	assert_string_equal(c.flavor, "c");
	assert_string_equal(c.image, "autopatch-sandbox:c");
	assert_string_equal(c.why, "Makefile in the checkout");
	put("calc.py", "x = 1\n");
	choose(&c, NULL);
	assert_string_equal(c.flavor, "python"); /* the Makefile only wraps pytest */
	put("go.mod", "module x\n");
	choose(&c, NULL);
	assert_string_equal(c.flavor, "go");
	put("package.json", "{}\n");
	choose(&c, NULL);
	assert_string_equal(c.flavor, "node");
	assert_string_equal(c.why, "package.json in the checkout");
	/* A symbolic link is not a marker: the checkout is untrusted. */
	snprintf(path, sizeof(path), "%s/package.json", dir);
	unlink(path);
	snprintf(target, sizeof(target), "%s/go.mod", dir);
	assert_int_equal(symlink(target, path), 0);
	snprintf(path, sizeof(path), "%s/go.mod", dir);
	unlink(path);
	put("Cargo.toml", "[package]\n");
	choose(&c, NULL);
	assert_string_equal(c.flavor, "rust");
}

static void test_image_field(void **state)
{
	env_choice c;
	char line[700];

	(void)state;
	choose(&c, "node");
	assert_string_equal(c.flavor, "node");
	assert_string_equal(c.image, "autopatch-sandbox:node");
	assert_string_equal(c.why, "`image: node` in .github/autopatch.yml");
	choose(&c, "python");
	assert_string_equal(c.image, "autopatch-sandbox:latest");
	choose(&c, "registry.example/ci@sha256:abc");
	assert_string_equal(c.flavor, "");
	assert_string_equal(c.image, "registry.example/ci@sha256:abc");
	choose(&c, "autopatch-sandbox:java");
	assert_string_equal(c.flavor, "java");
	env_describe_choice(&c, line, sizeof(line));
	assert_string_equal(line, "sandbox image autopatch-sandbox:java (flavour java: `image: "
				  "autopatch-sandbox:java` in .github/autopatch.yml)");
	assert_int_equal(cfg_set(cfg, "AUTOPATCH_FLAVOR_REPOSITORY", "reg.example/ap"), 0);
	choose(&c, "go");
	assert_string_equal(c.image, "reg.example/ap:go");
	assert_int_equal(cfg_set(cfg, "AUTOPATCH_FLAVOR_REPOSITORY", "autopatch-sandbox"), 0);
}

static void key(char out[65], const char *repo, const char *setup_script, const char *const *globs)
{
	assert_int_equal(env_cache_key(out, "sha256:1111", setup_script, repo, dir, globs), 0);
	assert_int_equal(strlen(out), 64);
}

static void test_cache_key(void **state)
{
	char a[65], b[65];
	const char *globs[] = {"deps/*.lock", NULL};

	(void)state;
	put("requirements.txt", "aphelper==1.0\n");
	key(a, "o/r", "pip install -r requirements.txt", NULL);
	key(b, "o/r", "pip install -r requirements.txt", NULL);
	assert_string_equal(a, b);
	put("calc.py", "x = 2\n"); /* not a lockfile: same key */
	key(b, "o/r", "pip install -r requirements.txt", NULL);
	assert_string_equal(a, b);
	put("requirements.txt", "aphelper==1.1\n");
	key(b, "o/r", "pip install -r requirements.txt", NULL);
	assert_string_not_equal(a, b);
	key(a, "o/other", "pip install -r requirements.txt", NULL);
	assert_string_not_equal(a, b); /* one repository's key never names another's */
	key(a, "o/r", "pip install .", NULL);
	assert_string_not_equal(a, b);
	assert_int_equal(
	    env_cache_key(a, "sha256:2222", "pip install -r requirements.txt", "o/r", dir, NULL),
	    0);
	assert_string_not_equal(a, b);
	/* cache_key: globs replace the default list, and reach below the top. */
	char sub[512];
	snprintf(sub, sizeof(sub), "%s/deps", dir);
	mkdir(sub, 0755);
	put("deps/app.lock", "v1\n");
	key(a, "o/r", "x", globs);
	put("requirements.txt", "aphelper==9\n");
	key(b, "o/r", "x", globs);
	assert_string_equal(a, b);
	put("deps/app.lock", "v2\n");
	key(b, "o/r", "x", globs);
	assert_string_not_equal(a, b);
}

static void test_command_flavours(void **state)
{
	(void)state;
	assert_string_equal(env_flavor_of_command("npm"), "node");
	assert_string_equal(env_flavor_of_command("cargo"), "rust");
	assert_string_equal(env_flavor_of_command("mvn"), "java");
	assert_string_equal(env_flavor_of_command("go"), "go");
	assert_string_equal(env_flavor_of_command("cmake"), "c");
	assert_string_equal(env_flavor_of_command("pip"), "python");
	assert_null(env_flavor_of_command("ruby"));
	assert_true(env_is_flavor("java"));
	assert_false(env_is_flavor("ruby"));
}

static void test_setup_list_and_keys(void **state)
{
	const char *one = "setup: pip install -e .\n";
	const char *many = "setup:\n  - pip install -r a.txt\n  - make deps\nagent_network: true\n"
			   "cache_key: [\"deps/*.lock\"]\nnetwork: [pypi.org]\n";
	repo_config *c = NULL;

	(void)state;
	assert_int_equal(repo_config_parse(&c, one, strlen(one)), 0);
	assert_string_equal(c->setup, "pip install -e .");
	assert_string_equal(c->setup_steps[0], "pip install -e .");
	assert_null(c->setup_steps[1]);
	assert_false(c->agent_network);
	assert_null(c->cache_key[0]);
	repo_config_free(c);
	assert_int_equal(repo_config_parse(&c, many, strlen(many)), 0);
	assert_string_equal(c->setup, "set -e\npip install -r a.txt\nmake deps");
	assert_string_equal(c->setup_steps[1], "make deps");
	assert_true(c->agent_network);
	assert_string_equal(c->cache_key[0], "deps/*.lock");
	repo_config_free(c);
	c = NULL;
	assert_int_equal(repo_config_parse(&c, "agent_network: maybe\n", 21), AP_EINVAL);
	assert_non_null(strstr(ap_error_last(), "\"agent_network\" must be true or false"));
	assert_int_equal(repo_config_parse(&c, "setup: [a, {b: c}]\n", 19), AP_EINVAL);
	assert_non_null(strstr(ap_error_last(), "each entry of \"setup\" must be a string"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_flavour_from_the_checkout, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_image_field, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cache_key, setup, teardown),
	    cmocka_unit_test(test_command_flavours),
	    cmocka_unit_test(test_setup_list_and_keys),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* tests/job/test_environment.c - the flavour chosen from `image:` or the checkout (links not
 * followed), the environment cache key (what changes it and what does not), the command ->
 * flavour map, `setup:` as a command or a list with agent_network and cache_key, and the
 * cache store on the host: archives kept, a use moving an entry up, least recently used
 * entries evicted past AUTOPATCH_ENV_CACHE_SIZE (never the one just stored), and the
 * blocked-egress report's advice for each kind of refusal. */
#include "common/config.h"
#include "common/err.h"
#include "common/fs.h"
#include "job/env_cache.h"
#include "job/environment.h"
#include "job/repo_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

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
	char line[700], longrepo[300];

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
	/* A repository too long for an image reference is an error naming it, not a cut name. */
	memset(longrepo, 'r', sizeof(longrepo) - 1);
	longrepo[sizeof(longrepo) - 1] = '\0';
	assert_int_equal(cfg_set(cfg, "AUTOPATCH_FLAVOR_REPOSITORY", longrepo), 0);
	assert_int_equal(env_choose_image(&c, cfg, dir, "go", NULL), AP_ETOOBIG);
	assert_non_null(strstr(ap_error_last(), "AUTOPATCH_FLAVOR_REPOSITORY is too long"));
	ap_error_clear();
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

/* The cache store, with real files and no box: what env_setup() does after a setup (put, then
 * evict) and on a hit (touch). */
struct fill {
	size_t bytes;
	int fail; /* return this instead of writing everything */
};

static int fill_archive(void *ud, int fd)
{
	const struct fill *f = ud;
	char block[65536];
	size_t left = f->bytes;

	memset(block, 'a', sizeof(block));
	while (left) {
		size_t n = left < sizeof(block) ? left : sizeof(block);
		ssize_t w = write(fd, block, f->fail ? n / 2 : n);

		if (w <= 0)
			return AP_EIO;
		if (f->fail)
			return ap_error_set(f->fail, "the box went away");
		left -= (size_t)w;
	}
	return 0;
}

static void store(const char *repo, const char *key, size_t bytes)
{
	env_cache_entry e = {0};
	struct fill f = {bytes, 0};

	snprintf(e.repo, sizeof(e.repo), "%s", repo);
	snprintf(e.key, sizeof(e.key), "%s", key);
	snprintf(e.image, sizeof(e.image), "autopatch-sandbox:latest");
	e.setup_ms = 1234;
	assert_int_equal(env_cache_put(cfg, &e, fill_archive, &f), 0);
}

static char evicted[8][400];
static size_t n_evicted;

static void heard(void *ud, const char *msg)
{
	(void)ud;
	if (n_evicted < 8)
		snprintf(evicted[n_evicted++], sizeof(evicted[0]), "%s", msg);
}

/* The cache's entries, most recently used first, as "repo/key" joined by spaces. */
static void listing(char *out, size_t n)
{
	env_cache_entry *v = NULL;
	size_t count = 0, len = 0;

	assert_int_equal(env_cache_list(cfg, &v, &count), 0);
	out[0] = '\0';
	for (size_t i = 0; i < count; i++)
		len += (size_t)snprintf(out + len, n - len, "%s%s/%s", i ? " " : "", v[i].repo,
					v[i].key);
	free(v);
}

static void evict(const char *keep_repo, const char *keep_key, size_t want_removed)
{
	size_t removed = 99;

	n_evicted = 0;
	assert_int_equal(env_cache_evict(cfg, keep_repo, keep_key, heard, NULL, &removed), 0);
	assert_int_equal(removed, want_removed);
	assert_int_equal(n_evicted, want_removed);
}

#define MB 1000000

static void test_cache_lru_eviction(void **state)
{
	char got[1024], path[600];
	env_cache_entry *v = NULL;
	size_t n = 0;

	(void)state;
	assert_int_equal(cfg_set(cfg, "AUTOPATCH_DATA_DIR", dir), 0);
	assert_int_equal(cfg_set(cfg, "AUTOPATCH_ENV_CACHE_SIZE", "3m"), 0); /* 3 MiB */
	listing(got, sizeof(got));
	assert_string_equal(got, "");
	/* Three repositories, 1 MB each: they fit, nothing goes. */
	store("octo/alpha", "aaaa", MB);
	evict("octo/alpha", "aaaa", 0);
	store("octo/beta", "bbbb", MB);
	store("local:/src/gamma", "cccc", MB);
	evict("local:/src/gamma", "cccc", 0);
	listing(got, sizeof(got));
	assert_string_equal(got, "local:/src/gamma/cccc octo/beta/bbbb octo/alpha/aaaa");
	/* alpha is restored (a use): beta becomes the least recently used. */
	assert_int_equal(env_cache_touch(cfg, "octo/alpha", "aaaa"), 0);
	listing(got, sizeof(got));
	assert_string_equal(got, "octo/alpha/aaaa local:/src/gamma/cccc octo/beta/bbbb");
	/* A fourth entry passes the cap: beta goes, not alpha, which was stored first. */
	store("octo/delta", "dddd", MB);
	evict("octo/delta", "dddd", 1);
	assert_string_equal(evicted[0],
			    "environment cache: evicted key bbbb (octo/beta, least recently used)");
	listing(got, sizeof(got));
	assert_string_equal(got, "octo/delta/dddd octo/alpha/aaaa local:/src/gamma/cccc");
	assert_int_equal(env_cache_touch(cfg, "octo/beta", "bbbb"), AP_ENOTFOUND);
	/* A second key of alpha's repository; gamma is now the oldest. */
	store("octo/alpha", "a2a2", MB);
	evict("octo/alpha", "a2a2", 1);
	listing(got, sizeof(got));
	assert_string_equal(got, "octo/alpha/a2a2 octo/delta/dddd octo/alpha/aaaa");
	/* A big entry pushes out as many as it takes, oldest first, and is itself kept even
	 * when it is the least recently used (it was just stored). */
	store("octo/big", "eeee", 2 * MB + MB / 2);
	assert_int_equal(env_cache_touch(cfg, "octo/alpha", "a2a2"), 0);
	assert_int_equal(env_cache_touch(cfg, "octo/delta", "dddd"), 0);
	assert_int_equal(env_cache_touch(cfg, "octo/alpha", "aaaa"), 0);
	evict("octo/big", "eeee", 3);
	assert_non_null(strstr(evicted[0], "key a2a2 (octo/alpha"));
	assert_non_null(strstr(evicted[1], "key dddd (octo/delta"));
	assert_non_null(strstr(evicted[2], "key aaaa (octo/alpha"));
	listing(got, sizeof(got));
	assert_string_equal(got, "octo/big/eeee");
	/* The listing carries what `autopatch cache list` prints. */
	assert_int_equal(env_cache_list(cfg, &v, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(v[0].bytes, 2 * MB + MB / 2);
	assert_int_equal(v[0].setup_ms, 1234);
	assert_string_equal(v[0].image, "autopatch-sandbox:latest");
	assert_true(v[0].used_s > 1700000000);
	free(v);
	/* A cap of 0 empties everything but the entry kept. */
	assert_int_equal(cfg_set(cfg, "AUTOPATCH_ENV_CACHE_SIZE", "0"), 0);
	evict(NULL, NULL, 1);
	listing(got, sizeof(got));
	assert_string_equal(got, "");
	/* The repository's directory goes with its last entry. */
	snprintf(path, sizeof(path), "%s/env-cache", dir);
	assert_int_equal(rmdir(path), 0);
}

static void test_cache_put_failure_leaves_nothing(void **state)
{
	env_cache_entry e = {0};
	struct fill f = {MB, AP_ECANCELLED};
	char got[256], path[600];
	size_t removed = 0;

	(void)state;
	assert_int_equal(cfg_set(cfg, "AUTOPATCH_DATA_DIR", dir), 0);
	snprintf(e.repo, sizeof(e.repo), "octo/alpha");
	snprintf(e.key, sizeof(e.key), "ffff");
	assert_int_equal(env_cache_put(cfg, &e, fill_archive, &f), AP_ECANCELLED);
	listing(got, sizeof(got));
	assert_string_equal(got, "");
	/* No temporary file either: the clear finds nothing, and the directory is empty. */
	assert_int_equal(env_cache_clear(cfg, NULL, &removed), 0);
	assert_int_equal(removed, 0);
	store("octo/alpha", "ffff", 10);
	assert_int_equal(env_cache_clear(cfg, "octo/alpha", &removed), 0);
	assert_int_equal(removed, 1);
	snprintf(path, sizeof(path), "%s/env-cache", dir);
	assert_int_equal(rmdir(path), 0); /* ENOTEMPTY if anything was left behind */
}

/* An AUTOPATCH_DATA_DIR too long for the cache's paths is an error naming the setting, never
 * a cut path that names another directory. */
static void test_cache_long_data_dir_fails(void **state)
{
	static char longdir[3100];
	env_cache_entry e = {0}, *v = NULL;
	struct fill f = {10, 0};
	size_t n = 0;

	(void)state;
	snprintf(longdir, sizeof(longdir), "%s/", dir);
	memset(longdir + strlen(longdir), 'd', sizeof(longdir) - strlen(longdir) - 1);
	assert_int_equal(cfg_set(cfg, "AUTOPATCH_DATA_DIR", longdir), 0);
	snprintf(e.repo, sizeof(e.repo), "octo/alpha");
	snprintf(e.key, sizeof(e.key), "ffff");
	assert_int_equal(env_cache_put(cfg, &e, fill_archive, &f), AP_ETOOBIG);
	assert_non_null(strstr(ap_error_last(), "AUTOPATCH_DATA_DIR is too long"));
	assert_int_equal(env_cache_touch(cfg, "octo/alpha", "ffff"), AP_ETOOBIG);
	assert_int_equal(env_cache_list(cfg, &v, &n), AP_ETOOBIG);
	assert_null(v);
	ap_error_clear();
}

/* Metadata whose repository does not fit an entry is skipped, not read as a cut name (which
 * would be another repository's entry to evict or clear). */
static void test_cache_overlong_meta_skipped(void **state)
{
	char repo[300], text[600], sub[512];
	env_cache_entry *v = NULL;
	size_t n = 0;

	(void)state;
	assert_int_equal(cfg_set(cfg, "AUTOPATCH_DATA_DIR", dir), 0);
	store("octo/alpha", "aaaa", 10);
	memset(repo, 'r', sizeof(repo) - 1);
	repo[sizeof(repo) - 1] = '\0';
	snprintf(text, sizeof(text), "{\"repo\":\"%s\",\"key\":\"bbbb\",\"image\":\"x\"}\n", repo);
	snprintf(sub, sizeof(sub), "%s/env-cache/alpha-0000000000000000", dir);
	assert_int_equal(fs_mkdir_p(sub, 0700), 0);
	put("env-cache/alpha-0000000000000000/bbbb.json", text);
	put("env-cache/alpha-0000000000000000/bbbb.tar", "x");
	assert_int_equal(env_cache_list(cfg, &v, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(v[0].repo, "octo/alpha");
	free(v);
}

/* One denial group. */
static sbx_denial denial(enum sbx_denial_kind kind, const char *host, int port, int count,
			 const char *phase, const char *command, const char *reason)
{
	sbx_denial d;

	memset(&d, 0, sizeof(d));
	d.kind = kind;
	snprintf(d.host, sizeof(d.host), "%s", host);
	d.port = port;
	d.count = count;
	snprintf(d.phase, sizeof(d.phase), "%s", phase);
	snprintf(d.command, sizeof(d.command), "%s", command);
	snprintf(d.reason, sizeof(d.reason), "%s", reason);
	return d;
}

/* The line of the report that starts with start (the lines are in the groups' order). */
static const char *line_of(const char *text, const char *start, char *out, size_t n)
{
	const char *p = strstr(text, start);
	size_t len;

	if (!p)
		fail_msg("no line starting with %s in:\n%s", start, text);
	len = strcspn(p, "\n");
	snprintf(out, n, "%.*s", (int)len, p);
	return out;
}

static void assert_has(const char *line, const char *needle)
{
	if (!strstr(line, needle))
		fail_msg("\"%s\" is not in: %s", needle, line);
}

static void assert_lacks(const char *line, const char *needle)
{
	if (strstr(line, needle))
		fail_msg("\"%s\" should not be in: %s", needle, line);
}

/* Each kind of refusal gets the advice that fits it, never another kind's. */
static void test_blocked_report_advice_per_kind(void **state)
{
	sbx_denial d[] = {
	    denial(SBX_DENY_NOT_LISTED, "files.example.org", 443, 2, "setup",
		   "pip install -r r.txt", "host:port is not on the egress allow-list"),
	    denial(SBX_DENY_LIMIT, "", 0, 609, "setup", "npm install",
		   "too many concurrent connections: 256 open, none closed within 60 s"),
	    denial(SBX_DENY_DNS, "registry.example.org", 443, 66, "setup", "npm install",
		   "cannot resolve registry.example.org: Temporary failure in name resolution"),
	    denial(SBX_DENY_RESERVED, "mirror.corp.example", 443, 3, "setup", "npm ci",
		   "the name resolves to a private address (10.20.3.4)"),
	    denial(SBX_DENY_NEVER, "local.example", 8080, 1, "setup", "curl x",
		   "the name resolves to a loopback address (127.0.0.1)"),
	    denial(SBX_DENY_CONNECT, "down.example", 443, 1, "setup", "git fetch",
		   "cannot connect to the host"),
	    denial(SBX_DENY_LOCKED, "pypi.example", 443, 1, "agent", "pip download x",
		   "the setup phase is over: the agent phase has no network"),
	    denial(SBX_DENY_OTHER, "10.0.0.1", 443, 1, "setup", "curl https://10.0.0.1/",
		   "IP address literals are not allowed"),
	};
	char *text = NULL, l[2048];

	(void)state;
	assert_int_equal(env_denials_text(d, 0, &text), 0);
	assert_null(text);
	assert_int_equal(env_denials_text(d, sizeof(d) / sizeof(d[0]), &text), 0);
	assert_non_null(text);

	line_of(text, "files.example.org:443, 2 times, during setup by `pip install -r r.txt`: ", l,
		sizeof(l));
	assert_has(l, "add `files.example.org:443` to `network:` in .github/autopatch.yml");

	/* the limit: no host, no "add - to network:", the limit and its settings */
	line_of(text, "609 connections, during setup by `npm install`: ", l, sizeof(l));
	assert_has(l, "connection limit (too many concurrent connections: 256 open, none closed "
		      "within 60 s)");
	assert_has(l, "AUTOPATCH_EGRESS_MAX_CONNS");
	assert_has(l, "AUTOPATCH_EGRESS_QUEUE_S");
	assert_lacks(l, "`network:`");
	assert_lacks(text, "- -");
	assert_lacks(text, "`-`");

	line_of(text, "registry.example.org:443, 66 times, during setup by `npm install`: ", l,
		sizeof(l));
	assert_has(l, "the name registry.example.org could not be resolved");
	assert_has(l, "the autopatch host's resolver");
	assert_has(l, "failed (Temporary failure in name resolution)");
	assert_lacks(l, "add `");

	/* listed, resolves to a private address: the operator setting, not `network:` */
	line_of(text, "mirror.corp.example:443, 3 times, during setup by `npm ci`: ", l, sizeof(l));
	assert_has(l, "`mirror.corp.example:443` is allowed, but the name resolves to a private "
		      "address (10.20.3.4)");
	assert_has(l, "add `10.20.3.4/32` (or its network) to AUTOPATCH_EGRESS_ALLOW_NETS");
	assert_lacks(l, "to `network:`");

	line_of(text, "local.example:8080, 1 time, during setup by `curl x`: ", l, sizeof(l));
	assert_has(l, "loopback address (127.0.0.1), which no box may reach");
	assert_lacks(l, "to `network:`");

	line_of(text, "down.example:443, 1 time, during setup by `git fetch`: ", l, sizeof(l));
	assert_has(l, "no address of down.example answered");
	assert_lacks(l, "to `network:`");

	line_of(text, "pypi.example:443, 1 time, during the agent phase by `pip download x`: ", l,
		sizeof(l));
	assert_has(l, "the agent phase is offline");
	assert_has(l, "`agent_network: true`");

	line_of(text, "10.0.0.1:443, 1 time, during setup by", l, sizeof(l));
	assert_has(l, "refused: IP address literals are not allowed");
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_flavour_from_the_checkout, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_image_field, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cache_key, setup, teardown),
	    cmocka_unit_test(test_command_flavours),
	    cmocka_unit_test(test_blocked_report_advice_per_kind),
	    cmocka_unit_test(test_setup_list_and_keys),
	    cmocka_unit_test_setup_teardown(test_cache_lru_eviction, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cache_put_failure_leaves_nothing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cache_long_data_dir_fails, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cache_overlong_meta_skipped, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

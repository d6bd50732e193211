/* SPDX-License-Identifier: MIT */
/* tests/common/test_beneath.c - opening and reading an untrusted tree from the host: beneath it
 * and through no symbolic link in any component (beneath_open(), and fs_read_file_at() with
 * FS_READ_NOFOLLOW, which opens through it), with openat2 and with the component walk (forced,
 * as on a kernel without openat2). Every case runs under both. */
#include "common/beneath.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#define CANARY "canary-host-file-4d1f"

/* A checkout and a "host" directory beside it:
 *   host/autopatch.yml         CANARY
 *   repo/ok/file.txt           "hello\n"
 *   repo/ok/big.txt            100 bytes
 *   repo/.github -> ../host    a directory symlink leading out
 *   repo/inside -> ok          a directory symlink that stays inside
 *   repo/last.txt -> ok/file.txt
 *   repo/abs.txt -> <host>/autopatch.yml
 *   repo/fifo                  a FIFO */
struct tree {
	char base[64];
	char repo[128];
	int root;
};

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int setup(void **state)
{
	struct tree *t = calloc(1, sizeof(*t));
	char p[512], big[101];

	snprintf(t->base, sizeof(t->base), "/tmp/ap-beneath-XXXXXX");
	assert_non_null(mkdtemp(t->base));
	snprintf(t->repo, sizeof(t->repo), "%s/repo", t->base);
	snprintf(p, sizeof(p), "%s/host", t->base);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/host/autopatch.yml", t->base);
	write_file(p, CANARY "\n");
	assert_int_equal(mkdir(t->repo, 0700), 0);
	snprintf(p, sizeof(p), "%s/ok", t->repo);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/ok/file.txt", t->repo);
	write_file(p, "hello\n");
	memset(big, 'x', 100);
	big[100] = '\0';
	snprintf(p, sizeof(p), "%s/ok/big.txt", t->repo);
	write_file(p, big);
	snprintf(p, sizeof(p), "%s/.github", t->repo);
	assert_int_equal(symlink("../host", p), 0);
	snprintf(p, sizeof(p), "%s/inside", t->repo);
	assert_int_equal(symlink("ok", p), 0);
	snprintf(p, sizeof(p), "%s/last.txt", t->repo);
	assert_int_equal(symlink("ok/file.txt", p), 0);
	snprintf(p, sizeof(p), "%s/abs.txt", t->repo);
	{
		char target[512];

		snprintf(target, sizeof(target), "%s/host/autopatch.yml", t->base);
		assert_int_equal(symlink(target, p), 0);
	}
	snprintf(p, sizeof(p), "%s/fifo", t->repo);
	assert_int_equal(mkfifo(p, 0600), 0);
	t->root = open(t->repo, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(t->root >= 0);
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct tree *t = *state;
	char cmd[128];

	close(t->root);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->base);
	assert_int_equal(system(cmd), 0);
	free(t);
	beneath__force_walk(false);
	return 0;
}

/* Both implementations: 0 = openat2 (where the kernel has it), 1 = the forced walk. */
static void each_mode(void (*body)(struct tree *t), struct tree *t)
{
	for (int walk = 0; walk < 2; walk++) {
		beneath__force_walk(walk == 1);
		body(t);
	}
	beneath__force_walk(false);
}

/* A test case that runs body under both implementations. */
#define BOTH_MODES(test, body)                                                                     \
	static void test(void **state)                                                             \
	{                                                                                          \
		each_mode(body, *state);                                                           \
	}

/* Read rel (at most max bytes) and expect code; a refusal leaves the buffer as it was and never
 * holds CANARY. */
static void expect_read(struct tree *t, const char *rel, size_t max, int code)
{
	ap_buf b = AP_BUF_INIT(max + 5);
	int rc;

	assert_int_equal(ap_buf_adds(&b, "keep:"), 0);
	rc = fs_read_file_at(&b, t->repo, rel, FS_READ_NOFOLLOW);
	if (rc != code)
		fail_msg("%s: got %s (%s), want %s", rel, ap_error_name(rc), ap_error_last(),
			 ap_error_name(code));
	if (code) {
		assert_string_equal(ap_buf_str(&b), "keep:");
		assert_non_null(strstr(ap_error_last(), rel));
	}
	assert_null(strstr(ap_buf_str(&b), CANARY));
	ap_buf_release(&b);
}

static void body_normal_file(struct tree *t)
{
	ap_buf b = AP_BUF_INIT(1024);

	assert_int_equal(fs_read_file_at(&b, t->repo, "ok/file.txt", FS_READ_NOFOLLOW), 0);
	assert_string_equal(ap_buf_str(&b), "hello\n");
	ap_buf_release(&b);
	/* exactly at the cap is fine */
	expect_read(t, "ok/big.txt", 100, 0);
}

BOTH_MODES(test_normal_file_is_read, body_normal_file)

static void body_dir_symlink(struct tree *t)
{
	expect_read(t, ".github/autopatch.yml", 4096, AP_EDENIED);
	assert_non_null(strstr(ap_error_last(), "symbolic link"));
	/* a link that stays inside the tree is refused just the same: no symlink at all */
	expect_read(t, "inside/file.txt", 4096, AP_EDENIED);
}

BOTH_MODES(test_directory_symlink_in_the_middle_is_refused, body_dir_symlink)

static void body_last_symlink(struct tree *t)
{
	expect_read(t, "last.txt", 4096, AP_EDENIED);
	expect_read(t, "abs.txt", 4096, AP_EDENIED);
}

BOTH_MODES(test_symlink_as_last_component_is_refused, body_last_symlink)

static void body_over_cap(struct tree *t)
{
	expect_read(t, "ok/big.txt", 99, AP_ETOOBIG);
}

BOTH_MODES(test_over_the_cap_is_refused, body_over_cap)

static void body_bad_paths(struct tree *t)
{
	expect_read(t, "../host/autopatch.yml", 4096, AP_EINVAL);
	expect_read(t, "ok/../../host/autopatch.yml", 4096, AP_EINVAL);
	expect_read(t, "/etc/passwd", 4096, AP_EINVAL);
	expect_read(t, "ok//file.txt", 4096, AP_EINVAL);
	expect_read(t, "./ok/file.txt", 4096, AP_EINVAL);
	expect_read(t, "ok/", 4096, AP_EINVAL);
	expect_read(t, "", 4096, AP_EINVAL);
	expect_read(t, "missing.txt", 4096, AP_ENOTFOUND);
	expect_read(t, "ok/file.txt/x", 4096, AP_ENOTFOUND);
	expect_read(t, "nodir/x", 4096, AP_ENOTFOUND);
	/* not regular files: a FIFO (opened without blocking) and a directory */
	expect_read(t, "fifo", 4096, AP_EDENIED);
	expect_read(t, "ok", 4096, AP_EDENIED);
}

BOTH_MODES(test_bad_paths_and_kinds, body_bad_paths)

static void body_open_dir(struct tree *t)
{
	int fd = -2;

	assert_int_equal(beneath_open(&fd, t->root, "ok", O_RDONLY | O_DIRECTORY), 0);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(beneath_open(&fd, t->root, "inside", O_RDONLY | O_DIRECTORY), AP_EDENIED);
	assert_int_equal(fd, -1);
	assert_int_equal(beneath_open(&fd, t->root, ".github", O_RDONLY | O_DIRECTORY), AP_EDENIED);
	assert_int_equal(beneath_open(&fd, t->root, "ok/file.txt", O_RDONLY | O_CREAT), AP_EINVAL);
}

BOTH_MODES(test_open_directories, body_open_dir)

/* The first case really exercised openat2 where the kernel has it (else both runs walked). */
static void test_kernel_has_openat2_or_skip(void **state)
{
	struct tree *t = *state;
	struct open_how how = {.flags = O_RDONLY, .resolve = RESOLVE_BENEATH};
	long fd = syscall(SYS_openat2, t->root, "ok/file.txt", &how, sizeof(how));

	if (fd < 0 && (errno == ENOSYS || errno == EPERM))
		skip();
	assert_true(fd >= 0);
	close((int)fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_normal_file_is_read, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_directory_symlink_in_the_middle_is_refused, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_symlink_as_last_component_is_refused, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_over_the_cap_is_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_paths_and_kinds, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_open_directories, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_kernel_has_openat2_or_skip, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* tests/common/test_fs.c - fs_mkdir_p, fs_rm_rf (never through a link), capped reads. */
#include "common/buf.h"
#include "common/err.h"
#include "common/fs.h"

#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

/* Each test gets a fresh directory under /tmp; teardown removes it (with fs_rm_rf too, so a
 * broken fs_rm_rf shows up as leftovers, not as a wrong pass). */
static int setup(void **state)
{
	char *dir = strdup("/tmp/ap-test-fs-XXXXXX");

	if (!dir || !mkdtemp(dir)) {
		free(dir);
		return -1;
	}
	*state = dir;
	return 0;
}

static int teardown(void **state)
{
	char *dir = *state;

	fs_rm_rf(dir);
	free(dir);
	return 0;
}

static void path_in(char *out, const char *dir, const char *rel)
{
	assert_true((size_t)snprintf(out, PATH_MAX, "%s/%s", dir, rel) < PATH_MAX);
}

static void write_text(const char *path, const char *text, size_t n)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}

static bool is_dir(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static void test_mkdir_p_makes_every_level(void **state)
{
	char p[PATH_MAX], q[PATH_MAX];
	struct stat st;

	path_in(p, *state, "a/b/c/d");
	assert_int_equal(fs_mkdir_p(p, 0700), 0);
	assert_true(is_dir(p));
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	path_in(q, *state, "a/b");
	assert_true(is_dir(q));
	/* Again, and with a trailing slash: nothing to do is success. */
	assert_int_equal(fs_mkdir_p(p, 0700), 0);
	path_in(p, *state, "a/b/c/d/");
	assert_int_equal(fs_mkdir_p(p, 0700), 0);
}

static void test_mkdir_p_refuses_a_file_in_the_way(void **state)
{
	char file[PATH_MAX], p[PATH_MAX];

	path_in(file, *state, "plain");
	write_text(file, "x", 1);
	/* The last component is a file: not a directory afterwards, so an error. */
	assert_int_equal(fs_mkdir_p(file, 0700), AP_EIO);
	assert_non_null(strstr(ap_error_last(), "plain"));
	/* A parent is a file. */
	path_in(p, *state, "plain/sub");
	assert_int_equal(fs_mkdir_p(p, 0700), AP_EIO);
	assert_non_null(strstr(ap_error_last(), "plain/sub"));
	assert_int_equal(fs_mkdir_p("", 0700), AP_EINVAL);
}

/* The tree holds links to a directory and a file outside it, and a dangling link: the links
 * go, what they point at stays. */
static void test_rm_rf_never_follows_links(void **state)
{
	char tree[PATH_MAX], outside[PATH_MAX], keep[PATH_MAX], p[PATH_MAX];

	path_in(outside, *state, "outside");
	assert_int_equal(mkdir(outside, 0700), 0);
	path_in(keep, *state, "outside/keep.txt");
	write_text(keep, "keep", 4);
	path_in(tree, *state, "tree");
	path_in(p, *state, "tree/sub/deep");
	assert_int_equal(fs_mkdir_p(p, 0700), 0);
	path_in(p, *state, "tree/sub/deep/file");
	write_text(p, "x", 1);
	path_in(p, *state, "tree/top.txt");
	write_text(p, "y", 1);
	path_in(p, *state, "tree/dirlink");
	assert_int_equal(symlink(outside, p), 0);
	path_in(p, *state, "tree/sub/filelink");
	assert_int_equal(symlink(keep, p), 0);
	path_in(p, *state, "tree/sub/dangling");
	assert_int_equal(symlink("/nonexistent/ap-test", p), 0);

	assert_int_equal(fs_rm_rf(tree), 0);
	assert_false(exists(tree));
	assert_true(is_dir(outside));
	assert_true(exists(keep));
}

static void test_rm_rf_of_a_link_removes_only_the_link(void **state)
{
	char outside[PATH_MAX], keep[PATH_MAX], link[PATH_MAX];

	path_in(outside, *state, "outside");
	assert_int_equal(mkdir(outside, 0700), 0);
	path_in(keep, *state, "outside/keep.txt");
	write_text(keep, "keep", 4);
	path_in(link, *state, "link");
	assert_int_equal(symlink(outside, link), 0);
	assert_int_equal(fs_rm_rf(link), 0);
	assert_false(exists(link));
	assert_true(exists(keep));
}

static void test_rm_rf_missing_path_and_single_file(void **state)
{
	char p[PATH_MAX];

	path_in(p, *state, "never-made");
	assert_int_equal(fs_rm_rf(p), 0);
	path_in(p, *state, "lone.txt");
	write_text(p, "z", 1);
	assert_int_equal(fs_rm_rf(p), 0);
	assert_false(exists(p));
}

static void test_read_file_whole_and_appends(void **state)
{
	char p[PATH_MAX], big[20000];
	ap_buf b = AP_BUF_INIT(sizeof(big) + 3);

	memset(big, 'q', sizeof(big)); /* more than one read() */
	path_in(p, *state, "big.txt");
	write_text(p, big, sizeof(big));
	assert_int_equal(ap_buf_adds(&b, "hd:"), 0);
	assert_int_equal(fs_read_file(&b, p, 0), 0);
	assert_int_equal(b.len, sizeof(big) + 3); /* exactly the cap */
	assert_memory_equal(b.data, "hd:qqq", 6);
	assert_int_equal(b.data[b.len], '\0');
	ap_buf_release(&b);

	path_in(p, *state, "empty.txt");
	write_text(p, "", 0);
	ap_buf_init(&b, 16);
	assert_int_equal(fs_read_file(&b, p, 0), 0);
	assert_int_equal(b.len, 0);
	assert_string_equal(ap_buf_str(&b), "");
	ap_buf_release(&b);
}

static void test_read_file_over_cap_is_etoobig(void **state)
{
	char p[PATH_MAX];
	ap_buf b = AP_BUF_INIT(10);

	path_in(p, *state, "eleven.txt");
	write_text(p, "0123456789A", 11);
	assert_int_equal(ap_buf_adds(&b, "ab"), 0);
	assert_int_equal(fs_read_file(&b, p, 0), AP_ETOOBIG);
	assert_non_null(strstr(ap_error_last(), "eleven.txt is larger than 10 bytes"));
	/* A failed read leaves the buffer as it was. */
	assert_string_equal(ap_buf_str(&b), "ab");
	ap_buf_release(&b);
}

static void test_read_file_missing_is_enotfound(void **state)
{
	char p[PATH_MAX];
	ap_buf b = AP_BUF_INIT(64);

	path_in(p, *state, "no-such-file");
	assert_int_equal(fs_read_file(&b, p, 0), AP_ENOTFOUND);
	assert_non_null(strstr(ap_error_last(), "no-such-file"));
	path_in(p, *state, "no-such-dir/file");
	assert_int_equal(fs_read_file(&b, p, 0), AP_ENOTFOUND);
	assert_int_equal(b.len, 0);
	ap_buf_release(&b);
}

/* FS_READ_NOFOLLOW: no symlink as the last component nor on the way, only regular files, no
 * blocking on a FIFO; fs_read_file_at names only the relative path. Without the flag links
 * are read. */
static void test_read_nofollow_refuses_links_and_specials(void **state)
{
	char secret[PATH_MAX], p[PATH_MAX], q[PATH_MAX];
	ap_buf b = AP_BUF_INIT(64);

	path_in(secret, *state, "secret.txt");
	write_text(secret, "s3cret", 6);
	path_in(p, *state, "repo/.github");
	assert_int_equal(fs_mkdir_p(p, 0700), 0);
	path_in(p, *state, "repo/.github/autopatch.yml");
	assert_int_equal(symlink(secret, p), 0);

	path_in(p, *state, "repo");
	assert_int_equal(fs_read_file_at(&b, p, ".github/autopatch.yml", FS_READ_NOFOLLOW),
			 AP_EDENIED);
	assert_string_equal(ap_error_last(),
			    "`.github/autopatch.yml` is or goes through a symbolic link; the host "
			    "reads checkout files only through no symbolic link");
	assert_int_equal(b.len, 0);
	assert_int_equal(fs_read_file_at(&b, p, ".github", FS_READ_NOFOLLOW), AP_EDENIED);
	assert_string_equal(ap_error_last(), ".github is not a regular file");
	assert_int_equal(fs_read_file_at(&b, p, "absent.yml", FS_READ_NOFOLLOW), AP_ENOTFOUND);
	assert_null(strstr(ap_error_last(), p)); /* the host path stays out of the message */

	/* A link on the way (.github -> a directory outside) is refused too, and so is "..". */
	path_in(p, *state, "elsewhere");
	assert_int_equal(mkdir(p, 0700), 0);
	path_in(p, *state, "elsewhere/autopatch.yml");
	write_text(p, "test: leak", 10);
	path_in(p, *state, "elsewhere");
	path_in(q, *state, "repo/linked");
	assert_int_equal(symlink(p, q), 0);
	path_in(p, *state, "repo");
	assert_int_equal(fs_read_file_at(&b, p, "linked/autopatch.yml", FS_READ_NOFOLLOW),
			 AP_EDENIED);
	assert_string_equal(ap_error_last(),
			    "`linked/autopatch.yml` is or goes through a symbolic link; the host "
			    "reads checkout files only through no symbolic link");
	assert_int_equal(fs_read_file_at(&b, p, "../secret.txt", FS_READ_NOFOLLOW), AP_EINVAL);
	assert_int_equal(fs_read_file_at(&b, p, ".github//autopatch.yml", FS_READ_NOFOLLOW),
			 AP_EINVAL);
	assert_int_equal(b.len, 0);
	/* Without the flag the same path reads through the link (trusted trees). */
	assert_int_equal(fs_read_file_at(&b, p, "linked/autopatch.yml", 0), 0);
	assert_string_equal(ap_buf_str(&b), "test: leak");
	ap_buf_reset(&b);

	path_in(p, *state, "repo/fifo");
	assert_int_equal(mkfifo(p, 0600), 0);
	path_in(p, *state, "repo");
	assert_int_equal(fs_read_file_at(&b, p, "fifo", FS_READ_NOFOLLOW), AP_EDENIED);

	/* Without the flag a link is followed (operator-given paths like PRIVATE_KEY_PATH). */
	path_in(p, *state, "repo/.github/autopatch.yml");
	assert_int_equal(fs_read_file(&b, p, 0), 0);
	assert_string_equal(ap_buf_str(&b), "s3cret");
	ap_buf_release(&b);
}

/* Every case runs in its own fresh directory. */
#define FS_TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    FS_TEST(test_mkdir_p_makes_every_level),
	    FS_TEST(test_mkdir_p_refuses_a_file_in_the_way),
	    FS_TEST(test_rm_rf_never_follows_links),
	    FS_TEST(test_rm_rf_of_a_link_removes_only_the_link),
	    FS_TEST(test_rm_rf_missing_path_and_single_file),
	    FS_TEST(test_read_file_whole_and_appends),
	    FS_TEST(test_read_file_over_cap_is_etoobig),
	    FS_TEST(test_read_file_missing_is_enotfound),
	    FS_TEST(test_read_nofollow_refuses_links_and_specials),
	};
	return cmocka_run_group_tests_name("fs", tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* common/fs.c - mkdir -p, rm -rf without following links, capped whole-file reads (see
 * fs.h). */
#include "common/fs.h"

#include "common/beneath.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FS_RM_FDS 16 /* directories nftw may hold open at once */

int fs_mkdir_p(const char *path, mode_t mode)
{
	char tmp[PATH_MAX];
	struct stat st;
	size_t n = strlen(path);

	if (n == 0)
		return ap_error_set(AP_EINVAL, "mkdir: empty path");
	if (n >= sizeof(tmp))
		return ap_error_set(AP_EINVAL, "path too long: %.200s...", path);
	memcpy(tmp, path, n + 1);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, mode) != 0 && errno != EEXIST)
			return ap_error_set(AP_EIO, "mkdir %s: %s", tmp, strerror(errno));
		*p = '/';
	}
	if (mkdir(tmp, mode) == 0)
		return 0;
	if (errno != EEXIST)
		return ap_error_set(AP_EIO, "mkdir %s: %s", tmp, strerror(errno));
	if (stat(tmp, &st) != 0 || !S_ISDIR(st.st_mode))
		return ap_error_set(AP_EIO, "mkdir %s: it exists and is not a directory", tmp);
	return 0;
}

/* The first failure of the current fs_rm_rf() walk (nftw's callback has no user data). */
static __thread int rm_rc;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	int failed;

	(void)st;
	(void)ftw;
	if (flag == FTW_DP || flag == FTW_D || flag == FTW_DNR)
		failed = rmdir(path) != 0;
	else
		failed = unlink(path) != 0; /* FTW_SL, FTW_SLN: the link itself */
	if (failed && errno != ENOENT && rm_rc == 0)
		rm_rc = ap_error_set(AP_EIO, "cannot remove %s: %s", path, strerror(errno));
	return 0; /* go on: remove as much as can be removed */
}

int fs_rm_rf(const char *path)
{
	int rc;

	rm_rc = 0;
	if (nftw(path, rm_entry, FS_RM_FDS, FTW_DEPTH | FTW_PHYS) != 0) {
		if (errno == ENOENT && rm_rc == 0)
			return 0;
		if (rm_rc == 0)
			rm_rc = ap_error_set(AP_EIO, "cannot remove %s: %s", path, strerror(errno));
	}
	rc = rm_rc;
	rm_rc = 0;
	return rc;
}

/* The error for a failed open of name (errno set). */
static int open_error(const char *name, unsigned flags)
{
	int e = errno;

	if (e == ELOOP && (flags & FS_READ_NOFOLLOW))
		return ap_error_set(AP_EDENIED, "%s is a symbolic link; it must be a file", name);
	if (e == ENOENT || e == ENOTDIR)
		return ap_error_set(AP_ENOTFOUND, "cannot read %s: %s", name, strerror(e));
	return ap_error_set(AP_EIO, "cannot read %s: %s", name, strerror(e));
}

/* Read the open file fd to out, naming it `name` in messages; closes fd. */
static int read_fd(ap_buf *out, int fd, const char *name, unsigned flags)
{
	char chunk[8192];
	size_t start = out->len;
	struct stat st;
	ssize_t n;
	int rc = 0;

	if ((flags & FS_READ_NOFOLLOW) && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
		rc = ap_error_set(AP_EDENIED, "%s is not a regular file", name);
		goto out_close;
	}
	while ((n = read(fd, chunk, sizeof(chunk))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = ap_error_set(AP_EIO, "cannot read %s: %s", name, strerror(errno));
			break;
		}
		if ((size_t)n > out->cap - out->len) {
			rc =
			    ap_error_set(AP_ETOOBIG, "%s is larger than %zu bytes", name, out->cap);
			break;
		}
		rc = ap_buf_add(out, chunk, (size_t)n);
		if (rc)
			break;
	}
	if (rc && out->data) {
		explicit_bzero(out->data + start, out->len - start);
		ap_buf_truncate(out, start);
	}
out_close:
	explicit_bzero(chunk, sizeof(chunk));
	close(fd);
	return rc;
}

/* open(2) flags for a file read with flags. */
static int read_oflags(unsigned flags)
{
	return O_RDONLY | O_CLOEXEC | (flags & FS_READ_NOFOLLOW ? O_NOFOLLOW | O_NONBLOCK : 0);
}

int fs_read_file(ap_buf *out, const char *path, unsigned flags)
{
	int fd = open(path, read_oflags(flags));

	if (fd < 0)
		return open_error(path, flags);
	return read_fd(out, fd, path, flags);
}

int fs_read_file_at(ap_buf *out, const char *dir, const char *rel, unsigned flags)
{
	int dfd, fd, rc;

	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return ap_error_set(errno == ENOENT ? AP_ENOTFOUND : AP_EIO,
				    "cannot open the directory of %s: %s", rel, strerror(errno));
	/* An untrusted tree: beneath dir, through no symlink in any component (one
	 * implementation, common/beneath.h: openat2, or its component walk). */
	if (flags & FS_READ_NOFOLLOW) {
		rc = beneath_open(&fd, dfd, rel, O_RDONLY | O_NONBLOCK);
		close(dfd);
		return rc ? rc : read_fd(out, fd, rel, flags);
	}
	fd = openat(dfd, rel, read_oflags(flags));
	if (fd < 0) {
		int e = errno;

		close(dfd);
		errno = e;
		return open_error(rel, flags);
	}
	close(dfd);
	return read_fd(out, fd, rel, flags);
}

int fs_write_atomic(const char *path, const void *data, size_t len, mode_t mode)
{
	char tmp[PATH_MAX], dir[PATH_MAX];
	const char *p = data, *slash;
	size_t done = 0;
	int fd, dfd, rc = 0;

	if (!path || !*path || strlen(path) + 16 > sizeof(tmp))
		return ap_error_set(AP_EINVAL, "cannot write \"%.200s\": not a usable path",
				    path ? path : "");
	snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path); /* fits: length checked above */
	fd = mkstemp(tmp);
	if (fd < 0)
		return ap_error_set(AP_EIO, "cannot create a file beside %s: %s", path,
				    strerror(errno));
	if (fchmod(fd, mode) != 0) {
		rc = ap_error_set(AP_EIO, "cannot set the mode of %s: %s", tmp, strerror(errno));
		goto out_unlink;
	}
	while (done < len) {
		ssize_t n = write(fd, p + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = ap_error_set(AP_EIO, "cannot write %s: %s", tmp, strerror(errno));
			goto out_unlink;
		}
		done += (size_t)n;
	}
	if (fsync(fd) != 0) {
		rc = ap_error_set(AP_EIO, "cannot sync %s: %s", tmp, strerror(errno));
		goto out_unlink;
	}
	if (close(fd) != 0) {
		fd = -1;
		rc = ap_error_set(AP_EIO, "cannot close %s: %s", tmp, strerror(errno));
		goto out_unlink;
	}
	fd = -1;
	if (rename(tmp, path) != 0) {
		rc = ap_error_set(AP_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
		goto out_unlink;
	}
	/* The rename itself is durable once the directory is synced. */
	slash = strrchr(path, '/');
	if (slash) /* fits: path is shorter than tmp, and dir is the same size */
		snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
	else
		snprintf(dir, sizeof(dir), ".");
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
out_unlink:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	return rc;
}

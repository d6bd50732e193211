/* SPDX-License-Identifier: MIT */
/* common/fs.h - the file-system helpers every folder shares: mkdir -p, rm -rf that never
 * follows a symbolic link, and reading a whole file into a capped buffer.
 *
 * All functions return 0 or a negative AP_E* code with ap_error_set() called, and are
 * thread-safe. Paths are borrowed, never kept.
 */
#ifndef AP_FS_H
#define AP_FS_H

#include "common/buf.h"

#include <sys/types.h>

/* Flags of fs_read_file() and fs_read_file_at(). */
enum {
	/* The file comes from a tree someone else controls (a repository checkout): refuse a
	 * symbolic link (AP_EDENIED; the last path component for fs_read_file(), every one of
	 * rel for fs_read_file_at()) and anything but a regular file (AP_EDENIED), and never
	 * block in open() on a FIFO. */
	FS_READ_NOFOLLOW = 1 << 0,
};

/* Create path and every missing parent with mode (less the umask); existing directories
 * are left as they are. 0 when path is a directory afterwards. AP_EINVAL for an empty or
 * over-long path, AP_EIO when a component cannot be made or exists but is not a
 * directory (the message names the component). */
int fs_mkdir_p(const char *path, mode_t mode);

/* Remove path and, when it is a directory, everything below it, like `rm -rf`. Symbolic
 * links are removed, never followed (nftw with FTW_PHYS), so a link to a directory outside
 * the tree leaves that directory alone. A missing path is success. The walk goes on past
 * an entry it cannot remove; AP_EIO then names the first one. The tree must not be changed
 * by anyone untrusted while it is removed (stop the container that wrote it first). */
int fs_rm_rf(const char *path);

/* Append the whole file at path to out. The file must fit in what out's cap leaves
 * (AP_ETOOBIG "<path> is larger than <cap> bytes"): out->cap is the read cap. flags is 0
 * or FS_READ_NOFOLLOW. Errors: AP_ENOTFOUND when the file (or a parent) does not exist,
 * AP_EDENIED for what FS_READ_NOFOLLOW refuses, AP_EIO when it cannot be opened or read,
 * AP_ENOMEM. Messages name path. On failure out holds what it held before (its
 * allocation may have grown); on success the caller still owns out and releases it with
 * ap_buf_release(). The read goes through no other buffer that outlives the call, so a
 * key read this way is only in out. */
int fs_read_file(ap_buf *out, const char *path, unsigned flags);

/* fs_read_file() of rel under the directory dir (trusted, so followed), with messages
 * naming rel only (so a host path does not reach a user-visible message about a checkout).
 * With FS_READ_NOFOLLOW rel is opened by beneath_open() (common/beneath.h): beneath dir and
 * through no symbolic link in any component (AP_EDENIED), and an absolute rel or an empty,
 * "." or ".." name in it is AP_EINVAL. */
int fs_read_file_at(ap_buf *out, const char *dir, const char *rel, unsigned flags);

/* Replace the file at path with data[0..len) atomically: a temporary file beside it gets the
 * data and mode (not reduced by the umask), is synced, then renamed over path and the
 * directory synced, so a reader sees the old or the new contents, never a mix, and a crash
 * leaves one of the two. AP_EINVAL for an unusable path, AP_EIO (naming the file) when a
 * step fails; the temporary file is removed then. */
int fs_write_atomic(const char *path, const void *data, size_t len, mode_t mode);

#endif

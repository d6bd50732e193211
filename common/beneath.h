/* SPDX-License-Identifier: MIT */
/* common/beneath.h - open and read files of an untrusted directory tree (a checkout) from the
 * host, beneath that directory and through no symbolic link in any component.
 *
 * A checkout is outside input: a committed `.github -> /etc` makes a plain open of
 * "<checkout>/.github/autopatch.yml" read a host file, and O_NOFOLLOW guards only the last
 * component. Every host-side read of checkout files goes through this module instead.
 *
 * Resolution uses openat2(2) with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS. Where the kernel (or a seccomp filter) lacks openat2 it falls back
 * to a component-by-component walk: every directory opened with O_DIRECTORY | O_NOFOLLOW
 * relative to the one before, the last name with O_NOFOLLOW. Both refuse the same paths.
 *
 * To read a whole file of a checkout, call fs_read_file_at(..., FS_READ_NOFOLLOW)
 * (common/fs.h), which opens it with beneath_open() and reads only a regular file, capped.
 */
#ifndef AP_BENEATH_H
#define AP_BENEATH_H

#include <stdbool.h>

/* Open rel (plain names separated by '/': not absolute, no empty, "." or ".." component,
 * at most 4095 bytes) beneath the directory root_fd. flags are open(2) flags without O_CREAT,
 * O_TMPFILE or O_PATH; O_NOFOLLOW and O_CLOEXEC are always added. On success *out is a new
 * descriptor (the caller closes it); else *out is -1 and the return is:
 *   AP_EINVAL    rel is not such a path, or flags are refused;
 *   AP_ENOTFOUND rel (or a directory on the way) does not exist;
 *   AP_EDENIED   rel is, or goes through, a symbolic link, or resolves outside root_fd;
 *   AP_EIO       any other failure (errno's text in the message).
 * Every failure records a sentence naming rel. root_fd is borrowed. Thread-safe. */
int beneath_open(int *out, int root_fd, const char *rel, int flags);

/* Tests only: true makes every call use the component walk, as on a kernel without openat2.
 * Process-wide. */
void beneath__force_walk(bool on);

#endif

/* SPDX-License-Identifier: MIT */
/* common/beneath.c - files of an untrusted tree, opened beneath it with no symlink in any
 * component: openat2(2), or a component walk where openat2 is missing (see beneath.h). */
#include "common/beneath.h"

#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define REL_MAX	     4095 /* bytes of a relative path */
#define NAME_MAX_    255  /* bytes of one component */
#define EAGAIN_TRIES 8	  /* openat2 answers EAGAIN when a rename races the lookup */
#define READ_CHUNK   8192
#define QUOTE_MAX    200 /* bytes of rel quoted in a message */

static atomic_bool force_walk;
static atomic_bool no_openat2; /* learnt from ENOSYS/EPERM, once */

void beneath__force_walk(bool on)
{
	atomic_store(&force_walk, on);
}

/* rel as the contract allows it: relative, plain names, bounded. */
static bool rel_ok(const char *rel)
{
	const char *p = rel;
	size_t len = strlen(rel);

	if (len == 0 || len > REL_MAX || rel[0] == '/')
		return false;
	while (*p) {
		size_t n = strcspn(p, "/");

		if (n == 0 || n > NAME_MAX_ || (n == 1 && p[0] == '.') ||
		    (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p += n;
		if (*p == '/' && !*++p)
			return false; /* a trailing slash is an empty last component */
	}
	return true;
}

/* The AP code and sentence for errno e while opening rel. */
static int open_error(int e, const char *rel)
{
	switch (e) {
	case ENOENT:
	case ENOTDIR:
		return ap_error_set(AP_ENOTFOUND, "`%.*s` does not exist in the checkout",
				    QUOTE_MAX, rel);
	case ELOOP:
		return ap_error_set(AP_EDENIED,
				    "`%.*s` is or goes through a symbolic link; the host reads "
				    "checkout files only through no symbolic link",
				    QUOTE_MAX, rel);
	case EXDEV:
		return ap_error_set(AP_EDENIED, "`%.*s` resolves outside the checkout", QUOTE_MAX,
				    rel);
	default:
		return ap_error_set(AP_EIO, "cannot open `%.*s` in the checkout: %s", QUOTE_MAX,
				    rel, strerror(e));
	}
}

/* openat2 with the resolve rules; -1 with errno, ENOSYS where it is not available. */
static int open_openat2(int root_fd, const char *rel, int flags)
{
	struct open_how how;
	long fd = -1;

	memset(&how, 0, sizeof(how));
	how.flags = (unsigned long long)(flags | O_NOFOLLOW | O_CLOEXEC);
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
	for (int i = 0; i < EAGAIN_TRIES; i++) {
		fd = syscall(SYS_openat2, root_fd, rel, &how, sizeof(how));
		if (fd >= 0 || errno != EAGAIN)
			break;
	}
	return (int)fd;
}

/* Why openat(dir, name, ...) failed with e: ELOOP when name is a symbolic link (O_DIRECTORY
 * reports a link as ENOTDIR), else e. */
static int classify(int dir, const char *name, int e)
{
	struct stat st;

	if ((e == ENOTDIR || e == ELOOP) && fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return S_ISLNK(st.st_mode) ? ELOOP : ENOTDIR;
	return e;
}

/* The component walk: -1 with errno. */
static int open_walk(int root_fd, const char *rel, int flags)
{
	char name[NAME_MAX_ + 1];
	const char *p = rel;
	int dir = root_fd, fd, e = 0;

	for (;;) {
		size_t n = strcspn(p, "/");
		bool last = p[n] == '\0';

		memcpy(name, p, n);
		name[n] = '\0';
		fd = openat(dir, name,
			    last ? flags | O_NOFOLLOW | O_CLOEXEC
				 : O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			e = classify(dir, name, errno);
		if (dir != root_fd)
			close(dir);
		if (fd < 0) {
			errno = e;
			return -1;
		}
		if (last)
			return fd;
		dir = fd;
		p += n + 1;
	}
}

int beneath_open(int *out, int root_fd, const char *rel, int flags)
{
	int fd = -1;

	*out = -1;
	if (!rel || !rel_ok(rel))
		return ap_error_set(AP_EINVAL, "`%.*s` is not a relative path beneath the checkout",
				    QUOTE_MAX, rel ? rel : "");
	if ((flags & (O_CREAT | O_PATH)) || (flags & O_TMPFILE) == O_TMPFILE)
		return ap_error_set(AP_EINVAL, "beneath_open opens existing files only");
	if (!atomic_load(&force_walk) && !atomic_load(&no_openat2)) {
		fd = open_openat2(root_fd, rel, flags);
		/* ENOSYS: an old kernel; EPERM: a seccomp filter that predates openat2. */
		if (fd < 0 && (errno == ENOSYS || errno == EPERM)) {
			atomic_store(&no_openat2, true);
		} else if (fd < 0 && errno == ENOTDIR) {
			/* O_DIRECTORY reports a final symlink as ENOTDIR: the walk tells a link
			 * from a file on the way (and is as strict). */
		} else {
			if (fd < 0)
				return open_error(errno, rel);
			*out = fd;
			return 0;
		}
	}
	fd = open_walk(root_fd, rel, flags);
	if (fd < 0)
		return open_error(errno, rel);
	*out = fd;
	return 0;
}

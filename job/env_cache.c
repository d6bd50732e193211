/* SPDX-License-Identifier: MIT */
/* job/env_cache.c - the environment cache (env_cache.h): the key over the image, the setup
 * and the repository's lockfiles, and the archives kept on the host, least recently used out
 * first. The setup phase that fills and restores it is job/environment.c. */
#include "job/env_cache.h"

#include "common/buf.h"
#include "common/err.h"
#include "common/fs.h"
#include "job/repo_config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define KEY_FILES_MAX	 256	     /* files hashed into a cache key */
#define KEY_FILE_CAP	 (16u << 20) /* largest file hashed */
#define KEY_WALK_DEPTH	 12
#define KEY_WALK_ENTRIES 20000

static const char *const default_key_globs[] = {"requirements*.txt",
						"pyproject.toml",
						"poetry.lock",
						"Pipfile",
						"Pipfile.lock",
						"setup.py",
						"setup.cfg",
						"package.json",
						"package-lock.json",
						"npm-shrinkwrap.json",
						"yarn.lock",
						"pnpm-lock.yaml",
						"go.mod",
						"go.sum",
						"Cargo.toml",
						"Cargo.lock",
						"pom.xml",
						"build.gradle",
						"build.gradle.kts",
						"gradle.lockfile",
						"Gemfile",
						"Gemfile.lock",
						"composer.json",
						"composer.lock",
						NULL};

/* ---- the cache key ---- */

struct keywalk {
	char **paths;
	size_t n, seen;
	const char *const *globs;
	bool top_only;
};

static bool key_match(const struct keywalk *w, const char *rel)
{
	for (size_t i = 0; w->globs[i]; i++)
		if (repo_config_glob(w->globs[i], rel))
			return true;
	return false;
}

static int walk(struct keywalk *w, int dfd, const char *rel, int depth)
{
	DIR *d;
	struct dirent *de;
	int rc = 0;

	if (depth > KEY_WALK_DEPTH)
		return 0;
	d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return ap_error_set(AP_EIO, "cannot read the checkout: %s", strerror(errno));
	}
	while (!rc && (de = readdir(d)) != NULL) {
		char path[4096];
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    (depth == 0 && strcmp(de->d_name, ".git") == 0) ||
		    strcmp(de->d_name, "node_modules") == 0)
			continue;
		if (++w->seen > KEY_WALK_ENTRIES)
			break;
		/* Fits: at most KEY_WALK_DEPTH + 1 names of <= 255 bytes (3328 < 4096). */
		snprintf(path, sizeof(path), "%s%s%s", rel, *rel ? "/" : "", de->d_name);
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (S_ISDIR(st.st_mode) && !w->top_only) {
			int fd = openat(dirfd(d), de->d_name,
					O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (fd >= 0)
				rc = walk(w, fd, path, depth + 1);
		} else if (S_ISREG(st.st_mode) && key_match(w, path) && w->n < KEY_FILES_MAX) {
			if (!(w->paths[w->n] = strdup(path)))
				rc = ap_error_set(AP_ENOMEM, "out of memory");
			else
				w->n++;
		}
	}
	closedir(d);
	return rc;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void hash_str(EVP_MD_CTX *h, const char *label, const char *s)
{
	EVP_DigestUpdate(h, label, strlen(label) + 1);
	EVP_DigestUpdate(h, s ? s : "", strlen(s ? s : "") + 1);
}

int env_cache_key(char out[65], const char *image_id, const char *setup_script, const char *repo_id,
		  const char *repo_dir, const char *const *globs)
{
	struct keywalk w = {0};
	EVP_MD_CTX *h = EVP_MD_CTX_new();
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	int fd, rc = 0;

	out[0] = '\0';
	if (!h)
		return ap_error_set(AP_ENOMEM, "out of memory");
	w.globs = globs && globs[0] ? globs : default_key_globs;
	w.top_only = !(globs && globs[0]);
	w.paths = calloc(KEY_FILES_MAX, sizeof(*w.paths));
	if (!w.paths) {
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto out;
	}
	fd = open(repo_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		rc = ap_error_set(AP_EIO, "cannot open the checkout: %s", strerror(errno));
		goto out;
	}
	if ((rc = walk(&w, fd, "", 0)))
		goto out;
	qsort(w.paths, w.n, sizeof(*w.paths), cmp_str);
	EVP_DigestInit_ex(h, EVP_sha256(), NULL);
	hash_str(h, "autopatch-env-1", "");
	hash_str(h, "image", image_id);
	hash_str(h, "setup", setup_script);
	hash_str(h, "repo", repo_id);
	for (size_t i = 0; i < w.n; i++) {
		ap_buf b = AP_BUF_INIT(KEY_FILE_CAP);

		rc = fs_read_file_at(&b, repo_dir, w.paths[i], FS_READ_NOFOLLOW);
		hash_str(h, "file", w.paths[i]);
		if (rc == 0) {
			EVP_DigestUpdate(h, b.data ? b.data : "", b.len);
		} else {
			/* Too big or refused: the key says so, and changes with its size. */
			hash_str(h, "unreadable", ap_error_name(rc));
			ap_error_clear();
			rc = 0;
		}
		ap_buf_release(&b);
	}
	EVP_DigestFinal_ex(h, md, &mdlen);
	for (unsigned int i = 0; i < 32 && i < mdlen; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
out:
	for (size_t i = 0; w.paths && i < w.n; i++)
		free(w.paths[i]);
	free(w.paths);
	EVP_MD_CTX_free(h);
	return rc;
}

/* ---- the cache on the host ---- */

static void repo_slug(const char *repo_id, char *out, size_t n)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char hex[17];
	size_t j = 0;

	EVP_Digest(repo_id, strlen(repo_id), md, &mdlen, EVP_sha256(), NULL);
	for (int i = 0; i < 8; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	/* A readable tail of the name, then the hash that makes it unique. */
	const char *tailp = strrchr(repo_id, '/');
	const char *name = tailp && tailp[1] ? tailp + 1 : repo_id;
	char clean[41];

	for (const char *p = name; *p && j < sizeof(clean) - 1; p++)
		clean[j++] = ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			      (*p >= '0' && *p <= '9') || *p == '-' || *p == '_')
				 ? *p
				 : '_';
	clean[j] = '\0';
	snprintf(out, n, "%s-%s", clean, hex);
}

/* AUTOPATCH_DATA_DIR/env-cache, or AP_ETOOBIG naming the setting when it does not fit. */
static int cache_root(const ap_config *cfg, char *out, size_t n)
{
	const char *data = cfg_str(cfg, "AUTOPATCH_DATA_DIR");

	if (ap_fmt(out, n, "%s/env-cache", data))
		return ap_error_set(AP_ETOOBIG,
				    "AUTOPATCH_DATA_DIR is too long for the environment cache "
				    "(%zu bytes; at most %zu): choose a shorter directory",
				    strlen(data), n - sizeof("/env-cache"));
	return 0;
}

int env_cache_paths(const ap_config *cfg, const char *repo_id, const char *key, char *dir,
		    char *tar, char *meta, size_t n)
{
	char root[3000], slug[80];
	int rc;

	if ((rc = cache_root(cfg, root, sizeof(root))))
		return rc;
	/* The slug is at most 40 + 1 + 16 bytes, so it fits slug[80]. */
	repo_slug(repo_id, slug, sizeof(slug));
	if ((rc = ap_fmt(dir, n, "%s/%s", root, slug)) ||
	    (rc = ap_fmt(tar, n, "%s/%s.tar", dir, key)) ||
	    (rc = ap_fmt(meta, n, "%s/%s.json", dir, key)))
		return ap_error_set(rc,
				    "the environment cache's path for key %.12s is too long: %s",
				    key, ap_error_last());
	return 0;
}

static int write_meta(const char *path, const env_cache_entry *e)
{
	char text[1024];
	int len;

	/* Only values autopatch made itself: the repository id, a hex key, an image
	 * reference (letters, digits, ._-/:@), numbers. */
	len = snprintf(text, sizeof(text),
		       "{\"repo\":\"%s\",\"key\":\"%s\",\"image\":\"%s\",\"bytes\":%" PRId64
		       ",\"setup_ms\":%" PRId64 "}\n",
		       e->repo, e->key, e->image, e->bytes, e->setup_ms);
	/* Cannot be cut: the three fields are capped at 255 + 64 + 255 bytes (see
	 * env_cache_entry), the rest is under 100. */
	return fs_write_atomic(path, text, (size_t)len, 0600);
}

/* The LRU clock: the archive's mtime, from the wall clock with nanoseconds (the kernel's own
 * file times are coarser, and two uses a few milliseconds apart must stay ordered). */
static int set_used_now(const char *tar)
{
	struct timespec t[2];

	clock_gettime(CLOCK_REALTIME, &t[0]);
	t[1] = t[0];
	if (utimensat(AT_FDCWD, tar, t, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	return errno == ENOENT
		   ? AP_ENOTFOUND
		   : ap_error_set(AP_EIO, "cannot mark %s used: %s", tar, strerror(errno));
}

static bool json_field(const char *text, const char *name, char *out, size_t n)
{
	char pat[40];
	const char *p, *end;

	snprintf(pat, sizeof(pat), "\"%s\":", name); /* name: one of ours, <= 8 bytes */
	p = strstr(text, pat);
	if (!p)
		return false;
	p += strlen(pat);
	if (*p == '"') {
		p++;
		end = strchr(p, '"');
	} else {
		end = p + strcspn(p, ",}");
	}
	if (!end || (size_t)(end - p) >= n)
		return false; /* a cut repository or key would name another entry */
	snprintf(out, n, "%.*s", (int)(end - p), p);
	return true;
}

static int read_entry(const char *dir, const char *name, env_cache_entry *e)
{
	char path[4200], num[32];
	ap_buf b = AP_BUF_INIT(8192);
	struct stat st;
	size_t len = strlen(name);
	int rc;

	if (len < 6 || strcmp(name + len - 5, ".json") != 0)
		return AP_ENOTFOUND;
	/* Fits: dir is under 3400 bytes (env_cache_list), a name at most 255. */
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	rc = fs_read_file(&b, path, FS_READ_NOFOLLOW);
	if (rc) {
		ap_buf_release(&b);
		ap_error_clear();
		return AP_ENOTFOUND;
	}
	memset(e, 0, sizeof(*e));
	if (!json_field(ap_buf_str(&b), "repo", e->repo, sizeof(e->repo)) ||
	    !json_field(ap_buf_str(&b), "key", e->key, sizeof(e->key))) {
		ap_buf_release(&b);
		return AP_ENOTFOUND; /* not one autopatch wrote */
	}
	json_field(ap_buf_str(&b), "image", e->image, sizeof(e->image));
	if (json_field(ap_buf_str(&b), "setup_ms", num, sizeof(num)))
		e->setup_ms = strtoll(num, NULL, 10);
	ap_buf_release(&b);
	snprintf(path, sizeof(path), "%s/%.*s.tar", dir, (int)(len - 5), name);
	if (stat(path, &st) != 0)
		return AP_ENOTFOUND;
	e->bytes = st.st_size;
	e->used_s = st.st_mtim.tv_sec;
	e->used_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	return 0;
}

static int cmp_used(const void *a, const void *b)
{
	const env_cache_entry *x = a, *y = b;

	return x->used_ns < y->used_ns ? 1 : x->used_ns > y->used_ns ? -1 : 0;
}

int env_cache_list(const ap_config *cfg, env_cache_entry **out, size_t *n)
{
	char root[3000], dir[3400];
	DIR *rd, *dd;
	struct dirent *re, *de;
	env_cache_entry *v = NULL, e;
	size_t cap = 0;
	int rc;

	*out = NULL;
	*n = 0;
	if ((rc = cache_root(cfg, root, sizeof(root))))
		return rc;
	rd = opendir(root);
	if (!rd)
		return errno == ENOENT
			   ? 0
			   : ap_error_set(AP_EIO, "cannot read %s: %s", root, strerror(errno));
	while ((re = readdir(rd)) != NULL) {
		if (re->d_name[0] == '.')
			continue;
		snprintf(dir, sizeof(dir), "%s/%s", root, re->d_name); /* 3000 + 256: fits */
		dd = opendir(dir);
		if (!dd)
			continue;
		while ((de = readdir(dd)) != NULL) {
			if (read_entry(dir, de->d_name, &e) != 0)
				continue;
			if (*n == cap) {
				env_cache_entry *nv;

				cap = cap ? cap * 2 : 16;
				nv = realloc(v, cap * sizeof(*v));
				if (!nv) {
					closedir(dd);
					closedir(rd);
					free(v);
					return ap_error_set(AP_ENOMEM, "out of memory");
				}
				v = nv;
			}
			v[(*n)++] = e;
		}
		closedir(dd);
	}
	closedir(rd);
	if (*n > 1)
		qsort(v, *n, sizeof(*v), cmp_used);
	*out = v;
	return 0;
}

static void remove_entry(const ap_config *cfg, const env_cache_entry *e)
{
	char dir[4200], tar[4200], meta[4200];

	/* The entry was listed, so its paths fit (the same root and its own names). */
	if (env_cache_paths(cfg, e->repo, e->key, dir, tar, meta, sizeof(dir))) {
		ap_error_clear();
		return;
	}
	unlink(meta);
	unlink(tar);
	rmdir(dir); /* when it was the repository's last entry */
}

int env_cache_clear(const ap_config *cfg, const char *repo_id, size_t *removed)
{
	env_cache_entry *v = NULL;
	size_t n = 0;
	int rc = env_cache_list(cfg, &v, &n);

	*removed = 0;
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++)
		if (!repo_id || strcmp(v[i].repo, repo_id) == 0) {
			remove_entry(cfg, &v[i]);
			(*removed)++;
		}
	free(v);
	return 0;
}

int env_cache_put(const ap_config *cfg, const env_cache_entry *e, int (*write_fn)(void *ud, int fd),
		  void *ud)
{
	char dir[4200], tar[4200], meta[4200], tmp[4300];
	env_cache_entry m = *e;
	struct stat st;
	int fd, rc;

	if ((rc = env_cache_paths(cfg, e->repo, e->key, dir, tar, meta, sizeof(dir))) ||
	    (rc = fs_mkdir_p(dir, 0700)))
		return rc;
	/* tar is under 4200 bytes: fits. Unique: workers may race. */
	snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", tar);
	fd = mkstemp(tmp);
	if (fd < 0)
		return ap_error_set(AP_EIO, "cannot write in %s: %s", dir, strerror(errno));
	rc = write_fn(ud, fd);
	if (rc == 0 && fstat(fd, &st) != 0)
		rc = ap_error_set(AP_EIO, "cannot stat %s: %s", tmp, strerror(errno));
	if (close(fd) != 0 && rc == 0)
		rc = ap_error_set(AP_EIO, "cannot write %s: %s", tmp, strerror(errno));
	if (rc == 0 && rename(tmp, tar) != 0)
		rc = ap_error_set(AP_EIO, "cannot store %s: %s", tar, strerror(errno));
	if (rc) {
		unlink(tmp);
		return rc;
	}
	m.bytes = st.st_size;
	if ((rc = write_meta(meta, &m)) || (rc = set_used_now(tar))) {
		unlink(tar);
		return rc;
	}
	return 0;
}

int env_cache_touch(const ap_config *cfg, const char *repo_id, const char *key)
{
	char dir[4200], tar[4200], meta[4200];
	int rc = env_cache_paths(cfg, repo_id, key, dir, tar, meta, sizeof(dir));

	return rc ? rc : set_used_now(tar);
}

int env_cache_evict(const ap_config *cfg, const char *keep_repo, const char *keep_key,
		    void (*note_fn)(void *ud, const char *msg), void *ud, size_t *removed)
{
	env_cache_entry *v = NULL;
	size_t n = 0;
	int64_t cap = 0, total = 0;
	int rc;

	*removed = 0;
	if ((rc = cfg_bytes(cfg, "AUTOPATCH_ENV_CACHE_SIZE", 0, INT64_MAX, &cap)) ||
	    (rc = env_cache_list(cfg, &v, &n)))
		return rc;
	for (size_t i = 0; i < n; i++)
		total += v[i].bytes;
	/* v is most recently used first: remove from the end. */
	for (size_t i = n; i-- > 0 && total > cap;) {
		char msg[400];

		if (keep_repo && strcmp(v[i].repo, keep_repo) == 0 &&
		    strcmp(v[i].key, keep_key) == 0)
			continue;
		remove_entry(cfg, &v[i]);
		total -= v[i].bytes;
		(*removed)++;
		if (note_fn) {
			snprintf(
			    msg, sizeof(msg),
			    "environment cache: evicted key %.12s (%.256s, least recently used)",
			    v[i].key, v[i].repo);
			note_fn(ud, msg);
		}
	}
	free(v);
	return 0;
}

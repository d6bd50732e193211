/* SPDX-License-Identifier: MIT */
/* job/env_cache.h - the environment cache: what the setup phase made, kept on the host as an
 * archive per (repository, key) under AUTOPATCH_DATA_DIR/env-cache,
 * capped by AUTOPATCH_ENV_CACHE_SIZE, least recently used out first. job/environment.c fills
 * and restores it; `autopatch cache` lists and clears it. */
#ifndef AP_ENV_CACHE_H
#define AP_ENV_CACHE_H

#include "common/config.h"

#include <stddef.h>
#include <stdint.h>

/*
 * The cache key: hex SHA-256 over the image id, the setup script, repo_id, and the path and
 * content of every file of repo_dir matching the globs (default: the lockfiles and manifests
 * at the top: requirements*.txt, pyproject.toml, poetry.lock, Pipfile(.lock), setup.py,
 * setup.cfg, package.json, package-lock.json, npm-shrinkwrap.json, yarn.lock,
 * pnpm-lock.yaml, go.mod, go.sum, Cargo.toml, Cargo.lock, pom.xml, build.gradle(.kts),
 * gradle.lockfile, Gemfile(.lock), composer.json, composer.lock). The checkout is walked
 * without following a link (.git and node_modules skipped, at most 256 files of 16 MiB).
 */
int env_cache_key(char out[65], const char *image_id, const char *setup_script, const char *repo_id,
		  const char *repo_dir, const char *const *globs);

/* One cached environment (env_cache_list). */
typedef struct env_cache_entry {
	char repo[256]; /* repo_id it belongs to */
	char key[65];
	char image[256];  /* the image reference it was made in */
	int64_t bytes;	  /* archive size */
	int64_t used_s;	  /* last use (Unix time) */
	int64_t used_ns;  /* last use, nanoseconds since the epoch: the LRU order */
	int64_t setup_ms; /* how long the setup it replaces took */
} env_cache_entry;

/* Every entry, most recently used first. *out is malloc'd (free()); AP_EIO. */
int env_cache_list(const ap_config *cfg, env_cache_entry **out, size_t *n);

/* Remove the entries of repo_id (NULL: all). *removed gets how many. */
int env_cache_clear(const ap_config *cfg, const char *repo_id, size_t *removed);

/*
 * Keep an archive as the entry (e->repo, e->key): write_fn(ud, fd) writes it into a new
 * temporary file of the cache (0, or a negative AP_E* that abandons it), which then replaces
 * any archive of that key; e->image and e->setup_ms become its metadata (the size is the
 * file's). The entry counts as used now. Neither the caller nor this reads the archive.
 * AP_EIO naming the file, or write_fn's error; nothing is left behind on error.
 */
int env_cache_put(const ap_config *cfg, const env_cache_entry *e, int (*write_fn)(void *ud, int fd),
		  void *ud);

/* Mark the entry used now (every restore does): the LRU clock is the archive's mtime, set
 * to the wall clock with nanoseconds. AP_ENOTFOUND when there is no such entry. */
int env_cache_touch(const ap_config *cfg, const char *repo_id, const char *key);

/*
 * Remove the least recently used entries until the archives' total fits
 * AUTOPATCH_ENV_CACHE_SIZE. The entry (keep_repo, keep_key) - the one just stored - is never
 * removed (keep_repo NULL: none is kept). note(ud, sentence), when given, hears each removal
 * ("environment cache: evicted key 3f2a... (owner/name, least recently used)"); *removed gets
 * how many. AP_EINVAL for a bad AUTOPATCH_ENV_CACHE_SIZE, AP_EIO when the cache is unreadable.
 */
int env_cache_evict(const ap_config *cfg, const char *keep_repo, const char *keep_key,
		    void (*note)(void *ud, const char *msg), void *ud, size_t *removed);

/* The entry's directory, archive and metadata paths (each of cap n) for (repo_id, key).
 * AP_ETOOBIG, with a sentence, when AUTOPATCH_DATA_DIR makes a path that does not fit: a cut
 * path would name another file. */
int env_cache_paths(const ap_config *cfg, const char *repo_id, const char *key, char *dir,
		    char *tar, char *meta, size_t n);

#endif

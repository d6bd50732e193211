/* SPDX-License-Identifier: MIT */
/* sandbox/internal.h - sandbox/ internals shared by its modules and unit tests (not an API). */
#ifndef AP_SANDBOX_INTERNAL_H
#define AP_SANDBOX_INTERNAL_H

#include "sandbox/sandbox.h"

#include <cjson/cJSON.h>
#include <stdbool.h>

/* uid:gid every command runs as (the image's "sandbox" user). */
#define SBX_USER "10001:10001"

/* The defaults of the AUTOPATCH_SANDBOX_* settings are in the table of common/config.c
 * (docs/sandbox.md). */

/* Most VOLUMEs an image may declare. */
#define SBX_MAX_VOLUMES 16

/* HOME of every command: outside the workspace (a `pip install --user -e .` must not add
 * files to the diff) on the exec-able /tmp/trees mount (user-installed extensions load). */
#define SBX_HOME "/tmp/trees/home"

/*
 * The body of POST /containers/create for a fully resolved spec (no zero fields): every
 * hardening field is set here and only here. owner labels the container; cmd_seconds is the
 * life of PID 1 (0: sleep forever, for warm-pool boxes that the host destroys). network_mode
 * is "none" or the name of the job's internal network; extra_env (NULL-terminated, may be
 * NULL) adds entries such as the egress proxy's address. volumes (NULL-terminated, may be
 * NULL: from sbx__image_volumes) are the image's VOLUME paths, each covered by a tmpfs of
 * spec->volume_bytes owned by the box user, so the daemon creates no volume on host disk.
 * podman selects Podman's spelling of the owner option ("U" instead of uid=/gid=). *out is
 * freed with cJSON_Delete.
 */
int sbx__create_body(const sbx_spec *spec, const char *owner, int cmd_seconds,
		     const char *network_mode, const char *const *extra_env,
		     const char *const *volumes, bool podman, cJSON **out);

/*
 * The VOLUME paths a box of this image must cover, from the daemon's answer to GET
 * /images/{name}/json (its Config.Volumes): each cleaned the way the daemon cleans it
 * ("/data/" and "//data" are "/data"), duplicates dropped, "/tmp" dropped (the box's /tmp is
 * a capped tmpfs already). Refused with AP_EDENIED and a sentence naming the image (name, for
 * messages) and the path: "/", paths under /proc, /sys or /dev, paths that cover or lie
 * inside /repo or /tmp/workspace, relative paths or paths with "." or ".." components,
 * characters other than letters, digits and "._-@+=", more than SBX_MAX_VOLUMES, or a
 * Config.Volumes that is not an object; AP_ENOMEM. *out is NULL-terminated (NULL when there is none
 * to cover) and freed with sbx__volumes_free.
 */
int sbx__image_volumes(const cJSON *image, const char *name, char ***out);

/* Accepts NULL. */
void sbx__volumes_free(char **volumes);

/*
 * Check what the daemon mounted into a created container (GET /containers/{id}/json,
 * its Mounts): only the read-only bind at /repo and tmpfs mounts are allowed. Anything else,
 * such as an anonymous volume for an image VOLUME, is AP_EDENIED with a sentence naming the
 * mount and the image (name, for messages).
 */
int sbx__check_mounts(const cJSON *container, const char *name);

/* Fill the zero fields of spec from the engine's settings. Strings stay borrowed. */
void sbx__resolve_spec(const sbx_engine *e, const sbx_spec *in, sbx_spec *out);

/* Files in a box's tmpfs mounts count against its memory limit (the kernel charges tmpfs
 * pages to the writer's memory cgroup; a kubelet does the same for memory-backed emptyDirs):
 * together they may hold at most all but 1/SBX_PROC_SHARE of the memory, which stays the
 * processes'. docs/sandbox.md, "What a box holds". */
#define SBX_PROC_SHARE 16

/* Bytes a box of this memory may keep in its tmpfs mounts. */
int64_t sbx__files_max(int64_t memory);

/* 0 when s's /tmp, workspace and trees plus n_volumes image VOLUMEs of s->volume_bytes fit
 * sbx__files_max(s->memory_bytes); else AP_EINVAL with a sentence naming every size. */
int sbx__sizes_check(const sbx_spec *s, size_t n_volumes);

/* Compute the default owner id: 16 hex digits of SHA-256(hostname "\n" absolute db path). */
int sbx__default_owner(const char *db_path, char *out, size_t outlen);

#endif

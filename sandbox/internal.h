/* SPDX-License-Identifier: MIT */
/* sandbox/internal.h - sandbox/ internals shared by its modules and unit tests (not an API). */
#ifndef AP_SANDBOX_INTERNAL_H
#define AP_SANDBOX_INTERNAL_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "sandbox/sandbox.h"

/* uid:gid every command runs as (the image's "sandbox" user). */
#define SBX_USER "10001:10001"

/* HOME of every command: outside the workspace (a `pip install --user -e .` must not add
 * files to the diff) on the exec-able /tmp/trees mount (user-installed extensions load). */
#define SBX_HOME "/tmp/trees/home"

/* Defaults of the AUTOPATCH_SANDBOX_* settings (docs/sandbox.md). */
#define SBX_DEF_IMAGE	     "autopatch-sandbox:latest"
#define SBX_DEF_RUNTIME	     "runc"
#define SBX_DEF_MEMORY	     (2LL << 30)
#define SBX_DEF_NANO_CPUS    2000000000LL
#define SBX_DEF_PIDS	     512
#define SBX_DEF_TMP_BYTES    (256LL << 20)
#define SBX_DEF_WORKSPACE    (1LL << 30)
#define SBX_DEF_TREES	     (2LL << 30)
#define SBX_DEF_NOFILE	     4096
#define SBX_DEF_FSIZE	     (1LL << 30)
#define SBX_DEF_WALL_SECONDS 3600
#define SBX_DEF_OUTPUT_CAP   (1 << 20)
#define SBX_DEF_POOL	     1

/*
 * The body of POST /containers/create for a fully resolved spec (no zero fields): every
 * hardening field is set here and only here. owner labels the container; cmd_seconds is the
 * life of PID 1 (0: sleep forever, for warm-pool boxes that the host destroys). network_mode
 * is "none" or the name of the job's internal network; extra_env (NULL-terminated, may be
 * NULL) adds entries such as the egress proxy's address. podman selects Podman's spelling of
 * the workspace owner option ("U" instead of uid=/gid=). *out is freed with cJSON_Delete.
 */
int sbx__create_body(const sbx_spec *spec, const char *owner, int cmd_seconds,
		     const char *network_mode, const char *const *extra_env, bool podman,
		     cJSON **out);

/* Fill the zero fields of spec from the engine's settings. Strings stay borrowed. */
void sbx__resolve_spec(const sbx_engine *e, const sbx_spec *in, sbx_spec *out);

/* The engine's owner id (AUTOPATCH_OWNER_ID or the default hash). */
const char *sbx__owner(const sbx_engine *e);

/* Compute the default owner id: 16 hex digits of SHA-256(hostname "\n" absolute db path). */
int sbx__default_owner(const char *db_path, char *out, size_t outlen);

#endif

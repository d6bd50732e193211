/* SPDX-License-Identifier: MIT */
/* sandbox/sandbox.h - the sandbox backend interface: create / exec / destroy.
 *
 * AI-written code runs only inside a box. A box is a fresh, hardened, network-less container
 * with the job's repository read-only at /repo and a size-capped tmpfs workspace at
 * /tmp/workspace. /tmp/trees (exec-able, size-capped) holds HOME (/tmp/trees/home) and the trees
 * the Tester builds and runs tests in; /tmp itself is noexec (on Kubernetes it cannot be). No
 * credential ever enters a box. Two backends sit behind this interface
 * (AUTOPATCH_SANDBOX_BACKEND, sandbox/backend.h): the Docker Engine (default, docker.c) and
 * Kubernetes pods (k8s.c); the settings, the pool and the output handling are shared.
 *
 * Ownership: sbx_engine is long-lived and thread-safe; a box is used by one thread at a time
 * and must be released with sbx_destroy(), which always kills and removes it.
 */
#ifndef AP_SANDBOX_H
#define AP_SANDBOX_H

#include "common/config.h"

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* In a box: the list of the setup products the host restored there (one path per line,
 * relative to the workspace; job/environment.h writes it, the Tester reads it). */
#define SBX_SETUP_KEEP_LIST "/tmp/.ap-env/keep"

typedef struct sbx_engine sbx_engine; /* connection to a backend (the Docker daemon) */
typedef struct sbx_box sbx_box;	      /* one container */

enum sbx_network { SBX_NET_NONE, SBX_NET_ALLOWLIST };

/* What a box looks like. Strings are borrowed for the duration of sbx_create(). */
typedef struct sbx_spec {
	int version;
	const char *image;	  /* default: AUTOPATCH_SANDBOX_IMAGE */
	const char *runtime;	  /* "runc" (default) or "runsc" */
	const char *repo_dir;	  /* host directory bound read-only at /repo; NULL: none */
	const char *job_label;	  /* value of the autopatch.job label */
	int64_t memory_bytes;	  /* memory and memory+swap */
	int64_t nano_cpus;	  /* CPU quota, 1e9 = one CPU */
	int64_t pids;		  /* pids limit */
	int64_t tmp_bytes;	  /* tmpfs size of /tmp */
	int64_t workspace_bytes;  /* tmpfs size of /tmp/workspace */
	int64_t volume_bytes;	  /* tmpfs size of each VOLUME the image declares */
	int64_t nofile;		  /* RLIMIT_NOFILE */
	int64_t fsize_bytes;	  /* RLIMIT_FSIZE */
	int wall_seconds;	  /* life of the box; the host kills it after this */
	enum sbx_network network; /* SBX_NET_NONE by default */
	const char *const *allow; /* NULL-terminated "host:port" list for SBX_NET_ALLOWLIST (the
				   * kubernetes backend refuses an allow-list: AP_EINVAL) */
	int64_t trees_bytes;	  /* tmpfs size of /tmp/trees (HOME and the Tester's trees) */
} sbx_spec;

#define SBX_SPEC_VERSION 1
/* Zero means "the configured default" for every numeric field. */
#define SBX_SPEC_INIT                                                                              \
	{                                                                                          \
		.version = SBX_SPEC_VERSION                                                        \
	}

/* Result of one command. */
typedef struct sbx_result {
	int exit_code;	/* the command's exit status; 124 on timeout, 128+N on signal N */
	bool timed_out; /* the per-command deadline passed and the command was killed */
	bool truncated; /* output passed the cap: head and tail were kept, the middle dropped */
	char *out;	/* stdout, NUL-terminated (may contain NULs before it) */
	size_t out_len;
	char *err; /* stderr, likewise */
	size_t err_len;
	int64_t millis; /* wall time of the exec */
} sbx_result;

#define SBX_RESULT_INIT                                                                            \
	{                                                                                          \
		0, false, false, NULL, 0, NULL, 0, 0                                               \
	}

/* Receives output as it arrives (stream 1 = stdout, 2 = stderr), before any cap; the bytes
 * come from the box: treat them as untrusted. Already redacted (common/redact.h streams, so
 * the last bytes of a stream may only arrive when the command ends). */
typedef void (*sbx_output_fn)(void *ud, int stream, const char *p, size_t n);

/* Supplies stdin bytes as the command reads them (sbx_cmd.stdin_fn): fills up to n bytes of
 * buf and returns how many, 0 at the end, or < 0 to stop (stdin is then closed early). */
typedef long (*sbx_input_fn)(void *ud, char *buf, size_t n);

/* One command: argv is executed directly (never through a host-side shell). */
typedef struct sbx_cmd {
	const char *const *argv; /* NULL-terminated */
	const char *workdir;	 /* default /tmp/workspace */
	const void *stdin_data;	 /* optional bytes written to the command's stdin, then EOF */
	size_t stdin_len;
	int timeout_s;	   /* per-command deadline, enforced inside and outside the box */
	size_t output_cap; /* per stream; 0 = default (AUTOPATCH_SANDBOX_OUTPUT_CAP, 1 MiB) */
	/* Additions (optional, zero = off): */
	sbx_output_fn on_output; /* streaming callback */
	void *on_output_ud;
	const volatile sig_atomic_t *cancel; /* when it becomes non-zero, sbx_exec kills the box
					      * and returns AP_ECANCELLED */
	/* Binary streams kept on the host (environment archives), never shown to a person or a
	 * model: */
	sbx_output_fn raw_stdout; /* when set, stdout goes only here: unredacted, uncapped, and
				   * not in res->out; stderr is handled as usual */
	void *raw_stdout_ud;
	sbx_input_fn stdin_fn; /* when set (and stdin_data is NULL), stdin is read from it */
	void *stdin_ud;
} sbx_cmd;

#define SBX_CMD_INIT                                                                               \
	{                                                                                          \
		NULL, NULL, NULL, 0, 60, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL               \
	}

/* Connect to the backend named by the config (AUTOPATCH_SANDBOX_BACKEND; DOCKER_HOST, or the
 * Kubernetes API from AUTOPATCH_K8S_* / in-cluster config) and read the sandbox
 * settings (AUTOPATCH_SANDBOX_*), which fill the spec's zero fields. Fails with AP_EUNAVAIL and
 * a one-line sentence when the daemon is unreachable or its API is too old, AP_EINVAL for a bad
 * setting. */
int sbx_engine_new(sbx_engine **out, const ap_config *cfg);
void sbx_engine_free(sbx_engine *e);

/* Create and start a fresh box. On failure nothing is left behind. */
int sbx_create(sbx_engine *e, const sbx_spec *spec, sbx_box **out);

/* Take a box from the warm pool when one of the default spec is ready (milliseconds), else
 * create one. repo_dir is where the caller must put the repository before the first exec
 * (see sbx_box_repo_dir); the box copies /repo into /tmp/workspace on sbx_prepare(). */
int sbx_acquire(sbx_engine *e, const char *job_label, sbx_box **out);

/* The host directory bound at /repo for this box (owned by the box, removed on destroy). */
const char *sbx_box_repo_dir(const sbx_box *b);

/* Copy /repo into /tmp/workspace (after the caller filled the repo dir). */
int sbx_prepare(sbx_box *b);

/* Run one command. A non-zero exit status is not an error: it is in res->exit_code. Errors
 * are for the box or the daemon failing. res is filled even on timeout; release it with
 * sbx_result_release(). */
int sbx_exec(sbx_box *b, const sbx_cmd *cmd, sbx_result *res);
void sbx_result_release(sbx_result *res);

/* Kill every process the box's commands left running (all but the box's own init and main
 * process: they are session 1, every exec is a session of its own), as the box does itself
 * after a command's inside deadline. 0 when none is left; when that cannot be done the box is
 * killed and AP_EIO returned (further commands fail). The Tester calls it after each run, so
 * nothing a run started can change what is read back after it. */
int sbx_box_sweep(sbx_box *b);

/* Kill and remove the box and everything created for it (network, proxy, repo dir), on every
 * path. Accepts NULL. Returns 0 or the first error (the box is freed either way). */
int sbx_destroy(sbx_box *b);

/* Remove every container and network labelled with this process's owner id
 * (AUTOPATCH_OWNER_ID) that a crash left behind: those whose creating process (label
 * autopatch.creator = pid and start time) is gone, so a concurrent `autopatch sandbox run`
 * with the same owner id keeps its box. Also removes their repo dirs. Returns how many
 * containers and networks were removed, or < 0. */
int sbx_reap_orphans(sbx_engine *e);

/* Additions. */

/* Like sbx_reap_orphans but also removes boxes of live processes (`autopatch sandbox reap
 * --all`). */
int sbx_reap_all(sbx_engine *e);

/* Start filling the warm pool now (sbx_acquire() also starts it). Idempotent. */
int sbx_pool_start(sbx_engine *e);

/* How many ready boxes the pool holds right now (tests, metrics). */
int sbx_pool_ready(sbx_engine *e);

/* The image boxes run unless their spec names another (AUTOPATCH_SANDBOX_IMAGE). Owned by e. */
const char *sbx_engine_image(const sbx_engine *e);

/* One sentence saying what a box holds: its memory, the sizes of its tmpfs mounts (which count
 * against that memory) and what is left to its processes. 0, or AP_ETOOBIG when n is short
 * (out is cut). */
int sbx_engine_capacity(const sbx_engine *e, char *out, size_t n);

/* Whether image (NULL: sbx_engine_image()) is present in the backend, without pulling it and
 * within SBX_PROBE_TIMEOUT_MS. 0 when present, AP_ENOTFOUND when absent; otherwise the
 * backend's error (AP_EUNAVAIL, AP_ETIMEOUT, AP_EHTTP, ...) with a sentence. */
int sbx_image_present(sbx_engine *e, const char *image);

#define SBX_PROBE_TIMEOUT_MS 10000L

/* The id ("sha256:...") of image (NULL: sbx_engine_image()) in the backend, into out (at least
 * 80 bytes). AP_ENOTFOUND when absent (the sentence names the image), else the backend's
 * error. Never pulls. Kubernetes cannot inspect images: the digest of a name@sha256:...
 * reference, else "name:" + the SHA-256 of the name; never AP_ENOTFOUND. */
int sbx_image_id(sbx_engine *e, const char *image, char *out, size_t n);

/* The value of label key of image (NULL: sbx_engine_image()) into out, cut to n - 1 bytes
 * ("autopatch.toolchain" -> "go 1.24.4, gcc 14.2.0"). AP_ENOTFOUND when the image or the label
 * is absent, or the backend cannot read labels (Kubernetes). Never pulls. */
int sbx_image_label(sbx_engine *e, const char *image, const char *key, char *out, size_t n);

/* ---- phases of a box (the setup phase may use the network; the agent phase may not) ---- */

/* Name the phase later commands belong to ("setup", "agent", ...; copied): egress denials are
 * reported with it. */
void sbx_box_set_phase(sbx_box *b, const char *phase);

/* Switch the box's network, one way only: SBX_NET_NONE ends the allow-list of a box created
 * with SBX_NET_ALLOWLIST (a box without one is already offline: 0). Its proxy is locked for
 * good: every later request is refused (and reported as a denial), tunnels opened during setup
 * are closed. When the proxy does not confirm the lock, the box is disconnected from its
 * network instead; when that fails too, the box is killed and the error returned, so a box
 * never stays online by accident. AP_EINVAL for any other net. */
int sbx_box_set_network(sbx_box *b, enum sbx_network net);

#define SBX_DENIAL_CMD_MAX     200
#define SBX_EGRESS_MAX_DENIALS 64 /* distinct (host, port, phase, command) groups kept */

/* Why the egress proxy refused a connection (its log line's "kind"); each has its own advice
 * in the blocked-egress report (job/environment.c). */
enum sbx_denial_kind {
	SBX_DENY_NOT_LISTED, /* host:port is not in the allow-list ("denied") */
	SBX_DENY_LOCKED,     /* the setup phase was over ("locked") */
	SBX_DENY_LIMIT,	     /* the box had too many connections open ("limit") */
	SBX_DENY_DNS,	     /* the name did not resolve on the host's side ("dns") */
	SBX_DENY_RESERVED,   /* a listed name resolves to a private/reserved address that
			      * AUTOPATCH_EGRESS_ALLOW_NETS could open ("reserved") */
	SBX_DENY_NEVER,	     /* ... to loopback, link-local, multicast ... ("never") */
	SBX_DENY_CONNECT,    /* no address of the name answered ("connect") */
	SBX_DENY_OTHER,	     /* IP literal, malformed request, TLS/SNI check, ... */
};

/* Connections the egress proxy refused, grouped by kind, host, port, phase and command. */
typedef struct sbx_denial {
	enum sbx_denial_kind kind;
	char host[256];			  /* the host the command asked for ("" for a limit) */
	int port;			  /* its port (0: not given) */
	int count;			  /* refused connections in this group */
	char phase[16];			  /* sbx_box_set_phase() at the time ("" when unset) */
	char command[SBX_DENIAL_CMD_MAX]; /* the command that tried (its `sh -c` text) */
	char reason[200];		  /* the proxy's reason for the first one */
} sbx_denial;

/* Copy the box's egress denials so far (after reading the proxy's latest log lines) into out
 * (at most max); *n gets how many were copied. 0 for a box without an allow-list (n = 0). */
int sbx_box_denials(sbx_box *b, sbx_denial *out, size_t max, size_t *n);

/* This engine's owner id (AUTOPATCH_OWNER_ID or the default hash; see docs/sandbox.md). */
const char *sbx_owner_id(const sbx_engine *e);

/* The container id (Docker) or pod name (Kubernetes) of a box (for logs and tests). */
const char *sbx_box_id(const sbx_box *b);

/* Whether the box's container / pod still runs (tests; errors count as running). */
bool sbx_box_running(sbx_box *b);

/* How many boxes with this engine's owner id the backend holds right now (tests), or < 0. */
int sbx_owned_count(sbx_engine *e);

#endif

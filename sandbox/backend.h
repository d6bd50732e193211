/* SPDX-License-Identifier: MIT */
/* sandbox/backend.h - the contract between the backend-neutral core (sandbox/core.c) and a
 * backend (sandbox/docker.c, sandbox/k8s.c); not an API outside sandbox/.
 *
 * core.c owns the settings, the owner id, per-box repo dirs, the warm pool, the output
 * plumbing of a command (redaction in front of the head+tail capture, the streaming callback)
 * and what happens after a command (deadline, sweep, a box that died). A backend owns only what
 * talks to its API: create/start, run one command, kill, remove, list-and-reap, image probe.
 * Every sandbox.h call dispatches through the engine's ops table.
 */
#ifndef AP_SANDBOX_BACKEND_H
#define AP_SANDBOX_BACKEND_H

#include "common/config.h"
#include "common/redact.h"
#include "sandbox/sandbox.h"
#include "sandbox/stream.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#define SBX_POOL_MAX   16
#define SBX_KILL_GRACE 3000 /* ms the host waits past a deadline before killing the box */

/* One output stream of a command: the redactor in front of its capture. Redacting before the
 * head+tail cap (not after it) is what keeps a secret that straddles the cut from surviving
 * in part, and the streaming callback only ever sees the same redacted bytes. */
struct sbx_exec_stream {
	struct sbx_exec_io *io;
	int stream; /* SBX_STREAM_STDOUT or SBX_STREAM_STDERR */
	sbx_capture cap;
	redact_stream *rs;
};

/* Where a backend puts the bytes a command prints (sbx__io_payload) while it runs. */
typedef struct sbx_exec_io {
	struct sbx_exec_stream out, err;
	sbx_output_fn fn;
	void *ud;
	int rc;	      /* first redaction failure: the exec fails rather than pass a raw byte on */
	bool pending; /* bytes went in since the last nudge */
	sbx_output_fn raw; /* sbx_cmd.raw_stdout: stdout bypasses redaction and capture */
	void *raw_ud;
} sbx_exec_io;

/* Feed n payload bytes of stream (SBX_STREAM_STDOUT/STDERR); a failure is kept in io->rc.
 * Has the sbx_demux_fn signature, so a demultiplexer can call it directly. */
void sbx__io_payload(void *io, int stream, const char *p, size_t n);

/* No output for a while: let the redactors emit all they safely can (call on idle polls). */
void sbx__io_nudge(sbx_exec_io *io);

#define SBX_BOX_DIED 1 /* backend run(): the box stopped under the command */

typedef struct sbx_backend_ops {
	const char *name; /* "docker", "kubernetes" (AUTOPATCH_SANDBOX_BACKEND) */
	/* Connect (e's settings are read already): sets e->be. One sentence on failure. */
	int (*open)(sbx_engine *e, const ap_config *cfg);
	/* Release e->be (the pool is gone already). */
	void (*close)(sbx_engine *e);
	/* Create and start the box b for the resolved spec s: b->name, b->job, b->repo_dir and
	 * b->has_repo are filled; set b->id and b->impl. pool: a warm-pool box (lives until
	 * destroyed). On failure everything the backend made is removed. */
	int (*create)(sbx_engine *e, const sbx_spec *s, sbx_box *b, bool pool);
	/* Put /repo's content into /tmp/workspace (b->has_repo is true). */
	int (*prepare)(sbx_box *b);
	/* Run one command (argv not wrapped yet) with the inside deadline seconds and the host
	 * deadline deadline_ms, feeding output to io. 0 with *code the exit status;
	 * SBX_BOX_DIED; AP_ETIMEOUT (host deadline); AP_ECANCELLED; or an error. */
	int (*run)(sbx_box *b, const sbx_cmd *cmd, int seconds, long long deadline_ms,
		   sbx_exec_io *io, int *code);
	/* Whether the box still runs (errors count as running). */
	bool (*running)(sbx_box *b);
	/* Kill the box now (its commands die; it is removed later). */
	int (*kill)(sbx_box *b);
	/* Remove the box and all the backend made for it; frees b->impl. 0 or the error. */
	int (*remove)(sbx_box *b);
	/* Remove the owner's boxes whose creator is gone (all: every one); for each removed box
	 * call sbx__remove_box_dir(e, name). How many objects were removed, or < 0. */
	int (*reap)(sbx_engine *e, bool all);
	/* How many boxes of the owner exist (tests). */
	int (*count)(sbx_engine *e);
	int (*image_present)(sbx_engine *e, const char *image);
	/* The image's id into out (n >= 80 bytes): AP_ENOTFOUND when absent. Never pulls. */
	int (*image_id)(sbx_engine *e, const char *image, char *out, size_t n);
	/* The value of the image's label key into out (capped to n): AP_ENOTFOUND when the image
	 * or the label is absent. Optional (NULL: no labels, as on Kubernetes). */
	int (*image_label)(sbx_engine *e, const char *image, const char *key, char *out, size_t n);
	/* sbx_box_set_network(b, SBX_NET_NONE): end the box's allow-list for good, or kill the
	 * box and fail; 0 for a box that has no network. */
	int (*network_off)(sbx_box *b);
	/* Copy up to max egress denials of the box into out, *n how many (0 without network). */
	int (*denials)(sbx_box *b, sbx_denial *out, size_t max, size_t *n);
} sbx_backend_ops;

extern const sbx_backend_ops sbx_docker_ops;
extern const sbx_backend_ops sbx_k8s_ops;

struct sbx_engine {
	const sbx_backend_ops *ops;
	void *be;	      /* the backend's state */
	char owner[65];	      /* owner id, label-safe */
	char *image;	      /* AUTOPATCH_SANDBOX_IMAGE */
	char *runtime;	      /* AUTOPATCH_SANDBOX_RUNTIME */
	char *data_dir;	      /* absolute $AUTOPATCH_DATA_DIR/sandbox */
	sbx_spec defaults;    /* every numeric field resolved; strings point at the above */
	size_t output_cap;    /* default per-stream cap */
	int pool_size;	      /* AUTOPATCH_SANDBOX_POOL */
	pthread_mutex_t lock; /* guards everything below */
	pthread_cond_t cond;  /* pool changed or stopping */
	sbx_box *pool[SBX_POOL_MAX];
	int pool_n;   /* ready boxes */
	int creating; /* boxes being created for the pool */
	bool pool_started, stopping;
	pthread_t pool_thread;
};

struct sbx_box {
	sbx_engine *e;
	char id[80];	       /* container id / pod uid */
	char name[96];	       /* container / pod name */
	char *repo_dir;	       /* host dir of the repository, or NULL */
	bool own_repo_dir;     /* repo_dir was made for this box: remove it on destroy */
	char job[64];	       /* job label (pool boxes are labelled "pool") */
	long long deadline_ms; /* end of the box's life (monotonic) */
	bool killed;	       /* the host killed it (deadline, cancel): execs are refused */
	bool has_repo;	       /* a repository reaches /repo */
	bool sweeping;	       /* the sweep is running its own exec: no sweep of the sweep */
	char phase[16];	       /* sbx_box_set_phase() */
	void *impl;	       /* the backend's state */
};

/* Copy /repo into /tmp/workspace with one command in the box: argv, or NULL for
 * `mkdir -p SBX_HOME && cp -R --preserve=mode,timestamps,links --no-dereference /repo/.
 * /tmp/workspace/` (a backend's own argv makes SBX_HOME too). */
int sbx__copy_repo(sbx_box *b, const char *const *argv);

/* Whether s is 1..max of [A-Za-z0-9._-]. */
bool sbx__label_safe(const char *s, size_t max);

/* Remove $data_dir/<name> (a box's repo dir), keeping the current error message. */
void sbx__remove_box_dir(const sbx_engine *e, const char *name);

/* "<pid>:<start time in clock ticks>" of this process: a process identity that survives pid
 * reuse and container restarts. Static storage. */
const char *sbx_creator_self(void);

/* Whether the process named by a creator value is still running. */
int sbx_creator_alive(const char *creator);

#endif

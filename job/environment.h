/* SPDX-License-Identifier: MIT */
/* job/environment.h - a repository's environment: which toolchain image its box runs, the
 * setup phase (the only time a box may reach the network), the per-repository environment
 * cache, and the report of connections the egress proxy refused. docs/environments.md is the
 * user's manual; this is the contract.
 *
 * Both front ends use it in the same order, so one repository is prepared the same way by
 * `autopatch serve` (job/pipeline.c) and `autopatch fix` (cli/fix.c):
 *
 *   env_choose_image()   `image:` (a flavour or any reference), else a flavour chosen from the
 *                        checkout; one sentence says which and why
 *   env_check_image()    present on the Docker host, else the sentence that says how to make it
 *                        so (docker pull, or the flavour's build command) - before any model
 *                        call and before any box
 *   env_check_tools()    the first word of every setup step and of the test command exists in
 *                        the box, else the sentence naming the command and the flavour that
 *                        has it
 *   env_setup()          restore the cached environment, or run `setup:` (phase "setup", the
 *                        allow-list of `network:`, its own deadline, output streamed to
 *                        on_live) and cache what it produced; then switch the box's network
 *                        off (unless agent_network) and set its phase to "agent". With
 *                        AUTOPATCH_SETUP_CA_FILE the steps trust the operator's CAs too
 *                        (/tmp/.ap-ca in the box, SSL_CERT_FILE & co.; removed after setup)
 *   env_blocked_report() the connections the proxy refused, with the advice for each kind
 *
 * What setup produced (files not tracked by git in the workspace, which is also HOME) is listed
 * in the box at ENV_FILES_LIST and added to the workspace's .git/info/exclude, so it never
 * enters a patch. ENV_PREPARE_TREE_CMD copies it into another tree (the Tester's pristine and
 * patched copies); it is what the pipeline passes the fixer as fixer_opts.setup_cmd ("the
 * command that prepares a tree", re-run offline): setup itself never runs twice.
 *
 * The cache lives on the host under $AUTOPATCH_DATA_DIR/env-cache/<repository>/: one tar
 * archive per key, streamed out of the box and back into later boxes, never unpacked (nor
 * listed) on the host. See env_cache_key() for the key.
 *
 * Errors: 0 or a negative AP_E* with ap_error_set(); the sentences are meant for the progress
 * comment. Nothing here is thread-unsafe; the cache directory is shared by the workers
 * (entries are written to a temporary name and renamed).
 */
#ifndef AP_ENVIRONMENT_H
#define AP_ENVIRONMENT_H

#include "common/config.h"
#include "sandbox/sandbox.h"

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* In the box: the setup products (one path per line, relative to the workspace; directories
 * end in "/"), and the subset kept in the cache and copied into other trees (tool caches such
 * as .cache/ and .npm/ left out). */
#define ENV_DIR	       "/tmp/.ap-env"
#define ENV_FILES_LIST ENV_DIR "/files"
#define ENV_KEEP_LIST  SBX_SETUP_KEEP_LIST /* ENV_DIR "/keep" */

/* sh script: copy the kept setup products from the workspace into the current directory (a
 * no-op in the workspace itself, or when there are none), then point what an editable install
 * left there (*.pth, *.egg-link, __editable__* files among the products) at this tree instead
 * of the workspace, so a tree imports its own code. Offline, idempotent. */
#define ENV_PREPARE_TREE_CMD                                                                       \
	"d=$(pwd -P); [ \"$d\" = /tmp/workspace ] || [ ! -s " ENV_KEEP_LIST " ] || { "             \
	"tar -C /tmp/workspace -cf - -T " ENV_KEEP_LIST " | tar -C \"$d\" -xf - && "               \
	"while IFS= read -r p; do find \"./$p\" -type f \\( -name '*.pth' -o -name '*.egg-link' "  \
	"-o -name '__editable__*' \\) 2>/dev/null; done < " ENV_KEEP_LIST " | "                    \
	"while IFS= read -r f; do sed -i \"s|/tmp/workspace|$d|g\" \"$f\"; done; }"

#define ENV_FLAVOR_MAX 16

/* The image a repository's box runs. */
typedef struct env_choice {
	char image[256];	     /* the reference handed to the sandbox */
	char flavor[ENV_FLAVOR_MAX]; /* "python", "node", ...; "" for an image that is no flavour */
	char why[320];		     /* "package.json in the checkout", "`image: node` in ..." */
	char image_id[80];	     /* filled by env_check_image() */
	char toolchain[300];	     /* filled by env_check_image() from the image's labels:
				      * "go 1.24.4, gcc 14.2.0 (Debian trixie)"; "" if unlabelled */
} env_choice;

/* The flavours, NULL-terminated, in detection order of their marker files. */
extern const char *const env_flavors[];

/* Whether name is a flavour short name. */
bool env_is_flavor(const char *name);

/* The image of a flavour: AUTOPATCH_SANDBOX_IMAGE for the default flavour (python), else
 * AUTOPATCH_FLAVOR_REPOSITORY:NAME. AP_ETOOBIG naming the setting when it does not fit n. */
int env_flavor_image(const ap_config *cfg, const char *flavor, char *out, size_t n);

/*
 * Choose the image: image_field (the file's `image:`, or a flag) is a flavour name or an
 * image reference; without it the flavour comes from marker files at the top of repo_dir,
 * read through the safe reader (no symbolic link, regular files only): package.json -> node,
 * go.mod -> go, Cargo.toml -> rust, pom.xml / build.gradle(.kts) -> java, then Python's own
 * files (pyproject.toml, setup.py, setup.cfg, requirements.txt, Pipfile, pytest.ini, tox.ini,
 * conftest.py) -> python, then any *.py file at the top -> python (a Makefile often only wraps
 * pytest), then CMakeLists.txt / Makefile -> c, else python. source names where image_field came
 * from (for the sentence). Cannot fail but for AP_EINVAL (an over-long reference).
 */
int env_choose_image(env_choice *out, const ap_config *cfg, const char *repo_dir,
		     const char *image_field, const char *source);

/* One sentence for the comment and fix's output: "sandbox image autopatch-sandbox:node
 * (flavour node: package.json in the checkout)". */
void env_describe_choice(const env_choice *c, char *out, size_t n);

/*
 * Whether the chosen image is present (fills c->image_id, and c->toolchain from its labels).
 * A missing image that is no flavour: AP_ENOTFOUND with `docker pull IMAGE` (autopatch never
 * pulls). A missing flavour is built on first use (AUTOPATCH_SANDBOX_BUILD, on by default):
 * `CMD --flavor NAME`, CMD being AUTOPATCH_SANDBOX_BUILD_CMD or else
 * deploy/sandbox-image/build.sh found above the running binary, in its own process group with
 * AUTOPATCH_FLAVOR_REPOSITORY in its environment, its whole output kept in
 * $AUTOPATCH_DATA_DIR/sandbox-builds/FLAVOR-TIME.log. note() is told before the build starts
 * ("building the sandbox image ... (first use; ...)") and after ("built the sandbox image ...
 * in N s: <toolchain>; log: ..."); live() (optional) gets a progress line every 15 s. Builds
 * are serialised across the workers of a process and across processes sharing
 * AUTOPATCH_DATA_DIR (a flock on its sandbox-build.lock), so a job that waited finds the image
 * built and builds nothing. With AUTOPATCH_SANDBOX_BUILD=off, or no build script to run,
 * AP_ENOTFOUND with the sentence giving the build command. A build that cannot start, fails,
 * passes AUTOPATCH_SANDBOX_BUILD_TIMEOUT_S (its process group is killed) or exits 0 without
 * tagging the image is AP_ENOTFOUND too - the image is still missing - with the command, its
 * exit status, the log's path and the tail of its output.
 */
int env_check_image(sbx_engine *e, const ap_config *cfg, env_choice *c,
		    void (*note)(void *ud, const char *msg),
		    void (*live)(void *ud, const char *msg), void *ud);

/* The toolchain versions and Debian suite an image's labels give (deploy/sandbox-image/build.sh
 * reads them inside the image it builds): "go 1.24.4, gcc 14.2.0 (Debian trixie)", cut to n;
 * "" for an image without them or a backend that cannot read labels. */
void env_image_toolchain(sbx_engine *e, const char *image, char *out, size_t n);

/*
 * Run `command -v` in the box for the first word of each setup step and of test_cmd (words
 * with '=' or '/' and shell keywords are skipped). AP_ENOTFOUND with "the setup step `npm ci`
 * needs `npm`, which the sandbox image ... does not have; the node flavour has it (add `image:
 * node` to .github/autopatch.yml)".
 */
int env_check_tools(sbx_box *b, const env_choice *c, const char *const *setup_steps,
		    const char *test_cmd);

/* The flavour whose image has command (e.g. "npm" -> "node"), or NULL. */
const char *env_flavor_of_command(const char *command);

/* What env_setup() needs. Strings are borrowed. */
typedef struct env_setup_opts {
	int version;
	const ap_config *cfg;
	sbx_box *box;			    /* prepared (workspace filled) */
	const env_choice *image;	    /* its image (the id keys the cache) */
	const char *repo_id;		    /* "owner/name", or the checkout's absolute path */
	const char *repo_dir;		    /* host checkout, for the lockfiles of the key */
	const char *const *setup_steps;	    /* NULL-terminated; empty: no setup */
	const char *setup_script;	    /* the steps as one script (repo_config.setup) */
	const char *const *cache_key_globs; /* NULL or empty: the default lockfile list */
	bool had_network;		    /* the box was created with the allow-list */
	bool agent_network;		    /* keep it after setup */
	int timeout_s; /* all steps together; 0: AUTOPATCH_SETUP_TIMEOUT_S (the repository's
			* `setup_timeout:` when it sets one) */
	const volatile sig_atomic_t *cancel;	 /* optional */
	void (*note)(void *ud, const char *msg); /* one event per step of the phase */
	void (*live)(void *ud, const char *msg); /* the live setup line (replaced each time) */
	void *ud;
} env_setup_opts;

#define ENV_SETUP_OPTS_VERSION 1
#define ENV_SETUP_OPTS_INIT                                                                        \
	{                                                                                          \
		.version = ENV_SETUP_OPTS_VERSION                                                  \
	}

/* What happened. */
typedef struct env_setup_result {
	bool ran;	       /* setup ran (no cache hit) */
	bool restored;	       /* the cache supplied the environment */
	bool have_products;    /* ENV_KEEP_LIST is non-empty: pass ENV_PREPARE_TREE_CMD on */
	int64_t setup_ms;      /* wall time of setup, or of the restore */
	char key[65];	       /* cache key (hex), "" when there was no setup */
	int64_t archive_bytes; /* size of the archive restored or stored */
	char summary[200]; /* "setup ran (12 s)" / "environment restored from cache (key ...)" */
} env_setup_result;

/*
 * The setup phase, as described at the top. A failing step ends it with AP_EINVAL and "setup
 * failed: `STEP` exited with N (after M s)" plus the tail of its output on the following
 * lines; a deadline (o->timeout_s, else AUTOPATCH_SETUP_TIMEOUT_S; all steps together) with
 * AP_ETIMEOUT and the same; exit 127 names the missing command and its flavour, and output
 * showing an unverifiable TLS certificate names AUTOPATCH_SETUP_CA_FILE. A cache that cannot
 * be read or written is only a note (setup runs, or its result is not kept). The network is
 * switched off before returning 0, and on every error path too.
 */
int env_setup(const env_setup_opts *o, env_setup_result *res);

/*
 * The setup products as the host holds them: taken once when env_setup() returned 0, before
 * any model call, and restored into every box the Tester runs in (job/tester_box.h), so no
 * Tester box ever sees what the Builder later did to its workspace. The bytes are the cache's
 * archive of res->key when there is one (its descriptor is held open: an eviction or a newer
 * archive of the key changes nothing for this job), else the products streamed out of o->box
 * into an unlinked file of AUTOPATCH_DATA_DIR (capped by AUTOPATCH_ENV_CACHE_SIZE). Nothing on
 * the host unpacks or lists them. No products (res->have_products false): an empty snapshot
 * whose restore does nothing. *out is the caller's (env_snapshot_free); AP_EIO, AP_ETOOBIG,
 * AP_ENOMEM or the box's error.
 */
typedef struct env_snapshot env_snapshot;
int env_snapshot_take(const env_setup_opts *o, const env_setup_result *res, env_snapshot **out);

/* Unpack the snapshot into a fresh box: the products into /tmp/workspace and their list at
 * ENV_KEEP_LIST, as a cache restore does (ENV_PREPARE_TREE_CMD then copies them into a tree).
 * 0 (also for an empty snapshot), or AP_EIO / the box's error. The snapshot is not changed and
 * can be restored into any number of boxes, one at a time. */
int env_snapshot_restore(const env_snapshot *s, sbx_box *box, const volatile sig_atomic_t *cancel);

/* Accepts NULL. */
void env_snapshot_free(env_snapshot *s);

/*
 * The connections the box's egress proxy refused so far, one line per group (kind, host,
 * port, phase, command), each with the advice that fits its kind (env_denials_text).
 * *out is malloc'd, NULL when there were none.
 */
int env_blocked_report(sbx_box *b, char **out);

/*
 * The report of n denial groups, one line each, "WHAT, N times, during PHASE by `CMD`: ADVICE":
 *   not listed (setup):  add `host:port` to `network:` in .github/autopatch.yml
 *   not listed / locked (agent phase): fetch it in `setup:`, or `agent_network: true`
 *   connection limit:    "N connections, ..." naming the limit (the proxy's reason),
 *                        AUTOPATCH_EGRESS_MAX_CONNS and AUTOPATCH_EGRESS_QUEUE_S
 *   name resolution:     the name, and that the autopatch host's resolver failed
 *   reserved address:    the address, and AUTOPATCH_EGRESS_ALLOW_NETS (with ADDR/32)
 *   never reachable:     loopback, link-local...: no setting opens it
 *   connect failed, other: the proxy's reason
 * *out is malloc'd, NULL when n is 0.
 */
int env_denials_text(const sbx_denial *d, size_t n, char **out);

#endif

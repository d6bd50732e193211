/* SPDX-License-Identifier: MIT */
/* sandbox/egress.h - the egress allow-list of one sandbox: a per-job Internal network plus a
 * proxy container that lets only listed host:port through (off by default).
 *
 * The Docker backend calls these when spec->network == SBX_NET_ALLOWLIST:
 *
 *   sbx_create:  sbx_egress_up(dk, &opts, owner, job, runtime, spec->allow, &eg);
 *                create the sandbox with HostConfig.NetworkMode = sbx_egress_network(eg) and
 *                the entries of sbx_egress_env(eg) appended to its Env;
 *                on any later failure: remove the sandbox container, then sbx_egress_down(eg).
 *   sbx_exec:    optionally sbx_egress_drain_log(eg) after a command, to log denials early.
 *   sbx_destroy: remove the sandbox container first (the network cannot be removed while it
 *                is attached), then sbx_egress_down(eg).
 *
 * What the sandbox sees: one network with no gateway and no DNS forwarding (Docker's embedded
 * resolver on an Internal network answers only container names and cannot reach an upstream
 * server), and the proxy's address in HTTP_PROXY/HTTPS_PROXY/http_proxy/https_proxy. A client
 * that ignores the proxy variables reaches nothing. Unavailable under runsc: see docs/egress.md.
 *
 * The proxy is the program sandbox/egress_proxy.c, bind-mounted read-only into a hardened
 * container of the sandbox image; its decisions (one JSON line each) are read back from the
 * container's log and written to autopatch's log (denials at level warn).
 */
#ifndef AP_SANDBOX_EGRESS_H
#define AP_SANDBOX_EGRESS_H

#include "common/buf.h"
#include "common/config.h"
#include "sandbox/docker_api.h"
#include "sandbox/sandbox.h"

#include <limits.h>
#include <stddef.h>

typedef struct sbx_egress sbx_egress;

#define SBX_EGRESS_MAX_NETS 16
#define SBX_EGRESS_PORT	    3128

/* Settings, read once from the config (AUTOPATCH_EGRESS_*; docs/egress.md). */
typedef struct sbx_egress_opts {
	char proxy_bin[PATH_MAX]; /* AUTOPATCH_EGRESS_PROXY_BIN: host path of the proxy program;
				   * default: autopatch-egress-proxy next to /proc/self/exe, or in
				   * its sandbox/ subdirectory (the build tree) */
	char image[256];	  /* AUTOPATCH_EGRESS_IMAGE: image the proxy runs in (needs glibc);
				   * default: AUTOPATCH_SANDBOX_IMAGE */
	char outer_network[128];  /* AUTOPATCH_EGRESS_NETWORK: the network the proxy reaches the
				   * mirror through; default "bridge" */
	char allow_nets[SBX_EGRESS_MAX_NETS][64]; /* AUTOPATCH_EGRESS_ALLOW_NETS: comma-separated
						   * CIDRs whose private addresses may be reached
						   * (a mirror on the LAN); default none */
	size_t n_allow_nets;
	int ready_timeout_ms; /* how long sbx_egress_up waits for the proxy to listen */
	int max_conns;	      /* AUTOPATCH_EGRESS_MAX_CONNS: connections one box's proxy serves at
			       * once (256); more wait in its queue */
	int queue_s;	      /* AUTOPATCH_EGRESS_QUEUE_S: how long a connection waits for a
			       * free slot before it is refused with 503 (60) */
} sbx_egress_opts;

#define SBX_EGRESS_OPTS_INIT                                                                       \
	{                                                                                          \
		"", "", "bridge", {""}, 0, 10000, 256, 60                                          \
	}

/* Fill opts from cfg. AP_EINVAL with a sentence for a bad CIDR, a value too long or out of
 * range, or an AUTOPATCH_SETUP_CA_FILE that sbx_setup_ca_read refuses (so a bad CA bundle
 * stops start-up). A missing proxy binary is reported by sbx_egress_up, not here (the
 * allow-list is off by default). */
int sbx_egress_opts_load(sbx_egress_opts *opts, const ap_config *cfg);

/*
 * AUTOPATCH_SETUP_CA_FILE: the PEM bundle of certificate authorities the operator trusts for
 * the setup phase (a network that intercepts TLS). When it is set, the file is read (at most
 * 4 MiB) and every PEM block in it must be a certificate OpenSSL parses; at least one must be
 * there. Unset: 0 with *n_certs 0 and pem untouched. pem (optional) receives the text of the
 * certificates, re-encoded (so nothing but certificates reaches a box); n_certs (optional)
 * how many. AP_EINVAL with a sentence naming the file and what to fix (unreadable, not PEM,
 * no certificate, a block that is not a certificate).
 */
int sbx_setup_ca_read(const ap_config *cfg, ap_buf *pem, int *n_certs);

/* Check an allow-list ("host:port" or "*.suffix:port" entries, NULL-terminated) without
 * creating anything. AP_EINVAL with a sentence naming the bad entry; an empty list is
 * AP_EINVAL too (an allow-list that allows nothing is a mistake: use SBX_NET_NONE). */
int sbx_egress_check(const char *const *allow);

/*
 * Create the job's Internal network and start its proxy. owner and job label everything (with
 * the creator label, so sbx_reap_orphans removes what a crash leaves). runtime is the
 * sandbox's runtime: "runsc" is refused with AP_EINVAL (no networking there at all). On
 * failure nothing is left behind. *out is released with sbx_egress_down().
 */
int sbx_egress_up(dk_client *dk, const sbx_egress_opts *opts, const char *owner, const char *job,
		  const char *runtime, const char *const *allow, sbx_egress **out);

/* Name of the job's Internal network: the sandbox's HostConfig.NetworkMode. Owned by eg. */
const char *sbx_egress_network(const sbx_egress *eg);

/* "http://<proxy address>:3128". Owned by eg. */
const char *sbx_egress_proxy_url(const sbx_egress *eg);

/* NULL-terminated Env entries for the sandbox: HTTP_PROXY, HTTPS_PROXY, http_proxy,
 * https_proxy (the proxy URL), NO_PROXY and no_proxy (empty). Owned by eg. */
const char *const *sbx_egress_env(const sbx_egress *eg);

/* Write the proxy's decisions that were not written yet to autopatch's log: each denial as a
 * warn line "egress denied: ...", each allowed connection as info. Returns how many denials
 * were seen so far in total, or < 0 when the log could not be read. */
int sbx_egress_drain_log(sbx_egress *eg);

/* What later denials are attributed to: the box's phase ("setup", "agent") and the command
 * running (both copied, cut to fit). */
void sbx_egress_set_context(sbx_egress *eg, const char *phase, const char *command);

/* sbx_egress_set_context with a command's argv: a `sh -c` script by its text (also behind
 * `env NAME=value...`, as setup steps run with the CA variables), anything else by its words
 * joined with spaces (line breaks become spaces). */
void sbx_egress_set_command(sbx_egress *eg, const char *phase, const char *const *argv);

/* Drain the log, then copy up to max denial groups into out (*n how many; 0 for eg NULL):
 * the denials relayed so far, grouped by host, port, phase and command (at most
 * SBX_EGRESS_MAX_DENIALS groups; later new groups are only counted in the log). AP_EIO when
 * the log cannot be read. */
int sbx_egress_copy_denials(sbx_egress *eg, sbx_denial *out, size_t max, size_t *n);

/* Lock the proxy for good (SIGUSR1): from now on it refuses every request with 403 "the setup
 * phase is over" (each logged as a denial) and closes open tunnels. Waits up to 5 s for the
 * proxy to confirm in its log; AP_EIO when it does not (the caller must then cut the box off
 * another way), or the daemon's error. */
int sbx_egress_lock(sbx_egress *eg);

/*
 * A local proxy (the Kubernetes backend, docs/kubernetes.md): the same program as a child
 * process of this one. sbx_egress_local_listen checks the allow-list and the program, binds
 * and listens on addr (an IP address) with a port the kernel picks, so the port is known
 * (sbx_egress_port, sbx_egress_proxy_url, sbx_egress_env) before the box exists; the proxy's
 * JSON lines will go to log_path (removed by sbx_egress_down). sbx_egress_local_start then
 * starts the child on that socket, serving only client (the box's IP address), with allow
 * and opts->allow_nets as its policy, an empty environment and --parent this process, and
 * waits for its "listening" line. Drain, denials, lock and down work as for a container
 * proxy (lock signals the child; down kills and reaps it).
 */
int sbx_egress_local_listen(const sbx_egress_opts *opts, const char *job, const char *addr,
			    const char *const *allow, const char *log_path, sbx_egress **out);
int sbx_egress_port(const sbx_egress *eg);
int sbx_egress_local_start(sbx_egress *eg, const sbx_egress_opts *opts, const char *client,
			   const char *const *allow);

/* Drain the log, remove the proxy container and the network (or kill the local proxy), free
 * eg, on every path. The sandbox container must already be gone. Accepts NULL. Returns 0 or
 * the first error. */
int sbx_egress_down(sbx_egress *eg);

#endif

/* SPDX-License-Identifier: MIT */
/* sandbox/egress_internal.h - what the egress proxy's two homes share: the handle, and the
 * steps both use. egress.c runs the proxy as a container on the box's Internal network (the
 * Docker backend); egress_local.c runs it as a child process of this one (the Kubernetes
 * backend). Only they include this header. */
#ifndef AP_EGRESS_INTERNAL_H
#define AP_EGRESS_INTERNAL_H

#include "sandbox/docker_api.h"
#include "sandbox/sandbox.h"

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

/* (egress.h is not included: egress.c includes this, and the two would be a cycle; the
 * handle is `struct sbx_egress`, which egress.h names `sbx_egress`.) */
typedef struct sbx_egress sbx_egress;

#define EG_LOG_CAP (8u << 20) /* bytes of proxy log read at once */
#define EG_ENV_N   6

struct sbx_egress {
	dk_client *dk;	      /* borrowed */
	char job[128];	      /* for log lines */
	char net_name[128];   /* the Internal network */
	char net_id[80];      /* "" until created */
	char proxy_name[128]; /* the proxy container */
	char proxy_id[80];    /* "" until created */
	char proxy_url[96];
	char last_ts[48]; /* timestamp of the last log line relayed */
	int denials;	  /* denials relayed so far */
	bool locked;	  /* the proxy logged "egress locked" */
	char phase[16];	  /* what the box is doing (sbx_egress_set_context) */
	char command[SBX_DENIAL_CMD_MAX];
	sbx_denial seen[SBX_EGRESS_MAX_DENIALS]; /* denials grouped by host, port, phase, cmd */
	size_t n_seen;
	char env_store[EG_ENV_N][128];
	const char *env[EG_ENV_N + 1];
	/* A local proxy (sbx_egress_local_*): a child process of this one. */
	bool local;
	int listen_fd; /* the socket the child serves, -1 once handed over and closed */
	int port;      /* its port */
	pid_t pid;     /* the child, 0 until started */
	char log_path[PATH_MAX];
	off_t log_off;	/* bytes of the log relayed so far */
	bool listening; /* the child logged "egress proxy listening" */
};

/* Relay one JSON log line of the proxy (a denial, "listening", "locked") into eg. */
void sbx__eg_relay_json(sbx_egress *eg, const char *text);

/* Check the allow-list and that the proxy program exists, before anything starts. */
int sbx__eg_check_list_and_program(const struct sbx_egress_opts *opts, const char *const *allow);

/* The proxy's policy as arguments, the same in both homes: --max-conns, --queue-ms, one
 * --allow per entry of allow, one --allow-net per opts->allow_nets. sbx__eg_policy_argc() is
 * how many slots they take; sbx__eg_policy_args() writes them to argv from k (room checked by
 * the caller) and returns the new count. conns and queue receive the numbers' text and must
 * outlive argv. */
size_t sbx__eg_policy_argc(const struct sbx_egress_opts *opts, const char *const *allow);
size_t sbx__eg_policy_args(const struct sbx_egress_opts *opts, const char *const *allow,
			   const char **argv, size_t k, char conns[16], char queue[16]);

/* Fill eg's environment for the box (HTTP(S)_PROXY, NO_PROXY ...) from its proxy URL. */
void sbx__eg_fill_env(sbx_egress *eg);

/* Relay what the local child logged since the last call. */
int sbx__eg_local_drain(sbx_egress *eg);

#endif

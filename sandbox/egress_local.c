/* SPDX-License-Identifier: MIT */
/* sandbox/egress_local.c - the egress proxy as a child process of this one, for the
 * Kubernetes backend, whose pods reach it through a NetworkPolicy (see egress.h,
 * sbx_egress_local_*). The container form is egress.c. */
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "sandbox/egress.h"
#include "sandbox/egress_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* Relay the complete lines the child appended to its log since the last drain. */
int sbx__eg_local_drain(sbx_egress *eg)
{
	ap_buf raw = AP_BUF_INIT(EG_LOG_CAP);
	char chunk[16384];
	int fd = open(eg->log_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	size_t done = 0;
	ssize_t got;
	int rc = 0;

	if (fd < 0)
		return eg->pid > 0 ? ap_error_set(AP_EIO, "egress log %s: %s", eg->log_path,
						  strerror(errno))
				   : eg->denials;
	while ((got = pread(fd, chunk, sizeof(chunk), eg->log_off + (off_t)raw.len)) > 0)
		if (ap_buf_add(&raw, chunk, (size_t)got) < 0)
			break; /* the rest waits for the next drain */
	close(fd);
	for (size_t i = 0; i < raw.len; i++) {
		if (raw.data[i] != '\n')
			continue;
		raw.data[i] = '\0';
		sbx__eg_relay_json(eg, raw.data + done);
		done = i + 1;
	}
	eg->log_off += (off_t)done;
	ap_buf_release(&raw);
	return rc ? rc : eg->denials;
}

int sbx_egress_local_listen(const sbx_egress_opts *opts, const char *job, const char *addr,
			    const char *const *allow, const char *log_path, sbx_egress **out)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	socklen_t slen;
	sbx_egress *eg;
	int rc, fd;

	*out = NULL;
	if ((rc = sbx__eg_check_list_and_program(opts, allow)))
		return rc;
	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		slen = sizeof(*s4);
	} else if (inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		slen = sizeof(*s6);
	} else {
		return ap_error_set(AP_EINVAL, "the egress address \"%.80s\" is not an IP address",
				    addr);
	}
	if (strlen(log_path) >= PATH_MAX)
		return ap_error_set(AP_EINVAL, "egress log path too long");
	eg = calloc(1, sizeof(*eg));
	if (!eg)
		return ap_error_set(AP_ENOMEM, "out of memory");
	eg->local = true;
	eg->listen_fd = -1;
	/* The job is a box's label (under 64 bytes); log_path's length is checked above. */
	snprintf(eg->job, sizeof(eg->job), "%s", job ? job : "");
	snprintf(eg->log_path, sizeof(eg->log_path), "%s", log_path);
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	/* Above 3, so the child's dup2 onto 3 always makes a new descriptor. */
	if (fd >= 0) {
		int high = fcntl(fd, F_DUPFD_CLOEXEC, 10);

		close(fd);
		fd = high;
	}
	slen = ss.ss_family == AF_INET ? sizeof(*s4) : sizeof(*s6);
	if (fd < 0 || bind(fd, (struct sockaddr *)&ss, slen) < 0 || listen(fd, 1024) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &slen) < 0) {
		rc = ap_error_set(AP_EIO, "cannot listen on the egress address %s: %s", addr,
				  strerror(errno));
		if (fd >= 0)
			close(fd);
		free(eg);
		return rc;
	}
	eg->listen_fd = fd;
	eg->port = ntohs(ss.ss_family == AF_INET ? s4->sin_port : s6->sin6_port);
	/* addr is a parsed IP address (under INET6_ADDRSTRLEN bytes): fits the 96. */
	snprintf(eg->proxy_url, sizeof(eg->proxy_url),
		 ss.ss_family == AF_INET ? "http://%s:%d" : "http://[%s]:%d", addr, eg->port);
	sbx__eg_fill_env(eg);
	*out = eg;
	return 0;
}

int sbx_egress_port(const sbx_egress *eg)
{
	return eg->port;
}

int sbx_egress_local_start(sbx_egress *eg, const sbx_egress_opts *opts, const char *client,
			   const char *const *allow)
{
	posix_spawn_file_actions_t fa;
	char cidr[80], parent[24], conns[16], queue[16], **argv;
	char *const no_env[] = {NULL};
	size_t k = 0;
	long long until = ap_mono_ms() + opts->ready_timeout_ms;
	int logfd, rc = 0, st;

	if (!eg->local || eg->pid > 0 || eg->listen_fd < 0)
		return ap_error_set(AP_EINVAL, "egress: no local proxy to start");
	snprintf(cidr, sizeof(cidr), "%s/%s", client, strchr(client, ':') ? "128" : "32");
	snprintf(parent, sizeof(parent), "%ld", (long)getpid());
	argv = calloc(8 + sbx__eg_policy_argc(opts, allow), sizeof(*argv));
	if (!argv)
		return ap_error_set(AP_ENOMEM, "out of memory");
	argv[k++] = (char *)opts->proxy_bin;
	argv[k++] = "--listen-fd";
	argv[k++] = "3";
	argv[k++] = "--client";
	argv[k++] = cidr;
	argv[k++] = "--parent";
	argv[k++] = parent;
	sbx__eg_policy_args(opts, allow, (const char **)argv, k, conns, queue);
	logfd = open(eg->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
		     0600);
	if (logfd < 0) {
		free(argv);
		return ap_error_set(AP_EIO, "egress log %s: %s", eg->log_path, strerror(errno));
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, logfd, 2);
	posix_spawn_file_actions_adddup2(&fa, eg->listen_fd, 3);
	posix_spawn_file_actions_addclosefrom_np(&fa, 4);
	st = posix_spawn(&eg->pid, opts->proxy_bin, &fa, NULL, argv, no_env);
	posix_spawn_file_actions_destroy(&fa);
	close(logfd);
	free(argv);
	if (st != 0) {
		eg->pid = 0;
		return ap_error_set(AP_EIO, "cannot start the egress proxy %s: %s", opts->proxy_bin,
				    strerror(st));
	}
	/* The child has the socket now; a second holder would keep the port open after it. */
	close(eg->listen_fd);
	eg->listen_fd = -1;
	while (!eg->listening) {
		struct timespec ts = {0, 20 * 1000 * 1000};
		pid_t w;

		if (sbx__eg_local_drain(eg) < 0)
			ap_error_clear();
		if (eg->listening)
			break;
		w = waitpid(eg->pid, &st, WNOHANG);
		if (w == eg->pid) {
			eg->pid = 0;
			return ap_error_set(AP_EIO,
					    "the egress proxy exited (status %d) before "
					    "it listened; see %s",
					    st, eg->log_path);
		}
		if (ap_mono_ms() > until)
			return ap_error_set(AP_ETIMEOUT,
					    "the egress proxy did not start listening within %d ms",
					    opts->ready_timeout_ms);
		nanosleep(&ts, NULL);
	}
	ap_info("egress (job %s): proxy pid %ld at %s for %s", eg->job, (long)eg->pid,
		eg->proxy_url, cidr);
	return rc;
}

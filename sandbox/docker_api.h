/* SPDX-License-Identifier: MIT */
/* sandbox/docker_api.h - a small Docker Engine API client over the daemon's unix socket.
 *
 * JSON requests and responses with libcurl + cJSON, the API version negotiated once with the
 * unversioned GET /_ping (refused below 1.41), the daemon's {"message": ...} carried into the
 * error sentence, and one clear sentence when the daemon cannot be reached. The hijacked
 * connection of `exec start` / `attach` is opened here too (dk_hijack) and streamed by the
 * caller. Shared by the sandbox backend and the egress network/proxy code.
 *
 * Thread-safety: a dk_client is immutable after dk_client_new() and may be used by any number
 * of threads at once (every request uses its own connection).
 */
#ifndef AP_DOCKER_API_H
#define AP_DOCKER_API_H

#include "common/buf.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct dk_client dk_client;

/* Lowest API version spoken (Docker 20.10) and the highest one used when the daemon offers
 * more; both as major*1000+minor. */
#define DK_API_MIN 1041
#define DK_API_MAX 1044

/* Labels put on everything autopatch creates. */
#define DK_LABEL_OWNER	 "autopatch.owner"
#define DK_LABEL_JOB	 "autopatch.job"
#define DK_LABEL_CREATOR "autopatch.creator" /* "<pid>:<start time>" of the creating process */

/* Connect to docker_host ("unix:///path": cfg_str() of DOCKER_HOST, never NULL) and negotiate
 * the API version. AP_EUNAVAIL with one sentence when the daemon is unreachable or too old,
 * AP_EINVAL for a DOCKER_HOST that is not a unix socket. *out is freed with dk_client_free(). */
int dk_client_new(dk_client **out, const char *docker_host);

/* Accepts NULL. */
void dk_client_free(dk_client *c);

/* The negotiated version as text ("1.41"). */
const char *dk_api_version(const dk_client *c);

/* Whether the daemon is Podman's Docker-compatible service (it answered /_ping with a
 * Libpod-Api-Version header); a few options are spelled differently there. */
bool dk_is_podman(const dk_client *c);

/* The socket path (for messages). */
const char *dk_socket_path(const dk_client *c);

/*
 * Send one request. path starts with "/" and excludes the version prefix
 * ("/containers/create?name=x"); query values must already be URL-encoded (dk_escape). body
 * is sent as JSON when not NULL. timeout_ms bounds the whole request (0: 120 s).
 *
 * On a 2xx answer returns 0 and, when out is not NULL, *out is the parsed JSON body (NULL for
 * an empty body; caller frees with cJSON_Delete). Otherwise returns AP_ENOTFOUND (404) or
 * AP_EHTTP (any other status), with "docker METHOD PATH: STATUS MESSAGE" as the error
 * sentence; AP_EUNAVAIL when the daemon cannot be reached, AP_ETIMEOUT after timeout_ms,
 * AP_ETOOBIG when the answer passes 8 MiB. *status (may be NULL) is the HTTP status or 0.
 */
int dk_request(dk_client *c, const char *method, const char *path, const cJSON *body,
	       long timeout_ms, long *status, cJSON **out);

/* GET /images/{name}/json within timeout_ms (0: 120 s): the image's inspect answer (Id,
 * Config.Volumes, ...) in *out (caller frees with cJSON_Delete). name must be an image
 * reference (letters, digits and "._-/:@", at most 255 bytes): AP_EINVAL otherwise, before
 * any request. AP_ENOTFOUND with a sentence saying autopatch never pulls when the daemon does
 * not have it; else like dk_request. */
int dk_image_inspect(dk_client *c, const char *name, long timeout_ms, cJSON **out);

/* URL-encode s for a query string. Caller frees with free(); NULL on ENOMEM. */
char *dk_escape(const char *s);

/*
 * POST path with a JSON body on a raw connection and read the response head. When the daemon
 * hijacks the connection (101 Switching Protocols or 200), returns 0 with *fd_out the
 * connected socket (caller closes it) and `rest` holding any stream bytes that arrived with
 * the head. Otherwise returns like dk_request (the daemon's message in the sentence). The
 * head must arrive before deadline_ms (CLOCK_MONOTONIC milliseconds, see ap_mono_ms in
 * common/clock.h).
 */
int dk_hijack(dk_client *c, const char *path, const cJSON *body, long long deadline_ms, int *fd_out,
	      ap_buf *rest);

/* Add the owner, job and creator labels to a "Labels" object. */
int dk_labels_add(cJSON *labels, const char *owner, const char *job);

#endif

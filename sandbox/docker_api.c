/* SPDX-License-Identifier: MIT */
/* sandbox/docker_api.c - Docker Engine API client over the unix socket (see docker_api.h). */
#include "sandbox/docker_api.h"

#include "common/clock.h"
#include "common/err.h"
#include "common/fs.h"
#include "common/httpc.h"
#include "sandbox/backend.h"

#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define DK_RESPONSE_CAP (8u << 20)
#define DK_HEAD_CAP	(16u << 10)

struct dk_client {
	char sock[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* socket path */
	char version[16];					/* "1.41" */
	bool podman;						/* Podman's compat service */
};

/* The answer headers dk_client_new() reads from /_ping. */
static const char *const ping_headers[] = {
    "Api-Version", "Libpod-Api-Version", /* only Podman's compat service sends it */
};

/* The daemon's {"message": ...} from an error body, or the raw text, or "". */
static const char *error_message(const ap_buf *body, cJSON **parsed)
{
	cJSON *msg;

	*parsed = NULL;
	if (!body->len)
		return "";
	*parsed = cJSON_ParseWithLength(body->data, body->len);
	msg = cJSON_GetObjectItemCaseSensitive(*parsed, "message");
	if (cJSON_IsString(msg))
		return msg->valuestring;
	return ap_buf_str(body);
}

static int http_error(const char *method, const char *path, long status, const ap_buf *body)
{
	cJSON *parsed;
	const char *msg = error_message(body, &parsed);
	int rc = ap_error_set(status == 404 ? AP_ENOTFOUND : AP_EHTTP, "docker %s %s: %ld %.300s",
			      method, path, status, msg);

	cJSON_Delete(parsed);
	return rc;
}

/* The error of a transfer that ended with cc (sink_rc: the body sink's code, cap: the answer's
 * cap), or 0 when it went through. */
static int transfer_error(const dk_client *c, CURLcode cc, int sink_rc, const char *method,
			  const char *path, size_t cap, long timeout_ms)
{
	if (sink_rc)
		return sink_rc != AP_ETOOBIG
			   ? sink_rc
			   : ap_error_set(AP_ETOOBIG, "docker %s %s: answer larger than %zu bytes",
					  method, path, cap);
	if (cc == CURLE_OPERATION_TIMEDOUT)
		return ap_error_set(AP_ETIMEOUT, "docker %s %s: no answer within %ld ms", method,
				    path, timeout_ms > 0 ? timeout_ms : 120000L);
	if (cc == CURLE_COULDNT_CONNECT || cc == CURLE_RECV_ERROR || cc == CURLE_SEND_ERROR ||
	    cc == CURLE_GOT_NOTHING)
		return ap_error_set(AP_EUNAVAIL,
				    "cannot reach the Docker daemon at unix://%s (%s): is dockerd "
				    "running and is DOCKER_HOST right?",
				    c->sock, curl_easy_strerror(cc));
	if (cc != CURLE_OK)
		return ap_error_set(AP_EIO, "docker %s %s: %s", method, path,
				    curl_easy_strerror(cc));
	return 0;
}

/* One request with an explicit version prefix ("" for unversioned). The answer body goes to
 * resp (capped); answer, when not NULL, collects answer headers. */
static int do_request(const dk_client *c, const char *prefix, const char *method, const char *path,
		      const cJSON *body, long timeout_ms, long *status, cJSON **out, ap_buf *resp,
		      httpc_headers *answer)
{
	httpc_body sink = HTTPC_BODY_INIT(resp);
	CURL *h = NULL;
	struct curl_slist *hdrs = NULL;
	char *json = NULL;
	char url[2048];
	long code = 0;
	CURLcode cc;
	int rc = 0;

	if (status)
		*status = 0;
	if (out)
		*out = NULL;
	rc = httpc_global_init();
	if (rc)
		return rc;
	if (snprintf(url, sizeof(url), "http://docker%s%s", prefix, path) >= (int)sizeof(url))
		return ap_error_set(AP_EINVAL, "docker request path too long");
	h = curl_easy_init();
	if (!h)
		return ap_error_set(AP_ENOMEM, "out of memory creating a curl handle");
	curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->sock);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 120000L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	httpc_body_sink(h, &sink);
	if (answer)
		httpc_headers_sink(h, answer);
	if (strcmp(method, "HEAD") == 0)
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	if (body) {
		json = cJSON_PrintUnformatted(body);
		if (!json) {
			rc = ap_error_set(AP_ENOMEM, "out of memory encoding a docker request");
			goto out_free_handle;
		}
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, json);
	} else if (strcmp(method, "POST") == 0) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
	}
	hdrs = curl_slist_append(hdrs, "Expect:");
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);

	cc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	if (status)
		*status = code;
	if ((rc = transfer_error(c, cc, sink.rc, method, path, resp->cap, timeout_ms)))
		goto out_free_handle;
	if (code < 200 || code > 299) {
		rc = http_error(method, path, code, resp);
		goto out_free_handle;
	}
	if (out && resp->len) {
		*out = cJSON_ParseWithLength(resp->data, resp->len);
		if (!*out)
			rc = ap_error_set(AP_EIO, "docker %s %s: the answer is not JSON", method,
					  path);
	}
out_free_handle:
	curl_slist_free_all(hdrs);
	free(json);
	curl_easy_cleanup(h);
	return rc;
}

int dk_request(dk_client *c, const char *method, const char *path, const cJSON *body,
	       long timeout_ms, long *status, cJSON **out)
{
	ap_buf resp = AP_BUF_INIT(DK_RESPONSE_CAP);
	char prefix[24];
	int rc;

	snprintf(prefix, sizeof(prefix), "/v%s", c->version);
	rc = do_request(c, prefix, method, path, body, timeout_ms, status, out, &resp, NULL);
	ap_buf_release(&resp);
	return rc;
}

int dk_image_inspect(dk_client *c, const char *name, long timeout_ms, cJSON **out)
{
	char path[300], why[AP_ERROR_MSG_MAX];
	size_t n = strlen(name);
	int rc;

	*out = NULL;
	if (n == 0 || n > 255 || name[0] == '/' || name[0] == '-' ||
	    strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:@") !=
		n)
		return ap_error_set(AP_EINVAL, "\"%.80s\" is not an image name", name);
	snprintf(path, sizeof(path), "/images/%s/json", name); /* name: at most 255, checked */
	rc = dk_request(c, "GET", path, NULL, timeout_ms, NULL, out);
	if (rc == AP_ENOTFOUND) {
		snprintf(why, sizeof(why), "%s", ap_error_last());
		return ap_error_set(rc,
				    "%s (the sandbox image must be on the Docker host: autopatch "
				    "never pulls; pull or build %s first)",
				    why, name);
	}
	if (rc == 0 && !cJSON_IsObject(*out)) {
		cJSON_Delete(*out);
		*out = NULL;
		return ap_error_set(AP_EIO, "docker GET %s: not a JSON object", path);
	}
	return rc;
}

static int parse_version(const char *v)
{
	int major, minor;
	char tail;

	if (sscanf(v, "%d.%d%c", &major, &minor, &tail) != 2 || major < 0 || minor < 0 ||
	    minor > 999 || major > 99)
		return -1;
	return major * 1000 + minor;
}

int dk_client_new(dk_client **out, const char *docker_host)
{
	ap_buf resp = AP_BUF_INIT(4096);
	httpc_headers hdrs;
	dk_client *c;
	const char *path, *api;
	char why[AP_ERROR_MSG_MAX];
	int rc, v;

	*out = NULL;
	httpc_headers_init(&hdrs, ping_headers, sizeof(ping_headers) / sizeof(ping_headers[0]), 64);
	if (strncmp(docker_host, "unix://", 7) != 0)
		return ap_error_set(AP_EINVAL,
				    "DOCKER_HOST=%s is not supported: use a unix socket "
				    "(unix:///var/run/docker.sock)",
				    docker_host);
	path = docker_host + 7;
	c = calloc(1, sizeof(*c));
	if (!c)
		return ap_error_set(AP_ENOMEM, "out of memory");
	if (strlen(path) >= sizeof(c->sock)) {
		rc = ap_error_set(AP_EINVAL, "DOCKER_HOST socket path is too long");
		goto err_free_client;
	}
	strcpy(c->sock, path);
	rc = do_request(c, "", "GET", "/_ping", NULL, 10000, NULL, NULL, &resp, &hdrs);
	if (rc) {
		snprintf(why, sizeof(why), "%s", ap_error_last());
		if (rc == AP_EHTTP || rc == AP_ENOTFOUND)
			rc = ap_error_set(AP_EUNAVAIL,
					  "unix://%s does not answer like a Docker daemon: %s",
					  c->sock, why);
		else if (rc != AP_EUNAVAIL)
			rc = ap_error_set(AP_EUNAVAIL,
					  "cannot reach the Docker daemon at unix://%s: %s",
					  c->sock, why);
		goto err_free_client;
	}
	api = httpc_header(&hdrs, "Api-Version");
	v = parse_version(api ? api : "");
	if (v < 0) {
		rc = ap_error_set(AP_EUNAVAIL,
				  "the daemon at unix://%s did not say its API version in /_ping",
				  c->sock);
		goto err_free_client;
	}
	if (v < DK_API_MIN) {
		rc = ap_error_set(
		    AP_EUNAVAIL,
		    "the Docker daemon at unix://%s speaks API %s; autopatch needs 1.41 "
		    "or newer (Docker 20.10+, Podman 3+)",
		    c->sock, api);
		goto err_free_client;
	}
	if (v > DK_API_MAX)
		v = DK_API_MAX;
	snprintf(c->version, sizeof(c->version), "%d.%d", v / 1000, v % 1000);
	c->podman = httpc_header(&hdrs, "Libpod-Api-Version") != NULL;
	ap_buf_release(&resp);
	httpc_headers_clear(&hdrs);
	*out = c;
	return 0;
err_free_client:
	ap_buf_release(&resp);
	httpc_headers_clear(&hdrs);
	free(c);
	return rc;
}

void dk_client_free(dk_client *c)
{
	free(c);
}

const char *dk_api_version(const dk_client *c)
{
	return c->version;
}

bool dk_is_podman(const dk_client *c)
{
	return c->podman;
}

const char *dk_socket_path(const dk_client *c)
{
	return c->sock;
}

char *dk_escape(const char *s)
{
	CURL *h;
	char *e, *copy;

	if (httpc_global_init())
		return NULL;
	h = curl_easy_init();
	if (!h)
		return NULL;
	e = curl_easy_escape(h, s, 0);
	curl_easy_cleanup(h);
	if (!e)
		return NULL;
	copy = strdup(e);
	curl_free(e);
	return copy;
}

/* Wait until fd is ready for events or the deadline passes. */
static int wait_fd(int fd, short events, long long deadline_ms)
{
	struct pollfd p = {fd, events, 0};
	long long left;
	int n;

	for (;;) {
		left = deadline_ms - ap_mono_ms();
		if (left <= 0)
			return AP_ETIMEOUT;
		n = poll(&p, 1, left > 1000 ? 1000 : (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return AP_EIO;
	}
}

static int send_all(int fd, const char *p, size_t n, long long deadline_ms)
{
	ssize_t w;

	while (n) {
		if (wait_fd(fd, POLLOUT, deadline_ms))
			return ap_error_set(AP_ETIMEOUT, "docker did not accept a request in time");
		w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (w < 0)
			return ap_error_set(AP_EIO, "writing to the docker socket: %s",
					    strerror(errno));
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Read the rest of an error answer's body (Content-Length bytes, capped) for its message. */
static void read_error_body(int fd, const char *head, ap_buf *rest, long long deadline_ms)
{
	const char *cl = strcasestr(head, "\r\nContent-Length:");
	long want = cl ? strtol(cl + 17, NULL, 10) : 0;
	char tmp[4096];
	ssize_t n;

	if (want > 4096)
		want = 4096;
	while ((long)rest->len < want && !wait_fd(fd, POLLIN, deadline_ms)) {
		n = recv(fd, tmp, sizeof(tmp), 0);
		if (n <= 0 || ap_buf_add(rest, tmp, (size_t)n))
			break;
	}
}

/* A non-blocking connection to the daemon's socket in *fd (-1 on failure). */
static int hijack_connect(const dk_client *c, int *fd)
{
	struct sockaddr_un sa = {0};
	int rc;

	*fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (*fd < 0)
		return ap_error_set(AP_EIO, "socket: %s", strerror(errno));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, c->sock, strlen(c->sock) + 1);
	if (connect(*fd, (struct sockaddr *)&sa, sizeof(sa)) && errno != EINPROGRESS) {
		rc = ap_error_set(AP_EUNAVAIL,
				  "cannot reach the Docker daemon at unix://%s (%s): is dockerd "
				  "running and is DOCKER_HOST right?",
				  c->sock, strerror(errno));
		close(*fd);
		*fd = -1;
		return rc;
	}
	return 0;
}

/* Read from fd into head until it holds the answer head (up to its blank line, *end). */
static int read_head(int fd, const char *path, long long deadline_ms, ap_buf *head, char **end)
{
	char tmp[4096];
	ssize_t n;

	for (;;) {
		*end = head->len ? strstr(head->data, "\r\n\r\n") : NULL;
		if (*end)
			return 0;
		if (wait_fd(fd, POLLIN, deadline_ms))
			return ap_error_set(AP_ETIMEOUT, "docker POST %s: no answer in time", path);
		n = recv(fd, tmp, sizeof(tmp), 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return ap_error_set(
			    AP_EUNAVAIL, "docker POST %s: the daemon closed the connection", path);
		if (memchr(tmp, '\0', (size_t)n) && !head->len)
			return ap_error_set(AP_EIO, "docker POST %s: not an HTTP answer", path);
		if (ap_buf_add(head, tmp, (size_t)n))
			return ap_error_set(AP_EIO, "docker POST %s: answer head too large", path);
	}
}

int dk_hijack(dk_client *c, const char *path, const cJSON *body, long long deadline_ms, int *fd_out,
	      ap_buf *rest)
{
	ap_buf req = AP_BUF_INIT(1 << 20);
	ap_buf head = AP_BUF_INIT(DK_HEAD_CAP);
	char *json = NULL, *end;
	long status;
	int fd, rc;

	*fd_out = -1;
	if ((rc = hijack_connect(c, &fd)))
		return rc;
	json = body ? cJSON_PrintUnformatted(body) : strdup("{}");
	if (!json) {
		rc = ap_error_set(AP_ENOMEM, "out of memory encoding a docker request");
		goto err_close;
	}
	rc = ap_buf_addf(&req,
			 "POST /v%s%s HTTP/1.1\r\nHost: docker\r\nUser-Agent: autopatch\r\n"
			 "Content-Type: application/json\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
			 "Content-Length: %zu\r\n\r\n%s",
			 c->version, path, strlen(json), json);
	if (rc)
		goto err_close;
	rc = send_all(fd, req.data, req.len, deadline_ms);
	if (rc)
		goto err_close;
	if ((rc = read_head(fd, path, deadline_ms, &head, &end)))
		goto err_close;
	/* Bytes after the head already belong to the stream (or to the error body). */
	rc = ap_buf_add(rest, end + 4, head.len - (size_t)(end + 4 - head.data));
	if (rc)
		goto err_close;
	end[2] = '\0';
	if (sscanf(head.data, "HTTP/1.%*d %ld", &status) != 1) {
		rc = ap_error_set(AP_EIO, "docker POST %s: not an HTTP answer", path);
		goto err_close;
	}
	if (status != 101 && status != 200) {
		read_error_body(fd, head.data, rest, deadline_ms);
		rc = http_error("POST", path, status, rest);
		goto err_close;
	}
	*fd_out = fd;
	fd = -1;
	rc = 0;
err_close:
	if (fd >= 0)
		close(fd);
	free(json);
	ap_buf_release(&req);
	ap_buf_release(&head);
	return rc;
}

int dk_labels_add(cJSON *labels, const char *owner, const char *job)
{
	if (!cJSON_AddStringToObject(labels, DK_LABEL_OWNER, owner) ||
	    !cJSON_AddStringToObject(labels, DK_LABEL_JOB, job ? job : "") ||
	    !cJSON_AddStringToObject(labels, DK_LABEL_CREATOR, sbx_creator_self()))
		return ap_error_set(AP_ENOMEM, "out of memory");
	return 0;
}

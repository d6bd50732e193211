/* SPDX-License-Identifier: MIT */
/* sandbox/egress.c - per-job Internal network + allow-list proxy container (see egress.h).
 *
 * Why a proxy *container* rather than a proxy on the host: the sandbox's network is Internal
 * (no gateway, no route out), so whatever it can reach must sit on that network. A host process
 * listening on the network's bridge address would also expose every other host service bound
 * to that address or to 0.0.0.0; a container attached to both the Internal network and an
 * ordinary bridge exposes nothing but the proxy's port. Why our own proxy program rather than
 * squid or tinyproxy: see the file-top comment of sandbox/egress_proxy.c and docs/egress.md.
 *
 * Order of work in sbx_egress_up: check everything that needs no daemon (runtime, allow-list,
 * proxy binary), create the network, create the proxy container on it, connect the container
 * to the outer network, start it, wait for its "listening" line (which carries the address it
 * bound). Every failure after the first create undoes what was created.
 */
#include "sandbox/egress.h"

#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/fs.h"
#include "common/httpc.h"
#include "common/log.h"
#include "sandbox/backend.h"
#include "sandbox/egress_internal.h"
#include "sandbox/egress_policy.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EG_API_TIMEOUT	    30000L
#define EG_PROXY_MEMORY	    (128LL << 20)
#define EG_PROXY_PIDS_EXTRA 64		  /* threads beyond one per connection */
#define EG_CONN_MEMORY	    (128LL << 10) /* per connection: buffers, stack touched */
#define EG_CA_CAP	    (4u << 20)	  /* AUTOPATCH_SETUP_CA_FILE */
#define EG_PROXY_PATH	    "/autopatch-egress-proxy"
#define EG_PROXY_USER	    "10001:10001"

/* Find the proxy program next to the running binary: installed side by side, or the build
 * tree's sandbox/ subdirectory. */
static void default_proxy_bin(char *out, size_t n)
{
	static const char *const rel[] = {"/autopatch-egress-proxy",
					  "/sandbox/autopatch-egress-proxy"};
	char exe[PATH_MAX], *slash;
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	size_t dir;

	out[0] = '\0';
	if (len <= 0)
		return;
	exe[len] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return;
	dir = (size_t)(slash - exe);
	for (size_t i = 2; i-- > 0;) {
		if (dir + strlen(rel[i]) >= n)
			continue;
		memcpy(out, exe, dir);
		memcpy(out + dir, rel[i], strlen(rel[i]) + 1);
		if (i == 0 || access(out, X_OK) == 0)
			return;
	}
}

static int copy_setting(char *dst, size_t n, const char *name, const char *v)
{
	if (strlen(v) >= n)
		return ap_error_set(AP_EINVAL, "%s is longer than %zu bytes", name, n - 1);
	memcpy(dst, v, strlen(v) + 1);
	return 0;
}

int sbx_egress_opts_load(sbx_egress_opts *opts, const ap_config *cfg)
{
	const char *v;
	char list[SBX_EGRESS_MAX_NETS * 64 + 64], *save = NULL, *tok;
	int64_t n;
	int rc;

	*opts = (sbx_egress_opts)SBX_EGRESS_OPTS_INIT;
	v = cfg_str(cfg, "AUTOPATCH_EGRESS_PROXY_BIN");
	if (v) {
		if ((rc = copy_setting(opts->proxy_bin, sizeof(opts->proxy_bin),
				       "AUTOPATCH_EGRESS_PROXY_BIN", v)))
			return rc;
	} else {
		default_proxy_bin(opts->proxy_bin, sizeof(opts->proxy_bin));
	}
	v = cfg_str(cfg, "AUTOPATCH_EGRESS_IMAGE");
	if (!v)
		v = cfg_str(cfg, "AUTOPATCH_SANDBOX_IMAGE");
	if ((rc = copy_setting(opts->image, sizeof(opts->image), "AUTOPATCH_EGRESS_IMAGE", v)))
		return rc;
	v = cfg_str(cfg, "AUTOPATCH_EGRESS_NETWORK");
	if ((rc = copy_setting(opts->outer_network, sizeof(opts->outer_network),
			       "AUTOPATCH_EGRESS_NETWORK", v)))
		return rc;
	if ((rc = cfg_int(cfg, "AUTOPATCH_EGRESS_MAX_CONNS", 1, 4096, &n)))
		return rc;
	opts->max_conns = (int)n;
	if ((rc = cfg_int(cfg, "AUTOPATCH_EGRESS_QUEUE_S", 0, 3600, &n)))
		return rc;
	opts->queue_s = (int)n;
	if ((rc = sbx_setup_ca_read(cfg, NULL, NULL)))
		return rc;
	v = cfg_str(cfg, "AUTOPATCH_EGRESS_ALLOW_NETS");
	if (!v)
		return 0;
	if ((rc = copy_setting(list, sizeof(list), "AUTOPATCH_EGRESS_ALLOW_NETS", v)))
		return rc;
	for (tok = strtok_r(list, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		egp_net net;

		if (opts->n_allow_nets == SBX_EGRESS_MAX_NETS)
			return ap_error_set(AP_EINVAL,
					    "AUTOPATCH_EGRESS_ALLOW_NETS: more than %d "
					    "networks",
					    SBX_EGRESS_MAX_NETS);
		if ((rc = egp_net_parse(&net, tok)) ||
		    (rc = copy_setting(opts->allow_nets[opts->n_allow_nets], 64,
				       "AUTOPATCH_EGRESS_ALLOW_NETS entry", tok)))
			return ap_error_set(rc, "AUTOPATCH_EGRESS_ALLOW_NETS: %s", ap_error_last());
		opts->n_allow_nets++;
	}
	return 0;
}

/* Each PEM block of text (len bytes) must be a certificate; their re-encoded text goes to out
 * (optional). Returns how many, or AP_EINVAL with a sentence about path. */
static int ca_parse(const char *path, const char *text, size_t len, ap_buf *out)
{
	BIO *in = BIO_new_mem_buf(text, (int)len), *pem = NULL;
	char *name = NULL, *header = NULL;
	unsigned char *data = NULL;
	long dlen = 0;
	int n = 0, rc = 0;

	if (!in || !(pem = BIO_new(BIO_s_mem()))) {
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto out;
	}
	ERR_clear_error();
	while (rc == 0 && PEM_read_bio(in, &name, &header, &data, &dlen) == 1) {
		const unsigned char *p = data;
		X509 *x = NULL;

		if (strcmp(name, "CERTIFICATE") != 0 && strcmp(name, "TRUSTED CERTIFICATE") != 0)
			rc =
			    ap_error_set(AP_EINVAL,
					 "AUTOPATCH_SETUP_CA_FILE %s holds a %.40s block, not only "
					 "certificates: keep only the CA certificates (never a "
					 "private key) in it",
					 path, name);
		else if (!(x = strcmp(name, "CERTIFICATE") == 0 ? d2i_X509(NULL, &p, dlen)
								: d2i_X509_AUX(NULL, &p, dlen)))
			rc = ap_error_set(
			    AP_EINVAL,
			    "AUTOPATCH_SETUP_CA_FILE %s: certificate %d cannot be "
			    "parsed: replace it with the PEM text of the CA certificate",
			    path, n + 1);
		else if (PEM_write_bio_X509(pem, x) != 1)
			rc = ap_error_set(AP_ENOMEM, "out of memory");
		X509_free(x);
		OPENSSL_free(name);
		OPENSSL_free(header);
		OPENSSL_free(data);
		name = header = NULL;
		data = NULL;
		n++;
	}
	ERR_clear_error();
	if (rc == 0 && n == 0)
		rc = ap_error_set(
		    AP_EINVAL,
		    "AUTOPATCH_SETUP_CA_FILE %s holds no PEM certificate (\"-----BEGIN "
		    "CERTIFICATE-----\"): point it at the CA bundle in PEM form (convert "
		    "a DER file with openssl x509 -inform der -in FILE)",
		    path);
	if (rc == 0 && out) {
		char *p;
		long plen = BIO_get_mem_data(pem, &p);

		if (plen > 0 && ap_buf_add(out, p, (size_t)plen) < 0)
			rc = ap_error_set(AP_ENOMEM, "out of memory");
	}
out:
	BIO_free(in);
	BIO_free(pem);
	return rc ? rc : n;
}

int sbx_setup_ca_read(const ap_config *cfg, ap_buf *pem, int *n_certs)
{
	const char *path = cfg_str(cfg, "AUTOPATCH_SETUP_CA_FILE");
	ap_buf text = AP_BUF_INIT(EG_CA_CAP);
	char why[AP_ERROR_MSG_MAX];
	int rc;

	if (n_certs)
		*n_certs = 0;
	if (!path)
		return 0;
	rc = fs_read_file(&text, path, 0);
	if (rc == AP_ETOOBIG) {
		rc =
		    ap_error_set(AP_EINVAL,
				 "AUTOPATCH_SETUP_CA_FILE %s is larger than 4 MiB: point it at the "
				 "CA bundle (PEM certificates only)",
				 path);
	} else if (rc) {
		snprintf(why, sizeof(why), "%s", ap_error_last());
		rc =
		    ap_error_set(AP_EINVAL,
				 "AUTOPATCH_SETUP_CA_FILE cannot be read (%s): fix the path or its "
				 "permissions (autopatch reads it at start-up), or unset it",
				 why);
	} else {
		rc = ca_parse(path, text.data ? text.data : "", text.len, pem);
		if (rc > 0) {
			if (n_certs)
				*n_certs = rc;
			rc = 0;
		}
	}
	ap_buf_release(&text);
	return rc;
}

int sbx_egress_check(const char *const *allow)
{
	egp_rule r;
	int rc;

	if (!allow || !allow[0])
		return ap_error_set(AP_EINVAL, "the egress allow-list is empty: list host:port "
					       "entries or use no network");
	for (const char *const *p = allow; *p; p++)
		if ((rc = egp_rule_parse(&r, *p)))
			return rc;
	return 0;
}

/* Names for Docker objects may only hold [a-zA-Z0-9_.-]. */
static void safe_name(char *out, size_t n, const char *in)
{
	size_t i = 0;

	for (; in && in[i] && i + 1 < n; i++) {
		unsigned char c = (unsigned char)in[i];

		out[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
				 (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'
			     ? (char)c
			     : '_';
	}
	out[i] = '\0';
}

static int add_strings(cJSON *obj, const char *key, const char *const *v)
{
	cJSON *arr = cJSON_AddArrayToObject(obj, key);

	if (!arr)
		return AP_ENOMEM;
	for (; v && *v; v++) {
		cJSON *s = cJSON_CreateString(*v);

		if (!s)
			return AP_ENOMEM;
		cJSON_AddItemToArray(arr, s);
	}
	return 0;
}

/* The job's network. Internal alone is not enough: Docker (20.10 at least) still gives the
 * host an address on the bridge and the containers a default route to it, so a sandbox could
 * reach every host service listening on 0.0.0.0 through the host's addresses (INPUT, not
 * FORWARD, so the isolation rules never see it). inhibit_ipv4 leaves the host without an
 * address on this bridge: the default route's gateway never answers, nothing off the subnet is
 * reachable, and the proxy is the only peer. tests/e2e/test_egress.py checks this. */
static int net_create(sbx_egress *eg, const char *owner, const char *job, char *subnet, size_t n)
{
	cJSON *body = cJSON_CreateObject(), *labels, *opts, *resp = NULL, *id, *cfg0, *sub;
	char path[256];
	int rc = AP_ENOMEM;

	if (!body || !cJSON_AddStringToObject(body, "Name", eg->net_name) ||
	    !cJSON_AddStringToObject(body, "Driver", "bridge") ||
	    !cJSON_AddTrueToObject(body, "Internal") ||
	    !cJSON_AddTrueToObject(body, "CheckDuplicate") ||
	    !(opts = cJSON_AddObjectToObject(body, "Options")) ||
	    !cJSON_AddStringToObject(opts, "com.docker.network.bridge.inhibit_ipv4", "true") ||
	    !(labels = cJSON_AddObjectToObject(body, "Labels")))
		goto out;
	if ((rc = dk_labels_add(labels, owner, job)))
		goto out;
	rc = AP_ENOMEM;
	if (!cJSON_AddStringToObject(labels, "autopatch.role", "egress-network"))
		goto out;
	rc = dk_request(eg->dk, "POST", "/networks/create", body, EG_API_TIMEOUT, NULL, &resp);
	if (rc)
		goto out;
	id = cJSON_GetObjectItemCaseSensitive(resp, "Id");
	if (!cJSON_IsString(id) || strlen(id->valuestring) >= sizeof(eg->net_id)) {
		rc = ap_error_set(AP_EIO, "docker network create: no id in the answer");
		goto out;
	}
	snprintf(eg->net_id, sizeof(eg->net_id), "%s", id->valuestring);
	cJSON_Delete(resp);
	resp = NULL;
	snprintf(path, sizeof(path), "/networks/%s", eg->net_id);
	rc = dk_request(eg->dk, "GET", path, NULL, EG_API_TIMEOUT, NULL, &resp);
	if (rc)
		goto out;
	cfg0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
				      cJSON_GetObjectItemCaseSensitive(resp, "IPAM"), "Config"),
				  0);
	sub = cJSON_GetObjectItemCaseSensitive(cfg0, "Subnet");
	if (!cJSON_IsString(sub) || strlen(sub->valuestring) >= n) {
		rc = ap_error_set(AP_EIO, "docker network inspect %s: no subnet", eg->net_name);
		goto out;
	}
	snprintf(subnet, n, "%s", sub->valuestring);
	rc = 0;
out:
	if (rc == AP_ENOMEM)
		ap_error_set(rc, "out of memory");
	cJSON_Delete(body);
	cJSON_Delete(resp);
	return rc;
}

/* The proxy's memory limit: 128 MiB, or more when AUTOPATCH_EGRESS_MAX_CONNS asks for more
 * than 512 connections (each needs EG_CONN_MEMORY at most). */
static long long eg_proxy_memory(const sbx_egress_opts *o)
{
	long long want = (64LL << 20) + (long long)o->max_conns * EG_CONN_MEMORY;

	return want > EG_PROXY_MEMORY ? want : EG_PROXY_MEMORY;
}

size_t sbx__eg_policy_argc(const sbx_egress_opts *opts, const char *const *allow)
{
	size_t n_allow = 0;

	while (allow[n_allow])
		n_allow++;
	return 4 + 2 * n_allow + 2 * opts->n_allow_nets;
}

size_t sbx__eg_policy_args(const sbx_egress_opts *opts, const char *const *allow, const char **argv,
			   size_t k, char conns[16], char queue[16])
{
	snprintf(conns, 16, "%d", opts->max_conns); /* ints: they fit */
	snprintf(queue, 16, "%d", opts->queue_s * 1000);
	argv[k++] = "--max-conns";
	argv[k++] = conns;
	argv[k++] = "--queue-ms";
	argv[k++] = queue;
	for (size_t i = 0; allow[i]; i++) {
		argv[k++] = "--allow";
		argv[k++] = allow[i];
	}
	for (size_t i = 0; i < opts->n_allow_nets; i++) {
		argv[k++] = "--allow-net";
		argv[k++] = opts->allow_nets[i];
	}
	return k;
}

/* The proxy container: the sandbox's hardening (read-only root, no capabilities, no new
 * privileges, non-root, memory/pids limits) with the program bound read-only. Its argv is the
 * whole policy; it gets no environment from the host. */
static cJSON *proxy_body(const sbx_egress *eg, const sbx_egress_opts *o, const char *owner,
			 const char *job, const char *subnet, const char *const *allow)
{
	cJSON *b = NULL, *hc, *labels, *lc, *lcc;
	char bind[PATH_MAX + 64], conns[16], queue[16];
	const char **argv;
	size_t k = 0;
	const char *entry[] = {EG_PROXY_PATH, NULL};
	const char *binds[] = {bind, NULL};
	const char *caps[] = {"ALL", NULL};
	const char *secopt[] = {"no-new-privileges:true", NULL};
	const char *no_env[] = {NULL};

	/* The proxy's whole policy is its argv (no config file, no environment). */
	argv = calloc(5 + sbx__eg_policy_argc(o, allow), sizeof(*argv));
	if (!argv)
		return NULL;
	argv[k++] = "--listen-net";
	argv[k++] = subnet;
	argv[k++] = "--port";
	argv[k++] = "3128";
	sbx__eg_policy_args(o, allow, argv, k, conns, queue);
	/* proxy_bin is under PATH_MAX bytes (sbx_egress_opts): it fits. */
	snprintf(bind, sizeof(bind), "%s:" EG_PROXY_PATH ":ro", o->proxy_bin);
	b = cJSON_CreateObject();
	if (!b || !cJSON_AddStringToObject(b, "Image", o->image) ||
	    !cJSON_AddStringToObject(b, "User", EG_PROXY_USER) ||
	    !cJSON_AddStringToObject(b, "WorkingDir", "/") || add_strings(b, "Entrypoint", entry) ||
	    add_strings(b, "Env", no_env) || !cJSON_AddNumberToObject(b, "StopTimeout", 1) ||
	    add_strings(b, "Cmd", argv))
		goto err;
	if (!(labels = cJSON_AddObjectToObject(b, "Labels")) || dk_labels_add(labels, owner, job) ||
	    !cJSON_AddStringToObject(labels, "autopatch.role", "egress-proxy"))
		goto err;
	if (!(hc = cJSON_AddObjectToObject(b, "HostConfig")) ||
	    !cJSON_AddStringToObject(hc, "NetworkMode", eg->net_name) ||
	    add_strings(hc, "Binds", binds) || !cJSON_AddTrueToObject(hc, "ReadonlyRootfs") ||
	    add_strings(hc, "CapDrop", caps) || add_strings(hc, "SecurityOpt", secopt) ||
	    !cJSON_AddFalseToObject(hc, "Privileged") ||
	    !cJSON_AddNumberToObject(hc, "Memory", (double)eg_proxy_memory(o)) ||
	    !cJSON_AddNumberToObject(hc, "MemorySwap", (double)eg_proxy_memory(o)) ||
	    !cJSON_AddNumberToObject(hc, "NanoCpus", 1e9) ||
	    !cJSON_AddNumberToObject(hc, "PidsLimit", o->max_conns + EG_PROXY_PIDS_EXTRA) ||
	    !cJSON_AddTrueToObject(hc, "Init") ||
	    !cJSON_AddStringToObject(hc, "IpcMode", "private") ||
	    !cJSON_AddStringToObject(hc, "Runtime", "runc") ||
	    !(lc = cJSON_AddObjectToObject(hc, "LogConfig")) ||
	    !cJSON_AddStringToObject(lc, "Type", "json-file") ||
	    !(lcc = cJSON_AddObjectToObject(lc, "Config")) ||
	    !cJSON_AddStringToObject(lcc, "max-size", "4m") ||
	    !cJSON_AddStringToObject(lcc, "max-file", "1"))
		goto err;
	free(argv);
	return b;
err:
	free(argv);
	cJSON_Delete(b);
	return NULL;
}

/* Whole seconds of an RFC 3339 UTC timestamp, 0 when there is none: lines of that second
 * are fetched again and skipped by relay_line, earlier ones are not fetched at all. */
static long long since_seconds(const char *ts)
{
	struct tm tm = {0};

	if (!ts[0] || sscanf(ts, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
			     &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6)
		return 0;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (long long)timegm(&tm);
}

/* GET the container's log (raw multiplexed stream, not JSON, so not through dk_request). */
static int logs_fetch(sbx_egress *eg, ap_buf *raw)
{
	char url[512], err[CURL_ERROR_SIZE] = "";
	httpc_body sink = HTTPC_BODY_INIT(raw);
	CURL *h = curl_easy_init();
	long status = 0;
	CURLcode cc;

	if (!h)
		return ap_error_set(AP_ENOMEM, "out of memory");
	/* A version of at most 15 bytes and a checked id under 80: fits. */
	snprintf(url, sizeof(url),
		 "http://docker/v%s/containers/%s/logs?stdout=1&stderr=1&timestamps=1&since=%lld",
		 dk_api_version(eg->dk), eg->proxy_id, since_seconds(eg->last_ts));
	curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, dk_socket_path(eg->dk));
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, EG_API_TIMEOUT);
	httpc_body_sink(h, &sink);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, err);
	cc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(h);
	if (cc != CURLE_OK)
		return ap_error_set(sink.rc ? sink.rc : AP_EUNAVAIL, "docker logs %s: %s",
				    eg->proxy_name, err[0] ? err : curl_easy_strerror(cc));
	if (status != 200)
		return ap_error_set(AP_EHTTP, "docker logs %s: HTTP %ld", eg->proxy_name, status);
	return 0;
}

/* Split the multiplexed stream into lines (both streams) and call fn for each complete one.
 * Frame lengths are checked against what arrived; a bad header ends the walk. */
static void demux_lines(const ap_buf *raw, void (*fn)(sbx_egress *, char *), sbx_egress *eg)
{
	ap_buf line = AP_BUF_INIT(64 * 1024);
	size_t pos = 0;

	while (raw->len - pos >= 8) {
		const unsigned char *h = (const unsigned char *)raw->data + pos;
		size_t sz = (size_t)h[4] << 24 | (size_t)h[5] << 16 | (size_t)h[6] << 8 | h[7];

		if (h[0] > 2 || h[1] || h[2] || h[3] || sz > raw->len - pos - 8)
			break;
		pos += 8;
		for (size_t i = 0; i < sz; i++) {
			char c = raw->data[pos + i];

			if (c == '\n') {
				fn(eg, line.data ? line.data : (char *)"");
				ap_buf_reset(&line);
			} else if (ap_buf_add(&line, &c, 1) < 0) {
				/* an over-long line is cut: keep what fits */
			}
		}
		pos += sz;
	}
	ap_buf_release(&line);
}

/* "host:port" (CONNECT) or "http://host[:port]/..." (plain HTTP) -> host and port. */
static void split_target(const char *t, char *host, size_t n, int *port)
{
	const char *h = t, *end, *colon;

	*port = 0;
	if (strncasecmp(t, "http://", 7) == 0) {
		h = t + 7;
		*port = 80;
	}
	end = h + strcspn(h, "/?#");
	colon = NULL;
	for (const char *p = h; p < end; p++)
		if (*p == ':')
			colon = p;
	if (colon) {
		*port = atoi(colon + 1);
		end = colon;
	}
	/* Only shown (a denial's host): a host too long for it is cut visibly. */
	if ((size_t)(end - h) < n)
		snprintf(host, n, "%.*s", (int)(end - h), h);
	else
		ap_excerpt(host, n, h);
}

/* The proxy's "kind" of a refusal (sandbox/egress_proxy.c) as an sbx_denial_kind. */
static enum sbx_denial_kind denial_kind(const char *kind)
{
	static const struct {
		const char *name;
		enum sbx_denial_kind kind;
	} kinds[] = {{"denied", SBX_DENY_NOT_LISTED}, {"locked", SBX_DENY_LOCKED},
		     {"limit", SBX_DENY_LIMIT},	      {"dns", SBX_DENY_DNS},
		     {"reserved", SBX_DENY_RESERVED}, {"never", SBX_DENY_NEVER},
		     {"connect", SBX_DENY_CONNECT}};

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(kind, kinds[i].name) == 0)
			return kinds[i].kind;
	return SBX_DENY_OTHER;
}

/* Group one denial under the context the box set. A target of "-" (a connection refused
 * before its request was read: the connection limit) has no host. */
static void record_denial(sbx_egress *eg, const char *kind, const char *target, const char *reason)
{
	char host[256] = "";
	int port = 0;
	enum sbx_denial_kind k = denial_kind(kind);
	sbx_denial *d;

	if (strcmp(target, "-") != 0)
		split_target(target, host, sizeof(host), &port);
	for (size_t i = 0; i < eg->n_seen; i++) {
		d = &eg->seen[i];
		if (d->kind == k && d->port == port && strcmp(d->host, host) == 0 &&
		    strcmp(d->phase, eg->phase) == 0 && strcmp(d->command, eg->command) == 0) {
			d->count++;
			return;
		}
	}
	if (eg->n_seen == SBX_EGRESS_MAX_DENIALS)
		return;
	d = &eg->seen[eg->n_seen++];
	d->kind = k;
	/* A denial is only shown: what does not fit is cut visibly, never dropped. */
	ap_excerpt(d->host, sizeof(d->host), host);
	d->port = port;
	d->count = 1;
	ap_excerpt(d->phase, sizeof(d->phase), eg->phase);
	ap_excerpt(d->command, sizeof(d->command), eg->command);
	ap_excerpt(d->reason, sizeof(d->reason), reason);
}

static const char *jstr(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsString(v) ? v->valuestring : "-";
}

/* One log line of the proxy: "<timestamp> <json>". Lines at or before last_ts were relayed by
 * an earlier drain. */

static void relay_line(sbx_egress *eg, char *line)
{
	char *sp = strchr(line, ' ');

	if (!sp || (size_t)(sp - line) >= sizeof(eg->last_ts))
		return;
	*sp = '\0';
	if (eg->last_ts[0] && strcmp(line, eg->last_ts) <= 0)
		return;
	snprintf(eg->last_ts, sizeof(eg->last_ts), "%s", line);
	sbx__eg_relay_json(eg, sp + 1);
}

/* One decision of the proxy (a JSON line), to autopatch's log and the denial groups. */
void sbx__eg_relay_json(sbx_egress *eg, const char *text)
{
	cJSON *j = cJSON_Parse(text);
	const char *msg;

	if (!j) {
		ap_warn("egress proxy (job %s): %.300s", eg->job, text);
		return;
	}
	msg = jstr(j, "msg");
	if (strcmp(msg, "egress denied") == 0) {
		eg->denials++;
		record_denial(eg, jstr(j, "kind"), jstr(j, "target"), jstr(j, "reason"));
		ap_warn("egress denied (job %s): %s %s from %s: %s", eg->job, jstr(j, "method"),
			jstr(j, "target"), jstr(j, "client"), jstr(j, "reason"));
	} else if (strcmp(msg, "egress locked") == 0) {
		eg->locked = true;
		ap_info("egress locked (job %s): the proxy refuses everything from now on",
			eg->job);
	} else if (strcmp(msg, "egress allowed") == 0) {
		ap_info("egress allowed (job %s): %s %s from %s", eg->job, jstr(j, "method"),
			jstr(j, "target"), jstr(j, "client"));
	} else if (strcmp(msg, "egress failed") == 0) {
		ap_warn("egress failed (job %s): %s %s from %s: %s", eg->job, jstr(j, "method"),
			jstr(j, "target"), jstr(j, "client"), jstr(j, "reason"));
	} else {
		if (strcmp(msg, "egress proxy listening") == 0)
			eg->listening = true;
		ap_debug("egress proxy (job %s): %s %s", eg->job, msg, jstr(j, "addr"));
	}
	cJSON_Delete(j);
}

int sbx_egress_drain_log(sbx_egress *eg)
{
	ap_buf raw = AP_BUF_INIT(EG_LOG_CAP);
	int rc;

	if (eg->local)
		return sbx__eg_local_drain(eg);
	if (!eg->proxy_id[0])
		return eg->denials;
	rc = logs_fetch(eg, &raw);
	if (rc == 0)
		demux_lines(&raw, relay_line, eg);
	ap_buf_release(&raw);
	return rc ? rc : eg->denials;
}

void sbx_egress_set_context(sbx_egress *eg, const char *phase, const char *command)
{
	ap_excerpt(eg->phase, sizeof(eg->phase), phase ? phase : "");
	ap_excerpt(eg->command, sizeof(eg->command), command ? command : "");
}

void sbx_egress_set_command(sbx_egress *eg, const char *phase, const char *const *argv)
{
	ap_buf text = AP_BUF_INIT(4 * SBX_DENIAL_CMD_MAX);
	const char *const *a = argv;

	/* `env NAME=value... sh -c STEP` (a setup step with the CA variables) is its STEP. */
	if (a[0] && strcmp(a[0], "env") == 0) {
		const char *const *b = a + 1;

		while (*b && strchr(*b, '=') && (*b)[0] != '-' && (*b)[0] != '=')
			b++;
		if (*b)
			a = b;
	}
	if (a[0] && a[1] && a[2] && strcmp(a[0], "sh") == 0 && strcmp(a[1], "-c") == 0)
		a += 2;
	/* Enough of the words to fill what is shown; sbx_egress_set_context() marks the cut. */
	for (; *a && text.len < SBX_DENIAL_CMD_MAX; a++)
		if ((text.len && ap_buf_add(&text, " ", 1)) ||
		    ap_buf_add(&text, *a, strnlen(*a, SBX_DENIAL_CMD_MAX)))
			break; /* out of memory: show what there is */
	ap_error_clear();
	for (char *c = text.data; c && *c; c++)
		if (*c == '\n' || *c == '\r' || *c == '\t')
			*c = ' ';
	sbx_egress_set_context(eg, phase, ap_buf_str(&text));
	ap_buf_release(&text);
}

int sbx_egress_copy_denials(sbx_egress *eg, sbx_denial *out, size_t max, size_t *n)
{
	*n = 0;
	if (!eg)
		return 0;
	if (sbx_egress_drain_log(eg) < 0)
		return AP_EIO;
	for (size_t i = 0; i < eg->n_seen && *n < max; i++)
		out[(*n)++] = eg->seen[i];
	return 0;
}

int sbx_egress_lock(sbx_egress *eg)
{
	char path[160];
	int rc;

	if (eg->local) {
		if (eg->pid <= 0 || kill(eg->pid, SIGUSR1) < 0)
			return ap_error_set(AP_EIO, "egress: no proxy process to lock");
	} else {
		if (!eg->proxy_id[0])
			return ap_error_set(AP_EINVAL, "egress: no proxy to lock");
		snprintf(path, sizeof(path), "/containers/%s/kill?signal=SIGUSR1", eg->proxy_id);
		rc = dk_request(eg->dk, "POST", path, NULL, EG_API_TIMEOUT, NULL, NULL);
		if (rc)
			return rc;
	}
	for (int i = 0; i < 100 && !eg->locked; i++) {
		struct timespec ts = {0, 50 * 1000 * 1000};

		if (sbx_egress_drain_log(eg) < 0)
			ap_error_clear();
		if (!eg->locked)
			nanosleep(&ts, NULL);
	}
	return eg->locked ? 0
			  : ap_error_set(AP_EIO, "egress: the proxy did not confirm the lock "
						 "within 5 s");
}

/* Find "addr" in the proxy's "listening" line. */
static void find_listen(sbx_egress *eg, char *line)
{
	char *sp = strchr(line, ' ');
	cJSON *j = sp ? cJSON_Parse(sp + 1) : NULL;

	if (j && strcmp(jstr(j, "msg"), "egress proxy listening") == 0 && !eg->proxy_url[0] &&
	    ap_fmt(eg->proxy_url, sizeof(eg->proxy_url), "http://%s", jstr(j, "addr"))) {
		/* A cut address would send the box elsewhere: no URL, and wait_ready() fails. */
		ap_warn("egress: %s", ap_error_last());
		eg->proxy_url[0] = '\0';
	}
	cJSON_Delete(j);
}

static void last_line(sbx_egress *eg, char *line)
{
	char *sp = strchr(line, ' ');

	ap_excerpt(eg->env_store[0], sizeof(eg->env_store[0]), sp ? sp + 1 : line);
}

/* Wait until the proxy printed its listening line; fail early if it exited. */
static int wait_ready(sbx_egress *eg, int timeout_ms)
{
	long long until = ap_mono_ms() + timeout_ms;
	char path[256];
	int rc;

	snprintf(path, sizeof(path), "/containers/%s/json", eg->proxy_id);
	for (;;) {
		ap_buf raw = AP_BUF_INIT(EG_LOG_CAP);
		cJSON *st = NULL;
		const cJSON *running;
		struct timespec ts = {0, 30 * 1000 * 1000};

		rc = logs_fetch(eg, &raw);
		if (rc == 0)
			demux_lines(&raw, find_listen, eg);
		if (eg->proxy_url[0]) {
			ap_buf_release(&raw);
			return 0;
		}
		if (rc == 0)
			rc = dk_request(eg->dk, "GET", path, NULL, EG_API_TIMEOUT, NULL, &st);
		running = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(st, "State"), "Running");
		if (rc == 0 && !cJSON_IsTrue(running)) {
			eg->env_store[0][0] = '\0';
			demux_lines(&raw, last_line, eg);
			rc = ap_error_set(AP_EIO, "the egress proxy exited: %s",
					  eg->env_store[0][0] ? eg->env_store[0] : "(no output)");
		}
		cJSON_Delete(st);
		ap_buf_release(&raw);
		if (rc)
			return rc;
		if (ap_mono_ms() > until)
			return ap_error_set(AP_ETIMEOUT,
					    "the egress proxy did not start listening "
					    "within %d ms",
					    timeout_ms);
		nanosleep(&ts, NULL);
	}
}

static int proxy_start(sbx_egress *eg, const sbx_egress_opts *o, const char *owner, const char *job,
		       const char *subnet, const char *const *allow)
{
	cJSON *body = proxy_body(eg, o, owner, job, subnet, allow), *resp = NULL, *id, *conn = NULL;
	char path[512];
	int rc;

	if (!body)
		return ap_error_set(AP_ENOMEM, "out of memory");
	snprintf(path, sizeof(path), "/containers/create?name=%s", eg->proxy_name);
	rc = dk_request(eg->dk, "POST", path, body, EG_API_TIMEOUT, NULL, &resp);
	if (rc)
		goto out;
	id = cJSON_GetObjectItemCaseSensitive(resp, "Id");
	if (!cJSON_IsString(id) || strlen(id->valuestring) >= sizeof(eg->proxy_id)) {
		rc = ap_error_set(AP_EIO, "docker create %s: no id in the answer", eg->proxy_name);
		goto out;
	}
	snprintf(eg->proxy_id, sizeof(eg->proxy_id), "%s", id->valuestring);
	conn = cJSON_CreateObject();
	if (!conn || !cJSON_AddStringToObject(conn, "Container", eg->proxy_id)) {
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto out;
	}
	{
		char *esc = dk_escape(o->outer_network);

		if (!esc) {
			rc = ap_error_set(AP_ENOMEM, "out of memory");
			goto out;
		}
		snprintf(path, sizeof(path), "/networks/%s/connect", esc);
		free(esc);
	}
	rc = dk_request(eg->dk, "POST", path, conn, EG_API_TIMEOUT, NULL, NULL);
	if (rc)
		goto out;
	snprintf(path, sizeof(path), "/containers/%s/start", eg->proxy_id);
	rc = dk_request(eg->dk, "POST", path, NULL, EG_API_TIMEOUT, NULL, NULL);
	if (rc)
		goto out;
	rc = wait_ready(eg, o->ready_timeout_ms);
out:
	cJSON_Delete(body);
	cJSON_Delete(resp);
	cJSON_Delete(conn);
	return rc;
}

static int remove_all(sbx_egress *eg)
{
	char path[256];
	int rc = 0, r;

	if (eg->proxy_id[0]) {
		snprintf(path, sizeof(path), "/containers/%s?force=true&v=true", eg->proxy_id);
		r = dk_request(eg->dk, "DELETE", path, NULL, EG_API_TIMEOUT, NULL, NULL);
		if (r && r != AP_ENOTFOUND) {
			ap_err("egress: could not remove proxy %s: %s", eg->proxy_name,
			       ap_error_last());
			rc = r;
		}
		eg->proxy_id[0] = '\0';
	}
	if (eg->net_id[0]) {
		snprintf(path, sizeof(path), "/networks/%s", eg->net_id);
		/* The daemon can take a moment to release the last endpoint of a removed
		 * container; a few short retries avoid leaving the network to the reaper. */
		for (int i = 0; i < 20; i++) {
			struct timespec ts = {0, 50 * 1000 * 1000};

			r = dk_request(eg->dk, "DELETE", path, NULL, EG_API_TIMEOUT, NULL, NULL);
			if (r == 0 || r == AP_ENOTFOUND || r == AP_EUNAVAIL)
				break;
			nanosleep(&ts, NULL);
		}
		if (r && r != AP_ENOTFOUND) {
			ap_err("egress: could not remove network %s: %s", eg->net_name,
			       ap_error_last());
			if (!rc)
				rc = r;
		}
		eg->net_id[0] = '\0';
	}
	return rc;
}

/* What both kinds of proxy check before creating anything: the list and the program. */
int sbx__eg_check_list_and_program(const sbx_egress_opts *opts, const char *const *allow)
{
	int rc = sbx_egress_check(allow);

	if (rc)
		return rc;
	if (!opts->proxy_bin[0] || access(opts->proxy_bin, X_OK) != 0)
		return ap_error_set(AP_EUNAVAIL,
				    "egress proxy program \"%s\" is missing; build it "
				    "or set AUTOPATCH_EGRESS_PROXY_BIN",
				    opts->proxy_bin);
	return 0;
}

/* The box's proxy variables for eg->proxy_url (sbx_egress_env). */
void sbx__eg_fill_env(sbx_egress *eg)
{
	static const char *names[EG_ENV_N] = {"HTTP_PROXY",  "HTTPS_PROXY", "http_proxy",
					      "https_proxy", "NO_PROXY",    "no_proxy"};

	for (int i = 0; i < EG_ENV_N; i++) {
		snprintf(eg->env_store[i], sizeof(eg->env_store[i]), "%s=%s", names[i],
			 i < 4 ? eg->proxy_url : "");
		eg->env[i] = eg->env_store[i];
	}
	eg->env[EG_ENV_N] = NULL;
}

int sbx_egress_up(dk_client *dk, const sbx_egress_opts *opts, const char *owner, const char *job,
		  const char *runtime, const char *const *allow, sbx_egress **out)
{
	sbx_egress *eg;
	unsigned char rnd[6];
	char base[96], subnet[64];
	int rc;

	*out = NULL;
	if (runtime && strcmp(runtime, "runsc") == 0)
		return ap_error_set(AP_EINVAL, "the egress allow-list is not available with the "
					       "runsc runtime (gVisor runs with --network=none "
					       "here, so its containers have no network at all)");
	if ((rc = sbx__eg_check_list_and_program(opts, allow)))
		return rc;
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return ap_error_set(AP_EIO, "getrandom: %s", strerror(errno));
	eg = calloc(1, sizeof(*eg));
	if (!eg)
		return ap_error_set(AP_ENOMEM, "out of memory");
	eg->dk = dk;
	/* job is a box's label (under 64 bytes, see sbx_box.job), base at most 40 + 13 bytes: the
	 * names below fit their 128 bytes. */
	snprintf(eg->job, sizeof(eg->job), "%s", job ? job : "");
	safe_name(base, 40, owner);
	snprintf(base + strlen(base), sizeof(base) - strlen(base), "-%02x%02x%02x%02x%02x%02x",
		 rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
	snprintf(eg->net_name, sizeof(eg->net_name), "autopatch-egress-%s", base);
	snprintf(eg->proxy_name, sizeof(eg->proxy_name), "autopatch-egress-proxy-%s", base);
	rc = net_create(eg, owner, job ? job : "", subnet, sizeof(subnet));
	if (rc)
		goto err_remove;
	rc = proxy_start(eg, opts, owner, job ? job : "", subnet, allow);
	if (rc)
		goto err_remove;
	sbx__eg_fill_env(eg);
	ap_info("egress (job %s): network %s, proxy %s at %s", eg->job, eg->net_name,
		eg->proxy_name, eg->proxy_url);
	*out = eg;
	return 0;
err_remove : {
	char why[AP_ERROR_MSG_MAX];

	snprintf(why, sizeof(why), "%s", ap_error_last());
	if (eg->proxy_id[0])
		sbx_egress_drain_log(eg);
	remove_all(eg);
	free(eg);
	return ap_error_set(rc, "%s", why);
}
}

const char *sbx_egress_network(const sbx_egress *eg)
{
	return eg->net_name;
}

const char *sbx_egress_proxy_url(const sbx_egress *eg)
{
	return eg->proxy_url;
}

const char *const *sbx_egress_env(const sbx_egress *eg)
{
	return eg->env;
}

int sbx_egress_down(sbx_egress *eg)
{
	int rc;

	if (!eg)
		return 0;
	if (sbx_egress_drain_log(eg) < 0)
		ap_warn("egress (job %s): could not read the proxy's log: %s", eg->job,
			ap_error_last());
	rc = eg->local ? 0 : remove_all(eg);
	if (eg->local) {
		if (eg->pid > 0) {
			kill(eg->pid, SIGKILL);
			while (waitpid(eg->pid, NULL, 0) < 0 && errno == EINTR)
				;
		}
		if (eg->listen_fd >= 0)
			close(eg->listen_fd);
		if (eg->log_path[0])
			unlink(eg->log_path);
	}
	free(eg);
	return rc;
}

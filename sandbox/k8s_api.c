/* SPDX-License-Identifier: MIT */
/* sandbox/k8s_api.c - Kubernetes API client: kubeconfig / in-cluster config and JSON requests
 * (see k8s_api.h). */
#include "sandbox/k8s_api.h"

#include "common/buf.h"
#include "common/err.h"
#include "common/fs.h"
#include "common/httpc.h"
#include "common/log.h"

#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define K8S_RESPONSE_CAP (8u << 20)
#define K8S_PEM_CAP	 (256u << 10)
#define K8S_TOKEN_CAP	 (64u << 10)

struct k8s_client {
	char *server;	  /* https://host:port[/prefix], no trailing slash */
	char *host;	  /* parsed from server */
	int port;	  /* likewise */
	bool tls;	  /* https */
	char *prefix;	  /* path prefix of server */
	char *ca_pem;	  /* NULL: system CAs */
	bool insecure;	  /* no server certificate check */
	char *token;	  /* fixed bearer token, or NULL */
	char *token_file; /* re-read per request, or NULL */
	char *cert_pem, *key_pem;
	char *ns; /* AUTOPATCH_K8S_NAMESPACE */
};

/* --- kubeconfig ------------------------------------------------------------------------ */

/* A YAML node as cJSON: mappings are objects, sequences arrays, scalars strings. */
static cJSON *yaml_to_json(yaml_document_t *doc, yaml_node_t *n, int depth)
{
	cJSON *j = NULL, *v;

	if (!n || depth > K8S_KUBECONFIG_DEPTH)
		return NULL;
	switch (n->type) {
	case YAML_SCALAR_NODE:
		return cJSON_CreateString((const char *)n->data.scalar.value);
	case YAML_SEQUENCE_NODE:
		j = cJSON_CreateArray();
		for (yaml_node_item_t *it = n->data.sequence.items.start;
		     j && it < n->data.sequence.items.top; it++) {
			v = yaml_to_json(doc, yaml_document_get_node(doc, *it), depth + 1);
			if (!v) {
				cJSON_Delete(j);
				return NULL;
			}
			cJSON_AddItemToArray(j, v);
		}
		return j;
	case YAML_MAPPING_NODE:
		j = cJSON_CreateObject();
		for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
		     j && p < n->data.mapping.pairs.top; p++) {
			yaml_node_t *k = yaml_document_get_node(doc, p->key);

			if (!k || k->type != YAML_SCALAR_NODE) {
				cJSON_Delete(j);
				return NULL;
			}
			v = yaml_to_json(doc, yaml_document_get_node(doc, p->value), depth + 1);
			if (!v) {
				cJSON_Delete(j);
				return NULL;
			}
			cJSON_AddItemToObject(j, (const char *)k->data.scalar.value, v);
		}
		return j;
	default:
		return NULL;
	}
}

/* The "name"d entry of a kubeconfig list (clusters, users, contexts), its field (cluster, user,
 * context), or NULL. */
static const cJSON *named(const cJSON *root, const char *list, const char *name, const char *field)
{
	const cJSON *it;

	cJSON_ArrayForEach (it, cJSON_GetObjectItemCaseSensitive(root, list)) {
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(it, "name");

		if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0)
			return cJSON_GetObjectItemCaseSensitive(it, field);
	}
	return NULL;
}

static const char *str_field(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : NULL;
}

/* Decode base64 text (a *-data field) into a NUL-terminated allocation. */
static int b64_decode(const char *what, const char *in, char **out)
{
	size_t n = strlen(in), cap = n / 4 * 3 + 4;
	unsigned char *buf;
	int len, pad = 0;

	*out = NULL;
	if (n > K8S_PEM_CAP * 2 || n % 4)
		return ap_error_set(AP_EINVAL, "kubeconfig: %s is not base64", what);
	buf = malloc(cap);
	if (!buf)
		return ap_error_set(AP_ENOMEM, "out of memory");
	len = EVP_DecodeBlock(buf, (const unsigned char *)in, (int)n);
	if (len < 0) {
		free(buf);
		return ap_error_set(AP_EINVAL, "kubeconfig: %s is not base64", what);
	}
	while (n && in[n - 1] == '=' && pad < 2) {
		pad++;
		n--;
	}
	len -= pad;
	buf[len] = '\0';
	*out = (char *)buf;
	return 0;
}

/* Read a file named by the kubeconfig (relative to dir) into a NUL-terminated allocation. */
static int read_named_file(const char *what, const char *dir, const char *name, size_t cap,
			   char **out)
{
	ap_buf b = AP_BUF_INIT(cap);
	char path[PATH_MAX];
	int rc;

	*out = NULL;
	if (!dir)
		return ap_error_set(AP_EINVAL, "kubeconfig: %s names a file, which is refused here",
				    what);
	if (snprintf(path, sizeof(path), "%s%s%s", name[0] == '/' ? "" : dir,
		     name[0] == '/' ? "" : "/", name) >= (int)sizeof(path))
		return ap_error_set(AP_EINVAL, "kubeconfig: %s is too long a path", what);
	rc = fs_read_file(&b, path, 0);
	if (rc) {
		ap_buf_release(&b);
		return rc;
	}
	*out = ap_buf_take(&b);
	if (!*out)
		return ap_error_set(AP_ENOMEM, "out of memory");
	return 0;
}

/* One credential: the inline *-data field (base64), else the file field, else nothing. */
static int pem_field(const cJSON *o, const char *data_name, const char *file_name, const char *dir,
		     char **out)
{
	const char *data = str_field(o, data_name), *file = str_field(o, file_name);

	*out = NULL;
	if (data)
		return b64_decode(data_name, data, out);
	if (file)
		return read_named_file(file_name, dir, file, K8S_PEM_CAP, out);
	return 0;
}

static char *dup_or_null(const char *s, int *rc)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	if (!d)
		*rc = ap_error_set(AP_ENOMEM, "out of memory");
	return d;
}

void k8s_kubeconfig_release(k8s_kubeconfig *k)
{
	if (!k)
		return;
	free(k->server);
	free(k->ca_pem);
	free(k->token);
	free(k->token_file);
	free(k->cert_pem);
	if (k->key_pem)
		OPENSSL_cleanse(k->key_pem, strlen(k->key_pem));
	free(k->key_pem);
	free(k->namespace);
	memset(k, 0, sizeof(*k));
}

/* The kubeconfig text as a JSON object in *root (the caller deletes it). */
static int kubeconfig_load(const char *text, size_t len, cJSON **root)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	int rc;

	*root = NULL;
	if (!yaml_parser_initialize(&parser))
		return ap_error_set(AP_ENOMEM, "out of memory");
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		rc = ap_error_set(AP_EINVAL, "the kubeconfig is not YAML: %s at line %zu",
				  parser.problem ? parser.problem : "error",
				  parser.problem_mark.line + 1);
		yaml_parser_delete(&parser);
		return rc;
	}
	*root = yaml_to_json(&doc, yaml_document_get_root_node(&doc), 0);
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	if (!cJSON_IsObject(*root))
		return ap_error_set(AP_EINVAL,
				    "the kubeconfig is not a mapping of clusters, users and "
				    "contexts (or nests too deeply)");
	return 0;
}

/* The current context (into *ctx) and its cluster: server, namespace, TLS settings into out. */
static int kubeconfig_cluster(const cJSON *root, const char *dir, k8s_kubeconfig *out,
			      const cJSON **ctx)
{
	const cJSON *cluster;
	const char *cur, *cname, *v;
	int rc = 0;

	cur = str_field(root, "current-context");
	if (!cur)
		return ap_error_set(AP_EINVAL, "the kubeconfig has no current-context");
	*ctx = named(root, "contexts", cur, "context");
	cname = str_field(*ctx, "cluster");
	if (!*ctx || !cname)
		return ap_error_set(AP_EINVAL,
				    "the kubeconfig's context %.100s is missing or names no "
				    "cluster",
				    cur);
	cluster = named(root, "clusters", cname, "cluster");
	v = str_field(cluster, "server");
	if (!v)
		return ap_error_set(AP_EINVAL, "the kubeconfig's cluster %.100s has no server",
				    cname);
	out->server = dup_or_null(v, &rc);
	out->namespace = dup_or_null(str_field(*ctx, "namespace"), &rc);
	v = str_field(cluster, "insecure-skip-tls-verify");
	out->insecure = v && strcmp(v, "true") == 0;
	if (rc)
		return rc;
	return pem_field(cluster, "certificate-authority-data", "certificate-authority", dir,
			 &out->ca_pem);
}

/* The user's tokenFile v, relative to dir, into out->token_file. */
static int kubeconfig_token_file(const char *v, const char *dir, k8s_kubeconfig *out)
{
	if (!dir || (strlen(v) + strlen(dir) + 2 > PATH_MAX))
		return ap_error_set(AP_EINVAL, "kubeconfig: tokenFile cannot be used here");
	out->token_file = malloc(strlen(v) + strlen(dir) + 2);
	if (!out->token_file)
		return ap_error_set(AP_ENOMEM, "out of memory");
	sprintf(out->token_file, "%s%s%s", v[0] == '/' ? "" : dir, v[0] == '/' ? "" : "/", v);
	return 0;
}

/* The credentials of user uname (NULL: none) into out: a token, a token file or a client
 * certificate with its key; a plugin alone is refused. */
static int kubeconfig_user(const cJSON *root, const char *uname, const char *dir,
			   k8s_kubeconfig *out)
{
	const cJSON *user = uname ? named(root, "users", uname, "user") : NULL;
	const char *v;
	int rc = 0;

	if (uname && !user)
		return ap_error_set(AP_EINVAL, "the kubeconfig's user %.100s is missing", uname);
	out->token = dup_or_null(str_field(user, "token"), &rc);
	v = str_field(user, "tokenFile");
	if (!rc && v && (rc = kubeconfig_token_file(v, dir, out)))
		return rc;
	if (rc ||
	    (rc = pem_field(user, "client-certificate-data", "client-certificate", dir,
			    &out->cert_pem)) ||
	    (rc = pem_field(user, "client-key-data", "client-key", dir, &out->key_pem)))
		return rc;
	if (!out->cert_pem != !out->key_pem)
		return ap_error_set(AP_EINVAL,
				    "the kubeconfig's user %.100s has a client certificate "
				    "without its key, or a key without its certificate",
				    uname ? uname : "");
	if (str_field(user, "exec") || cJSON_GetObjectItemCaseSensitive(user, "exec") ||
	    cJSON_GetObjectItemCaseSensitive(user, "auth-provider")) {
		if (!out->token && !out->token_file && !out->cert_pem)
			return ap_error_set(
			    AP_EINVAL,
			    "the kubeconfig's user %.100s authenticates with an "
			    "exec or auth-provider plugin, which autopatch does not "
			    "run: use a token or a client certificate",
			    uname ? uname : "");
	}
	return 0;
}

int k8s_kubeconfig_parse(const char *text, size_t len, const char *dir, k8s_kubeconfig *out)
{
	cJSON *root = NULL;
	const cJSON *ctx = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if (len > K8S_KUBECONFIG_CAP)
		return ap_error_set(AP_ETOOBIG, "the kubeconfig is larger than %u bytes",
				    K8S_KUBECONFIG_CAP);
	rc = kubeconfig_load(text, len, &root);
	if (!rc)
		rc = kubeconfig_cluster(root, dir, out, &ctx);
	if (!rc)
		rc = kubeconfig_user(root, str_field(ctx, "user"), dir, out);
	cJSON_Delete(root);
	if (rc)
		k8s_kubeconfig_release(out);
	return rc;
}

/* --- client ---------------------------------------------------------------------------- */

/* Split server into host, port, tls, prefix. */
static int parse_server(k8s_client *c)
{
	const char *s = c->server, *h, *end, *colon;
	size_t n;

	if (strncmp(s, "https://", 8) == 0) {
		c->tls = true;
		h = s + 8;
	} else if (strncmp(s, "http://", 7) == 0) {
		h = s + 7;
	} else {
		return ap_error_set(AP_EINVAL,
				    "the Kubernetes server %.200s is not an http(s):// URL", s);
	}
	end = h + strcspn(h, "/");
	if (*h == '[') {
		const char *rb = memchr(h, ']', (size_t)(end - h));

		if (!rb)
			return ap_error_set(AP_EINVAL, "the Kubernetes server %.200s is malformed",
					    s);
		colon = rb[1] == ':' ? rb + 1 : NULL;
		n = (size_t)(rb - h - 1);
		h++;
	} else {
		colon = memchr(h, ':', (size_t)(end - h));
		n = (size_t)((colon ? colon : end) - h);
	}
	if (n == 0 || n > 253)
		return ap_error_set(AP_EINVAL, "the Kubernetes server %.200s has no host", s);
	c->host = strndup(h, n);
	c->port = c->tls ? 443 : 80;
	if (colon) {
		char *e;
		long p = strtol(colon + 1, &e, 10);

		if (e != end || p < 1 || p > 65535)
			return ap_error_set(AP_EINVAL,
					    "the Kubernetes server %.200s has a bad port", s);
		c->port = (int)p;
	}
	c->prefix = strdup(end);
	if (!c->host || !c->prefix)
		return ap_error_set(AP_ENOMEM, "out of memory");
	n = strlen(c->prefix);
	while (n && c->prefix[n - 1] == '/')
		c->prefix[--n] = '\0';
	return 0;
}

static int from_kubeconfig(k8s_client *c, const char *path)
{
	ap_buf text = AP_BUF_INIT(K8S_KUBECONFIG_CAP);
	k8s_kubeconfig k;
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int rc;

	/* The kubeconfig's directory resolves its relative file names: a cut one names another. */
	if (slash && (size_t)(slash - path) >= sizeof(dir))
		return ap_error_set(AP_EINVAL, "KUBECONFIG=\"%.60s...\" is longer than %zu bytes",
				    path, sizeof(dir) - 1);
	if (slash)
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	else
		snprintf(dir, sizeof(dir), ".");
	if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	rc = fs_read_file(&text, path, 0);
	if (rc) {
		ap_buf_release(&text);
		return ap_error_set(AP_EINVAL, "KUBECONFIG: %s", ap_error_last());
	}
	rc = k8s_kubeconfig_parse(ap_buf_str(&text), text.len, dir, &k);
	ap_buf_release(&text);
	if (rc)
		return ap_error_set(rc == AP_ENOMEM ? rc : AP_EINVAL, "%s (KUBECONFIG=%.200s)",
				    ap_error_last(), path);
	c->server = k.server;
	c->ca_pem = k.ca_pem;
	c->insecure = k.insecure;
	c->token = k.token;
	c->token_file = k.token_file;
	c->cert_pem = k.cert_pem;
	c->key_pem = k.key_pem;
	free(k.namespace); /* the sandbox namespace is a setting of its own */
	return 0;
}

static int from_cluster(k8s_client *c, const ap_config *cfg)
{
	const char *host = cfg_str(cfg, "KUBERNETES_SERVICE_HOST");
	const char *port = cfg_str(cfg, "KUBERNETES_SERVICE_PORT");
	const char *sa = cfg_str(cfg, "AUTOPATCH_K8S_SERVICEACCOUNT_DIR");
	char path[PATH_MAX], url[600];
	int rc;

	if (!host || !host[0])
		return ap_error_set(
		    AP_EUNAVAIL, "the kubernetes sandbox backend needs KUBECONFIG or to run in a "
				 "cluster (KUBERNETES_SERVICE_HOST is not set)");
	if (strlen(host) > 255 || strlen(port) > 5)
		return ap_error_set(AP_EINVAL, "KUBERNETES_SERVICE_HOST/_PORT are malformed");
	/* Lengths checked above: fits the 600. */
	snprintf(url, sizeof(url), strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host,
		 port);
	c->server = strdup(url);
	if (!c->server)
		return ap_error_set(AP_ENOMEM, "out of memory");
	if (ap_fmt(path, sizeof(path), "%s/ca.crt", sa))
		return ap_error_set(
		    AP_EINVAL, "AUTOPATCH_K8S_SERVICEACCOUNT_DIR=\"%.60s...\" is too long", sa);
	rc = read_named_file("the service account's ca.crt", "/", path, K8S_PEM_CAP, &c->ca_pem);
	if (rc)
		return ap_error_set(AP_EUNAVAIL, "in-cluster configuration: %s", ap_error_last());
	snprintf(path, sizeof(path), "%s/token", sa); /* shorter than ca.crt's: fits */
	c->token_file = strdup(path);
	if (!c->token_file)
		return ap_error_set(AP_ENOMEM, "out of memory");
	return 0;
}

int k8s_client_new(k8s_client **out, const ap_config *cfg)
{
	const char *kc = cfg_str(cfg, "KUBECONFIG");
	const char *ns = cfg_str(cfg, "AUTOPATCH_K8S_NAMESPACE");
	k8s_client *c;
	int rc;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return ap_error_set(AP_ENOMEM, "out of memory");
	if (strlen(ns) > 63 || strspn(ns, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(ns) ||
	    !ns[0] || ns[0] == '-') {
		rc = ap_error_set(AP_EINVAL,
				  "AUTOPATCH_K8S_NAMESPACE=\"%.80s\" is not a namespace name", ns);
		goto err_free;
	}
	c->ns = strdup(ns);
	if (!c->ns) {
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto err_free;
	}
	if (kc && kc[0]) {
		if (strchr(kc, ':')) {
			rc = ap_error_set(AP_EINVAL, "KUBECONFIG must name one file (a list is not "
						     "supported)");
			goto err_free;
		}
		rc = from_kubeconfig(c, kc);
	} else {
		rc = from_cluster(c, cfg);
	}
	if (!rc)
		rc = parse_server(c);
	if (rc)
		goto err_free;
	*out = c;
	return 0;
err_free:
	k8s_client_free(c);
	return rc;
}

void k8s_client_free(k8s_client *c)
{
	if (!c)
		return;
	free(c->server);
	free(c->host);
	free(c->prefix);
	free(c->ca_pem);
	if (c->token)
		OPENSSL_cleanse(c->token, strlen(c->token));
	free(c->token);
	free(c->token_file);
	free(c->cert_pem);
	if (c->key_pem)
		OPENSSL_cleanse(c->key_pem, strlen(c->key_pem));
	free(c->key_pem);
	free(c->ns);
	free(c);
}

const char *k8s_namespace(const k8s_client *c)
{
	return c->ns;
}

/* The bearer token now (the token file is re-read: the kubelet rotates projected tokens). */
static int current_token(k8s_client *c, char *buf, size_t len, const char **tok)
{
	ap_buf b = AP_BUF_INIT(K8S_TOKEN_CAP);
	size_t n;
	int rc;

	*tok = c->token;
	if (!c->token_file)
		return 0;
	rc = fs_read_file(&b, c->token_file, 0);
	if (rc) {
		ap_buf_release(&b);
		return ap_error_set(AP_EDENIED, "cannot read the service-account token: %s",
				    ap_error_last());
	}
	n = b.len;
	while (n && (b.data[n - 1] == '\n' || b.data[n - 1] == '\r' || b.data[n - 1] == ' '))
		n--;
	if (n + 1 > len) {
		ap_buf_release(&b);
		return ap_error_set(AP_ETOOBIG, "the service-account token is too long");
	}
	memcpy(buf, b.data, n);
	buf[n] = '\0';
	OPENSSL_cleanse(b.data, b.len);
	ap_buf_release(&b);
	*tok = buf;
	return 0;
}

int k8s_endpoint_get(k8s_client *c, k8s_endpoint *ep, char *tokbuf, size_t toklen)
{
	*ep = (k8s_endpoint){c->host,	  c->port,    c->tls,	   c->prefix, c->ca_pem,
			     c->cert_pem, c->key_pem, c->insecure, NULL};
	return current_token(c, tokbuf, toklen, &ep->token);
}

char *k8s_escape(const char *s)
{
	CURL *h = curl_easy_init();
	char *e, *copy;

	if (!h)
		return NULL;
	e = curl_easy_escape(h, s, 0);
	copy = e ? strdup(e) : NULL;
	curl_free(e);
	curl_easy_cleanup(h);
	return copy;
}

/* The Status message of an error body (sanitised to one line), or its raw start: an excerpt
 * by design, whose cut is marked "...". */
static void status_message(const ap_buf *body, char *out, size_t len)
{
	cJSON *j = cJSON_ParseWithLength(body->data ? body->data : "", body->len);
	const char *m = str_field(j, "message");
	size_t i;

	snprintf(out, len, "%s", m ? m : (body->data && body->len ? ap_buf_str(body) : ""));
	cJSON_Delete(j);
	for (i = 0; out[i]; i++)
		if (out[i] == '\n' || out[i] == '\r' || (unsigned char)out[i] < 0x20)
			out[i] = ' ';
	if (i > 300)
		strcpy(out + 297, "...");
}

static int status_error(k8s_client *c, long code, const char *verb, const char *resource,
			const ap_buf *body)
{
	char msg[400];

	status_message(body, msg, sizeof(msg));
	switch (code) {
	case 401:
		return ap_error_set(AP_EDENIED,
				    "the Kubernetes API at %s refused autopatch's credentials (401 "
				    "Unauthorized) to %s %s: check the token or client certificate",
				    c->server, verb, resource);
	case 403:
		return ap_error_set(AP_EDENIED, "cannot %s %s in namespace %s: %s", verb, resource,
				    c->ns, msg);
	case 404:
		return ap_error_set(AP_ENOTFOUND, "kubernetes %s %s: %s", verb, resource, msg);
	case 409:
		return ap_error_set(AP_EDUPLICATE, "kubernetes %s %s: %s", verb, resource, msg);
	default:
		return ap_error_set(AP_EHTTP, "kubernetes %s %s in namespace %s: %ld %s", verb,
				    resource, c->ns, code, msg);
	}
}

/* The request's options on h: URL, method, time limits and the client's TLS settings (errbuf:
 * CURL_ERROR_SIZE bytes for curl's message). */
static void set_options(CURL *h, const k8s_client *c, const char *url, const char *method,
			long timeout_ms, char *errbuf)
{
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 60000L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	if (c->ca_pem) {
		struct curl_blob ca = {c->ca_pem, strlen(c->ca_pem), CURL_BLOB_NOCOPY};

		curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &ca);
	}
	if (c->insecure) {
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (c->cert_pem) {
		struct curl_blob cert = {c->cert_pem, strlen(c->cert_pem), CURL_BLOB_NOCOPY};
		struct curl_blob key = {c->key_pem, strlen(c->key_pem), CURL_BLOB_NOCOPY};

		curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cert);
		curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
		curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &key);
		curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
	}
}

/* The error of a transfer that failed with cc (sink_rc: the body sink's code). */
static int transfer_error(const k8s_client *c, CURLcode cc, int sink_rc, const char *errbuf,
			  const char *verb, const char *resource)
{
	if (sink_rc == AP_ETOOBIG)
		return ap_error_set(AP_ETOOBIG, "kubernetes %s %s: the answer passed %u bytes",
				    verb, resource, K8S_RESPONSE_CAP);
	if (cc == CURLE_OPERATION_TIMEDOUT)
		return ap_error_set(AP_ETIMEOUT, "kubernetes %s %s: no answer from %s in time",
				    verb, resource, c->server);
	return ap_error_set(AP_EUNAVAIL, "cannot reach the Kubernetes API at %s to %s %s: %s",
			    c->server, verb, resource, errbuf[0] ? errbuf : curl_easy_strerror(cc));
}

static int do_request(k8s_client *c, const char *method, const char *path, const cJSON *body,
		      const char *verb, const char *resource, long timeout_ms, long *status,
		      ap_buf *resp)
{
	httpc_body sink = HTTPC_BODY_INIT(resp);
	static const char *const warn_name[] = {"Warning"};
	httpc_headers warn;
	struct curl_slist *hdrs = NULL;
	char url[2048], auth[K8S_TOKEN_CAP + 32], tokbuf[K8S_TOKEN_CAP];
	char errbuf[CURL_ERROR_SIZE] = "";
	const char *tok = NULL;
	char *json = NULL;
	long code = 0;
	CURL *h = NULL;
	CURLcode cc;
	int rc;

	if (status)
		*status = 0;
	httpc_headers_init(&warn, warn_name, 1, 300);
	rc = httpc_global_init();
	if (rc)
		return rc;
	if (snprintf(url, sizeof(url), "%s%s", c->server, path) >= (int)sizeof(url))
		return ap_error_set(AP_EINVAL, "kubernetes request path too long");
	rc = current_token(c, tokbuf, sizeof(tokbuf), &tok);
	if (rc)
		return rc;
	h = curl_easy_init();
	if (!h)
		return ap_error_set(AP_ENOMEM, "out of memory creating a curl handle");
	set_options(h, c, url, method, timeout_ms, errbuf);
	httpc_body_sink(h, &sink);
	httpc_headers_sink(h, &warn);
	if (body) {
		json = cJSON_PrintUnformatted(body);
		if (!json) {
			rc = ap_error_set(AP_ENOMEM, "out of memory encoding a kubernetes request");
			goto out_free;
		}
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, json);
	}
	hdrs = curl_slist_append(hdrs, "Accept: application/json, */*");
	hdrs = curl_slist_append(hdrs, "Expect:");
	if (tok) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", tok);
		hdrs = curl_slist_append(hdrs, auth);
		OPENSSL_cleanse(auth, sizeof(auth));
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "autopatch-sandbox");
	cc = curl_easy_perform(h);
	if (cc != CURLE_OK) {
		rc = transfer_error(c, cc, sink.rc, errbuf, verb, resource);
		goto out_free;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	if (status)
		*status = code;
	/* A server that accepted the request with a warning (an unknown field under
	 * fieldValidation=Warn, a deprecated field): said in the log, never silent. */
	if (httpc_header(&warn, "Warning"))
		ap_warn("kubernetes %s %s: the API server warns: %s", verb, resource,
			httpc_header(&warn, "Warning"));
	if (code < 200 || code > 299)
		rc = status_error(c, code, verb, resource, resp);
out_free:
	OPENSSL_cleanse(tokbuf, sizeof(tokbuf));
	httpc_headers_clear(&warn);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	free(json);
	return rc;
}

int k8s_request(k8s_client *c, const char *method, const char *path, const cJSON *body,
		const char *verb, const char *resource, long timeout_ms, long *status, cJSON **out)
{
	ap_buf resp = AP_BUF_INIT(K8S_RESPONSE_CAP);
	int rc;

	if (out)
		*out = NULL;
	rc = do_request(c, method, path, body, verb, resource, timeout_ms, status, &resp);
	if (!rc && out && resp.len) {
		*out = cJSON_ParseWithLength(resp.data, resp.len);
		if (!*out)
			rc = ap_error_set(AP_EIO, "kubernetes %s %s: the answer is not JSON", verb,
					  resource);
	}
	ap_buf_release(&resp);
	return rc;
}

int k8s_request_text(k8s_client *c, const char *path, const char *verb, const char *resource,
		     long timeout_ms, ap_buf *out)
{
	return do_request(c, "GET", path, NULL, verb, resource, timeout_ms, NULL, out);
}

/* SPDX-License-Identifier: MIT */
/* sandbox/k8s_api.h - a small Kubernetes API client: where the API is and how to prove who we
 * are (a kubeconfig file, or the in-cluster service account), and JSON requests with libcurl +
 * cJSON whose failures read as one sentence naming the verb and the resource.
 *
 * Configuration, in this order: KUBECONFIG (a kubeconfig file: its current context's cluster
 * server, certificate-authority[-data], insecure-skip-tls-verify, and its user's token,
 * tokenFile or client-certificate[-data] + client-key[-data]; relative paths are relative to
 * the file), else the in-cluster service account (KUBERNETES_SERVICE_HOST/_PORT, the token and
 * ca.crt in AUTOPATCH_K8S_SERVICEACCOUNT_DIR; the token file is re-read, as the kubelet rotates
 * it). The sandbox namespace is AUTOPATCH_K8S_NAMESPACE.
 *
 * Thread-safety: a k8s_client is immutable after k8s_client_new() (the token file is re-read
 * per request) and may be used by any number of threads at once.
 */
#ifndef AP_K8S_API_H
#define AP_K8S_API_H

#include "common/buf.h"
#include "common/config.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct k8s_client k8s_client;

/* Largest kubeconfig read, and most nesting accepted in it. */
#define K8S_KUBECONFIG_CAP   (1u << 20)
#define K8S_KUBECONFIG_DEPTH 32

/* What a kubeconfig's current context says (strings owned; *_pem are file contents or decoded
 * *-data fields, NUL-terminated). */
typedef struct k8s_kubeconfig {
	char *server;	  /* https://host:port[/prefix] */
	char *ca_pem;	  /* NULL: the system's CAs */
	bool insecure;	  /* insecure-skip-tls-verify */
	char *token;	  /* bearer token, or NULL */
	char *token_file; /* tokenFile, or NULL */
	char *cert_pem;	  /* client certificate, or NULL */
	char *key_pem;	  /* client key, or NULL */
	char *namespace;  /* the context's namespace, or NULL */
} k8s_kubeconfig;

/*
 * Parse a kubeconfig (YAML or JSON, at most K8S_KUBECONFIG_CAP bytes, nesting at most
 * K8S_KUBECONFIG_DEPTH) from text; dir resolves relative file names (NULL: files are refused,
 * for the fuzzer). 0 with *out filled (release with k8s_kubeconfig_release), or AP_EINVAL with
 * a sentence naming what is missing or malformed (never a secret value), AP_ENOMEM, or the
 * error of reading a named file.
 */
int k8s_kubeconfig_parse(const char *text, size_t len, const char *dir, k8s_kubeconfig *out);
void k8s_kubeconfig_release(k8s_kubeconfig *k);

/* Read the configuration (see the top of this file). AP_EINVAL with a sentence for a bad
 * setting or kubeconfig, AP_EUNAVAIL when there is neither a kubeconfig nor an in-cluster
 * service account. Nothing is sent yet. *out is freed with k8s_client_free(). */
int k8s_client_new(k8s_client **out, const ap_config *cfg);
void k8s_client_free(k8s_client *c);

/* The sandbox namespace. Owned by c. */
const char *k8s_namespace(const k8s_client *c);

/*
 * One request: path is absolute ("/api/v1/namespaces/NS/pods"), query values already escaped;
 * body (may be NULL) is sent as JSON. verb and resource name what is done for the error
 * sentence ("create", "pods"). timeout_ms bounds the whole request (0: 60 s).
 *
 * 2xx: 0, and *out (may be NULL) is the parsed answer (caller frees with cJSON_Delete).
 * Otherwise one sentence from the API's Status: 403 "cannot VERB RESOURCE in namespace NS:
 * MESSAGE" (AP_EDENIED); 401 AP_EDENIED naming the credentials; 404 AP_ENOTFOUND; 409
 * AP_EDUPLICATE; other statuses AP_EHTTP "kubernetes VERB RESOURCE: STATUS MESSAGE";
 * AP_EUNAVAIL "cannot reach the Kubernetes API at URL: ..."; AP_ETIMEOUT; AP_ETOOBIG past 8 MiB.
 * *status (may be NULL) is the HTTP status or 0.
 */
int k8s_request(k8s_client *c, const char *method, const char *path, const cJSON *body,
		const char *verb, const char *resource, long timeout_ms, long *status, cJSON **out);

/* GET path as text (pods/log), at most cap bytes kept. Errors as k8s_request. */
int k8s_request_text(k8s_client *c, const char *path, const char *verb, const char *resource,
		     long timeout_ms, ap_buf *out);

/* What the exec WebSocket needs to connect like k8s_request does. Borrowed from c; token is
 * written into tokbuf (re-read from the token file) and may be NULL. */
typedef struct k8s_endpoint {
	const char *host; /* host name or address of the server */
	int port;
	bool tls;
	const char *prefix; /* path prefix of the server URL ("" usually) */
	const char *ca_pem, *cert_pem, *key_pem;
	bool insecure;
	const char *token;
} k8s_endpoint;

int k8s_endpoint_get(k8s_client *c, k8s_endpoint *ep, char *tokbuf, size_t toklen);

/* URL-encode s for a query string. Caller frees with free(); NULL on ENOMEM. */
char *k8s_escape(const char *s);

#endif

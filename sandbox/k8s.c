/* SPDX-License-Identifier: MIT */
/* sandbox/k8s.c - the Kubernetes backend of sandbox.h: a pod per box with every hardening rule
 * of the Docker backend mapped, a deny-all NetworkPolicy per box, the repository streamed in
 * as a tar over exec stdin to a loader container, commands over the exec WebSocket
 * (k8s_exec.c), reaping of labelled pods and policies. docs/kubernetes.md has the mapping.
 * A box with an egress allow-list gets its own proxy, a child process (egress.c, local mode),
 * and a second policy NAME-egress allowing TCP to that proxy only, deleted when setup ends.
 *
 * A pod has two containers sharing memory-backed emptyDirs: "box" (PID 1 `sleep`, every
 * command an exec as uid 10001 wrapped in `env -C DIR prlimit ... timeout -s KILL N`) mounts
 * the repo volume read-only at /repo; "loader" mounts it read-write and does nothing but
 * extract the tar sbx_prepare sends it. The settings, the pool and the output handling are
 * backend-neutral (core.c).
 */
#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/fs.h"
#include "common/log.h"
#include "sandbox/backend.h"
#include "sandbox/egress.h"
#include "sandbox/internal.h"
#include "sandbox/k8s_api.h"
#include "sandbox/k8s_exec.h"
#include "sandbox/sandbox.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define K8S_API_TIMEOUT 30000L
#define K8S_MAX_SELECT	16
#define K8S_LABEL_OWNER "autopatch.owner"
#define K8S_LABEL_BOX	"autopatch.box"
#define K8S_LABEL_JOB	"autopatch.job"
#define K8S_ANN_CREATOR "autopatch.dev/creator"
#define K8S_ANN_JOB	"autopatch.dev/job"
#define K8S_LOADER_MEM	(64LL << 20) /* the loader's memory beyond the repo it writes */
/* A pod's grace period (the kubelet's SIGTERM, then SIGKILL this much later; PID 1 of each
 * container exits on SIGTERM). Not 0: the API server removes a pod deleted with grace 0 at
 * once, before the kubelet has stopped anything (docs/kubernetes.md, "Removal"). */
#define K8S_GRACE_SECONDS 1
#define K8S_REAP_GONE_MS  10000LL /* how long a reap waits, for all pods together */
/* Every write asks the API server to refuse a field it does not know rather than drop it
 * with a Warning (its default, fieldValidation=Warn): a misspelt hardening field fails. */
#define K8S_STRICT "?fieldValidation=Strict"

struct k8s_kv {
	char *key, *value, *effect; /* effect: tolerations only */
};

struct k8s_backend {
	k8s_client *kc;
	char *runtime_class; /* or NULL */
	struct k8s_kv nodesel[K8S_MAX_SELECT];
	int n_nodesel;
	struct k8s_kv tolerations[K8S_MAX_SELECT];
	int n_tolerations;
	int64_t ephemeral;
	char *pull_policy;
	int start_seconds;
	int remove_seconds; /* how long a removal waits for the pod object to go */
	char *protocols;
	atomic_int proto;	/* 0 unknown, 4, 5: what the server chose last */
	char *egress_addr;	/* AUTOPATCH_K8S_EGRESS_ADDRESS, or NULL: no allow-lists */
	sbx_egress_opts egress; /* AUTOPATCH_EGRESS_* */
};

#define K8S_EGRESS_SUFFIX "-egress" /* the allow policy of a box: NAME-egress */

/* A box's local egress proxy (sbx_box.impl), or NULL. */
static sbx_egress *box_eg(const sbx_box *b)
{
	return (sbx_egress *)b->impl;
}

extern char **environ;

static struct k8s_backend *be_of(const sbx_engine *e)
{
	return e->be;
}

/* --- settings --------------------------------------------------------------------------- */

static bool k8s_name_safe(const char *s, size_t max)
{
	size_t n = strlen(s);

	return n > 0 && n <= max && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == n &&
	       s[0] != '-' && s[n - 1] != '-';
}

/* A label key (optionally prefix/name) or value as the API accepts them. */
static bool label_ok(const char *s, bool key)
{
	const char *slash = key ? strrchr(s, '/') : NULL;
	const char *name = slash ? slash + 1 : s;

	if (slash && (slash == s || slash - s > 253))
		return false;
	return key ? sbx__label_safe(name, 63) : (!*s || sbx__label_safe(s, 63));
}

/* "k=v,k2=v2" (node selector) or "k=v:Effect,k:Effect" (tolerations). */
static int parse_list(const char *setting, const char *v, bool tol, struct k8s_kv *out, int *n)
{
	char *copy, *save = NULL, *item;
	int rc = 0;

	*n = 0;
	if (!v || !*v)
		return 0;
	copy = strdup(v);
	if (!copy)
		return ap_error_set(AP_ENOMEM, "out of memory");
	for (item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *eq, *colon = tol ? strrchr(item, ':') : NULL;
		struct k8s_kv kv = {0};

		if (*n == K8S_MAX_SELECT) {
			rc = ap_error_set(AP_EINVAL, "%s: at most %d entries", setting,
					  K8S_MAX_SELECT);
			break;
		}
		if (tol) {
			if (!colon ||
			    (strcmp(colon + 1, "NoSchedule") && strcmp(colon + 1, "NoExecute") &&
			     strcmp(colon + 1, "PreferNoSchedule"))) {
				rc = ap_error_set(
				    AP_EINVAL,
				    "%s: \"%.80s\" is not key=value:Effect or key:Effect "
				    "(Effect: NoSchedule, PreferNoSchedule, NoExecute)",
				    setting, item);
				break;
			}
			*colon = '\0';
			kv.effect = strdup(colon + 1);
		}
		eq = strchr(item, '=');
		if (eq)
			*eq = '\0';
		if ((!tol && !eq) || !label_ok(item, true) || (eq && !label_ok(eq + 1, false))) {
			rc = ap_error_set(AP_EINVAL, "%s: \"%.80s\" is not a valid key=value",
					  setting, item);
			free(kv.effect);
			break;
		}
		kv.key = strdup(item);
		kv.value = eq ? strdup(eq + 1) : NULL;
		out[(*n)++] = kv;
		if (!kv.key || (eq && !kv.value) || (tol && !kv.effect)) {
			rc = ap_error_set(AP_ENOMEM, "out of memory");
			break;
		}
	}
	free(copy);
	return rc;
}

static void free_list(struct k8s_kv *l, int n)
{
	for (int i = 0; i < n; i++) {
		free(l[i].key);
		free(l[i].value);
		free(l[i].effect);
	}
}

static void k8s_close(sbx_engine *e)
{
	struct k8s_backend *be = e->be;

	k8s_client_free(be->kc);
	free(be->runtime_class);
	free_list(be->nodesel, be->n_nodesel);
	free_list(be->tolerations, be->n_tolerations);
	free(be->pull_policy);
	free(be->egress_addr);
	free(be->protocols);
	free(be);
	e->be = NULL;
}

/* The owner id, runtime class, pull policy and protocols must be ones Kubernetes accepts. */
static int check_names(const sbx_engine *e, const char *rtc, const char *pull, const char *protos)
{
	if (!k8s_name_safe(e->owner, 40))
		return ap_error_set(
		    AP_EINVAL,
		    "the kubernetes backend needs an owner id of lowercase letters, "
		    "digits and '-' (pod names): AUTOPATCH_OWNER_ID=\"%s\"",
		    e->owner);
	if (rtc && rtc[0] && !k8s_name_safe(rtc, 253))
		return ap_error_set(
		    AP_EINVAL, "AUTOPATCH_K8S_RUNTIME_CLASS=\"%.80s\" is not a RuntimeClass name",
		    rtc);
	if (strcmp(pull, "IfNotPresent") && strcmp(pull, "Always") && strcmp(pull, "Never"))
		return ap_error_set(AP_EINVAL,
				    "AUTOPATCH_K8S_PULL_POLICY=\"%.40s\": use IfNotPresent, Always "
				    "or Never",
				    pull);
	if (strcmp(protos, K8S_PROTO_V5 "," K8S_PROTO_V4) && strcmp(protos, K8S_PROTO_V5) &&
	    strcmp(protos, K8S_PROTO_V4) && strcmp(protos, K8S_PROTO_V4 "," K8S_PROTO_V5))
		return ap_error_set(AP_EINVAL,
				    "AUTOPATCH_K8S_PROTOCOLS=\"%.80s\": list v5.channel.k8s.io "
				    "and/or v4.channel.k8s.io",
				    protos);
	return 0;
}

/* Node selector, tolerations, storage, time limits and egress settings from cfg into be. */
static int read_pod_settings(struct k8s_backend *be, const ap_config *cfg)
{
	const char *ea = cfg_str(cfg, "AUTOPATCH_K8S_EGRESS_ADDRESS");
	unsigned char bin[16];
	int64_t v;
	int rc;

	if ((rc = parse_list("AUTOPATCH_K8S_NODE_SELECTOR",
			     cfg_str(cfg, "AUTOPATCH_K8S_NODE_SELECTOR"), false, be->nodesel,
			     &be->n_nodesel)) ||
	    (rc = parse_list("AUTOPATCH_K8S_TOLERATIONS", cfg_str(cfg, "AUTOPATCH_K8S_TOLERATIONS"),
			     true, be->tolerations, &be->n_tolerations)) ||
	    (rc = cfg_bytes(cfg, "AUTOPATCH_K8S_EPHEMERAL_STORAGE", 1 << 20, 1LL << 40,
			    &be->ephemeral)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_K8S_START_SECONDS", 1, 3600, &v)))
		return rc;
	be->start_seconds = (int)v;
	if ((rc = cfg_int(cfg, "AUTOPATCH_K8S_REMOVE_SECONDS", 1, 3600, &v)))
		return rc;
	be->remove_seconds = (int)v;
	if ((rc = sbx_egress_opts_load(&be->egress, cfg)))
		return rc;
	if (ea && ea[0] && inet_pton(AF_INET, ea, bin) != 1 && inet_pton(AF_INET6, ea, bin) != 1)
		return ap_error_set(AP_EINVAL,
				    "AUTOPATCH_K8S_EGRESS_ADDRESS=\"%.80s\" is not an IP "
				    "address (use the replica's pod IP, status.podIP)",
				    ea);
	if (ea && ea[0] && !(be->egress_addr = strdup(ea)))
		return ap_error_set(AP_ENOMEM, "out of memory");
	return 0;
}

static int k8s_open(sbx_engine *e, const ap_config *cfg)
{
	struct k8s_backend *be = calloc(1, sizeof(*be));
	const char *rtc = cfg_str(cfg, "AUTOPATCH_K8S_RUNTIME_CLASS");
	const char *pull = cfg_str(cfg, "AUTOPATCH_K8S_PULL_POLICY");
	const char *protos = cfg_str(cfg, "AUTOPATCH_K8S_PROTOCOLS");
	int rc;

	if (!be)
		return ap_error_set(AP_ENOMEM, "out of memory");
	e->be = be;
	if ((rc = check_names(e, rtc, pull, protos)))
		goto err_close;
	be->runtime_class = rtc && rtc[0] ? strdup(rtc) : NULL;
	be->pull_policy = strdup(pull);
	be->protocols = strdup(protos);
	if (!be->pull_policy || !be->protocols || (rtc && rtc[0] && !be->runtime_class)) {
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto err_close;
	}
	if ((rc = read_pod_settings(be, cfg)))
		goto err_close;
	rc = k8s_client_new(&be->kc, cfg);
	if (rc)
		goto err_close;
	/* Reachable, and the credentials are accepted: one clear sentence now rather than a
	 * failing reaper and a failing create later. */
	rc = k8s_request(be->kc, "GET", "/version", NULL, "get", "the server version", 10000, NULL,
			 NULL);
	if (rc)
		goto err_close;
	return 0;
err_close:
	k8s_close(e);
	return rc;
}

/* --- objects ---------------------------------------------------------------------------- */

static cJSON *str_array(const char *const *v)
{
	cJSON *a = cJSON_CreateArray(), *s;

	for (; a && v && *v; v++) {
		if (!(s = cJSON_CreateString(*v))) {
			cJSON_Delete(a);
			return NULL;
		}
		cJSON_AddItemToArray(a, s);
	}
	return a;
}

/* A job label as a label value: [A-Za-z0-9._-], at most 63, alphanumeric at both ends. */
static void label_value(const char *in, char out[64])
{
	size_t o = 0;

	for (; *in && o < 63; in++)
		out[o++] = (strchr("-_.", *in) || (*in >= 'a' && *in <= 'z') ||
			    (*in >= 'A' && *in <= 'Z') || (*in >= '0' && *in <= '9'))
			       ? *in
			       : '_';
	while (o && !((out[o - 1] >= 'a' && out[o - 1] <= 'z') ||
		      (out[o - 1] >= 'A' && out[o - 1] <= 'Z') ||
		      (out[o - 1] >= '0' && out[o - 1] <= '9')))
		o--;
	out[o] = '\0';
	if (o && !((out[0] >= 'a' && out[0] <= 'z') || (out[0] >= 'A' && out[0] <= 'Z') ||
		   (out[0] >= '0' && out[0] <= '9')))
		out[0] = 'x';
}

/* metadata: name, the owner/box/job labels, the creator and raw job annotations. */
static cJSON *metadata(const sbx_engine *e, const sbx_box *b)
{
	cJSON *md = cJSON_CreateObject(), *l, *a;
	char job[64];

	label_value(b->job, job);
	if (!md || !cJSON_AddStringToObject(md, "name", b->name) ||
	    !(l = cJSON_AddObjectToObject(md, "labels")) ||
	    !cJSON_AddStringToObject(l, K8S_LABEL_OWNER, e->owner) ||
	    !cJSON_AddStringToObject(l, K8S_LABEL_BOX, b->name) ||
	    !cJSON_AddStringToObject(l, K8S_LABEL_JOB, job) ||
	    !(a = cJSON_AddObjectToObject(md, "annotations")) ||
	    !cJSON_AddStringToObject(a, K8S_ANN_CREATOR, sbx_creator_self()) ||
	    !cJSON_AddStringToObject(a, K8S_ANN_JOB, b->job)) {
		cJSON_Delete(md);
		return NULL;
	}
	return md;
}

/* Deny all ingress and egress of the box's pod (the CNI must enforce NetworkPolicy). With
 * eg: the box's allow policy NAME-egress instead, egress only (policies add up, so the deny-all
 * one keeps ingress closed): TCP to the proxy's address/32 (or /128) and port, nothing else. */
static cJSON *policy_body(const sbx_engine *e, const sbx_box *b, const sbx_egress *eg)
{
	cJSON *p = cJSON_CreateObject(), *spec, *sel, *ml, *md = metadata(e, b), *rules;
	cJSON *rule, *to, *peer, *ipb, *ports, *port;
	static const char *const types[] = {"Ingress", "Egress", NULL};
	static const char *const egress_only[] = {"Egress", NULL};
	char name[128], cidr[80];
	const char *addr = eg ? be_of(e)->egress_addr : NULL;

	/* A box name (under 96 bytes) and a checked IP address (AUTOPATCH_K8S_EGRESS_ADDRESS): both
	 * fit. */
	snprintf(name, sizeof(name), "%s%s", b->name, eg ? K8S_EGRESS_SUFFIX : "");
	if (addr)
		snprintf(cidr, sizeof(cidr), "%s/%s", addr, strchr(addr, ':') ? "128" : "32");
	if (md)
		cJSON_ReplaceItemInObject(md, "name", cJSON_CreateString(name));
	if (!p || !cJSON_AddStringToObject(p, "apiVersion", "networking.k8s.io/v1") ||
	    !cJSON_AddStringToObject(p, "kind", "NetworkPolicy") ||
	    !cJSON_AddItemToObject(p, "metadata", md) ||
	    !(spec = cJSON_AddObjectToObject(p, "spec")) ||
	    !(sel = cJSON_AddObjectToObject(spec, "podSelector")) ||
	    !(ml = cJSON_AddObjectToObject(sel, "matchLabels")) ||
	    !cJSON_AddStringToObject(ml, K8S_LABEL_BOX, b->name) ||
	    !cJSON_AddItemToObject(spec, "policyTypes", str_array(eg ? egress_only : types)) ||
	    (!eg && !cJSON_AddArrayToObject(spec, "ingress")) ||
	    !(rules = cJSON_AddArrayToObject(spec, "egress")))
		goto err_free;
	if (eg &&
	    (!(rule = cJSON_CreateObject()) || !cJSON_AddItemToArray(rules, rule) ||
	     !(to = cJSON_AddArrayToObject(rule, "to")) || !(peer = cJSON_CreateObject()) ||
	     !cJSON_AddItemToArray(to, peer) || !(ipb = cJSON_AddObjectToObject(peer, "ipBlock")) ||
	     !cJSON_AddStringToObject(ipb, "cidr", cidr) ||
	     !(ports = cJSON_AddArrayToObject(rule, "ports")) || !(port = cJSON_CreateObject()) ||
	     !cJSON_AddItemToArray(ports, port) ||
	     !cJSON_AddStringToObject(port, "protocol", "TCP") ||
	     !cJSON_AddNumberToObject(port, "port", sbx_egress_port(eg))))
		goto err_free;
	return p;
err_free:
	cJSON_Delete(p);
	return NULL;
}

/* The hardening every container of a box pod carries. */
static cJSON *security_context(void)
{
	cJSON *sc = cJSON_CreateObject(), *caps, *sp;
	static const char *const all[] = {"ALL", NULL};

	if (!sc || !cJSON_AddFalseToObject(sc, "allowPrivilegeEscalation") ||
	    !cJSON_AddFalseToObject(sc, "privileged") ||
	    !cJSON_AddTrueToObject(sc, "readOnlyRootFilesystem") ||
	    !cJSON_AddTrueToObject(sc, "runAsNonRoot") ||
	    !cJSON_AddNumberToObject(sc, "runAsUser", 10001) ||
	    !cJSON_AddNumberToObject(sc, "runAsGroup", 10001) ||
	    !(caps = cJSON_AddObjectToObject(sc, "capabilities")) ||
	    !cJSON_AddItemToObject(caps, "drop", str_array(all)) ||
	    !(sp = cJSON_AddObjectToObject(sc, "seccompProfile")) ||
	    !cJSON_AddStringToObject(sp, "type", "RuntimeDefault")) {
		cJSON_Delete(sc);
		return NULL;
	}
	return sc;
}

static bool add_limits(cJSON *ct, int64_t mem, int64_t nano_cpus, int64_t ephemeral)
{
	cJSON *res = cJSON_AddObjectToObject(ct, "resources"), *lim, *req;
	char m[32], c[32], s[32];

	snprintf(m, sizeof(m), "%lld", (long long)mem);
	snprintf(c, sizeof(c), "%lldm", (long long)(nano_cpus / 1000000));
	snprintf(s, sizeof(s), "%lld", (long long)ephemeral);
	/* requests = limits: the box gets exactly what it may use (Guaranteed QoS). */
	return res && (lim = cJSON_AddObjectToObject(res, "limits")) &&
	       cJSON_AddStringToObject(lim, "memory", m) &&
	       cJSON_AddStringToObject(lim, "cpu", c) &&
	       cJSON_AddStringToObject(lim, "ephemeral-storage", s) &&
	       (req = cJSON_AddObjectToObject(res, "requests")) &&
	       cJSON_AddStringToObject(req, "memory", m) &&
	       cJSON_AddStringToObject(req, "cpu", c) &&
	       cJSON_AddStringToObject(req, "ephemeral-storage", s);
}

static bool add_mount(cJSON *mounts, const char *vol, const char *path, bool ro)
{
	cJSON *m = cJSON_CreateObject();

	if (!m || !cJSON_AddStringToObject(m, "name", vol) ||
	    !cJSON_AddStringToObject(m, "mountPath", path) ||
	    (ro && !cJSON_AddTrueToObject(m, "readOnly"))) {
		cJSON_Delete(m);
		return false;
	}
	cJSON_AddItemToArray(mounts, m);
	return true;
}

static bool add_env(cJSON *env, const char *name, const char *value)
{
	cJSON *v = cJSON_CreateObject();

	if (!v || !cJSON_AddStringToObject(v, "name", name) ||
	    !cJSON_AddStringToObject(v, "value", value)) {
		cJSON_Delete(v);
		return false;
	}
	cJSON_AddItemToArray(env, v);
	return true;
}

static bool add_volume(cJSON *vols, const char *name, int64_t size)
{
	cJSON *v = cJSON_CreateObject(), *ed;
	char sz[32];

	snprintf(sz, sizeof(sz), "%lld", (long long)size);
	if (!v || !cJSON_AddStringToObject(v, "name", name) ||
	    !(ed = cJSON_AddObjectToObject(v, "emptyDir")) ||
	    !cJSON_AddStringToObject(ed, "medium", "Memory") ||
	    !cJSON_AddStringToObject(ed, "sizeLimit", sz)) {
		cJSON_Delete(v);
		return false;
	}
	cJSON_AddItemToArray(vols, v);
	return true;
}

/* One container of the pod: the box or the loader. A pod has no init process of its own (no
 * Docker Init): the box's PID 1 is a shell that only waits, which reaps every orphan
 * reparented to it (killed commands leave zombies otherwise, and zombies hold pids). The
 * box's life is the pod's activeDeadlineSeconds. */
static cJSON *container(const struct k8s_backend *be, const sbx_spec *s, bool loader,
			const char *const *extra_env)
{
	cJSON *ct = cJSON_CreateObject(), *env, *mounts;
	/* trap: the kubelet's SIGTERM ends the pod at once (PID 1 ignores it otherwise, and the
	 * grace period passes before SIGKILL). */
	static const char *const reaper[] = {
	    "sh", "-c", "trap 'exit 0' TERM; while :; do sleep 3600 & wait; done", NULL};
	const char *const *cmd = reaper;

	if (!ct || !cJSON_AddStringToObject(ct, "name", loader ? "loader" : "box") ||
	    !cJSON_AddStringToObject(ct, "image", s->image) ||
	    !cJSON_AddStringToObject(ct, "imagePullPolicy", be->pull_policy) ||
	    !cJSON_AddItemToObject(ct, "command", str_array(cmd)) ||
	    !cJSON_AddStringToObject(ct, "workingDir", loader ? "/repo" : "/tmp/workspace") ||
	    !cJSON_AddItemToObject(ct, "securityContext", security_context()) ||
	    !cJSON_AddFalseToObject(ct, "stdin") || !cJSON_AddFalseToObject(ct, "tty") ||
	    !(env = cJSON_AddArrayToObject(ct, "env")) ||
	    !(mounts = cJSON_AddArrayToObject(ct, "volumeMounts")))
		goto err_free;
	/* Nothing from the host's environment: fixed values only. The workspace emptyDir is
	 * owned by root (the kubelet makes it), so git is told the workspace is safe. */
	if (!add_env(env, "HOME", loader ? "/tmp" : "/tmp/workspace") || !add_env(env, "CI", "1") ||
	    !add_env(env, "TMPDIR", "/tmp") || !add_env(env, "LANG", "C.UTF-8") ||
	    !add_env(env, "PIP_BREAK_SYSTEM_PACKAGES", "1") ||
	    !add_env(env, "GIT_CONFIG_COUNT", "1") ||
	    !add_env(env, "GIT_CONFIG_KEY_0", "safe.directory") ||
	    !add_env(env, "GIT_CONFIG_VALUE_0", "/tmp/workspace"))
		goto err_free;
	/* The box's proxy variables ("NAME=value"): the loader never gets network. */
	for (const char *const *x = loader ? NULL : extra_env; x && *x; x++) {
		const char *eq = strchr(*x, '=');
		char name[64];

		if (!eq || (size_t)(eq - *x) >= sizeof(name))
			goto err_free;
		snprintf(name, sizeof(name), "%.*s", (int)(eq - *x), *x);
		if (!add_env(env, name, eq + 1))
			goto err_free;
	}
	if (loader) {
		if (!add_limits(ct, s->workspace_bytes + K8S_LOADER_MEM, 500000000, 64LL << 20) ||
		    !add_mount(mounts, "repo", "/repo", false))
			goto err_free;
	} else {
		if (!add_limits(ct, s->memory_bytes, s->nano_cpus, be->ephemeral) ||
		    !add_mount(mounts, "tmp", "/tmp", false) ||
		    !add_mount(mounts, "workspace", "/tmp/workspace", false) ||
		    !add_mount(mounts, "trees", "/tmp/trees", false) ||
		    !add_mount(mounts, "repo", "/repo", true))
			goto err_free;
	}
	return ct;
err_free:
	cJSON_Delete(ct);
	return NULL;
}

int sbx__k8s_pod_body(const sbx_engine *e, const sbx_spec *s, const sbx_box *b, bool pool,
		      const char *const *extra_env, cJSON **out);

/* The Pod for a resolved spec: every hardening rule is set here and only here. extra_env:
 * "NAME=value" entries for the box container (the proxy variables), or NULL. */
int sbx__k8s_pod_body(const sbx_engine *e, const sbx_spec *s, const sbx_box *b, bool pool,
		      const char *const *extra_env, cJSON **out)
{
	const struct k8s_backend *be = be_of(e);
	cJSON *p = cJSON_CreateObject(), *spec, *psc, *sp, *arr, *obj;

	*out = NULL;
	if (!p || !cJSON_AddStringToObject(p, "apiVersion", "v1") ||
	    !cJSON_AddStringToObject(p, "kind", "Pod") ||
	    !cJSON_AddItemToObject(p, "metadata", metadata(e, b)) ||
	    !(spec = cJSON_AddObjectToObject(p, "spec")) ||
	    !cJSON_AddStringToObject(spec, "restartPolicy", "Never") ||
	    !cJSON_AddFalseToObject(spec, "automountServiceAccountToken") ||
	    !cJSON_AddFalseToObject(spec, "enableServiceLinks") ||
	    !cJSON_AddFalseToObject(spec, "hostNetwork") ||
	    !cJSON_AddFalseToObject(spec, "hostPID") || !cJSON_AddFalseToObject(spec, "hostIPC") ||
	    !cJSON_AddFalseToObject(spec, "shareProcessNamespace") ||
	    !cJSON_AddNumberToObject(spec, "terminationGracePeriodSeconds", K8S_GRACE_SECONDS) ||
	    !(psc = cJSON_AddObjectToObject(spec, "securityContext")) ||
	    !cJSON_AddTrueToObject(psc, "runAsNonRoot") ||
	    !cJSON_AddNumberToObject(psc, "runAsUser", 10001) ||
	    !cJSON_AddNumberToObject(psc, "runAsGroup", 10001) ||
	    !cJSON_AddNumberToObject(psc, "fsGroup", 10001) ||
	    !(sp = cJSON_AddObjectToObject(psc, "seccompProfile")) ||
	    !cJSON_AddStringToObject(sp, "type", "RuntimeDefault"))
		goto err_nomem;
	/* The wall limit: the kubelet kills the pod even if autopatch died (pool pods wait
	 * unclaimed for an unknown time; their PID 1 sleeps forever, like Docker's). */
	if (!pool && !cJSON_AddNumberToObject(spec, "activeDeadlineSeconds", s->wall_seconds + 30))
		goto err_nomem;
	if (be->runtime_class &&
	    !cJSON_AddStringToObject(spec, "runtimeClassName", be->runtime_class))
		goto err_nomem;
	if (be->n_nodesel) {
		if (!(obj = cJSON_AddObjectToObject(spec, "nodeSelector")))
			goto err_nomem;
		for (int i = 0; i < be->n_nodesel; i++)
			if (!cJSON_AddStringToObject(obj, be->nodesel[i].key, be->nodesel[i].value))
				goto err_nomem;
	}
	if (be->n_tolerations) {
		if (!(arr = cJSON_AddArrayToObject(spec, "tolerations")))
			goto err_nomem;
		for (int i = 0; i < be->n_tolerations; i++) {
			const struct k8s_kv *t = &be->tolerations[i];

			if (!(obj = cJSON_CreateObject()))
				goto err_nomem;
			cJSON_AddItemToArray(arr, obj);
			if (!cJSON_AddStringToObject(obj, "key", t->key) ||
			    !cJSON_AddStringToObject(obj, "operator",
						     t->value ? "Equal" : "Exists") ||
			    (t->value && !cJSON_AddStringToObject(obj, "value", t->value)) ||
			    !cJSON_AddStringToObject(obj, "effect", t->effect))
				goto err_nomem;
		}
	}
	if (!(arr = cJSON_AddArrayToObject(spec, "containers")) ||
	    !cJSON_AddItemToArray(arr, container(be, s, false, extra_env)) ||
	    !cJSON_AddItemToArray(arr, container(be, s, true, NULL)) ||
	    cJSON_GetArraySize(arr) != 2 || !(arr = cJSON_AddArrayToObject(spec, "volumes")) ||
	    !add_volume(arr, "tmp", s->tmp_bytes) ||
	    !add_volume(arr, "workspace", s->workspace_bytes) ||
	    !add_volume(arr, "trees", s->trees_bytes > 0 ? s->trees_bytes : 2LL << 30) ||
	    !add_volume(arr, "repo", s->workspace_bytes))
		goto err_nomem;
	*out = p;
	return 0;
err_nomem:
	cJSON_Delete(p);
	return ap_error_set(AP_ENOMEM, "out of memory building a pod spec");
}

/* --- create / remove -------------------------------------------------------------------- */

/* API paths: a checked namespace (at most 63 bytes), a box name (under 96) and this file's
 * own words: with the query strings added by the callers they fit the 512-byte buffers used
 * throughout this file, so these snprintf calls are not checked. */
static void pods_path(const sbx_engine *e, char *out, size_t len, const char *name, const char *sub)
{
	snprintf(out, len, "/api/v1/namespaces/%s/pods%s%s%s%s", k8s_namespace(be_of(e)->kc),
		 name ? "/" : "", name ? name : "", sub ? "/" : "", sub ? sub : "");
}

static void policies_path(const sbx_engine *e, char *out, size_t len, const char *name)
{
	snprintf(out, len, "/apis/networking.k8s.io/v1/namespaces/%s/networkpolicies%s%s",
		 k8s_namespace(be_of(e)->kc), name ? "/" : "", name ? name : "");
}

/* Delete the pod with its grace period; a pod already gone counts as done. The object stays
 * (with a deletionTimestamp) until the kubelet has stopped its containers: wait_pod_gone(). */
static int delete_pod(sbx_engine *e, const char *name)
{
	char path[512];
	int rc;

	pods_path(e, path, sizeof(path), name, NULL);
	snprintf(path + strlen(path), sizeof(path) - strlen(path), "?gracePeriodSeconds=%d",
		 K8S_GRACE_SECONDS);
	rc = k8s_request(be_of(e)->kc, "DELETE", path, NULL, "delete", "pods", K8S_API_TIMEOUT,
			 NULL, NULL);
	return rc == AP_ENOTFOUND ? 0 : rc;
}

static int delete_policy(sbx_engine *e, const char *name)
{
	char path[512];
	int rc;

	policies_path(e, path, sizeof(path), name);
	rc = k8s_request(be_of(e)->kc, "DELETE", path, NULL, "delete", "networkpolicies",
			 K8S_API_TIMEOUT, NULL, NULL);
	return rc == AP_ENOTFOUND ? 0 : rc;
}

static const char *jstr(const cJSON *o, const char *a, const char *b)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);

	if (b)
		v = cJSON_GetObjectItemCaseSensitive(v, b);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Wait until the API server no longer has the pod object: after a graceful delete it removes
 * it only once the kubelet reports the containers stopped, so "gone" means nothing of the box
 * runs any more. 0 when gone; AP_ETIMEOUT when it is still there at until_ms; or the error of
 * asking (the caller then assumes it still runs). */
static int wait_pod_gone(sbx_engine *e, const char *name, long long until_ms)
{
	char path[512];
	useconds_t nap = 20000;
	int rc;

	pods_path(e, path, sizeof(path), name, NULL);
	for (;;) {
		rc = k8s_request(be_of(e)->kc, "GET", path, NULL, "get", "pods", K8S_API_TIMEOUT,
				 NULL, NULL);
		if (rc == AP_ENOTFOUND) {
			ap_error_clear();
			return 0;
		}
		if (rc)
			return rc;
		if (ap_mono_ms() >= until_ms)
			return ap_error_set(AP_ETIMEOUT, "the pod %s is still terminating", name);
		usleep(nap);
		if (nap < 400000)
			nap *= 2;
	}
}

/* Why the pod cannot start (a waiting reason that will not pass), or NULL. */
static const char *stuck(const cJSON *pod, const char **msg)
{
	static const char *const fatal[] = {"ErrImagePull",	    "ImagePullBackOff",
					    "ErrImageNeverPull",    "InvalidImageName",
					    "CreateContainerError", "CreateContainerConfigError",
					    "RunContainerError",    NULL};
	const cJSON *cs;

	cJSON_ArrayForEach (
	    cs, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "status"),
						 "containerStatuses")) {
		const cJSON *w = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(cs, "state"), "waiting");
		const char *reason = jstr(w, "reason", NULL);

		for (const char *const *f = fatal; reason && *f; f++)
			if (strcmp(reason, *f) == 0) {
				*msg = jstr(w, "message", NULL);
				return reason;
			}
	}
	return NULL;
}

/* The name of a container of the pod that has terminated (restartPolicy Never: for good), or
 * NULL. The pod stays Running while another container runs. */
static const char *terminated(const cJSON *pod)
{
	const cJSON *cs;

	cJSON_ArrayForEach (
	    cs, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "status"),
						 "containerStatuses")) {
		if (cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cs, "state"),
						     "terminated"))
			return jstr(cs, "name", NULL) ? jstr(cs, "name", NULL) : "?";
	}
	return NULL;
}

/* Whether every container of the pod runs. */
static bool all_running(const cJSON *pod)
{
	const cJSON *cs, *list = cJSON_GetObjectItemCaseSensitive(
			     cJSON_GetObjectItemCaseSensitive(pod, "status"), "containerStatuses");
	int n = 0;

	cJSON_ArrayForEach (cs, list) {
		if (!cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cs, "state"),
						      "running"))
			return false;
		n++;
	}
	return n == 2;
}

/* The box container's last log lines, for a sentence about a pod that failed (best effort). */
static void log_tail(sbx_engine *e, const char *name, char *out, size_t len)
{
	ap_buf text = AP_BUF_INIT(4096);
	char path[512];

	out[0] = '\0';
	pods_path(e, path, sizeof(path), name, "log");
	strcat(path, "?container=box&tailLines=3");
	if (k8s_request_text(be_of(e)->kc, path, "get", "pods/log", 5000, &text) == 0 && text.len) {
		/* An excerpt by design: at most 200 bytes of the tail (callers give 256). */
		snprintf(out, len, "; its last output: %.*s",
			 (int)(text.len > 200 ? 200 : text.len), text.data);
		for (char *p = out; *p; p++)
			if (*p == '\n' || *p == '\r')
				*p = ' ';
	}
	ap_error_clear();
	ap_buf_release(&text);
}

/* Wait until the pod runs, fails, or start_seconds pass. */
static int wait_running(sbx_engine *e, const char *name, const char *image, char *ip, size_t ipn)
{
	const struct k8s_backend *be = be_of(e);
	long long until = ap_mono_ms() + (long long)be->start_seconds * 1000;
	useconds_t nap = 10000;
	char path[512], tail[256];
	cJSON *pod = NULL;
	const char *phase, *reason, *msg = NULL;
	int rc;

	pods_path(e, path, sizeof(path), name, NULL);
	for (;;) {
		rc = k8s_request(be->kc, "GET", path, NULL, "get", "pods", K8S_API_TIMEOUT, NULL,
				 &pod);
		if (rc)
			return rc;
		phase = jstr(pod, "status", "phase");
		if (phase && strcmp(phase, "Running") == 0 && all_running(pod)) {
			const char *pip = jstr(pod, "status", "podIP");

			/* A cut address would point the egress policy at another pod. */
			rc = ip ? ap_fmt(ip, ipn, "%s", pip ? pip : "") : 0;
			cJSON_Delete(pod);
			return rc;
		}
		if ((reason = stuck(pod, &msg))) {
			rc = ap_error_set(AP_ENOTFOUND,
					  "the box pod %s cannot start: %s: %.300s (image %.200s; "
					  "autopatch does not build it: see docs/kubernetes.md)",
					  name, reason, msg ? msg : "", image);
			cJSON_Delete(pod);
			return rc;
		}
		if ((reason = terminated(pod)) && !(phase && strcmp(phase, "Failed") == 0)) {
			log_tail(e, name, tail, sizeof(tail));
			rc = ap_error_set(AP_EIO,
					  "the box pod %s stopped while starting: container %.40s "
					  "terminated%s",
					  name, reason, tail);
			cJSON_Delete(pod);
			return rc;
		}
		if (phase && (strcmp(phase, "Failed") == 0 || strcmp(phase, "Succeeded") == 0)) {
			log_tail(e, name, tail, sizeof(tail));
			rc = ap_error_set(
			    AP_EIO, "the box pod %s stopped while starting: %.60s %.200s%s", name,
			    jstr(pod, "status", "reason") ? jstr(pod, "status", "reason") : phase,
			    jstr(pod, "status", "message") ? jstr(pod, "status", "message") : "",
			    tail);
			cJSON_Delete(pod);
			return rc;
		}
		cJSON_Delete(pod);
		pod = NULL;
		if (ap_mono_ms() > until)
			return ap_error_set(AP_ETIMEOUT,
					    "the box pod %s did not start within %d s "
					    "(AUTOPATCH_K8S_START_SECONDS): phase %.40s",
					    name, be->start_seconds, phase ? phase : "unknown");
		usleep(nap);
		if (nap < 200000)
			nap *= 2;
	}
}

static int create_policy(sbx_engine *e, const sbx_box *b, const sbx_egress *eg)
{
	cJSON *body = policy_body(e, b, eg);
	char path[512];
	int rc;

	if (!body)
		return ap_error_set(AP_ENOMEM, "out of memory building a NetworkPolicy");
	policies_path(e, path, sizeof(path), NULL);
	strcat(path, K8S_STRICT);
	rc = k8s_request(be_of(e)->kc, "POST", path, body, "create", "networkpolicies",
			 K8S_API_TIMEOUT, NULL, NULL);
	cJSON_Delete(body);
	return rc;
}

static int delete_allow_policy(sbx_engine *e, const sbx_box *b)
{
	char name[128];

	snprintf(name, sizeof(name), "%s" K8S_EGRESS_SUFFIX, b->name);
	return delete_policy(e, name);
}

/* An allow-list box: the proxy's socket first (its port goes into the policy and the pod). */
static int egress_listen(sbx_engine *e, const sbx_spec *s, const sbx_box *b, sbx_egress **out)
{
	struct k8s_backend *be = be_of(e);
	char log_path[PATH_MAX];

	*out = NULL;
	if (!be->egress_addr)
		return ap_error_set(
		    AP_EINVAL,
		    "a sandbox with an egress allow-list (the setup phase's `network:` in "
		    ".github/autopatch.yml, or `autopatch sandbox run --allow`) cannot run on the "
		    "kubernetes backend without AUTOPATCH_K8S_EGRESS_ADDRESS (the address box "
		    "pods reach this replica's egress proxy at; otherwise its pods have no network "
		    "at all): set it, remove `network:` (and `agent_network:`) so setup runs "
		    "offline, or run such jobs with AUTOPATCH_SANDBOX_BACKEND=docker "
		    "(docs/kubernetes.md, \"Network\")");
	if (snprintf(log_path, sizeof(log_path), "%s/%s-egress.log", e->data_dir, b->name) >=
	    (int)sizeof(log_path))
		return ap_error_set(AP_EINVAL, "egress log path too long");
	if (fs_mkdir_p(e->data_dir, 0700) < 0)
		return ap_error_set(AP_EIO, "cannot make %s: %s", e->data_dir, strerror(errno));
	return sbx_egress_local_listen(&be->egress, b->job, be->egress_addr, s->allow, log_path,
				       out);
}

/* Remove a box's objects in the order that never leaves a running container without its
 * deny-all policy: the allow policy and the proxy first (less access is always safe), the pod
 * (gracefully), and only once the API server no longer has the pod object, the deny-all
 * policy. A pod still there after remove_seconds keeps its policy; the reaper deletes the policy
 * once the pod is gone. Each failure is logged; the first is returned. */
static int teardown(sbx_engine *e, sbx_box *b, sbx_egress *eg)
{
	const struct k8s_backend *be = be_of(e);
	int rc = 0, r;

	if (eg) {
		r = delete_allow_policy(e, b);
		if (r) {
			ap_err("sandbox: could not delete NetworkPolicy %s" K8S_EGRESS_SUFFIX
			       " (%s); the reaper will retry",
			       b->name, ap_error_last());
			rc = r;
		}
		sbx_egress_down(eg);
	}
	r = delete_pod(e, b->name);
	if (!r)
		r = wait_pod_gone(e, b->name, ap_mono_ms() + be->remove_seconds * 1000LL);
	if (r == AP_ETIMEOUT) {
		/* Deleted, not yet stopped (a slow or unreachable node): nothing failed, the
		 * policy is kept on purpose. */
		ap_warn("sandbox: pod %s is still terminating after %d s "
			"(AUTOPATCH_K8S_REMOVE_SECONDS); its deny-all NetworkPolicy stays until "
			"the reaper finds the pod gone",
			b->name, be->remove_seconds);
		return rc;
	}
	if (r) {
		ap_err("sandbox: pod %s may still run (%s); its deny-all NetworkPolicy stays until "
		       "the reaper finds the pod gone",
		       b->name, ap_error_last());
		return rc ? rc : r;
	}
	r = delete_policy(e, b->name);
	if (r)
		ap_err("sandbox: could not delete NetworkPolicy %s (%s); the reaper will retry",
		       b->name, ap_error_last());
	return rc ? rc : r;
}

static int k8s_create(sbx_engine *e, const sbx_spec *s, sbx_box *b, bool pool)
{
	struct k8s_backend *be = be_of(e);
	cJSON *body = NULL;
	sbx_egress *eg = NULL;
	char path[512], why[AP_ERROR_MSG_MAX], ip[64] = "";
	int rc;

	/* Fail closed: an allow-list only with a proxy this replica runs. */
	if (s->network == SBX_NET_ALLOWLIST && (rc = egress_listen(e, s, b, &eg)))
		return rc;
	/* A box name is at most 63 bytes (10 + a 40-byte owner + 13): nothing is cut. */
	snprintf(b->id, sizeof(b->id), "%.79s", b->name);
	/* The policies first: the pod never runs a moment without them. */
	rc = create_policy(e, b, NULL);
	if (rc)
		goto err_remove; /* a timed-out create may still have happened */
	if (eg && (rc = create_policy(e, b, eg)))
		goto err_remove;
	rc = sbx__k8s_pod_body(e, s, b, pool, eg ? sbx_egress_env(eg) : NULL, &body);
	if (rc)
		goto err_remove;
	pods_path(e, path, sizeof(path), NULL, NULL);
	strcat(path, K8S_STRICT);
	rc = k8s_request(be->kc, "POST", path, body, "create", "pods", K8S_API_TIMEOUT, NULL, NULL);
	cJSON_Delete(body);
	if (rc)
		goto err_remove;
	rc = wait_running(e, b->name, s->image, ip, sizeof(ip));
	if (rc)
		goto err_remove;
	if (eg) {
		unsigned char bin[16];

		/* The proxy serves the pod's address alone. */
		if (inet_pton(AF_INET, ip, bin) != 1 && inet_pton(AF_INET6, ip, bin) != 1) {
			rc = ap_error_set(AP_EIO,
					  "the box pod %s runs but has no pod IP (\"%.60s\") for "
					  "its egress proxy to serve",
					  b->name, ip);
			goto err_remove;
		}
		if ((rc = sbx_egress_local_start(eg, &be->egress, ip, s->allow)))
			goto err_remove;
		b->impl = eg;
	}
	return 0;
err_remove:
	snprintf(why, sizeof(why), "%s", ap_error_last());
	teardown(e, b, eg);
	ap_error_set(rc, "%s", why);
	return rc;
}

static int k8s_remove(sbx_box *b)
{
	sbx_egress *eg = box_eg(b);

	b->impl = NULL;
	return teardown(b->e, b, eg);
}

static int k8s_kill(sbx_box *b)
{
	return delete_pod(b->e, b->name);
}

static bool k8s_running(sbx_box *b)
{
	char path[512];
	cJSON *pod = NULL;
	const char *phase;
	bool alive = true;
	int rc;

	char kept[AP_ERROR_MSG_MAX];

	/* A look that must not change the caller's error sentence. */
	snprintf(kept, sizeof(kept), "%s", ap_error_last());
	pods_path(b->e, path, sizeof(path), b->name, NULL);
	rc = k8s_request(be_of(b->e)->kc, "GET", path, NULL, "get", "pods", 10000, NULL, &pod);
	if (rc == AP_ENOTFOUND)
		alive = false;
	phase = jstr(pod, "status", "phase");
	/* A pod being deleted is no box to run commands in any more. */
	if (!rc && (!phase || strcmp(phase, "Running") != 0 || !all_running(pod) ||
		    jstr(pod, "metadata", "deletionTimestamp")))
		alive = false;
	ap_error_set(0, "%s", kept);
	cJSON_Delete(pod);
	return alive;
}

/* --- exec ------------------------------------------------------------------------------- */

struct k8s_run_ctx {
	sbx_box *b;
	sbx_exec_io *io;
};

static bool run_alive(void *ud)
{
	return k8s_running(((struct k8s_run_ctx *)ud)->b);
}

static void run_idle(void *ud)
{
	sbx__io_nudge(((struct k8s_run_ctx *)ud)->io);
}

static void run_out(void *ud, int stream, const char *p, size_t n)
{
	sbx__io_payload(((struct k8s_run_ctx *)ud)->io, stream, p, n);
}

/* The exec path: container, streams and the command as repeated command= parameters. */
static int exec_path(sbx_box *b, const char *container, const char *const *argv, bool in,
		     ap_buf *out)
{
	char base[512];
	int rc;

	pods_path(b->e, base, sizeof(base), b->name, "exec");
	rc = ap_buf_addf(out, "%s?container=%s&stdout=true&stderr=true&stdin=%s", base, container,
			 in ? "true" : "false");
	for (const char *const *a = argv; !rc && *a; a++) {
		char *esc = k8s_escape(*a);

		if (!esc)
			return ap_error_set(AP_ENOMEM, "out of memory");
		rc = ap_buf_addf(out, "&command=%s", esc);
		free(esc);
	}
	if (rc == AP_ETOOBIG)
		return ap_error_set(AP_ETOOBIG, "the command line is too long for an exec request");
	return rc;
}

/* What an exec writes to the command's stdin: bytes, or a reader (fn, v5 only). */
struct k8s_stdin {
	const void *data;
	size_t len;
	sbx_input_fn fn;
	void *ud;
};

/* Run argv (already complete) in one container of the box; in: NULL for no stdin. */
static int exec_raw(sbx_box *b, const char *container, const char *const *argv,
		    const struct k8s_stdin *in, long long deadline,
		    const volatile sig_atomic_t *cancel, sbx_exec_io *io, int *code)
{
	struct k8s_backend *be = be_of(b->e);
	struct k8s_run_ctx ctx = {b, io};
	ap_buf path = AP_BUF_INIT(K8S_EXEC_PATH_MAX - 4096);
	k8s_endpoint ep;
	k8s_exec_req r;
	char tok[16384], proto[24], why[AP_ERROR_MSG_MAX];
	long http = 0;
	int rc;

	rc = exec_path(b, container, argv, in && (in->data || in->fn), &path);
	if (rc)
		goto out_release;
	rc = k8s_endpoint_get(be->kc, &ep, tok, sizeof(tok));
	if (rc)
		goto out_release;
	r = (k8s_exec_req){.path = ap_buf_str(&path),
			   .protocols = be->protocols,
			   .stdin_data = in ? in->data : NULL,
			   .stdin_len = in ? in->len : 0,
			   .stdin_fn = in ? in->fn : NULL,
			   .stdin_ud = in ? in->ud : NULL,
			   .deadline_ms = deadline,
			   .cancel = cancel,
			   .out_fn = run_out,
			   .idle_fn = run_idle,
			   .alive_fn = run_alive,
			   .ud = &ctx};
	rc = k8s_exec_run(&ep, &r, code, proto, &http);
	if (rc == K8S_EXEC_DIED)
		rc = SBX_BOX_DIED;
	if (!rc)
		atomic_store(&be->proto, strcmp(proto, K8S_PROTO_V5) == 0 ? 5 : 4);
	if (!rc)
		ap_debug("k8s exec: subprotocol \"%s\"", proto);
	if (rc == AP_EDENIED || rc == AP_ENOTFOUND || rc == AP_EHTTP) {
		/* The upgrade's answer body is not available: ask again without the upgrade (GET,
		 * as the upgrade) for the API's own Status message (permission, missing pod, a
		 * pod that cannot take an exec, an admission refusal). A 400 that only says an
		 * upgrade is required tells nothing: the upgrade's own sentence stays. */
		long again = 0;
		int rrc;

		snprintf(why, sizeof(why), "%s", ap_error_last());
		rrc = k8s_request(be->kc, "GET", ap_buf_str(&path), NULL, "create", "pods/exec",
				  10000, &again, NULL);
		if (rrc == 0 || again != http ||
		    (http != 400 && http != 403 && http != 401 && http != 404) ||
		    (http == 400 && strstr(ap_error_last(), "Upgrade request required")))
			ap_error_set(rc, "kubernetes create pods/exec in namespace %s: %s",
				     k8s_namespace(be->kc), why);
	}
out_release:
	memset(tok, 0, sizeof(tok));
	ap_buf_release(&path);
	return rc;
}

static void discard(void *ud, const char *p, size_t n)
{
	(void)ud;
	(void)p;
	(void)n;
}

/* Which exec protocol the server speaks, known after the first exec: when it is not known
 * yet, run `true` in the box once to learn it. */
static int learn_protocol(sbx_box *b)
{
	static const char *const argv[] = {"true", NULL};
	sbx_exec_io io = {0};
	int code = -1, rc;

	if (atomic_load(&be_of(b->e)->proto) != 0)
		return 0;
	io.out = (struct sbx_exec_stream){&io, SBX_STREAM_STDOUT, SBX_CAPTURE_INIT(64), NULL};
	io.err = (struct sbx_exec_stream){&io, SBX_STREAM_STDERR, SBX_CAPTURE_INIT(64), NULL};
	if ((rc = redact_stream_new(&io.out.rs, discard, NULL)) ||
	    (rc = redact_stream_new(&io.err.rs, discard, NULL)))
		goto out_free;
	rc = exec_raw(b, "box", argv, NULL, ap_mono_ms() + 30000, NULL, &io, &code);
	if (rc == SBX_BOX_DIED)
		rc = ap_error_set(AP_EIO, "the box pod %s stopped", b->name);
out_free:
	redact_stream_free(io.out.rs);
	redact_stream_free(io.err.rs);
	return rc;
}

/* libwebsockets 4.1 writes the request line into 2048 bytes and cuts what is longer, so an
 * argv whose exec path would pass K8S_URI_MAX goes in a file of the box first: a `set --` line
 * of single-quoted words (sent on stdin, exactly its length read), which a short fixed script
 * sources, removes and execs; exit status, stdin and deadlines are the command's own. */
#define K8S_URI_MAX 1800

static int stash_argv(sbx_box *b, const char *const *argv, long long deadline,
		      const volatile sig_atomic_t *cancel, char file[64])
{
	static atomic_uint seq;
	ap_buf text = AP_BUF_INIT(K8S_EXEC_PATH_MAX);
	struct k8s_stdin in = {NULL, 0, NULL, NULL};
	sbx_exec_io io = {0};
	char len[32];
	const char *put[] = {
	    "sh", "-c", "umask 077 && mkdir -p /tmp/.ap-argv && head -c \"$1\" > \"$0\"",
	    file, len,	NULL};
	int code = -1, rc;

	snprintf(file, 64, "/tmp/.ap-argv/%lld-%u", (long long)ap_mono_ms(),
		 atomic_fetch_add(&seq, 1));
	rc = ap_buf_addf(&text, "set --");
	for (const char *const *a = argv; !rc && *a; a++) {
		rc = ap_buf_addf(&text, " '");
		for (const char *c = *a; !rc && *c; c++)
			rc = *c == '\'' ? ap_buf_addf(&text, "'\\''") : ap_buf_add(&text, c, 1);
		if (!rc)
			rc = ap_buf_addf(&text, "'");
	}
	if (!rc)
		rc = ap_buf_addf(&text, "\n");
	if (rc) {
		rc = ap_error_set(AP_ETOOBIG, "the command line is too long for an exec request");
		goto out_release;
	}
	snprintf(len, sizeof(len), "%zu", text.len);
	in.data = text.data;
	in.len = text.len;
	io.out = (struct sbx_exec_stream){&io, SBX_STREAM_STDOUT, SBX_CAPTURE_INIT(64), NULL};
	io.err = (struct sbx_exec_stream){&io, SBX_STREAM_STDERR, SBX_CAPTURE_INIT(64), NULL};
	if ((rc = redact_stream_new(&io.out.rs, discard, NULL)) ||
	    (rc = redact_stream_new(&io.err.rs, discard, NULL)))
		goto out_release;
	rc = exec_raw(b, "box", put, &in, deadline, cancel, &io, &code);
	if (rc == SBX_BOX_DIED)
		rc = ap_error_set(AP_EIO, "the box pod %s stopped", b->name);
	else if (!rc && code != 0)
		rc = ap_error_set(
		    AP_EIO, "could not pass a long command line into the box (exit %d)", code);
out_release:
	redact_stream_free(io.out.rs);
	redact_stream_free(io.err.rs);
	ap_buf_release(&text);
	return rc;
}

/* A stdin of unknown length (cmd->stdin_fn) into in: only the v5 exec protocol can say
 * where it ends, so a server that speaks v4 refuses it. */
static int stdin_stream(sbx_box *b, const sbx_cmd *cmd, struct k8s_stdin *in)
{
	struct k8s_backend *be = be_of(b->e);
	int rc;

	if (cmd->stdin_data || !cmd->stdin_fn)
		return 0;
	rc = learn_protocol(b);
	if (rc)
		return rc;
	if (atomic_load(&be->proto) != 5)
		return ap_error_set(
		    AP_EINVAL,
		    "streaming stdin into a pod needs the v5.channel.k8s.io exec protocol "
		    "(Kubernetes 1.30 or later), and the API server chose v4: upgrade the "
		    "cluster or offer %s in AUTOPATCH_K8S_PROTOCOLS",
		    K8S_PROTO_V5);
	in->fn = cmd->stdin_fn;
	in->ud = cmd->stdin_ud;
	return 0;
}

static int k8s_run(sbx_box *b, const sbx_cmd *cmd, int seconds, long long deadline, sbx_exec_io *io,
		   int *code)
{
	struct k8s_backend *be = be_of(b->e);
	const char *wrap[16], **argv;
	char secs[24], nofile[48], fsize[48], len[32];
	size_t n = 0, argc = 0;
	struct k8s_stdin in = {cmd->stdin_data, cmd->stdin_len, NULL, NULL};
	ap_buf path = AP_BUF_INIT(K8S_EXEC_PATH_MAX - 4096);
	char file[64];
	bool bound_stdin;
	int rc;

	if (box_eg(b) && !b->sweeping)
		sbx_egress_set_command(box_eg(b), b->phase, cmd->argv);
	if ((rc = stdin_stream(b, cmd, &in)))
		return rc;

	for (const char *const *a = cmd->argv; *a; a++)
		argc++;
	/* The exec API has no working directory or rlimits: env -C and prlimit set them (the
	 * Docker backend's WorkingDir and Ulimits); timeout -s KILL is the inside deadline. */
	snprintf(secs, sizeof(secs), "%d", seconds);
	snprintf(nofile, sizeof(nofile), "--nofile=%lld:%lld", (long long)b->e->defaults.nofile,
		 (long long)b->e->defaults.nofile);
	snprintf(fsize, sizeof(fsize), "--fsize=%lld:%lld", (long long)b->e->defaults.fsize_bytes,
		 (long long)b->e->defaults.fsize_bytes);
	wrap[n++] = "env";
	wrap[n++] = "-C";
	wrap[n++] = cmd->workdir ? cmd->workdir : "/tmp/workspace";
	wrap[n++] = "prlimit";
	wrap[n++] = nofile;
	wrap[n++] = fsize;
	wrap[n++] = "--core=0:0";
	wrap[n++] = "--";
	wrap[n++] = "timeout";
	wrap[n++] = "-s";
	wrap[n++] = "KILL";
	wrap[n++] = secs;
	/* v4 cannot half-close stdin: unless the server is known to speak v5, the command reads
	 * exactly stdin_len bytes through head -c, so it sees EOF either way. A fixed script;
	 * the command stays an argv ("$@"). */
	bound_stdin = cmd->stdin_data && atomic_load(&be->proto) != 5;
	if (bound_stdin) {
		snprintf(len, sizeof(len), "%zu", cmd->stdin_len);
		wrap[n++] = "sh";
		wrap[n++] = "-c";
		wrap[n++] = "head -c \"$0\" | \"$@\"";
		wrap[n++] = len;
	}
	argv = calloc(n + argc + 1, sizeof(*argv));
	if (!argv)
		return ap_error_set(AP_ENOMEM, "out of memory");
	memcpy(argv, wrap, n * sizeof(*argv));
	memcpy(argv + n, cmd->argv, argc * sizeof(*argv));
	rc = exec_path(b, "box", (const char *const *)argv, false, &path);
	if (!rc && path.len > K8S_URI_MAX) {
		const char *run[] = {"sh", "-c", ". \"$0\" && rm -f \"$0\" && exec \"$@\"", file,
				     NULL};

		rc = stash_argv(b, (const char *const *)argv, deadline, cmd->cancel, file);
		if (!rc)
			rc = exec_raw(b, "box", run, in.data || in.fn ? &in : NULL, deadline,
				      cmd->cancel, io, code);
	} else if (!rc) {
		rc = exec_raw(b, "box", (const char *const *)argv, in.data || in.fn ? &in : NULL,
			      deadline, cmd->cancel, io, code);
	}
	ap_buf_release(&path);
	free(argv);
	if (box_eg(b) && sbx_egress_drain_log(box_eg(b)) < 0)
		ap_warn("sandbox: egress log: %s", ap_error_last());
	return rc;
}

/* --- prepare: the repository as a tar over the loader's stdin --------------------------- */

/* tar of dir's entries (owner and group 10001, links kept as links), at most cap bytes.
 * The entries are named one by one, not ".": /repo itself belongs to the kubelet and its
 * mode cannot be set. An empty dir gives an empty out. */
/* Read tar's output from fd to its end into out; over cap bytes is an error (the rest is
 * still read, so tar can finish). */
static int read_tar(int fd, int64_t cap, ap_buf *out)
{
	char buf[65536];
	ssize_t got;
	int rc = 0;

	for (;;) {
		got = read(fd, buf, sizeof(buf));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		if (!rc && (int64_t)(out->len + (size_t)got) > cap)
			rc = ap_error_set(AP_ETOOBIG,
					  "the repository is larger than the box's workspace "
					  "(AUTOPATCH_SANDBOX_WORKSPACE_SIZE)");
		if (!rc)
			rc = ap_buf_add(out, buf, (size_t)got);
	}
	return rc;
}

static int tar_dir(const char *dir, int64_t cap, ap_buf *out)
{
	static const char *const head[] = {
	    "tar",	     "-C", NULL, "-cf", "-", "--numeric-owner", "--owner=10001",
	    "--group=10001", "--"};
	size_t nhead = sizeof(head) / sizeof(head[0]), n = nhead, max = nhead + 64;
	char **argv = calloc(max + 1, sizeof(*argv)), **grown;
	struct dirent *de;
	DIR *d;
	posix_spawn_file_actions_t fa;
	int pipefd[2], status = 0, rc = 0;
	pid_t pid;

	if (!argv)
		return ap_error_set(AP_ENOMEM, "out of memory");
	memcpy(argv, head, sizeof(head));
	argv[2] = (char *)dir;
	d = opendir(dir);
	if (!d) {
		free(argv);
		return ap_error_set(AP_EIO, "cannot read the repository dir: %s", strerror(errno));
	}
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (n == max) {
			max *= 2;
			grown = realloc(argv, (max + 1) * sizeof(*argv));
			if (!grown) {
				rc = ap_error_set(AP_ENOMEM, "out of memory");
				break;
			}
			argv = grown;
		}
		if (!(argv[n] = strdup(de->d_name))) {
			rc = ap_error_set(AP_ENOMEM, "out of memory");
			break;
		}
		argv[++n] = NULL;
	}
	closedir(d);
	if (rc || n == nhead)
		goto out_free_argv;
	if (pipe2(pipefd, O_CLOEXEC)) {
		rc = ap_error_set(AP_EIO, "pipe: %s", strerror(errno));
		goto out_free_argv;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	rc = posix_spawnp(&pid, "tar", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	if (rc) {
		close(pipefd[0]);
		rc = ap_error_set(AP_EIO, "cannot run tar: %s", strerror(rc));
		goto out_free_argv;
	}
	rc = read_tar(pipefd[0], cap, out);
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!rc && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
		rc = ap_error_set(AP_EIO, "tar of the repository failed (status %d)", status);
out_free_argv:
	for (size_t i = nhead; i < n; i++)
		free(argv[i]);
	free(argv);
	return rc;
}

/* The loader's output (redacted): the start of it goes into an error sentence. */
static void keep_output(void *ud, const char *p, size_t n)
{
	ap_buf *b = ud;
	size_t room = b->cap > b->len ? b->cap - b->len : 0;

	ap_buf_add(b, p, n < room ? n : room);
}

static int k8s_prepare(sbx_box *b)
{
	static const char *const untar[] = {
	    "tar", "-x", "-f", "-", "-C", "/repo", "--no-same-owner", NULL};
	/* HOME first (the trees mount starts empty), then the copy (entry by entry: /repo itself
	 * belongs to the kubelet). */
	static const char *const copy[] = {
	    "sh", "-c",
	    "mkdir -p " SBX_HOME " && find /repo -mindepth 1 -maxdepth 1 -exec cp -R "
	    "--preserve=mode,timestamps,links --no-dereference -t /tmp/workspace/ {} +",
	    NULL};
	ap_buf err = AP_BUF_INIT(512);
	struct k8s_backend *be = be_of(b->e);
	ap_buf tar = AP_BUF_INIT((size_t)b->e->defaults.workspace_bytes + (1 << 20));
	sbx_exec_io io = {0};
	struct k8s_stdin in;
	const char *argv[16];
	char len[32];
	size_t n = 0;
	int rc, code = -1;

	rc = tar_dir(b->repo_dir, b->e->defaults.workspace_bytes, &tar);
	if (rc || tar.len == 0)
		goto out_release; /* an empty repository: nothing to load or copy */
	io.out = (struct sbx_exec_stream){&io, SBX_STREAM_STDOUT, SBX_CAPTURE_INIT(4096), NULL};
	io.err = (struct sbx_exec_stream){&io, SBX_STREAM_STDERR, SBX_CAPTURE_INIT(4096), NULL};
	if ((rc = redact_stream_new(&io.out.rs, keep_output, &err)) ||
	    (rc = redact_stream_new(&io.err.rs, keep_output, &err)))
		goto out_release;
	if (atomic_load(&be->proto) != 5) {
		snprintf(len, sizeof(len), "%zu", tar.len);
		argv[n++] = "sh";
		argv[n++] = "-c";
		argv[n++] = "head -c \"$0\" | \"$@\"";
		argv[n++] = len;
	}
	for (const char *const *a = untar; *a; a++)
		argv[n++] = *a;
	argv[n] = NULL;
	in = (struct k8s_stdin){tar.data ? tar.data : "", tar.len, NULL, NULL};
	rc = exec_raw(b, "loader", argv, &in, ap_mono_ms() + 600000, NULL, &io, &code);
	redact_stream_flush(io.out.rs);
	redact_stream_flush(io.err.rs);
	if (rc == SBX_BOX_DIED)
		rc = ap_error_set(AP_EIO, "the box pod %s stopped while the repository was loaded",
				  b->name);
	else if (!rc && code != 0)
		rc = ap_error_set(
		    AP_EIO, "loading the repository into the box failed (tar exit %d): %.300s",
		    code, ap_buf_str(&err));
	/* The entries, not "/repo/.": the workspace dir itself belongs to the kubelet. */
	if (!rc)
		rc = sbx__copy_repo(b, copy);
out_release:
	redact_stream_free(io.out.rs);
	redact_stream_free(io.err.rs);
	sbx_capture_release(&io.out.cap);
	sbx_capture_release(&io.err.cap);
	ap_buf_release(&err);
	ap_buf_release(&tar);
	return rc;
}

/* --- reaping ---------------------------------------------------------------------------- */

/* List what carries the owner label: pods or networkpolicies. */
static int list_owned(sbx_engine *e, bool pods, cJSON **out)
{
	char path[512], sel[160], *esc;
	int rc;

	snprintf(sel, sizeof(sel), "%s=%s", K8S_LABEL_OWNER, e->owner);
	esc = k8s_escape(sel);
	if (!esc)
		return ap_error_set(AP_ENOMEM, "out of memory");
	if (pods)
		pods_path(e, path, sizeof(path), NULL, NULL);
	else
		policies_path(e, path, sizeof(path), NULL);
	snprintf(path + strlen(path), sizeof(path) - strlen(path), "?labelSelector=%s", esc);
	free(esc);
	rc = k8s_request(be_of(e)->kc, "GET", path, NULL, "list", pods ? "pods" : "networkpolicies",
			 K8S_API_TIMEOUT, NULL, out);
	return rc;
}

static int reap_kind(sbx_engine *e, bool pods, bool all)
{
	cJSON *list = NULL, *it;
	long long until = ap_mono_ms() + K8S_REAP_GONE_MS;
	int removed = 0, rc;

	rc = list_owned(e, pods, &list);
	if (rc)
		return rc;
	cJSON_ArrayForEach (it, cJSON_GetObjectItemCaseSensitive(list, "items")) {
		const cJSON *md = cJSON_GetObjectItemCaseSensitive(it, "metadata");
		const char *name = jstr(md, "name", NULL);
		const char *creator = jstr(md, "annotations", K8S_ANN_CREATOR);

		if (!name || !k8s_name_safe(name, 90))
			continue;
		if (!all && creator && sbx_creator_alive(creator))
			continue;
		/* A deny-all policy (named as its box) goes only once its pod is gone: the pods
		 * were deleted first, a pod still terminating keeps its policy until a later
		 * reap. An allow policy (NAME-egress) may go any time. */
		if (!pods && (rc = wait_pod_gone(e, name, until))) {
			if (rc == AP_ETIMEOUT)
				ap_warn(
				    "sandbox reap: pod %s is still terminating; its NetworkPolicy "
				    "stays until a later reap",
				    name);
			else
				ap_warn("sandbox reap: %s; NetworkPolicy %s kept", ap_error_last(),
					name);
			continue;
		}
		if (pods ? delete_pod(e, name) : delete_policy(e, name)) {
			ap_warn("sandbox reap: %s", ap_error_last());
			continue;
		}
		removed++;
		if (pods)
			sbx__remove_box_dir(e, name);
	}
	cJSON_Delete(list);
	return removed;
}

static int k8s_reap(sbx_engine *e, bool all)
{
	int pods = reap_kind(e, true, all), pols;

	if (pods < 0)
		return pods;
	pols = reap_kind(e, false, all);
	if (pols < 0)
		return pols;
	/* A box is a pod and its policy; report boxes, as the Docker backend reports
	 * containers (plus networks, which only allow-list boxes have). */
	return pods;
}

static int k8s_count(sbx_engine *e)
{
	cJSON *list = NULL;
	int rc = list_owned(e, true, &list);

	if (!rc)
		rc = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(list, "items"));
	cJSON_Delete(list);
	return rc;
}

/* The nodes pull images; the API cannot say whether one exists. 0: assume present (a missing
 * image fails the box's start with the kubelet's reason). */
static int k8s_image_present(sbx_engine *e, const char *image)
{
	(void)e;
	(void)image;
	return 0;
}

/* The API cannot inspect an image either: an image pinned by digest (name@sha256:...) is
 * identified by that digest; any other by a hash of its name (a re-tagged image keeps its
 * id, so pin images by digest to key environment caches by content). */
static int k8s_image_id(sbx_engine *e, const char *image, char *out, size_t n)
{
	const char *at = strstr(image, "@sha256:");
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	size_t pos;

	(void)e;
	if (at && strlen(at + 1) == 71 && strspn(at + 8, "0123456789abcdef") == 64)
		return ap_fmt(out, n, "%s", at + 1);
	if (!EVP_Digest(image, strlen(image), md, &mdlen, EVP_sha256(), NULL))
		return ap_error_set(AP_ENOMEM, "sha256 failed");
	/* A cut id would key caches by part of a hash: the whole "name:<hex>" or an error. */
	if (n < 5 + 2 * (size_t)mdlen + 1)
		return ap_error_set(AP_ETOOBIG, "an image id needs %u bytes", 5 + 2 * mdlen + 1);
	pos = (size_t)snprintf(out, n, "name:");
	for (unsigned int i = 0; i < mdlen; i++)
		pos += (size_t)snprintf(out + pos, n - pos, "%02x", md[i]);
	return 0;
}

/* backend op: after setup, both: lock the proxy (it refuses everything from now on) and
 * delete the allow policy (the CNI drops the pod's packets again). If either fails the pod is
 * deleted: a box never stays online by accident. 0 for a box that never had network. */
static int k8s_network_off(sbx_box *b)
{
	char why[AP_ERROR_MSG_MAX] = "";
	int lrc, prc;

	if (!box_eg(b))
		return 0;
	lrc = sbx_egress_lock(box_eg(b));
	if (lrc)
		snprintf(why, sizeof(why), "%s", ap_error_last());
	prc = delete_allow_policy(b->e, b);
	if (prc && !why[0])
		snprintf(why, sizeof(why), "%s", ap_error_last());
	if (!lrc && !prc)
		return 0;
	delete_pod(b->e, b->name);
	b->killed = true;
	return ap_error_set(lrc ? lrc : prc,
			    "the sandbox could not be taken offline after setup (%s); its pod "
			    "was deleted",
			    why);
}

static int k8s_denials(sbx_box *b, sbx_denial *out, size_t max, size_t *n)
{
	return sbx_egress_copy_denials(box_eg(b), out, max, n);
}

const sbx_backend_ops sbx_k8s_ops = {
    .name = "kubernetes",
    .open = k8s_open,
    .close = k8s_close,
    .create = k8s_create,
    .prepare = k8s_prepare,
    .run = k8s_run,
    .running = k8s_running,
    .kill = k8s_kill,
    .remove = k8s_remove,
    .reap = k8s_reap,
    .count = k8s_count,
    .image_present = k8s_image_present,
    .image_id = k8s_image_id,
    .network_off = k8s_network_off,
    .denials = k8s_denials,
};

/* SPDX-License-Identifier: MIT */
/* common/config.c - the settings table, and `.env` + environment settings (see config.h). */
#include "common/config.h"

#include "common/buf.h"
#include "common/err.h"
#include "common/fs.h"
#include "common/redact.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

extern char **environ;

#define ENV_FILE_CAP (1024 * 1024)

struct ap_config {
	char **names;
	char **values;
	size_t n;
};

static ssize_t find(const ap_config *c, const char *name)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->names[i], name) == 0)
			return (ssize_t)i;
	return -1;
}

/* --- the table ------------------------------------------------------------------------- */

/* Every setting autopatch reads, in .env.example order: {name, kind, default, flags, doc}. A
 * default is written the way a user would write it in .env; NULL means none, or one computed
 * by the module that owns the setting (the doc line says how). */
static const cfg_setting settings[] = {
    /* The GitHub App */
    {"APP_ID", CFG_STR, NULL, 0, "the GitHub App's ID (a number) or client ID (Iv...)"},
    {"PRIVATE_KEY_PATH", CFG_STR, NULL, CFG_SECRET_FILE,
     "path to the App's private key (.pem); or set PRIVATE_KEY"},
    {"PRIVATE_KEY", CFG_STR, NULL, CFG_SECRET,
     "the App's private key itself (PEM, \\n for newlines) instead of PRIVATE_KEY_PATH"},
    {"WEBHOOK_SECRET", CFG_STR, NULL, CFG_SECRET, "the webhook secret given to GitHub"},
    {"WEBHOOK_SECRET_PREVIOUS", CFG_STR, NULL, CFG_SECRET,
     "the previous webhook secret, still accepted while rotating"},
    {"GITHUB_URL", CFG_STR, NULL, 0,
     "GitHub's web and git host; default: https://github.com, or derived from GITHUB_API_URL"},
    {"GITHUB_API_URL", CFG_STR, NULL, 0,
     "GitHub's REST API; default: https://api.github.com, or GITHUB_URL/api/v3 (Enterprise)"},
    {"GITHUB_CLIENT_ID", CFG_STR, NULL, 0,
     "the App's OAuth client ID (Iv...), for \"Sign in with GitHub\" on the console"},
    {"GITHUB_CLIENT_SECRET", CFG_STR, NULL, CFG_SECRET, "the App's OAuth client secret"},
    {"AUTOPATCH_CREDENTIALS_FILE", CFG_STR, "./autopatch-credentials.env", 0,
     "written by the registration page (/setup), read after .env (the environment wins)"},
    {"AUTOPATCH_PUBLIC_URL", CFG_STR, NULL, 0,
     "where GitHub reaches this server (https://autopatch.example.org): the App's webhook"},
    /* The HTTP server */
    {"PORT", CFG_INT, "3000", 0, "TCP port of the webhook server"},
    {"WEBHOOK_PATH", CFG_STR, "/api/github/webhooks", 0, "path GitHub posts webhooks to"},
    {"AUTOPATCH_BIND", CFG_STR, "0.0.0.0", 0, "numeric listen address of the server"},
    {"AUTOPATCH_ADMIN_LISTEN", CFG_STR, "127.0.0.1:9464", 0,
     "the admin listener (status page, /metrics): ADDRESS:PORT, unix:PATH or off"},
    {"AUTOPATCH_ADMIN_SOCKET_MODE", CFG_STR, "0600", 0,
     "mode of the admin listener's unix socket file: 0600 or 0660"},
    {"AUTOPATCH_CONSOLE_URL", CFG_STR, NULL, 0,
     "the console as your browser reaches it; default: http:// + AUTOPATCH_ADMIN_LISTEN"},
    {"AUTOPATCH_CONSOLE_SIGN_IN", CFG_STR, "auto", 0,
     "auto (sign-in unless the admin listener is loopback or unix) or always"},
    {"AUTOPATCH_CONSOLE_USERS", CFG_STR, NULL, 0,
     "logins and org:NAME entries (comma-separated) that see every job; others: their repos"},
    {"AUTOPATCH_SESSION_HOURS", CFG_INT, "8", 0, "a console sign-in lasts this long"},
    {"AUTOPATCH_STATUS_PUBLIC", CFG_STR, NULL, 0,
     "removed (setting it stops start-up): the status page is on AUTOPATCH_ADMIN_LISTEN"},
    {"AUTOPATCH_MAX_CONNECTIONS", CFG_INT, "512", 0,
     "connections the public listener holds at once, all clients together"},
    {"AUTOPATCH_MAX_CONNECTIONS_PER_IP", CFG_INT, "32", 0,
     "connections from one client address (0: no limit); at most half the total"},
    {"AUTOPATCH_HTTP_THREADS", CFG_INT, "0", 0,
     "threads that verify and store deliveries on the public listener (0: one per core, up "
     "to 4)"},
    {"AUTOPATCH_HEADERS_DEADLINE_S", CFG_INT, "10", 0,
     "a request's line and headers must arrive within this (s), else it is closed"},
    {"AUTOPATCH_BODY_DEADLINE_S", CFG_INT, "30", 0,
     "a request's body must arrive within this (s) after its headers"},
    /* Jobs */
    {"AUTOPATCH_DB", CFG_STR, "./autopatch.db", CFG_SECRET_URI,
     "the job queue: a SQLite file path, or a postgresql:// URI shared by replicas"},
    {"AUTOPATCH_DATA_DIR", CFG_STR, "./autopatch-data", 0,
     "trajectories, the clone cache and per-box repository copies"},
    {"AUTOPATCH_WORKERS", CFG_INT, "2", 0, "worker threads (0: accept and queue only)"},
    {"AUTOPATCH_LABEL", CFG_STR, "autopatch", 0,
     "the issue label that starts a job (removing it cancels)"},
    {"AUTOPATCH_MAX_ATTEMPTS", CFG_INT, "3", 0,
     "attempts of a job that fails for a passing reason"},
    {"AUTOPATCH_COMMENT_INTERVAL_MS", CFG_INT, "2000", 0,
     "least time between edits of the progress comment"},
    {"AUTOPATCH_LEASE_SECONDS", CFG_INT, "60", 0,
     "a job whose server died is re-queued after this lease ends"},
    {"AUTOPATCH_HEARTBEAT_SECONDS", CFG_INT, "0", 0,
     "how often running jobs' leases are extended (0: a third of the lease)"},
    {"AUTOPATCH_RESCUE_SECONDS", CFG_INT, "0", 0,
     "how often expired leases of any replica are looked for (0: a third of the lease)"},
    {"AUTOPATCH_RETRY_SECONDS", CFG_INT, "30", 0,
     "first delay before a transient failure is retried (doubling)"},
    {"AUTOPATCH_SHUTDOWN_GRACE_SECONDS", CFG_INT, "8", 0,
     "on SIGTERM, how long running jobs get to stop before they are re-queued"},
    /* The sandbox */
    {"AUTOPATCH_SANDBOX_BACKEND", CFG_STR, "docker", 0,
     "where boxes run: docker (the Docker Engine) or kubernetes (pods)"},
    {"DOCKER_HOST", CFG_STR, "unix:///var/run/docker.sock", 0,
     "the Docker (or Podman) Engine API socket"},
    {"AUTOPATCH_SANDBOX_IMAGE", CFG_STR, "autopatch-sandbox:latest", 0,
     "image of the sandbox boxes (deploy/sandbox-image/build.sh)"},
    {"AUTOPATCH_SANDBOX_RUNTIME", CFG_STR, "runc", 0,
     "OCI runtime of the boxes: runc, or runsc (gVisor)"},
    {"AUTOPATCH_SANDBOX_MEMORY", CFG_BYTES, "2g", 0, "memory (and memory+swap) of a box"},
    {"AUTOPATCH_SANDBOX_CPUS", CFG_STR, "2", 0, "CPUs of a box (a decimal: 0.5)"},
    {"AUTOPATCH_SANDBOX_PIDS", CFG_INT, "512", 0, "process limit of a box"},
    {"AUTOPATCH_SANDBOX_TMP_SIZE", CFG_BYTES, "256m", 0, "tmpfs size of /tmp in a box"},
    {"AUTOPATCH_SANDBOX_WORKSPACE_SIZE", CFG_BYTES, "1g", 0,
     "tmpfs size of /tmp/workspace in a box"},
    {"AUTOPATCH_SANDBOX_TREES_SIZE", CFG_BYTES, "2g", 0,
     "tmpfs size of /tmp/trees in a box (exec-able: the Tester's trees)"},
    {"AUTOPATCH_SANDBOX_VOLUME_SIZE", CFG_BYTES, "64m", 0,
     "tmpfs size of each VOLUME the box's image declares"},
    {"AUTOPATCH_SANDBOX_NOFILE", CFG_INT, "4096", 0, "open files per process in a box"},
    {"AUTOPATCH_SANDBOX_FSIZE", CFG_BYTES, "1g", 0, "largest file a box may write"},
    {"AUTOPATCH_SANDBOX_WALL_SECONDS", CFG_INT, "3600", 0,
     "life of a box; the host kills it after this"},
    {"AUTOPATCH_SANDBOX_OUTPUT_CAP", CFG_BYTES, "1m", 0,
     "output kept per stream of a command (head and tail)"},
    {"AUTOPATCH_SANDBOX_POOL", CFG_INT, "1", 0, "boxes created ahead of time (warm pool)"},
    /* The Kubernetes backend (AUTOPATCH_SANDBOX_BACKEND=kubernetes; docs/kubernetes.md) */
    {"KUBECONFIG", CFG_STR, NULL, 0,
     "kubeconfig file of the cluster boxes run in; unset: the in-cluster service account"},
    {"KUBERNETES_SERVICE_HOST", CFG_STR, NULL, 0,
     "set by Kubernetes in a pod: the API server's address (in-cluster configuration)"},
    {"KUBERNETES_SERVICE_PORT", CFG_STR, "443", 0,
     "set by Kubernetes in a pod: the API server's port (in-cluster configuration)"},
    {"AUTOPATCH_K8S_SERVICEACCOUNT_DIR", CFG_STR, "/var/run/secrets/kubernetes.io/serviceaccount",
     0, "where the in-cluster service-account token and ca.crt are"},
    {"AUTOPATCH_K8S_NAMESPACE", CFG_STR, "autopatch-sandbox", 0,
     "namespace the box pods and their NetworkPolicies are created in"},
    {"AUTOPATCH_K8S_RUNTIME_CLASS", CFG_STR, NULL, 0,
     "RuntimeClass of the box pods (e.g. gvisor, kata); default: the cluster's"},
    {"AUTOPATCH_K8S_NODE_SELECTOR", CFG_STR, NULL, 0,
     "node labels box pods must run on: key=value,key2=value2"},
    {"AUTOPATCH_K8S_TOLERATIONS", CFG_STR, NULL, 0,
     "taints box pods tolerate: key=value:Effect or key:Effect, comma-separated"},
    {"AUTOPATCH_K8S_EPHEMERAL_STORAGE", CFG_BYTES, "1g", 0,
     "ephemeral-storage limit of a box container (logs, image volumes)"},
    {"AUTOPATCH_K8S_PULL_POLICY", CFG_STR, "IfNotPresent", 0,
     "imagePullPolicy of the box pods: IfNotPresent, Always or Never"},
    {"AUTOPATCH_K8S_START_SECONDS", CFG_INT, "120", 0,
     "how long a box pod may take to be scheduled and started"},
    {"AUTOPATCH_K8S_REMOVE_SECONDS", CFG_INT, "30", 0,
     "how long a box's removal waits for its pod to be gone before it leaves the deny-all "
     "policy to the reaper"},
    {"AUTOPATCH_K8S_PROTOCOLS", CFG_STR, "v5.channel.k8s.io,v4.channel.k8s.io", 0,
     "exec WebSocket subprotocols offered, in order of preference"},
    {"AUTOPATCH_K8S_EGRESS_ADDRESS", CFG_STR, NULL, 0,
     "IP address of this replica box pods reach its egress proxies at (the pod IP); unset: "
     "no allow-lists on kubernetes"},
    {"AUTOPATCH_OWNER_ID", CFG_STR, NULL, 0,
     "scopes the clean-up of crash leftovers; default: a hash of host name + AUTOPATCH_DB"},
    {"AUTOPATCH_EGRESS_PROXY_BIN", CFG_STR, NULL, 0,
     "the egress proxy program; default: autopatch-egress-proxy next to the binary"},
    {"AUTOPATCH_EGRESS_IMAGE", CFG_STR, NULL, 0,
     "image the egress proxy runs in; default: AUTOPATCH_SANDBOX_IMAGE"},
    {"AUTOPATCH_EGRESS_NETWORK", CFG_STR, "bridge", 0,
     "outer network the egress proxy reaches the internet on"},
    {"AUTOPATCH_EGRESS_ALLOW_NETS", CFG_STR, NULL, 0,
     "private networks (CIDRs, comma-separated) an allowed host may resolve to"},
    {"AUTOPATCH_EGRESS_MAX_CONNS", CFG_INT, "256", 0,
     "connections one box's egress proxy serves at once; more wait in its queue"},
    {"AUTOPATCH_EGRESS_QUEUE_S", CFG_INT, "60", 0,
     "how long a connection waits for a free proxy slot before it is refused (s)"},
    /* Environments (docs/environments.md) */
    {"AUTOPATCH_FLAVOR_REPOSITORY", CFG_STR, "autopatch-sandbox", 0,
     "image repository of the toolchain flavours (NAME:node, ...; python is SANDBOX_IMAGE)"},
    {"AUTOPATCH_SANDBOX_BUILD", CFG_BOOL, "on", 0,
     "build a missing flavour image on first use (off: the job fails with the build command)"},
    {"AUTOPATCH_SANDBOX_BUILD_CMD", CFG_STR, NULL, 0,
     "the program that builds a flavour (CMD --flavor NAME); default: "
     "deploy/sandbox-image/build.sh above the binary"},
    {"AUTOPATCH_SANDBOX_BUILD_TIMEOUT_S", CFG_INT, "1200", 0,
     "deadline of one flavour build on first use (s)"},
    {"AUTOPATCH_SETUP_TIMEOUT_S", CFG_INT, "900", 0,
     "deadline of a job's setup phase, all `setup:` steps together (s)"},
    {"AUTOPATCH_SETUP_CA_FILE", CFG_STR, NULL, 0,
     "PEM bundle of CAs the setup phase trusts besides the public ones (TLS-intercepting "
     "networks)"},
    {"AUTOPATCH_ENV_CACHE", CFG_BOOL, "true", 0,
     "cache what setup produced per repository and restore it instead of running setup"},
    {"AUTOPATCH_ENV_CACHE_SIZE", CFG_BYTES, "10g", 0,
     "total size of the environment cache; least recently used entries go first"},
    /* GitHub client */
    {"AUTOPATCH_GH_RETRIES", CFG_INT, "5", 0, "retries of a GitHub call on 5xx/network errors"},
    {"AUTOPATCH_GH_BACKOFF_MS", CFG_INT, "1000", 0, "first backoff of those retries"},
    {"AUTOPATCH_GH_DEADLINE_S", CFG_INT, "120", 0,
     "deadline of one GitHub call including retries and waits"},
    {"AUTOPATCH_GH_SECONDARY_WAIT_S", CFG_INT, "60", 0,
     "wait after a secondary rate limit without retry-after (doubling)"},
    {"AUTOPATCH_RATELIMIT_MAX_WAIT_S", CFG_INT, "3900", 0,
     "a job blocked by a rate limit longer than this is re-queued"},
    {"AUTOPATCH_GH_WRITE_SPACING_MS", CFG_INT, "1000", 0,
     "spacing of the serialized writes to one installation"},
    {"AUTOPATCH_GH_MAX_RESPONSE", CFG_BYTES, "16m", 0, "largest GitHub API response read"},
    {"AUTOPATCH_GH_TOKEN_MARGIN_S", CFG_INT, "600", 0,
     "installation tokens are renewed this long before they expire"},
    {"AUTOPATCH_GIT_NAME", CFG_STR, "autopatch[bot]", 0, "commit author name of the pushes"},
    {"AUTOPATCH_GIT_EMAIL", CFG_STR, "autopatch[bot]@users.noreply.github.com", 0,
     "commit author email of the pushes"},
    {"AUTOPATCH_ALLOW_WORKFLOW_CHANGES", CFG_BOOL, "false", 0,
     "allow patches that touch .github/workflows/"},
    {"AUTOPATCH_MAX_DIFF_BYTES", CFG_BYTES, "4m", 0, "largest patch applied on the host"},
    /* The model */
    {"AUTOPATCH_LLM_PROVIDER", CFG_STR, "openai", 0,
     "openai (any OpenAI-compatible server) or anthropic"},
    {"AUTOPATCH_LLM_BASE_URL", CFG_STR, NULL, 0,
     "model server; default: https://api.openai.com/v1 or https://api.anthropic.com"},
    {"AUTOPATCH_LLM_MODEL", CFG_STR, NULL, 0,
     "model name; default: gpt-4o or claude-sonnet-4-20250514 (by provider)"},
    {"AUTOPATCH_LLM_API_KEY", CFG_STR, NULL, CFG_SECRET,
     "the model API key; default: OPENAI_API_KEY or ANTHROPIC_API_KEY (by provider)"},
    {"OPENAI_API_KEY", CFG_STR, NULL, CFG_SECRET,
     "the openai provider's key when AUTOPATCH_LLM_API_KEY is unset"},
    {"ANTHROPIC_API_KEY", CFG_STR, NULL, CFG_SECRET,
     "the anthropic provider's key when AUTOPATCH_LLM_API_KEY is unset"},
    {"AUTOPATCH_LLM_TIMEOUT", CFG_INT, "120", 0, "deadline of one model request (s)"},
    {"AUTOPATCH_LLM_RETRIES", CFG_INT, "4", 0, "retries of a model request on 429/5xx/529"},
    {"AUTOPATCH_LLM_MAX_OUTPUT_TOKENS", CFG_INT, "4096", 0, "token cap of one model reply"},
    /* Budgets per job */
    {"AUTOPATCH_MAX_MODEL_CALLS", CFG_INT, "60", 0, "model calls per job"},
    {"AUTOPATCH_MAX_TOKENS", CFG_INT, "1000000", 0, "tokens per job (input + output)"},
    {"AUTOPATCH_MAX_WALL_SECONDS", CFG_INT, "1800", 0, "wall time per job"},
    {"AUTOPATCH_REPEAT_LIMIT", CFG_INT, "3", 0,
     "the same tool call this often without progress gets a nudge, then a stop"},
    {"AUTOPATCH_MAX_DIFF_LINES", CFG_INT, "500", 0, "the Tester refuses larger patches"},
    {"AUTOPATCH_TESTER_SIDE_BY_SIDE", CFG_BOOL, "on", 0,
     "a round's repro and suite runs go at once, two boxes (1 CPU or kubernetes: one by one)"},
    {"AUTOPATCH_TESTER_SPARES", CFG_INT, "2", 0,
     "fresh Tester boxes a job keeps made ahead of time, 0 to 4 (0: each run makes its own)"},
    /* Costs and daily budgets */
    {"AUTOPATCH_PRICES", CFG_STR, NULL, 0,
     "USD per million input/output tokens: MODEL=IN/OUT,... (* = any other model)"},
    {"AUTOPATCH_DAILY_BUDGET_USD", CFG_STR, "0", 0,
     "spending of all jobs per UTC day (0: no limit); a job that could exceed it is refused"},
    {"AUTOPATCH_REPO_DAILY_BUDGET_USD", CFG_STR, "0", 0,
     "spending per repository per UTC day (0: no limit); same rule"},
    /* Logging */
    {"AUTOPATCH_LOG_LEVEL", CFG_STR, "info", 0,
     "debug adds debug lines; any other value logs info and up"},
    /* Only for `autopatch demo` and the process environment */
    {"AUTOPATCH_SOURCE_ROOT", CFG_STR, NULL, 0,
     "the autopatch checkout `demo` runs from; default: found from the binary or cwd"},
    {"AUTOPATCH_DEMO_TIMEOUT", CFG_INT, "600", 0, "how long `demo` waits for the pull request"},
    {"AUTOPATCH_ENV_FILE", CFG_STR, NULL, CFG_ENV_ONLY,
     "settings file read instead of ./.env (which may be missing)"},
    {"GITHUB_TOKEN", CFG_STR, NULL, CFG_SECRET,
     "not used; redacted from every log when present in the environment"},
    {"GH_TOKEN", CFG_STR, NULL, CFG_SECRET,
     "not used; redacted from every log when present in the environment"},
};

const cfg_setting *cfg_settings(size_t *n)
{
	*n = sizeof(settings) / sizeof(settings[0]);
	return settings;
}

const cfg_setting *cfg_setting_find(const char *name)
{
	for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++)
		if (strcmp(settings[i].name, name) == 0)
			return &settings[i];
	return NULL;
}

/* A programmer error (a name missing from the table, the wrong accessor for its kind, a
 * default the caller's range refuses): say which and stop, in every build type. */
static _Noreturn void bug(const char *name, const char *what)
{
	fprintf(stderr, "autopatch: BUG: setting %s %s\n", name, what);
	abort();
}

/* The row of name, which must be in the table and (unless any is true) of kind. */
static const cfg_setting *setting_of(const char *name, enum cfg_kind kind, bool any)
{
	const cfg_setting *s = cfg_setting_find(name);

	if (!s)
		bug(name, "is not in the table of common/config.c: add it there");
	if (!any && s->kind != kind)
		bug(name, "is read with the accessor of another kind (see its table row)");
	return s;
}

/* --- the store ------------------------------------------------------------------------- */

/* Set or replace any name (cfg_load stores the whole environment). */
static int store_set(ap_config *c, const char *name, const char *value)
{
	ssize_t i = find(c, name);
	char *v = strdup(value), *nm = NULL;
	char **nn, **nv;

	if (!v)
		return AP_ENOMEM;
	if (i >= 0) {
		free(c->values[i]);
		c->values[i] = v;
		return 0;
	}
	nm = strdup(name);
	nn = realloc(c->names, (c->n + 1) * sizeof(*nn));
	if (nn)
		c->names = nn;
	nv = realloc(c->values, (c->n + 1) * sizeof(*nv));
	if (nv)
		c->values = nv;
	if (!nm || !nn || !nv) {
		free(nm);
		free(v);
		return AP_ENOMEM;
	}
	c->names[c->n] = nm;
	c->values[c->n] = v;
	c->n++;
	return 0;
}

int cfg_set(ap_config *c, const char *name, const char *value)
{
	setting_of(name, CFG_STR, true);
	return store_set(c, name, value);
}

int cfg_new_empty(ap_config **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : AP_ENOMEM;
}

/* Unquote a .env value in place: "double" (with \n, \", \\ escapes), 'single', or bare
 * (trailing " #comment" removed, whitespace trimmed). */
static char *unquote(char *v)
{
	size_t n;

	while (*v == ' ' || *v == '\t')
		v++;
	if (*v == '"' || *v == '\'') {
		char q = *v++, *r = v, *w = v;

		while (*r && *r != q) {
			if (q == '"' && *r == '\\' && r[1]) {
				r++;
				*w++ = *r == 'n' ? '\n' : *r;
				r++;
				continue;
			}
			*w++ = *r++;
		}
		*w = '\0';
		return v;
	}
	for (char *h = v; *h; h++)
		if (*h == '#' && (h == v || h[-1] == ' ' || h[-1] == '\t')) {
			*h = '\0';
			break;
		}
	n = strlen(v);
	while (n && isspace((unsigned char)v[n - 1]))
		v[--n] = '\0';
	return v;
}

static int parse_env_file(ap_config *c, const char *path, bool required)
{
	ap_buf text = AP_BUF_INIT(ENV_FILE_CAP);
	char why[AP_ERROR_MSG_MAX], *line, *next;
	int lineno = 0, rc;

	rc = fs_read_file(&text, path, 0);
	if (rc == AP_ENOTFOUND && !required) {
		ap_error_clear();
		return 0;
	}
	if (rc == AP_ETOOBIG) {
		rc =
		    ap_error_set(AP_EINVAL, "%s is larger than 1 MiB: is it the right file?", path);
	} else if (rc == AP_ENOTFOUND || rc == AP_EIO) {
		snprintf(why, sizeof(why), "%s", ap_error_last());
		rc = ap_error_set(AP_EINVAL, "%s: fix its permissions or path", why);
	}
	for (line = text.data; !rc && line; line = next) {
		char *p = line, *eq, *name;

		next = memchr(line, '\n', text.len - (size_t)(line - text.data));
		if (next)
			*next++ = '\0';
		lineno++;
		line[strcspn(line, "\r\n")] = '\0';
		while (isspace((unsigned char)*p))
			p++;
		if (!*p || *p == '#')
			continue;
		if (strncmp(p, "export ", 7) == 0)
			p += 7;
		eq = strchr(p, '=');
		if (!eq || eq == p) {
			rc = ap_error_set(AP_EINVAL,
					  "%s line %d is not NAME=value: fix or remove that line",
					  path, lineno);
			break;
		}
		*eq = '\0';
		name = p;
		for (char *e = eq - 1; e > name && isspace((unsigned char)*e); e--)
			*e = '\0';
		rc = store_set(c, name, unquote(eq + 1));
		if (rc)
			break;
	}
	ap_buf_release(&text);
	return rc;
}

static const char *raw(const ap_config *c, const char *name);

int cfg_load(ap_config **out, const char *env_file)
{
	const char *creds;
	ap_config *c;
	int rc;

	*out = NULL;
	rc = cfg_new_empty(&c);
	if (rc)
		return rc;
	rc = parse_env_file(c, env_file ? env_file : ".env", env_file != NULL);
	if (rc)
		goto fail;
	/* What the registration page wrote: after .env, before the environment. */
	creds = getenv("AUTOPATCH_CREDENTIALS_FILE");
	if (!creds || !*creds)
		creds = raw(c, "AUTOPATCH_CREDENTIALS_FILE");
	rc = parse_env_file(c, creds ? creds : cfg_setting_find("AUTOPATCH_CREDENTIALS_FILE")->def,
			    false);
	if (rc)
		goto fail;
	for (char **e = environ; *e; e++) {
		const char *eq = strchr(*e, '=');
		char *name;

		if (!eq)
			continue;
		name = strndup(*e, (size_t)(eq - *e));
		if (!name) {
			rc = AP_ENOMEM;
			goto fail;
		}
		rc = store_set(c, name, eq + 1);
		free(name);
		if (rc)
			goto fail;
	}
	*out = c;
	return 0;
fail:
	cfg_free(c);
	return rc;
}

/* --- accessors ------------------------------------------------------------------------- */

/* The stored value, or NULL when unset or empty. */
static const char *raw(const ap_config *c, const char *name)
{
	ssize_t i = find(c, name);

	return i >= 0 && c->values[i][0] ? c->values[i] : NULL;
}

bool cfg_is_set(const ap_config *c, const char *name)
{
	setting_of(name, CFG_STR, true);
	return raw(c, name) != NULL;
}

const char *cfg_str(const ap_config *c, const char *name)
{
	const cfg_setting *s = setting_of(name, CFG_STR, true);
	const char *v = raw(c, name);

	return v ? v : s->def;
}

const char *cfg_env(const char *name)
{
	const cfg_setting *s = setting_of(name, CFG_STR, true);
	const char *v;

	if (!(s->flags & CFG_ENV_ONLY))
		bug(name, "is not CFG_ENV_ONLY: read it from the loaded config");
	v = getenv(name);
	return v ? v : s->def;
}

static int parse_int(const char *name, const char *v, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	long long n;

	errno = 0;
	n = strtoll(v, &end, 10);
	if (errno || end == v || *end)
		return ap_error_set(AP_EINVAL, "%s=\"%s\" is not a whole number: set it to one",
				    name, v);
	if (n < min || n > max)
		return ap_error_set(AP_EINVAL, "%s=%lld is out of range: use %lld to %lld", name, n,
				    (long long)min, (long long)max);
	*out = n;
	return 0;
}

static int parse_bytes(const char *name, const char *v, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	long long n, mult = 1;

	errno = 0;
	n = strtoll(v, &end, 10);
	if (*end && !end[1] && strchr("kKmMgG", *end))
		mult = *end == 'k' || *end == 'K'   ? 1024
		       : *end == 'm' || *end == 'M' ? 1 << 20
						    : 1 << 30;
	else if (*end)
		end = NULL;
	if (errno || !end || end == v || n < 0 || n > INT64_MAX / mult)
		return ap_error_set(AP_EINVAL,
				    "%s=\"%s\" is not a size: use bytes or a k/m/g suffix (512m)",
				    name, v);
	n *= mult;
	if (n < min || n > max)
		return ap_error_set(AP_EINVAL, "%s=%s is out of range: use %lld to %lld bytes",
				    name, v, (long long)min, (long long)max);
	*out = n;
	return 0;
}

static int parse_bool(const char *name, const char *v, bool *out)
{
	static const char *yes[] = {"1", "true", "yes", "on"}, *no[] = {"0", "false", "no", "off"};

	for (int i = 0; i < 4; i++) {
		if (strcasecmp(v, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(v, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return ap_error_set(AP_EINVAL, "%s=\"%s\" is not a boolean: use true or false", name, v);
}

int cfg_int(const ap_config *c, const char *name, int64_t min, int64_t max, int64_t *out)
{
	const cfg_setting *s = setting_of(name, CFG_INT, false);
	const char *v = raw(c, name);

	if (!s->def || parse_int(name, s->def, min, max, out))
		bug(name, "has no default in the table that fits the caller's range");
	return v ? parse_int(name, v, min, max, out) : 0;
}

int cfg_bytes(const ap_config *c, const char *name, int64_t min, int64_t max, int64_t *out)
{
	const cfg_setting *s = setting_of(name, CFG_BYTES, false);
	const char *v = raw(c, name);

	if (!s->def || parse_bytes(name, s->def, min, max, out))
		bug(name, "has no default in the table that fits the caller's range");
	return v ? parse_bytes(name, v, min, max, out) : 0;
}

int cfg_bool(const ap_config *c, const char *name, bool *out)
{
	const cfg_setting *s = setting_of(name, CFG_BOOL, false);
	const char *v = raw(c, name);

	if (!s->def || parse_bool(name, s->def, out))
		bug(name, "has no boolean default in the table");
	return v ? parse_bool(name, v, out) : 0;
}

static int register_file(const char *path)
{
	ap_buf b = AP_BUF_INIT(1024 * 1024);
	int rc = fs_read_file(&b, path, 0);

	if (rc == AP_ENOTFOUND || rc == AP_EIO) {
		ap_error_clear();
		rc = 0; /* doctor and the App client report unreadable keys */
	} else if (!rc) {
		rc = redact_add_secret(ap_buf_str(&b));
	}
	ap_buf_release(&b);
	return rc;
}

/* The password of a URI's user-info part (scheme://user:PASSWORD@host/...), if any. */
static int register_uri_password(const char *uri)
{
	const char *p = strstr(uri, "://"), *end, *at, *colon;
	char *pw;
	int rc;

	if (!p)
		return 0;
	p += 3;
	end = p + strcspn(p, "/?#");
	at = memchr(p, '@', (size_t)(end - p));
	colon = at ? memchr(p, ':', (size_t)(at - p)) : NULL;
	if (!colon || colon + 1 >= at)
		return 0;
	pw = strndup(colon + 1, (size_t)(at - colon - 1));
	if (!pw)
		return ap_error_set(AP_ENOMEM, "out of memory");
	rc = redact_add_secret(pw);
	free(pw);
	return rc;
}

int cfg_register_secrets(const ap_config *c)
{
	int rc = 0;

	for (size_t i = 0; !rc && i < sizeof(settings) / sizeof(settings[0]); i++)
		if (settings[i].flags & CFG_SECRET)
			rc = redact_add_secret(raw(c, settings[i].name));
	for (size_t i = 0; !rc && i < sizeof(settings) / sizeof(settings[0]); i++)
		if ((settings[i].flags & CFG_SECRET_FILE) && raw(c, settings[i].name))
			rc = register_file(raw(c, settings[i].name));
	for (size_t i = 0; !rc && i < sizeof(settings) / sizeof(settings[0]); i++)
		if ((settings[i].flags & CFG_SECRET_URI) && raw(c, settings[i].name))
			rc = register_uri_password(raw(c, settings[i].name));
	return rc;
}

void cfg_free(ap_config *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++) {
		free(c->names[i]);
		free(c->values[i]);
	}
	free(c->names);
	free(c->values);
	free(c);
}

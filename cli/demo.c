/* SPDX-License-Identifier: MIT */
/* cli/demo.c - `autopatch demo`: the whole label -> draft PR loop on this machine.
 *
 * Starts, as child processes in a fresh temporary directory: the GitHub stand-in
 * (standins/github_stub.py) seeded with a copy of examples/calc and its issue, the scripted
 * model (standins/model_stub.py replaying the recorded calc session, unless AUTOPATCH_LLM_*
 * names a real model) and `autopatch serve` (this binary). Then it posts a signed
 * issues.labeled delivery, prints the progress comment whenever it changes, and finally the PR's
 * URL, diff and evidence. Exit 0 only when the PR exists and every child has stopped.
 */
#include "cli/commands.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/fs.h"
#include "common/httpc.h"
#include "common/redact.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define DEMO_REPO     "demo/calc"
#define HTTP_CAP      (8 * 1024 * 1024)
#define MAX_ENV	      512
#define STOP_GRACE_MS 30000

struct child {
	const char *name;
	pid_t pid;
	char log[1024];
};

/* The paths below are made of root (< 2048 bytes, checked where it is found), dir (the
 * mkdtemp template) and fixed names, so the PATH_MAX buffers built from them fit. */
struct demo {
	char root[2048]; /* the source tree (examples/, standins/) */
	char dir[512];	 /* temporary directory */
	char self[2048]; /* this binary */
	int gh_port, model_port, serve_port;
	char secret[65];
	bool real_model;
	struct child gh, model, serve;
	int64_t timeout_s;
};

/* SIGINT/SIGTERM: the demo stops what it started instead of leaving the children running. */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
	stop_signal = sig;
}

static int interrupted(void)
{
	return ap_error_set(AP_ECANCELLED, "interrupted by signal %d", (int)stop_signal);
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static bool exists(const char *dir, const char *rel)
{
	char p[PATH_MAX];
	struct stat st;

	if (ap_fmt(p, sizeof(p), "%s/%s", dir, rel)) {
		ap_error_clear(); /* too long to be the tree */
		return false;
	}
	return stat(p, &st) == 0;
}

/* The source tree: AUTOPATCH_SOURCE_ROOT, the binary's ../ (build/autopatch), or the cwd. */
static int find_root(struct demo *d, const ap_config *cfg)
{
	const char *env = cfg_str(cfg, "AUTOPATCH_SOURCE_ROOT");
	char buf[2048], *slash;
	ssize_t n;

	if (env && exists(env, "standins/github_stub.py")) {
		if (ap_fmt(d->root, sizeof(d->root), "%s", env))
			return ap_error_set(AP_EINVAL,
					    "AUTOPATCH_SOURCE_ROOT is longer than %zu bytes",
					    sizeof(d->root) - 1);
		return 0;
	}
	n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	if (n > 0 && n < (ssize_t)sizeof(buf) - 1) { /* a full buffer may be a cut path */
		buf[n] = '\0';
		snprintf(d->self, sizeof(d->self), "%s", buf);
		for (int up = 0; up < 3; up++) {
			slash = strrchr(buf, '/');
			if (!slash || slash == buf)
				break;
			*slash = '\0';
			if (exists(buf, "standins/github_stub.py") &&
			    exists(buf, "examples/calc")) {
				snprintf(d->root, sizeof(d->root), "%s", buf);
				return 0;
			}
		}
	}
	if (getcwd(buf, sizeof(buf)) && exists(buf, "standins/github_stub.py")) {
		snprintf(d->root, sizeof(d->root), "%s", buf);
		return 0;
	}
	return ap_error_set(AP_ENOTFOUND,
			    "cannot find the source tree (standins/github_stub.py"
			    " and examples/calc); run from the repository root or set "
			    "AUTOPATCH_SOURCE_ROOT");
}

static int free_port(void)
{
	struct sockaddr_in a = {0};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	if (fd < 0)
		return -1;
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

static int write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	size_t len = strlen(text), off = 0;

	if (fd < 0)
		return ap_error_set(AP_EIO, "cannot write %s: %s", path, strerror(errno));
	while (off < len) {
		ssize_t w = write(fd, text + off, len - off);

		if (w <= 0) {
			close(fd);
			return ap_error_set(AP_EIO, "cannot write %s: %s", path, strerror(errno));
		}
		off += (size_t)w;
	}
	close(fd);
	return 0;
}

/* The App's key pair: the private key for autopatch, the public one for the stand-in. */
static int make_app_key(const struct demo *d)
{
	char path[PATH_MAX];
	EVP_PKEY *key = EVP_RSA_gen(2048);
	FILE *f;
	int rc = 0;

	if (!key)
		return ap_error_set(AP_ENOMEM, "cannot generate an RSA key");
	snprintf(path, sizeof(path), "%s/app.pem", d->dir);
	f = fopen(path, "w");
	if (!f || !PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL))
		rc = ap_error_set(AP_EIO, "cannot write %s", path);
	if (f)
		fclose(f);
	snprintf(path, sizeof(path), "%s/app.pub", d->dir);
	f = rc ? NULL : fopen(path, "w");
	if (!rc && (!f || !PEM_write_PUBKEY(f, key)))
		rc = ap_error_set(AP_EIO, "cannot write %s", path);
	if (f)
		fclose(f);
	EVP_PKEY_free(key);
	return rc;
}

/* The seed: a copy of examples/calc as demo/calc with ISSUE.md as issue #1. */
static int write_seed(const struct demo *d, char **title, char **body)
{
	ap_buf issue = AP_BUF_INIT(64 * 1024);
	char path[PATH_MAX], src[PATH_MAX];
	cJSON *seed = NULL, *repos, *r, *issues, *i, *labels;
	char *text = NULL, *nl;
	int rc;

	snprintf(path, sizeof(path), "%s/examples/calc/ISSUE.md", d->root);
	rc = fs_read_file(&issue, path, 0);
	if (rc)
		goto out;
	nl = strchr(ap_buf_str(&issue), '\n');
	*title = strndup(ap_buf_str(&issue), nl ? (size_t)(nl - issue.data) : issue.len);
	*body = strdup(nl ? nl + 1 : "");
	snprintf(src, sizeof(src), "%s/examples/calc", d->root);
	seed = cJSON_CreateObject();
	repos = cJSON_AddArrayToObject(seed, "repos");
	r = cJSON_CreateObject();
	cJSON_AddItemToArray(repos, r);
	cJSON_AddStringToObject(r, "full_name", DEMO_REPO);
	cJSON_AddStringToObject(r, "source_dir", src);
	issues = cJSON_AddArrayToObject(r, "issues");
	i = cJSON_CreateObject();
	cJSON_AddItemToArray(issues, i);
	cJSON_AddStringToObject(i, "title", *title ? *title : "");
	cJSON_AddStringToObject(i, "body", *body ? *body : "");
	labels = cJSON_AddArrayToObject(i, "labels");
	cJSON_AddItemToArray(labels, cJSON_CreateString("autopatch"));
	text = cJSON_Print(seed);
	if (!text || !*title || !*body) {
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto out;
	}
	snprintf(path, sizeof(path), "%s/seed.json", d->dir);
	rc = write_file(path, text, 0600);
out:
	free(text);
	cJSON_Delete(seed);
	ap_buf_release(&issue);
	return rc;
}

/* Spawn argv with extra environment entries (NAME=value overriding the inherited ones); the
 * child's stdout and stderr go to its log file. */
static int spawn(struct child *c, const char *dir, char *const argv[], char *const extra[])
{
	posix_spawn_file_actions_t fa;
	char *envp[MAX_ENV];
	size_t n = 0;
	int rc;

	for (char *const *e = extra; *e && n < MAX_ENV - 1; e++)
		envp[n++] = *e;
	for (char **e = environ; *e && n < MAX_ENV - 1; e++) {
		bool overridden = false;
		size_t klen = strcspn(*e, "=");

		for (char *const *x = extra; *x && !overridden; x++)
			overridden = strncmp(*x, *e, klen) == 0 && (*x)[klen] == '=';
		if (!overridden)
			envp[n++] = *e;
	}
	envp[n] = NULL;
	snprintf(c->log, sizeof(c->log), "%s/%s.log", dir, c->name); /* d->dir + a short name */
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, c->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	rc = posix_spawn(&c->pid, argv[0], &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	if (rc) {
		c->pid = 0;
		return ap_error_set(AP_EIO, "cannot start %s: %s", c->name, strerror(rc));
	}
	return 0;
}

static bool child_alive(struct child *c)
{
	int status;

	if (c->pid <= 0)
		return false;
	if (waitpid(c->pid, &status, WNOHANG) == c->pid) {
		c->pid = -1;
		return false;
	}
	return true;
}

/* SIGTERM, wait up to the grace period, then SIGKILL. True when it is gone. */
static bool child_stop(struct child *c)
{
	int64_t end = ap_mono_ms() + STOP_GRACE_MS;
	int status;

	if (c->pid <= 0)
		return true;
	kill(c->pid, SIGTERM);
	while (ap_mono_ms() < end) {
		pid_t w = waitpid(c->pid, &status, WNOHANG);

		if (w == c->pid || (w < 0 && errno == ECHILD)) {
			c->pid = -1;
			return true;
		}
		sleep_ms(100);
	}
	kill(c->pid, SIGKILL);
	if (waitpid(c->pid, &status, 0) == c->pid) {
		c->pid = -1;
		return true;
	}
	return false;
}

/* One HTTP request to 127.0.0.1; returns the status (0 when none) and the body in out. */
static long http(const char *method, const char *url, struct curl_slist *hdrs, const char *body,
		 ap_buf *out)
{
	httpc_body sink = HTTPC_BODY_INIT(out);
	CURL *h = curl_easy_init();
	long status = 0;

	if (!h)
		return 0;
	ap_buf_reset(out);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	httpc_body_sink(h, &sink);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	if (body)
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	if (curl_easy_perform(h) == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(h);
	return status;
}

/* Wait until url answers 200 or the child dies. */
static int wait_ready(struct child *c, const char *url, int seconds)
{
	ap_buf b = AP_BUF_INIT(HTTP_CAP);
	int64_t end = ap_mono_ms() + (int64_t)seconds * 1000;
	long st = 0;

	while (!stop_signal && ap_mono_ms() < end && child_alive(c) &&
	       (st = http("GET", url, NULL, NULL, &b)) != 200)
		sleep_ms(100);
	ap_buf_release(&b);
	if (stop_signal)
		return interrupted();
	if (st == 200)
		return 0;
	return ap_error_set(AP_EUNAVAIL, "%s did not start (see %s)", c->name, c->log);
}

static void hex(const unsigned char *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

/* The issues.labeled delivery GitHub would send for issue #1, signed with the secret. */
static int post_delivery(const struct demo *d, const char *title, const char *body)
{
	unsigned char mac[32], rnd[16];
	unsigned int mac_len = 0;
	char sig[80] = "sha256=", sig_hdr[128], guid[64], url[128], rnd_hex[33];
	cJSON *p = cJSON_CreateObject(), *issue, *repo, *owner, *label, *labels, *sender, *inst;
	struct curl_slist *h = NULL;
	ap_buf resp = AP_BUF_INIT(HTTP_CAP);
	char *json;
	long st;

	cJSON_AddStringToObject(p, "action", "labeled");
	issue = cJSON_AddObjectToObject(p, "issue");
	cJSON_AddNumberToObject(issue, "number", 1);
	cJSON_AddStringToObject(issue, "title", title);
	cJSON_AddStringToObject(issue, "body", body);
	cJSON_AddStringToObject(issue, "state", "open");
	labels = cJSON_AddArrayToObject(issue, "labels");
	label = cJSON_CreateObject();
	cJSON_AddStringToObject(label, "name", "autopatch");
	cJSON_AddItemToArray(labels, label);
	cJSON_AddItemToObject(p, "label", cJSON_Duplicate(label, 1));
	repo = cJSON_AddObjectToObject(p, "repository");
	cJSON_AddNumberToObject(repo, "id", 1000);
	cJSON_AddStringToObject(repo, "name", "calc");
	cJSON_AddStringToObject(repo, "full_name", DEMO_REPO);
	owner = cJSON_AddObjectToObject(repo, "owner");
	cJSON_AddStringToObject(owner, "login", "demo");
	sender = cJSON_AddObjectToObject(p, "sender");
	cJSON_AddStringToObject(sender, "login", "octocat");
	cJSON_AddStringToObject(sender, "type", "User");
	inst = cJSON_AddObjectToObject(p, "installation");
	cJSON_AddNumberToObject(inst, "id", 1);
	json = cJSON_PrintUnformatted(p);
	cJSON_Delete(p);
	if (!json)
		return ap_error_set(AP_ENOMEM, "out of memory");
	HMAC(EVP_sha256(), d->secret, (int)strlen(d->secret), (const unsigned char *)json,
	     strlen(json), mac, &mac_len);
	hex(mac, mac_len, sig + 7);
	RAND_bytes(rnd, sizeof(rnd));
	hex(rnd, sizeof(rnd), rnd_hex);
	snprintf(guid, sizeof(guid), "X-GitHub-Delivery: %.8s-%.4s-%.4s-%.4s-%.12s", rnd_hex,
		 rnd_hex + 8, rnd_hex + 12, rnd_hex + 16, rnd_hex + 20);
	snprintf(sig_hdr, sizeof(sig_hdr), "X-Hub-Signature-256: %s", sig);
	h = curl_slist_append(h, "Content-Type: application/json");
	h = curl_slist_append(h, "X-GitHub-Event: issues");
	h = curl_slist_append(h, "User-Agent: GitHub-Hookshot/demo");
	h = curl_slist_append(h, guid);
	h = curl_slist_append(h, sig_hdr);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/api/github/webhooks", d->serve_port);
	st = http("POST", url, h, json, &resp);
	curl_slist_free_all(h);
	free(json);
	ap_buf_release(&resp);
	if (st != 202 && st != 200)
		return ap_error_set(AP_EHTTP, "the webhook answered %ld (see %s)", st,
				    d->serve.log);
	printf("==> posted a signed issues.labeled delivery for %s#1 (HTTP %ld)\n", DEMO_REPO, st);
	return 0;
}

/* The progress comment in the terminal: drop the hidden marker and the <details> tags. */
static void print_comment(const char *body)
{
	const char *p = body;

	printf("\n---- progress comment (edited in place on the issue) ----\n");
	while (p && *p) {
		const char *eol = strchr(p, '\n');
		size_t n = eol ? (size_t)(eol - p) : strlen(p);

		if (!(n >= 4 && strncmp(p, "<!--", 4) == 0) &&
		    !(n >= 9 && strncmp(p, "<details>", 9) == 0) &&
		    !(n >= 10 && strncmp(p, "</details>", 10) == 0))
			printf("  %.*s\n", (int)n, p);
		p = eol ? eol + 1 : NULL;
	}
	fflush(stdout);
}

static cJSON *stub_state(const struct demo *d)
{
	ap_buf b = AP_BUF_INIT(HTTP_CAP);
	char url[128];
	cJSON *j = NULL;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/_stub/state", d->gh_port);
	if (http("GET", url, NULL, NULL, &b) == 200)
		j = cJSON_Parse(ap_buf_str(&b));
	ap_buf_release(&b);
	return j;
}

/* Print the diff between the default branch and the PR's head from the stand-in's repo. */
static void print_diff(const char *bare, const char *base, const char *head)
{
	char *argv[] = {"/usr/bin/git", "--no-pager", "--git-dir", (char *)bare, "diff",
			"--stat",	"-p",	      NULL,	   NULL,	 NULL};
	char range[512];
	pid_t pid;
	int status;

	if (ap_fmt(range, sizeof(range), "%s...%s", base, head)) {
		fprintf(stderr, "autopatch: no diff to show: %s\n", ap_error_last());
		ap_error_clear();
		return;
	}
	argv[7] = range;
	fflush(stdout);
	if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) == 0)
		waitpid(pid, &status, 0);
}

/* Poll the stand-in: print the comment when it changes; stop at a final state. Returns 0 when
 * the PR exists. */
static int watch(struct demo *d)
{
	char *last = NULL;
	int64_t end = ap_mono_ms() + d->timeout_s * 1000;
	int rc = AP_ETIMEOUT;
	bool final = false;

	while (ap_mono_ms() < end && !final) {
		cJSON *st, *repo, *comments, *c, *pulls, *pr;

		if (stop_signal) {
			rc = interrupted();
			break;
		}
		st = stub_state(d);

		repo = cJSON_GetObjectItem(cJSON_GetObjectItem(st, "repos"), DEMO_REPO);
		comments = cJSON_GetObjectItem(repo, "comments");
		cJSON_ArrayForEach (c, comments) {
			const char *b = cJSON_GetStringValue(cJSON_GetObjectItem(c, "body"));
			cJSON *user = cJSON_GetObjectItem(c, "user");
			const char *login =
			    cJSON_GetStringValue(cJSON_GetObjectItem(user, "login"));

			if (!b || !login || !strstr(login, "[bot]") ||
			    !strstr(b, "autopatch:progress"))
				continue;
			if (!last || strcmp(last, b) != 0) {
				free(last);
				last = strdup(b);
				print_comment(b);
			}
			if (strstr(b, "could not fix") || strstr(b, "was cancelled")) {
				final = true;
				rc = ap_error_set(AP_EINVAL,
						  "the job did not produce a pull request");
			}
			if (strstr(b, "opened a pull request"))
				final = true;
		}
		pulls = cJSON_GetObjectItem(repo, "pulls");
		pr = cJSON_GetArrayItem(pulls, 0);
		if (pr && final) {
			cJSON *head = cJSON_GetObjectItem(pr, "head");
			cJSON *base = cJSON_GetObjectItem(pr, "base");
			const char *body = cJSON_GetStringValue(cJSON_GetObjectItem(pr, "body"));

			printf("\n==> draft pull request: %s\n    title: %s\n    branch: %s\n",
			       cJSON_GetStringValue(cJSON_GetObjectItem(pr, "html_url")),
			       cJSON_GetStringValue(cJSON_GetObjectItem(pr, "title")),
			       cJSON_GetStringValue(cJSON_GetObjectItem(head, "ref")));
			printf("\n---- diff ----\n");
			print_diff(cJSON_GetStringValue(cJSON_GetObjectItem(repo, "bare")),
				   cJSON_GetStringValue(cJSON_GetObjectItem(base, "ref")),
				   cJSON_GetStringValue(cJSON_GetObjectItem(head, "ref")));
			printf("\n---- pull request body (summary, cause, repro test, evidence) "
			       "----\n%s\n",
			       body ? body : "");
			rc = 0;
		}
		cJSON_Delete(st);
		if (!final && !child_alive(&d->serve)) {
			rc = ap_error_set(AP_EIO, "autopatch serve exited early (see %s)",
					  d->serve.log);
			break;
		}
		if (!final)
			sleep_ms(300);
	}
	if (rc == AP_ETIMEOUT)
		ap_error_set(AP_ETIMEOUT, "no pull request after %" PRId64 " s (see %s)",
			     d->timeout_s, d->serve.log);
	free(last);
	return rc;
}

/* Start the GitHub stand-in with the seeded repository and wait until it answers. */
static int start_github_stub(struct demo *d)
{
	char gh_port[16], state[PATH_MAX], pub[PATH_MAX], seed[PATH_MAX], gh_py[PATH_MAX];
	char url[160];
	int rc;

	snprintf(gh_port, sizeof(gh_port), "%d", d->gh_port);
	snprintf(state, sizeof(state), "%s/github", d->dir);
	snprintf(pub, sizeof(pub), "%s/app.pub", d->dir);
	snprintf(seed, sizeof(seed), "%s/seed.json", d->dir);
	snprintf(gh_py, sizeof(gh_py), "%s/standins/github_stub.py", d->root);
	{
		char *argv[] = {"/usr/bin/python3",
				gh_py,
				"--port",
				gh_port,
				"--state-dir",
				state,
				"--app-key-pub",
				pub,
				"--app-id",
				"1",
				"--seed",
				seed,
				NULL};
		char *extra[] = {NULL};

		d->gh.name = "github-stub";
		rc = spawn(&d->gh, d->dir, argv, extra);
		if (rc)
			return rc;
	}
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/_stub/health", d->gh_port);
	rc = wait_ready(&d->gh, url, 30);
	if (rc)
		return rc;
	printf("==> GitHub stand-in on 127.0.0.1:%d with a copy of examples/calc as %s and its "
	       "issue #1\n",
	       d->gh_port, DEMO_REPO);
	return 0;
}

/* Start the scripted model stand-in, or say which real model the demo uses. */
static int start_model(struct demo *d, const ap_config *cfg)
{
	char model_py[PATH_MAX], script[PATH_MAX], model_port[16], url[160];
	int rc;

	if (d->real_model) {
		const char *model = cfg_str(cfg, "AUTOPATCH_LLM_MODEL");
		const char *base = cfg_str(cfg, "AUTOPATCH_LLM_BASE_URL");

		printf("==> model: %s at %s (from AUTOPATCH_LLM_*)\n",
		       model ? model : "(default model)", base ? base : "(provider default URL)");
		return 0;
	}
	snprintf(model_py, sizeof(model_py), "%s/standins/model_stub.py", d->root);
	snprintf(script, sizeof(script), "%s/standins/scripts/calc_happy.json", d->root);
	snprintf(model_port, sizeof(model_port), "%d", d->model_port);
	char *argv[] = {"/usr/bin/python3", model_py, "--port", model_port,
			"--script",	    script,   NULL};
	char *extra[] = {NULL};

	d->model.name = "model-stub";
	rc = spawn(&d->model, d->dir, argv, extra);
	if (rc)
		return rc;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/_stub/requests", d->model_port);
	rc = wait_ready(&d->model, url, 30);
	if (rc)
		return rc;
	printf("==> model: this demo REPLAYS A RECORDED SESSION (standins/scripts/"
	       "calc_happy.json) from a scripted stand-in on 127.0.0.1:%d; set "
	       "AUTOPATCH_LLM_BASE_URL and AUTOPATCH_LLM_MODEL to use a real model\n",
	       d->model_port);
	return 0;
}

/* The environment entries of `autopatch serve` that depend on the demo's directory, ports and
 * owner id. */
struct serve_env {
	char port[32], api[96], key[PATH_MAX + 24], secret[96], db[PATH_MAX + 16];
	char data[PATH_MAX + 24], base[96], owner[160], root[PATH_MAX + 32];
	char admin[PATH_MAX + 40];
};

static int serve_env_fill(struct serve_env *e, const struct demo *d, const ap_config *cfg)
{
	snprintf(e->port, sizeof(e->port), "PORT=%d", d->serve_port);
	snprintf(e->api, sizeof(e->api), "GITHUB_API_URL=http://127.0.0.1:%d", d->gh_port);
	snprintf(e->key, sizeof(e->key), "PRIVATE_KEY_PATH=%s/app.pem", d->dir);
	snprintf(e->secret, sizeof(e->secret), "WEBHOOK_SECRET=%s", d->secret);
	snprintf(e->db, sizeof(e->db), "AUTOPATCH_DB=%s/autopatch.db", d->dir);
	snprintf(e->data, sizeof(e->data), "AUTOPATCH_DATA_DIR=%s/data", d->dir);
	snprintf(e->base, sizeof(e->base), "AUTOPATCH_LLM_BASE_URL=http://127.0.0.1:%d/v1",
		 d->model_port);
	/* Boxes are labelled with the owner id: keep the caller's, so it can find them. */
	if (cfg_is_set(cfg, "AUTOPATCH_OWNER_ID")) {
		if (ap_fmt(e->owner, sizeof(e->owner), "AUTOPATCH_OWNER_ID=%s",
			   cfg_str(cfg, "AUTOPATCH_OWNER_ID")))
			return ap_error_set(AP_EINVAL,
					    "AUTOPATCH_OWNER_ID is longer than %zu bytes",
					    sizeof(e->owner) - sizeof("AUTOPATCH_OWNER_ID="));
	} else {
		snprintf(e->owner, sizeof(e->owner), "AUTOPATCH_OWNER_ID=demo-%d", (int)getpid());
	}
	snprintf(e->root, sizeof(e->root), "AUTOPATCH_SOURCE_ROOT=%s", d->root);
	/* The status page on a unix socket in the demo's directory: no port to collide on. */
	snprintf(e->admin, sizeof(e->admin), "AUTOPATCH_ADMIN_LISTEN=unix:%s/admin.sock", d->dir);
	return 0;
}

/* Start `autopatch serve` against the stand-ins and wait until it answers. */
static int start_serve(struct demo *d, const ap_config *cfg)
{
	struct serve_env e;
	char url[160];
	int rc;

	rc = serve_env_fill(&e, d, cfg);
	if (rc)
		return rc;
	{
		char *argv[] = {d->self, "serve", NULL};
		char *fake[] = {e.port,
				e.api,
				e.key,
				e.secret,
				e.db,
				e.data,
				e.owner,
				e.root,
				e.admin,
				"APP_ID=1",
				"AUTOPATCH_BIND=127.0.0.1",
				"AUTOPATCH_WORKERS=1",
				"AUTOPATCH_LABEL=autopatch",
				"WEBHOOK_PATH=/api/github/webhooks",
				"AUTOPATCH_ENV_FILE=/dev/null",
				e.base,
				"AUTOPATCH_LLM_PROVIDER=openai",
				"AUTOPATCH_LLM_MODEL=recorded-calc-session",
				"AUTOPATCH_LLM_API_KEY=demo-not-a-real-key",
				NULL};

		/* With a real model, keep the user's AUTOPATCH_LLM_* (the entries from e.base on).
		 */
		for (size_t i = 0; d->real_model && fake[i]; i++)
			if (fake[i] == e.base)
				fake[i] = NULL;
		d->serve.name = "autopatch-serve";
		rc = spawn(&d->serve, d->dir, argv, fake);
		if (rc)
			return rc;
	}
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/healthz", d->serve_port);
	rc = wait_ready(&d->serve, url, 60);
	if (rc)
		return rc;
	printf("==> autopatch serve on 127.0.0.1:%d (pid %d, log: %s)\n", d->serve_port,
	       (int)d->serve.pid, d->serve.log);
	printf("==> status page: curl --unix-socket %s/admin.sock http://localhost/\n", d->dir);
	return 0;
}

/* Start the GitHub stand-in, the model (stand-in unless a real one is configured) and
 * `autopatch serve`, in that order. */
static int start_children(struct demo *d, const ap_config *cfg)
{
	int rc;

	rc = start_github_stub(d);
	if (!rc)
		rc = start_model(d, cfg);
	if (!rc)
		rc = start_serve(d, cfg);
	return rc;
}

/* SIGINT and SIGTERM end the demo through stop_signal, so the children are stopped. */
static void catch_stop_signals(void)
{
	struct sigaction sa = {0};

	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* Stop every child; remove the demo's directory unless its logs are needed. Returns rc, or
 * AP_EIO when rc was 0 and a child did not stop. */
static int stop_and_clean(struct demo *d, int rc)
{
	bool stopped;

	printf("\n==> stopping the processes the demo started\n");
	stopped = child_stop(&d->serve);
	stopped = child_stop(&d->model) && stopped;
	stopped = child_stop(&d->gh) && stopped;
	if (!stopped) {
		fprintf(stderr, "autopatch demo: a child process did not stop\n");
		if (!rc)
			rc = AP_EIO;
	}
	if (rc == 0) {
		fs_rm_rf(d->dir);
		printf("==> done: the draft pull request exists and every process has stopped\n");
	} else if (stop_signal && stopped) {
		fs_rm_rf(d->dir); /* the user asked to quit, not to debug */
		printf("==> interrupted: every process the demo started has stopped\n");
	} else {
		printf("==> logs kept in %s\n", d->dir);
	}
	return rc;
}

int demo_main(int argc, char **argv, ap_config *cfg)
{
	struct demo d = {0};
	unsigned char rnd[32];
	char *title = NULL, *body = NULL, tmpl[] = "/tmp/autopatch-demo-XXXXXX";
	int rc;

	(void)argv;
	if (argc > 1) {
		fprintf(stderr, "usage: autopatch demo\n");
		return 2;
	}
	rc = cfg_int(cfg, "AUTOPATCH_DEMO_TIMEOUT", 10, 86400, &d.timeout_s);
	if (rc) {
		fprintf(stderr, "autopatch: %s\n", ap_error_last());
		return 2;
	}
	if (find_root(&d, cfg)) {
		fprintf(stderr, "autopatch: %s\n", ap_error_last());
		return 2;
	}
	if (!d.self[0] && readlink("/proc/self/exe", d.self, sizeof(d.self) - 1) <= 0) {
		fprintf(stderr, "autopatch: cannot find my own binary\n");
		return 2;
	}
	d.real_model =
	    cfg_is_set(cfg, "AUTOPATCH_LLM_BASE_URL") || cfg_is_set(cfg, "AUTOPATCH_LLM_MODEL");
	/* Progress is meant to be watched, also through a pipe (`autopatch demo | tee`). */
	setvbuf(stdout, NULL, _IOLBF, 0);
	catch_stop_signals();
	if (!mkdtemp(tmpl)) {
		fprintf(stderr, "autopatch: cannot create a temporary directory: %s\n",
			strerror(errno));
		return 1;
	}
	snprintf(d.dir, sizeof(d.dir), "%s", tmpl);
	RAND_bytes(rnd, sizeof(rnd));
	hex(rnd, sizeof(rnd), d.secret);
	redact_add_secret(d.secret);
	d.gh_port = free_port();
	d.model_port = free_port();
	d.serve_port = free_port();
	printf("==> autopatch demo in %s\n", d.dir);
	rc = httpc_global_init();
	if (!rc)
		rc = make_app_key(&d);
	if (!rc)
		rc = write_seed(&d, &title, &body);
	if (!rc)
		rc = start_children(&d, cfg);
	if (!rc)
		rc = post_delivery(&d, title, body);
	if (!rc)
		rc = watch(&d);
	if (rc)
		fprintf(stderr, "autopatch demo: %s\n", ap_error_last());
	rc = stop_and_clean(&d, rc);
	free(title);
	free(body);
	if (stop_signal)
		return 128 + (int)stop_signal;
	return rc == 0 ? 0 : 1;
}

/* SPDX-License-Identifier: MIT */
/* tests/github/gh_test_util.c - see gh_test_util.h. */
#include "gh_test_util.h"

#include "common/buf.h"
#include "common/httpc.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int gh_sh(char **out, const char *fmt, ...)
{
	char cmd[4096], chunk[4096];
	ap_buf b = AP_BUF_INIT(16 << 20);
	va_list ap;
	FILE *p;
	size_t n;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0)
		ap_buf_add(&b, chunk, n);
	st = pclose(p);
	if (out)
		*out = ap_buf_take(&b);
	ap_buf_release(&b);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int gh_stub_start(gh_stub *s)
{
	const char *root = getenv("AP_SOURCE_ROOT");
	char tmpl[] = "/tmp/ap-gh-test-XXXXXX", script[512], line[256];
	int fds[2];
	FILE *f;

	memset(s, 0, sizeof(*s));
	if (!root || !mkdtemp(tmpl))
		return fprintf(stderr, "AP_SOURCE_ROOT unset or mkdtemp failed\n"), -1;
	snprintf(s->dir, sizeof(s->dir), "%s", tmpl);
	snprintf(s->key, sizeof(s->key), "%s/app.pem", s->dir);
	snprintf(s->pub, sizeof(s->pub), "%s/app.pub.pem", s->dir);
	snprintf(s->app_id, sizeof(s->app_id), "12345");
	if (gh_sh(NULL,
		  "openssl genrsa -traditional -out %s 2048 2>/dev/null && "
		  "openssl rsa -in %s -pubout -out %s 2>/dev/null",
		  s->key, s->key, s->pub) != 0)
		return fprintf(stderr, "openssl genrsa failed\n"), -1;
	snprintf(script, sizeof(script), "%s/standins/github_stub.py", root);
	if (pipe(fds))
		return -1;
	s->pid = fork();
	if (s->pid < 0)
		return -1;
	if (s->pid == 0) {
		char state[300];

		snprintf(state, sizeof(state), "%s/stub", s->dir);
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		execl("/usr/bin/python3", "python3", script, "--port", "0", "--state-dir", state,
		      "--app-key-pub", s->pub, "--app-id", s->app_id, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	if (!f || !fgets(line, sizeof(line), f)) {
		fprintf(stderr, "the stub did not start\n");
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	{
		const char *u = strstr(line, "http://");

		if (!u)
			return -1;
		snprintf(s->url, sizeof(s->url), "%.*s", (int)strcspn(u, "\r\n"), u);
	}
	return 0;
}

void gh_stub_stop(gh_stub *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGTERM);
		waitpid(s->pid, NULL, 0);
		s->pid = 0;
	}
	if (s->dir[0] && strncmp(s->dir, "/tmp/ap-gh-test-", 16) == 0)
		gh_sh(NULL, "rm -rf %s", s->dir);
}

long gh_stub_http(const gh_stub *s, const char *method, const char *path, const char *json,
		  char **body)
{
	ap_buf b = AP_BUF_INIT(64 << 20);
	httpc_body sink = HTTPC_BODY_INIT(&b);
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	char url[512];
	long status = -1;
	CURL *c;

	httpc_global_init(); /* a failure shows as curl_easy_perform's */
	c = curl_easy_init();
	snprintf(url, sizeof(url), "%s%s", s->url, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	httpc_body_sink(c, &sink);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
	if (json)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, json);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	curl_slist_free_all(h);
	if (body)
		*body = ap_buf_take(&b);
	ap_buf_release(&b);
	return status;
}

int gh_stub_count(const gh_stub *s, const char *method, const char *needle)
{
	char *body = NULL;
	cJSON *list, *it;
	int n = 0;

	if (gh_stub_http(s, "GET", "/_stub/requests", NULL, &body) != 200) {
		free(body);
		return -1;
	}
	list = cJSON_Parse(body);
	free(body);
	cJSON_ArrayForEach (it, list) {
		const char *m = cJSON_GetStringValue(cJSON_GetObjectItem(it, "method"));
		const char *p = cJSON_GetStringValue(cJSON_GetObjectItem(it, "path"));

		if (m && p && (!method || strcmp(m, method) == 0) && strstr(p, needle))
			n++;
	}
	cJSON_Delete(list);
	return n;
}

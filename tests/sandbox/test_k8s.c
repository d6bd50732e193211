/* SPDX-License-Identifier: MIT */
/* tests/sandbox/test_k8s.c - the Kubernetes backend's parsers of outside input: the kubeconfig
 * reader and the exec channel demultiplexer with its Status reader; and the size rule its
 * memory-backed emptyDirs (and Docker's tmpfs mounts) follow. */
#include "common/err.h"
#include "sandbox/internal.h"
#include "sandbox/k8s_api.h"
#include "sandbox/k8s_exec.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* --- kubeconfig ------------------------------------------------------------------------ */

static const char kc_token[] = "apiVersion: v1\n"
			       "kind: Config\n"
			       "current-context: b\n"
			       "clusters:\n"
			       "- name: other\n"
			       "  cluster: {server: https://wrong.example}\n"
			       "- name: k\n"
			       "  cluster:\n"
			       "    server: https://10.0.0.1:6443\n"
			       "    certificate-authority-data: aGVsbG8gY2E=\n"
			       "users:\n"
			       "- name: u\n"
			       "  user:\n"
			       "    token: s3cret\n"
			       "contexts:\n"
			       "- name: a\n"
			       "  context: {cluster: other, user: u}\n"
			       "- name: b\n"
			       "  context: {cluster: k, user: u, namespace: team}\n";

static void test_kubeconfig_token(void **state)
{
	k8s_kubeconfig k;

	(void)state;
	assert_int_equal(k8s_kubeconfig_parse(kc_token, strlen(kc_token), NULL, &k), 0);
	assert_string_equal(k.server, "https://10.0.0.1:6443");
	assert_string_equal(k.ca_pem, "hello ca");
	assert_string_equal(k.token, "s3cret");
	assert_string_equal(k.namespace, "team");
	assert_null(k.cert_pem);
	assert_false(k.insecure);
	k8s_kubeconfig_release(&k);
}

static void test_kubeconfig_json_and_files(void **state)
{
	char dir[] = "/tmp/test-k8s-XXXXXX", path[256];
	const char *text = "{\"current-context\": \"c\", \"clusters\": [{\"name\": \"k\", "
			   "\"cluster\": {\"server\": \"https://h\", \"certificate-authority\": "
			   "\"ca.pem\"}}], \"users\": [{\"name\": \"u\", \"user\": "
			   "{\"client-certificate\": \"c.pem\", \"client-key\": \"k.pem\"}}], "
			   "\"contexts\": [{\"name\": \"c\", \"context\": {\"cluster\": \"k\", "
			   "\"user\": \"u\"}}]}";
	k8s_kubeconfig k;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	for (int i = 0; i < 3; i++) {
		const char *names[] = {"ca.pem", "c.pem", "k.pem"};

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		f = fopen(path, "w");
		fprintf(f, "file %d", i);
		fclose(f);
	}
	assert_int_equal(k8s_kubeconfig_parse(text, strlen(text), dir, &k), 0);
	assert_string_equal(k.ca_pem, "file 0");
	assert_string_equal(k.cert_pem, "file 1");
	assert_string_equal(k.key_pem, "file 2");
	assert_null(k.token);
	k8s_kubeconfig_release(&k);
	/* Without a dir (the fuzzer), a named file is refused. */
	assert_int_equal(k8s_kubeconfig_parse(text, strlen(text), NULL, &k), AP_EINVAL);
	for (int i = 0; i < 3; i++) {
		const char *names[] = {"ca.pem", "c.pem", "k.pem"};

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
}

static void test_kubeconfig_refusals(void **state)
{
	static const char *const bad[] = {
	    "- a list\n",
	    "current-context: nope\ncontexts: []\n",
	    "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k}\n",
	    "current-context: c\nclusters:\n- name: k\n  cluster: {server: https://h}\n"
	    "users:\n- name: u\n  user: {exec: {command: aws}}\ncontexts:\n- name: c\n"
	    "  context: {cluster: k, user: u}\n",
	    "current-context: c\nclusters:\n- name: k\n  cluster: {server: https://h}\n"
	    "users:\n- name: u\n  user: {client-certificate-data: aGk=}\ncontexts:\n- name: c\n"
	    "  context: {cluster: k, user: u}\n",
	    "current-context: c\nclusters:\n- name: k\n  cluster: {server: https://h, "
	    "certificate-authority-data: '!!!'}\ncontexts:\n- name: c\n  context: {cluster: k}\n",
	    "a: [\n",
	    NULL};
	k8s_kubeconfig k;

	(void)state;
	for (const char *const *t = bad; *t; t++) {
		int rc = k8s_kubeconfig_parse(*t, strlen(*t), NULL, &k);

		assert_int_equal(rc, AP_EINVAL);
		assert_null(strstr(ap_error_last(), "s3cret"));
	}
	/* The exec plugin's refusal says what to do instead. */
	k8s_kubeconfig_parse(bad[3], strlen(bad[3]), NULL, &k);
	assert_non_null(strstr(ap_error_last(), "exec or auth-provider plugin"));
}

static void test_kubeconfig_depth(void **state)
{
	char text[4096] = "current-context: c\nx: ";
	size_t n = strlen(text);

	(void)state;
	for (int i = 0; i < 100; i++)
		text[n++] = '[';
	text[n] = '\0';
	for (int i = 0; i < 100; i++)
		text[n++] = ']';
	text[n++] = '\n';
	text[n] = '\0';
	k8s_kubeconfig k;
	assert_int_equal(k8s_kubeconfig_parse(text, n, NULL, &k), AP_EINVAL);
}

/* --- the channel demultiplexer --------------------------------------------------------- */

struct got {
	char out[256], err[256];
	size_t out_len, err_len;
};

static void on_payload(void *ud, int stream, const char *p, size_t n)
{
	struct got *g = ud;

	if (stream == 1) {
		memcpy(g->out + g->out_len, p, n);
		g->out_len += n;
	} else {
		memcpy(g->err + g->err_len, p, n);
		g->err_len += n;
	}
}

/* Feed one message in pieces of step bytes. */
static int feed(k8s_chan *d, const char *m, size_t len, size_t step, struct got *g)
{
	size_t done = 0;
	int rc = 0;

	do {
		size_t n = len - done < step ? len - done : step;

		rc = k8s_chan_feed(d, m + done, n, done + n == len, on_payload, g);
		done += n;
	} while (!rc && done < len);
	return rc;
}

static void test_chan_v5_split_anywhere(void **state)
{
	static const char st[] =
	    "\x03{\"metadata\":{},\"status\":\"Failure\",\"message\":\"command terminated\","
	    "\"reason\":\"NonZeroExitCode\",\"details\":{\"causes\":[{\"reason\":\"ExitCode\","
	    "\"message\":\"42\"}]}}";

	(void)state;
	for (size_t step = 1; step < 8; step++) {
		k8s_chan d;
		struct got g = {0};
		int code = -1;

		k8s_chan_init(&d, true);
		assert_int_equal(feed(&d, "\x01hello ", 7, step, &g), 0);
		assert_int_equal(feed(&d, "\x02oops", 5, step, &g), 0);
		assert_int_equal(feed(&d, "\x01world", 6, step, &g), 0);
		assert_int_equal(feed(&d, "", 0, step, &g), 0); /* empty: ignored */
		assert_int_equal(feed(&d, "\xff\x01", 2, step, &g), 0);
		/* A stdout message whose payload starts with a channel-like byte is just bytes. */
		assert_int_equal(feed(&d, "\x01\x03\x02", 3, step, &g), 0);
		assert_int_equal(feed(&d, st, sizeof(st) - 1, step, &g), 0);
		assert_int_equal(k8s_chan_exit_code(&d, &code), 0);
		assert_int_equal(code, 42);
		assert_int_equal(g.out_len, 13);
		assert_memory_equal(g.out, "hello world\x03\x02", 13);
		assert_int_equal(g.err_len, 4);
	}
}

static void test_chan_refusals(void **state)
{
	k8s_chan d;
	struct got g = {0};
	int code;
	char *big = malloc(K8S_STATUS_CAP + 2);

	(void)state;
	k8s_chan_init(&d, false);
	assert_int_equal(feed(&d, "\xff\x00", 2, 2, &g), AP_EIO); /* no close channel on v4 */
	assert_int_equal(feed(&d, "\x01x", 2, 2, &g), AP_EIO);	  /* refused after an error */
	k8s_chan_init(&d, true);
	assert_int_equal(feed(&d, "\x00stdin", 6, 3, &g), AP_EIO);
	k8s_chan_init(&d, true);
	assert_int_equal(feed(&d, "\x07?", 2, 1, &g), AP_EIO);
	k8s_chan_init(&d, true);
	big[0] = 3;
	memset(big + 1, 'x', K8S_STATUS_CAP + 1);
	assert_int_equal(feed(&d, big, K8S_STATUS_CAP + 2, 4096, &g), AP_EIO);
	free(big);
	k8s_chan_init(&d, true);
	assert_int_equal(feed(&d, "\x03{\"status\":\"Success\"}", 21, 5, &g), 0);
	assert_int_equal(feed(&d, "\x03{}", 3, 5, &g), AP_EIO); /* a second status */
	k8s_chan_init(&d, true);
	assert_int_equal(k8s_chan_exit_code(&d, &code), AP_EIO); /* no status at all */
	static const char *const statuses[] = {
	    "\x03not json",
	    "\x03{\"status\":\"Failure\",\"reason\":\"InternalError\",\"message\":\"boom\"}",
	    "\x03{\"status\":\"Failure\",\"reason\":\"NonZeroExitCode\",\"details\":{\"causes\":"
	    "[{\"reason\":\"ExitCode\",\"message\":\"999\"}]}}",
	    NULL};
	for (const char *const *s = statuses; *s; s++) {
		k8s_chan_init(&d, true);
		assert_int_equal(feed(&d, *s, strlen(*s), 3, &g), 0);
		assert_int_equal(k8s_chan_exit_code(&d, &code), AP_EIO);
	}
	assert_non_null(strstr(ap_error_last(), "NonZeroExitCode"));
	k8s_chan_init(&d, true);
	assert_int_equal(feed(&d, "\x03{\"status\":\"Success\"}", 21, 21, &g), 0);
	assert_int_equal(k8s_chan_exit_code(&d, &code), 0);
	assert_int_equal(code, 0);
}

/* Files in a tmpfs count against the memory: the mounts may hold 15/16 of it, VOLUMEs
 * included, and the refusal names every size. */
static void test_sizes_fit_the_memory(void **state)
{
	sbx_spec s = SBX_SPEC_INIT;

	(void)state;
	s.memory_bytes = 256LL << 20;
	s.tmp_bytes = 32LL << 20;
	s.workspace_bytes = 64LL << 20;
	s.trees_bytes = 128LL << 20;
	s.volume_bytes = 8LL << 20;
	assert_int_equal(sbx__files_max(s.memory_bytes), 240LL << 20);
	assert_int_equal(sbx__sizes_check(&s, 0), 0);
	assert_int_equal(sbx__sizes_check(&s, 2), 0); /* 240m: exactly the most */
	assert_int_equal(sbx__sizes_check(&s, 3), AP_EINVAL);
	assert_non_null(strstr(ap_error_last(), "would hold up to 248m"));
	assert_non_null(strstr(ap_error_last(), "3 image VOLUME(s) of _VOLUME_SIZE 8m"));
	assert_non_null(strstr(ap_error_last(), "AUTOPATCH_SANDBOX_MEMORY=256m"));
	/* The old defaults against a 2g box: 3.25g of tmpfs. */
	s.memory_bytes = 2LL << 30;
	s.tmp_bytes = 256LL << 20;
	s.workspace_bytes = 1LL << 30;
	s.trees_bytes = 2LL << 30;
	assert_int_equal(sbx__sizes_check(&s, 0), AP_EINVAL);
	assert_non_null(strstr(ap_error_last(), "would hold up to 3.25g"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kubeconfig_token),
	    cmocka_unit_test(test_kubeconfig_json_and_files),
	    cmocka_unit_test(test_kubeconfig_refusals),
	    cmocka_unit_test(test_kubeconfig_depth),
	    cmocka_unit_test(test_chan_v5_split_anywhere),
	    cmocka_unit_test(test_chan_refusals),
	    cmocka_unit_test(test_sizes_fit_the_memory),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

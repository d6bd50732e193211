/* SPDX-License-Identifier: MIT */
/* job/baseline_cache.c - the pristine suite's per-test results kept across jobs
 * (baseline_cache.h). */
#include "job/baseline_cache.h"

#include "agents/report.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/fs.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define MAGIC	     "autopatch-baseline 1\n"
#define STATUS_CAP   (64u << 10) /* bytes of `git status` read: more is not clean anyway */
#define HEAD_LINE    "# branch.oid "
#define NUM_LINE_MAX 96 /* bytes of one line of numbers in an entry */

/* Run `git status` on dir: 0 with out holding its stdout, when it exited 0. */
static int git_status(const char *dir, ap_buf *out)
{
	/* No optional locks: a status must not write the index of a checkout others read. */
	const char *argv[] = {"git",
			      "--no-optional-locks",
			      "-C",
			      dir,
			      "-c",
			      "core.fsmonitor=false",
			      "status",
			      "--porcelain=v2",
			      "--branch",
			      "--ignored=matching",
			      "--untracked-files=all",
			      NULL};
	posix_spawn_file_actions_t fa;
	int pfd[2], status = 0, rc = 0;
	pid_t pid;
	char chunk[4096];
	ssize_t n;

	if (pipe2(pfd, O_CLOEXEC))
		return AP_EIO;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	rc = posix_spawnp(&pid, "git", &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	if (rc) {
		close(pfd[0]);
		return AP_EIO;
	}
	rc = 0;
	while ((n = read(pfd[0], chunk, sizeof(chunk))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || (rc == 0 && ap_buf_add(out, chunk, (size_t)n)))
			rc = AP_EIO; /* keep reading: git must not block on a full pipe */
	}
	close(pfd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (rc == 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
		rc = AP_EIO;
	return rc;
}

/* The HEAD id of dir when the working tree is exactly that commit, else "". */
static void clean_head(const char *dir, char *out, size_t n)
{
	ap_buf b = AP_BUF_INIT(STATUS_CAP);
	const char *s, *e;

	out[0] = '\0';
	if (git_status(dir, &b) || !b.data)
		goto out;
	ap_error_clear();
	s = b.data;
	for (const char *line = s; line < s + b.len; line = e + 1) {
		if (!(e = memchr(line, '\n', (size_t)(s + b.len - line))))
			break;
		if (line[0] != '#') { /* a changed, untracked or ignored path */
			out[0] = '\0';
			goto out;
		}
		size_t hl = strlen(HEAD_LINE), idl = (size_t)(e - line) - hl;
		if ((size_t)(e - line) > hl && strncmp(line, HEAD_LINE, hl) == 0 && idl < n &&
		    strspn(line + hl, "0123456789abcdef") == idl)
			snprintf(out, n, "%.*s", (int)idl, line + hl);
	}
out:
	ap_error_clear();
	ap_buf_release(&b);
}

void baseline_cache_init(baseline_cache *c, const ap_config *cfg, const char *repo_id,
			 const char *repo_dir, const char *env_key, const char *image_id)
{
	const char *data = cfg ? cfg_str(cfg, "AUTOPATCH_DATA_DIR") : NULL;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char hex[65];

	memset(c, 0, sizeof(*c));
	snprintf(c->off, sizeof(c->off), "%s",
		 !data || !*data	   ? "there is no data directory (AUTOPATCH_DATA_DIR)"
		 : !image_id || !*image_id ? "the image has no id"
					   : "the repository or its checkout is not known");
	if (!data || !*data || !repo_id || !repo_dir || !image_id || !*image_id)
		return;
	/* A part of the key that does not fit would be compared cut: no reuse (fail closed). */
	if (ap_fmt(c->env_key, sizeof(c->env_key), "%s", env_key ? env_key : "") ||
	    ap_fmt(c->image_id, sizeof(c->image_id), "%s", image_id)) {
		ap_error_clear();
		snprintf(c->off, sizeof(c->off), "%s",
			 "the environment key or the image id is longer than the key allows");
		return;
	}
	clean_head(repo_dir, c->commit, sizeof(c->commit));
	snprintf(c->off, sizeof(c->off), "%s",
		 "the checkout is not exactly its commit (a changed, untracked or ignored file), "
		 "or not a git repository");
	if (!c->commit[0])
		return;
	snprintf(c->off, sizeof(c->off), "%s", "the entry's path cannot be made");
	if (!EVP_Digest(repo_id, strlen(repo_id), md, &mdlen, EVP_sha256(), NULL) || mdlen < 32)
		return;
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	if (ap_fmt(c->path, sizeof(c->path), "%s/baseline-cache/%s", data, hex)) {
		ap_error_clear();
		return;
	}
	c->off[0] = '\0';
	c->enabled = true;
}

/* The whole key, as the entry holds it. */
static int key_text(const baseline_cache *c, const char *test_cmd, ap_buf *k)
{
	return ap_buf_addf(k, "commit %s\nenv %s\nimage %s\ntest %s", c->commit, c->env_key,
			   c->image_id, test_cmd);
}

/* One part of a key text ("commit X\nenv Y\nimage Z\ntest CMD"): part i (0-3) of k[0..n),
 * without its label; the test command is the rest (it may hold newlines). */
static void key_part(const char *k, size_t n, int i, const char **p, size_t *len)
{
	const char *e = k + n, *s = k;

	for (int j = 0; j < i && s < e; j++) {
		const char *nl = memchr(s, '\n', (size_t)(e - s));
		s = nl ? nl + 1 : e;
	}
	const char *end = i == 3 ? e : memchr(s, '\n', (size_t)(e - s));
	if (!end)
		end = e;
	const char *sp = memchr(s, ' ', (size_t)(end - s));
	*p = sp ? sp + 1 : end;
	*len = (size_t)(end - *p);
}

/* Why a kept key (kept[0..kn)) is not this job's key: the parts that differ, each with both
 * values (ids cut to 12 characters, commands to 80), as one line into out. */
static void key_diff(const char *kept, size_t kn, const char *key, size_t n, ap_buf *out)
{
	static const char *const name[] = {"commit", "environment key", "image id", "test command"};
	static const int show[] = {12, 12, 19, 80};
	int parts = 0;

	for (int i = 0; i < 4; i++) {
		const char *a, *b;
		size_t al, bl;

		key_part(kept, kn, i, &a, &al);
		key_part(key, n, i, &b, &bl);
		if (al == bl && memcmp(a, b, al) == 0)
			continue;
		ap_buf_addf(out, "%s%s (kept: %.*s%s, now: %.*s%s)",
			    parts++ ? ", " : "the kept entry is for another ", name[i],
			    (int)(al < (size_t)show[i] ? al : (size_t)show[i]), a,
			    al > (size_t)show[i] ? "..." : "",
			    (int)(bl < (size_t)show[i] ? bl : (size_t)show[i]), b,
			    bl > (size_t)show[i] ? "..." : "");
	}
	if (!parts)
		ap_buf_adds(out, "the kept entry's key is written differently");
	/* one line: a test command's newlines and control bytes are shown as spaces */
	for (size_t i = 0; out->data && i < out->len; i++)
		if ((unsigned char)out->data[i] < 0x20)
			out->data[i] = ' ';
}

/* ---- reading: a cursor over the entry; any surprise is a miss ---- */

struct cur {
	const char *p, *end;
};

/* One line (without the newline) into line[NUM_LINE_MAX]; false at the end or when longer. */
static bool take_line(struct cur *c, char *line)
{
	const char *e = memchr(c->p, '\n', (size_t)(c->end - c->p));

	if (!e || e - c->p >= NUM_LINE_MAX)
		return false;
	memcpy(line, c->p, (size_t)(e - c->p));
	line[e - c->p] = '\0';
	c->p = e + 1;
	return true;
}

/* The next n bytes. */
static bool take_bytes(struct cur *c, size_t n, const char **out)
{
	if ((size_t)(c->end - c->p) < n)
		return false;
	*out = c->p;
	c->p += n;
	return true;
}

/* 1 with the results, 0 when the entry is not this key's or damaged (*why says which: a
 * static text, or NULL when the key differs and *kept / *kept_len hold the kept key), or
 * AP_ENOMEM. */
static int parse_entry(const char *s, size_t len, const char *key, size_t key_len, report *rep,
		       int *exit_code, int64_t *millis, const char **why, const char **kept,
		       size_t *kept_len)
{
	struct cur c = {s, s + len};
	char line[NUM_LINE_MAX];
	const char *kb, *id, *msg = NULL, *nl;
	long long klen, code, ms, pytest, ntests;
	int rc;

	*why = "the kept entry is damaged";
	*kept = NULL;
	*kept_len = 0;
	if (len < strlen(MAGIC) || memcmp(s, MAGIC, strlen(MAGIC)) != 0)
		return 0;
	c.p += strlen(MAGIC);
	if (!take_line(&c, line) || sscanf(line, "key %lld", &klen) != 1 || klen < 0 ||
	    klen > (long long)len || !take_bytes(&c, (size_t)klen, &kb) ||
	    !take_bytes(&c, 1, &nl) || *nl != '\n')
		return 0;
	if ((size_t)klen != key_len || memcmp(kb, key, key_len) != 0) {
		*why = NULL;
		*kept = kb;
		*kept_len = (size_t)klen;
		return 0;
	}
	if (!take_line(&c, line) ||
	    sscanf(line, "result %lld %lld %lld %lld", &code, &ms, &pytest, &ntests) != 4 ||
	    code < 0 || code > 255 || ms < 0 || (pytest != 0 && pytest != 1) || ntests < 1 ||
	    ntests > REPORT_MAX_TESTS)
		return 0;
	for (long long i = 0; i < ntests; i++) {
		long long o, coll, il, ml;

		if (!take_line(&c, line) ||
		    sscanf(line, "%lld %lld %lld %lld", &o, &coll, &il, &ml) != 4 ||
		    o < REPORT_PASSED || o > REPORT_FAILED || (coll != 0 && coll != 1) || il < 1 ||
		    il > REPORT_MAX_ID || ml < -1 || ml > 4 * REPORT_MAX_MESSAGE ||
		    !take_bytes(&c, (size_t)il, &id) ||
		    (ml >= 0 && !take_bytes(&c, (size_t)ml, &msg)) || !take_bytes(&c, 1, &nl) ||
		    *nl != '\n')
			return 0;
		if ((rc = report_add(rep, id, (size_t)il, (enum report_outcome)o,
				     ml >= 0 ? msg : NULL, ml >= 0 ? (size_t)ml : 0, coll == 1)))
			return rc == AP_ENOMEM ? rc : 0;
	}
	if (!take_line(&c, line) || strcmp(line, "end") != 0 || c.p != c.end)
		return 0;
	rep->pytest = pytest == 1;
	*exit_code = (int)code;
	*millis = ms;
	return 1;
}

int baseline_cache_get(void *ud, const char *test_cmd, report *rep, int *exit_code, int64_t *millis,
		       char **miss)
{
	baseline_cache *c = ud;
	ap_buf k = AP_BUF_INIT(64u << 10), e = AP_BUF_INIT(BASELINE_CACHE_MAX);
	ap_buf why = AP_BUF_INIT(1024);
	const char *w = NULL, *kept = NULL;
	size_t kept_len = 0;
	int rc = 0;

	*miss = NULL;
	if (!c || !test_cmd)
		return 0;
	if (!c->enabled) {
		ap_buf_addf(&why, "nothing is kept or reused for this job: %s", c->off);
		goto out;
	}
	if ((rc = key_text(c, test_cmd, &k)))
		goto out;
	if ((rc = fs_read_file(&e, c->path, FS_READ_NOFOLLOW))) { /* none, too big, unreadable */
		ap_buf_addf(&why, "%s",
			    rc == AP_ENOTFOUND
				? "no entry is kept for this repository yet"
				: "the kept entry cannot be read (a link, too big or "
				  "unreadable)");
		ap_error_clear();
		rc = 0;
		goto out;
	}
	rc = parse_entry(e.data ? e.data : "", e.len, k.data, k.len, rep, exit_code, millis, &w,
			 &kept, &kept_len);
	if (rc == 0 && kept)
		key_diff(kept, kept_len, k.data, k.len, &why);
	else if (rc == 0)
		ap_buf_adds(&why, w);
out:
	if (rc != 1 && why.len) {
		ap_info("baseline cache: the pristine suite runs again: %s", ap_buf_str(&why));
		*miss = ap_buf_take(&why);
	}
	ap_buf_release(&why);
	if (rc == 1)
		c->hits++;
	if (rc != 1) {
		report_release(rep);
		*rep = (report)REPORT_INIT;
	}
	if (rc < 0 && rc != AP_ENOMEM) {
		ap_error_clear();
		rc = 0;
	}
	ap_buf_release(&k);
	ap_buf_release(&e);
	return rc;
}

int baseline_cache_put(void *ud, const char *test_cmd, const report *rep, int exit_code,
		       int64_t millis)
{
	baseline_cache *c = ud;
	ap_buf k = AP_BUF_INIT(64u << 10), e = AP_BUF_INIT(BASELINE_CACHE_MAX);
	char dir[sizeof(c->path)];
	int rc;

	if (!c || !c->enabled || !test_cmd || !rep || !rep->n)
		return 0;
	if ((rc = key_text(c, test_cmd, &k)))
		goto out;
	if ((rc = ap_buf_adds(&e, MAGIC)) || (rc = ap_buf_addf(&e, "key %zu\n", k.len)) ||
	    (rc = ap_buf_add(&e, k.data, k.len)) ||
	    (rc = ap_buf_addf(&e, "\nresult %d %" PRId64 " %d %zu\n", exit_code, millis,
			      rep->pytest ? 1 : 0, rep->n)))
		goto out;
	for (size_t i = 0; i < rep->n; i++) {
		const report_test *x = &rep->tests[i];
		size_t il = strlen(x->id);

		if ((rc = ap_buf_addf(&e, "%d %d %zu %lld\n", x->outcome, x->collection ? 1 : 0, il,
				      x->message ? (long long)strlen(x->message) : -1LL)) ||
		    (rc = ap_buf_add(&e, x->id, il)) ||
		    (x->message && (rc = ap_buf_adds(&e, x->message))) ||
		    (rc = ap_buf_adds(&e, "\n")))
			goto out;
	}
	if ((rc = ap_buf_adds(&e, "end\n")))
		goto out;
	snprintf(dir, sizeof(dir), "%s", c->path); /* the same size as c->path */
	*strrchr(dir, '/') = '\0';
	if ((rc = fs_mkdir_p(dir, 0700)) || (rc = fs_write_atomic(c->path, e.data, e.len, 0600)))
		goto out;
	c->stores++;
out:
	ap_buf_release(&k);
	ap_buf_release(&e);
	return rc;
}

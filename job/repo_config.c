/* SPDX-License-Identifier: MIT */
/* job/repo_config.c - `.github/autopatch.yml`: strict parse with libyaml, test-command
 * detection, and the path globs the diff must respect (see repo_config.h). */
#include "job/repo_config.h"
#include "common/buf.h"
#include "common/err.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#define MAX_LIST    64	 /* entries in one glob or network list */
#define MAX_STRING  4096 /* one scalar value */
#define MAX_QUOTE   120	 /* characters of the offending line quoted in an error */
#define DETECT_READ (256 * 1024)

static const char *const known_keys = "image, setup, test, max_iterations, paths, network, "
				      "setup_timeout, repro_timeout, suite_timeout, "
				      "allow_weak_evidence";

/* Parsing context: the source text, for quoting lines in errors. */
struct ctx {
	const char *text;
	size_t len;
	yaml_document_t *doc;
};

/* Set AP_EINVAL with "<file> line N: `<line>`: <what>". line is 0-based (libyaml's marks). */
static int cfg_error(const struct ctx *cx, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int cfg_error(const struct ctx *cx, size_t line, const char *fmt, ...)
{
	char what[512], quote[MAX_QUOTE + 4];
	const char *p = cx->text, *end = cx->text + cx->len, *eol;
	size_t n = 0, i;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	for (i = 0; i < line && p < end; p++)
		if (*p == '\n')
			i++;
	eol = p;
	while (eol < end && *eol != '\n' && *eol != '\r')
		eol++;
	/* Quote the line as inline code: backticks and control bytes would break the comment. */
	for (; p < eol && n < MAX_QUOTE; p++)
		quote[n++] = (*p == '`' || (unsigned char)*p < 0x20) ? '\'' : *p;
	if (p < eol) {
		memcpy(quote + n, "...", 3);
		n += 3;
	}
	quote[n] = '\0';
	while (n > 0 && quote[n - 1] == ' ')
		quote[--n] = '\0';
	if (n == 0)
		return ap_error_set(AP_EINVAL, "%s line %zu: %s", REPO_CONFIG_PATH, line + 1, what);
	return ap_error_set(AP_EINVAL, "%s line %zu: `%s`: %s", REPO_CONFIG_PATH, line + 1, quote,
			    what);
}

static const char *node_kind(const yaml_node_t *n)
{
	switch (n->type) {
	case YAML_SCALAR_NODE:
		return "a single value";
	case YAML_SEQUENCE_NODE:
		return "a list";
	case YAML_MAPPING_NODE:
		return "a mapping";
	default:
		return "nothing";
	}
}

static void free_list(char **l)
{
	if (!l)
		return;
	for (char **p = l; *p; p++)
		free(*p);
	free(l);
}

/* A non-empty string scalar of at most MAX_STRING bytes, copied into *out. */
static int get_string(const struct ctx *cx, const char *key, const yaml_node_t *n, char **out)
{
	const char *v;
	size_t len;

	if (n->type != YAML_SCALAR_NODE)
		return cfg_error(cx, n->start_mark.line, "\"%s\" must be a string, not %s", key,
				 node_kind(n));
	v = (const char *)n->data.scalar.value;
	len = n->data.scalar.length;
	if (len == 0 || (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
			 (strcmp(v, "~") == 0 || strcmp(v, "null") == 0)))
		return cfg_error(cx, n->start_mark.line,
				 "\"%s\" is empty; remove the key or give it "
				 "a value",
				 key);
	if (len > MAX_STRING)
		return cfg_error(cx, n->start_mark.line, "\"%s\" is longer than %d bytes", key,
				 MAX_STRING);
	if (strlen(v) != len)
		return cfg_error(cx, n->start_mark.line, "\"%s\" contains a NUL byte", key);
	free(*out);
	*out = strdup(v);
	return *out ? 0 : ap_error_set(AP_ENOMEM, "out of memory");
}

static int get_int(const struct ctx *cx, const char *key, const yaml_node_t *n, int min, int max,
		   int *out)
{
	const char *v;
	char *end;
	long x;

	if (n->type != YAML_SCALAR_NODE)
		return cfg_error(cx, n->start_mark.line, "\"%s\" must be a whole number, not %s",
				 key, node_kind(n));
	v = (const char *)n->data.scalar.value;
	errno = 0;
	x = strtol(v, &end, 10);
	if (!*v || *end || errno || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return cfg_error(cx, n->start_mark.line,
				 "\"%s\" must be a whole number, got \"%.40s\"", key, v);
	if (x < min || x > max)
		return cfg_error(cx, n->start_mark.line,
				 "\"%s\" must be between %d and %d, got %ld", key, min, max, x);
	*out = (int)x;
	return 0;
}

/* true/false (YAML 1.2 spellings only, so "no" is not a surprise). */
static int get_bool(const struct ctx *cx, const char *key, const yaml_node_t *n, bool *out)
{
	const char *v;

	if (n->type != YAML_SCALAR_NODE)
		return cfg_error(cx, n->start_mark.line, "\"%s\" must be true or false, not %s",
				 key, node_kind(n));
	v = (const char *)n->data.scalar.value;
	if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && strcmp(v, "true") == 0)
		*out = true;
	else if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && strcmp(v, "false") == 0)
		*out = false;
	else
		return cfg_error(cx, n->start_mark.line,
				 "\"%s\" must be true or false, got \"%.40s\"", key, v);
	return 0;
}

/* A path glob from the file: relative, no "..", printable. */
static int check_glob(const struct ctx *cx, const yaml_node_t *n, const char *g)
{
	const char *seg;

	if (g[0] == '/')
		return cfg_error(cx, n->start_mark.line,
				 "path glob \"%.60s\" must be relative to the repository root", g);
	for (seg = g; seg; seg = strchr(seg, '/') ? strchr(seg, '/') + 1 : NULL)
		if (strncmp(seg, "..", 2) == 0 && (seg[2] == '/' || seg[2] == '\0'))
			return cfg_error(cx, n->start_mark.line,
					 "path glob \"%.60s\" must not contain \"..\"", g);
	for (const char *p = g; *p; p++)
		if ((unsigned char)*p < 0x20)
			return cfg_error(cx, n->start_mark.line,
					 "path glob contains a control character");
	return 0;
}

/* "host" or "host:port" → "host:port" (443 by default) in buf; hostnames only. */
static int check_net(const struct ctx *cx, const yaml_node_t *n, const char *v, char **out)
{
	const char *colon = strrchr(v, ':');
	size_t hlen = colon ? (size_t)(colon - v) : strlen(v);
	long port = 443;
	char *end;

	if (hlen == 0 || hlen > 253)
		return cfg_error(cx, n->start_mark.line,
				 "network entry \"%.60s\" needs a host name", v);
	for (size_t i = 0; i < hlen; i++)
		if (!isalnum((unsigned char)v[i]) && v[i] != '.' && v[i] != '-')
			return cfg_error(cx, n->start_mark.line,
					 "network entry \"%.60s\" must be host or host:port "
					 "(letters, digits, '.' and '-' in the host)",
					 v);
	if (colon) {
		errno = 0;
		port = strtol(colon + 1, &end, 10);
		if (!colon[1] || *end || errno || port < 1 || port > 65535)
			return cfg_error(cx, n->start_mark.line,
					 "network entry \"%.60s\" has a bad port (1-65535)", v);
	}
	if (asprintf(out, "%.*s:%ld", (int)hlen, v, port) < 0) {
		*out = NULL;
		return ap_error_set(AP_ENOMEM, "out of memory");
	}
	return 0;
}

enum list_kind { LIST_GLOB, LIST_NET };

/* A list of strings (a single string counts as a list of one) into a NULL-terminated array. */
static int get_list(const struct ctx *cx, const char *key, const yaml_node_t *n,
		    enum list_kind kind, char ***out)
{
	yaml_node_item_t *it;
	char **l = NULL;
	size_t count, i = 0;
	int rc = 0;

	if (n->type == YAML_SCALAR_NODE) {
		count = 1;
	} else if (n->type == YAML_SEQUENCE_NODE) {
		count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
	} else {
		return cfg_error(cx, n->start_mark.line, "\"%s\" must be a list of strings, not %s",
				 key, node_kind(n));
	}
	if (count > MAX_LIST)
		return cfg_error(cx, n->start_mark.line, "\"%s\" has more than %d entries", key,
				 MAX_LIST);
	l = calloc(count + 1, sizeof(*l));
	if (!l)
		return ap_error_set(AP_ENOMEM, "out of memory");
	for (i = 0; i < count; i++) {
		const yaml_node_t *item = n;
		char *s = NULL;

		if (n->type == YAML_SEQUENCE_NODE) {
			it = n->data.sequence.items.start + i;
			item = yaml_document_get_node(cx->doc, *it);
		}
		if (item->type != YAML_SCALAR_NODE) {
			rc = cfg_error(cx, item->start_mark.line,
				       "each entry of \"%s\" must be a string, not %s", key,
				       node_kind(item));
			goto out_free_list;
		}
		rc = get_string(cx, key, item, &s);
		if (rc)
			goto out_free_list;
		if (kind == LIST_GLOB) {
			rc = check_glob(cx, item, s);
			l[i] = s;
		} else {
			rc = check_net(cx, item, s, &l[i]);
			free(s);
		}
		if (rc)
			goto out_free_list;
	}
	free_list(*out);
	*out = l;
	return 0;

out_free_list:
	free_list(l);
	return rc;
}

static int parse_paths(const struct ctx *cx, const yaml_node_t *n, repo_config *c)
{
	yaml_node_pair_t *pr;

	if (n->type != YAML_MAPPING_NODE)
		return cfg_error(
		    cx, n->start_mark.line,
		    "\"paths\" must be a mapping with \"allow\" and/or \"deny\" lists, "
		    "not %s",
		    node_kind(n));
	for (pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top; pr++) {
		const yaml_node_t *k = yaml_document_get_node(cx->doc, pr->key);
		const yaml_node_t *v = yaml_document_get_node(cx->doc, pr->value);
		const char *name;
		int rc;

		if (k->type != YAML_SCALAR_NODE)
			return cfg_error(cx, k->start_mark.line,
					 "keys under \"paths\" must be "
					 "\"allow\" or \"deny\"");
		name = (const char *)k->data.scalar.value;
		if (strcmp(name, "allow") == 0)
			rc = get_list(cx, "paths.allow", v, LIST_GLOB, &c->allow);
		else if (strcmp(name, "deny") == 0)
			rc = get_list(cx, "paths.deny", v, LIST_GLOB, &c->deny);
		else
			rc = cfg_error(
			    cx, k->start_mark.line,
			    "unknown key \"%.40s\" under \"paths\" (allowed: allow, deny)", name);
		if (rc)
			return rc;
	}
	return 0;
}

static int empty_list(char ***l)
{
	if (*l)
		return 0;
	*l = calloc(1, sizeof(**l));
	return *l ? 0 : ap_error_set(AP_ENOMEM, "out of memory");
}

static int config_alloc(repo_config **out)
{
	repo_config *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c)
		return ap_error_set(AP_ENOMEM, "out of memory");
	if (empty_list(&c->allow) || empty_list(&c->deny) || empty_list(&c->network)) {
		repo_config_free(c);
		return AP_ENOMEM;
	}
	*out = c;
	return 0;
}

static int parse_root(const struct ctx *cx, const yaml_node_t *root, repo_config *c)
{
	yaml_node_pair_t *pr;
	int rc = 0;

	if (root->type == YAML_SCALAR_NODE && root->data.scalar.length == 0)
		return 0; /* "---" alone or only comments */
	if (root->type != YAML_MAPPING_NODE)
		return cfg_error(cx, root->start_mark.line,
				 "the file must be a mapping of settings (%s), not %s", known_keys,
				 node_kind(root));
	for (pr = root->data.mapping.pairs.start; pr < root->data.mapping.pairs.top && !rc; pr++) {
		const yaml_node_t *k = yaml_document_get_node(cx->doc, pr->key);
		const yaml_node_t *v = yaml_document_get_node(cx->doc, pr->value);
		const char *name;

		if (k->type != YAML_SCALAR_NODE)
			return cfg_error(cx, k->start_mark.line, "keys must be plain names (%s)",
					 known_keys);
		name = (const char *)k->data.scalar.value;
		if (strcmp(name, "image") == 0)
			rc = get_string(cx, name, v, &c->image);
		else if (strcmp(name, "setup") == 0)
			rc = get_string(cx, name, v, &c->setup);
		else if (strcmp(name, "test") == 0)
			rc = get_string(cx, name, v, &c->test);
		else if (strcmp(name, "max_iterations") == 0)
			rc = get_int(cx, name, v, 1, REPO_CONFIG_MAX_ITER, &c->max_iterations);
		else if (strcmp(name, "paths") == 0)
			rc = parse_paths(cx, v, c);
		else if (strcmp(name, "network") == 0)
			rc = get_list(cx, name, v, LIST_NET, &c->network);
		else if (strcmp(name, "setup_timeout") == 0)
			rc = get_int(cx, name, v, 1, REPO_CONFIG_MAX_TIMEOUT, &c->setup_timeout);
		else if (strcmp(name, "repro_timeout") == 0)
			rc = get_int(cx, name, v, 1, REPO_CONFIG_MAX_TIMEOUT, &c->repro_timeout);
		else if (strcmp(name, "suite_timeout") == 0)
			rc = get_int(cx, name, v, 1, REPO_CONFIG_MAX_TIMEOUT, &c->suite_timeout);
		else if (strcmp(name, "allow_weak_evidence") == 0)
			rc = get_bool(cx, name, v, &c->allow_weak_evidence);
		else
			rc = cfg_error(cx, k->start_mark.line,
				       "unknown key \"%.40s\" (allowed: %s)", name, known_keys);
	}
	return rc;
}

/* Reject a key given twice: libyaml keeps both pairs and the second would silently win. */
static int check_duplicates(const struct ctx *cx, const yaml_node_t *map)
{
	yaml_node_pair_t *a, *b;

	if (map->type != YAML_MAPPING_NODE)
		return 0;
	for (a = map->data.mapping.pairs.start; a < map->data.mapping.pairs.top; a++) {
		const yaml_node_t *ka = yaml_document_get_node(cx->doc, a->key);
		const yaml_node_t *va = yaml_document_get_node(cx->doc, a->value);
		int rc;

		for (b = a + 1; b < map->data.mapping.pairs.top; b++) {
			const yaml_node_t *kb = yaml_document_get_node(cx->doc, b->key);

			if (ka->type == YAML_SCALAR_NODE && kb->type == YAML_SCALAR_NODE &&
			    strcmp((const char *)ka->data.scalar.value,
				   (const char *)kb->data.scalar.value) == 0)
				return cfg_error(cx, kb->start_mark.line,
						 "key \"%.40s\" is given twice",
						 (const char *)kb->data.scalar.value);
		}
		rc = check_duplicates(cx, va);
		if (rc)
			return rc;
	}
	return 0;
}

int repo_config_parse(repo_config **out, const char *text, size_t len)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	struct ctx cx = {text, len, &doc};
	yaml_node_t *root;
	repo_config *c = NULL;
	int rc;

	*out = NULL;
	if (len > REPO_CONFIG_MAX_BYTES)
		return ap_error_set(AP_ETOOBIG, "%s is larger than %d bytes", REPO_CONFIG_PATH,
				    REPO_CONFIG_MAX_BYTES);
	if (memchr(text, '\0', len))
		return ap_error_set(AP_EINVAL, "%s contains a NUL byte", REPO_CONFIG_PATH);
	rc = config_alloc(&c);
	if (rc)
		return rc;
	if (!yaml_parser_initialize(&parser)) {
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto out_free_config;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		size_t line = parser.problem_mark.line;

		rc = cfg_error(&cx, line, "not valid YAML: %s%s%s",
			       parser.problem ? parser.problem : "syntax error",
			       parser.context ? " " : "", parser.context ? parser.context : "");
		goto out_free_parser;
	}
	c->from_file = true;
	root = yaml_document_get_root_node(&doc);
	if (root) {
		rc = check_duplicates(&cx, root);
		if (!rc)
			rc = parse_root(&cx, root, c);
	}
	yaml_document_delete(&doc);
	if (rc)
		goto out_free_parser;
	if (c->test) {
		free(c->test_source);
		c->test_source = strdup("`test` from " REPO_CONFIG_PATH);
		if (!c->test_source) {
			rc = ap_error_set(AP_ENOMEM, "out of memory");
			goto out_free_parser;
		}
	}
	yaml_parser_delete(&parser);
	*out = c;
	return 0;

out_free_parser:
	yaml_parser_delete(&parser);
out_free_config:
	repo_config_free(c);
	return rc;
}

/* Read at most cap bytes of a regular file under dir into b; 0, AP_ENOTFOUND, or an error.
 * O_NOFOLLOW: a symlink in an untrusted checkout must not make the host read another file. */
static int read_repo_file(const char *dir, const char *rel, size_t cap, ap_buf *b)
{
	char path[4096];
	struct stat st;
	char chunk[8192];
	ssize_t n;
	int fd, rc = 0;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, rel) >= sizeof(path))
		return ap_error_set(AP_EINVAL, "path too long");
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return AP_ENOTFOUND;
		if (errno == ELOOP)
			return ap_error_set(AP_EDENIED, "%s is a symbolic link; it must be a file",
					    rel);
		return ap_error_set(AP_EIO, "cannot open %s: %s", rel, strerror(errno));
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		rc = ap_error_set(AP_EDENIED, "%s is not a regular file", rel);
		goto out_close;
	}
	while ((n = read(fd, chunk, sizeof(chunk))) > 0) {
		if ((size_t)n > cap - b->len) {
			rc = ap_error_set(AP_ETOOBIG, "%s is larger than %zu bytes", rel, cap);
			goto out_close;
		}
		rc = ap_buf_add(b, chunk, (size_t)n);
		if (rc)
			goto out_close;
	}
	if (n < 0)
		rc = ap_error_set(AP_EIO, "cannot read %s: %s", rel, strerror(errno));
out_close:
	close(fd);
	return rc;
}

static bool repo_has(const char *dir, const char *rel)
{
	char path[4096];
	struct stat st;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, rel) >= sizeof(path))
		return false;
	return lstat(path, &st) == 0;
}

/* Whether the file's text (capped read) contains needle at the start of a line. */
static bool file_has_line(const char *dir, const char *rel, const char *needle)
{
	ap_buf b = AP_BUF_INIT(DETECT_READ);
	const char *p;
	bool found = false;
	size_t n = strlen(needle);

	if (read_repo_file(dir, rel, DETECT_READ, &b) == 0 && b.data)
		for (p = b.data; p && !found; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
			found = strncmp(p, needle, n) == 0;
	ap_buf_release(&b);
	ap_error_clear();
	return found;
}

static bool file_contains(const char *dir, const char *rel, const char *needle)
{
	ap_buf b = AP_BUF_INIT(DETECT_READ);
	bool found;

	found = read_repo_file(dir, rel, DETECT_READ, &b) == 0 && b.data && strstr(b.data, needle);
	ap_buf_release(&b);
	ap_error_clear();
	return found;
}

/* Python tests exist when a tests/ or test/ folder or the root holds a test_*.py file. */
static bool has_python_tests(const char *dir)
{
	static const char *const sub[] = {"", "/tests", "/test"};
	char path[4096];

	for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
		DIR *d;
		struct dirent *e;
		bool found = false;

		if ((size_t)snprintf(path, sizeof(path), "%s%s", dir, sub[i]) >= sizeof(path))
			continue;
		d = opendir(path);
		if (!d)
			continue;
		while (!found && (e = readdir(d))) {
			size_t n = strlen(e->d_name);

			found = strncmp(e->d_name, "test_", 5) == 0 && n > 8 &&
				strcmp(e->d_name + n - 3, ".py") == 0;
		}
		closedir(d);
		if (found)
			return true;
	}
	return false;
}

int repo_config_detect_test(const char *repo_dir, char **cmd, char **why)
{
	const char *c = NULL, *w = NULL;

	*cmd = NULL;
	*why = NULL;
	/* An explicit `test:` target is the maintainers' own entry point, so it comes first. */
	if ((repo_has(repo_dir, "Makefile") && file_has_line(repo_dir, "Makefile", "test:")) ||
	    (repo_has(repo_dir, "makefile") && file_has_line(repo_dir, "makefile", "test:"))) {
		c = "make test";
		w = "the Makefile has a `test` target";
	} else if (repo_has(repo_dir, "pytest.ini") ||
		   file_contains(repo_dir, "pyproject.toml", "[tool.pytest") ||
		   file_contains(repo_dir, "setup.cfg", "[tool:pytest]") ||
		   file_contains(repo_dir, "tox.ini", "[pytest]") ||
		   repo_has(repo_dir, "conftest.py") || has_python_tests(repo_dir)) {
		c = "python3 -m pytest -q";
		w = "the repository has pytest configuration or test_*.py files";
	} else if (file_contains(repo_dir, "package.json", "\"test\"")) {
		c = "npm test";
		w = "package.json defines a `test` script";
	} else if (repo_has(repo_dir, "go.mod")) {
		c = "go test ./...";
		w = "the repository is a Go module (go.mod)";
	} else if (repo_has(repo_dir, "Cargo.toml")) {
		c = "cargo test";
		w = "the repository is a Cargo package (Cargo.toml)";
	}
	if (c) {
		*cmd = strdup(c);
		if (asprintf(why, "detected `%s`: %s (no `test` in %s)", c, w, REPO_CONFIG_PATH) <
		    0)
			*why = NULL;
	} else {
		*why = strdup("no test command configured in " REPO_CONFIG_PATH
			      " and none detected (looked for a Makefile `test` target, pytest, "
			      "npm, Go and Cargo)");
	}
	if ((c && !*cmd) || !*why) {
		free(*cmd);
		free(*why);
		*cmd = *why = NULL;
		return ap_error_set(AP_ENOMEM, "out of memory");
	}
	return 0;
}

int repo_config_load(repo_config **out, const char *repo_dir)
{
	ap_buf b = AP_BUF_INIT(REPO_CONFIG_MAX_BYTES);
	repo_config *c = NULL;
	int rc;

	*out = NULL;
	rc = read_repo_file(repo_dir, REPO_CONFIG_PATH, REPO_CONFIG_MAX_BYTES, &b);
	if (rc == AP_ENOTFOUND) {
		ap_error_clear();
		rc = config_alloc(&c);
	} else if (rc == 0) {
		rc = repo_config_parse(&c, ap_buf_str(&b), b.len);
	}
	ap_buf_release(&b);
	if (rc)
		return rc;
	if (!c->test) {
		free(c->test_source);
		c->test_source = NULL;
		rc = repo_config_detect_test(repo_dir, &c->test, &c->test_source);
		if (rc) {
			repo_config_free(c);
			return rc;
		}
	}
	*out = c;
	return 0;
}

/* Class "[...]" at p (after '['): match ch, advance *pp past ']'. -1 when malformed. */
static int glob_class(const char **pp, char ch)
{
	const char *p = *pp;
	bool neg = false, hit = false;

	if (*p == '!' || *p == '^') {
		neg = true;
		p++;
	}
	if (*p == ']') { /* a leading ']' is literal */
		hit = ch == ']';
		p++;
	}
	for (; *p && *p != ']'; p++) {
		if (p[1] == '-' && p[2] && p[2] != ']') {
			hit = hit || (ch >= p[0] && ch <= p[2]);
			p += 2;
		} else {
			hit = hit || ch == *p;
		}
	}
	if (*p != ']')
		return -1;
	*pp = p + 1;
	return (hit != neg) && ch != '/';
}

static bool glob_at(const char *pat, const char *s, int depth)
{
	if (depth > 32) /* bounds the backtracking for hostile patterns */
		return false;
	while (*pat) {
		if (pat[0] == '*' && pat[1] == '*') {
			const char *rest = pat + 2;

			if (*rest == '/') {
				/* "**\/" matches zero or more whole directories. */
				rest++;
				if (glob_at(rest, s, depth + 1))
					return true;
				for (const char *q = s; *q; q++)
					if (*q == '/' && glob_at(rest, q + 1, depth + 1))
						return true;
				return false;
			}
			for (const char *q = s;; q++) {
				if (glob_at(rest, q, depth + 1))
					return true;
				if (!*q)
					return false;
			}
		}
		if (*pat == '*') {
			for (const char *q = s;; q++) {
				if (glob_at(pat + 1, q, depth + 1))
					return true;
				if (!*q || *q == '/')
					return false;
			}
		}
		if (!*s)
			return false;
		if (*pat == '?') {
			if (*s == '/')
				return false;
			pat++;
		} else if (*pat == '[') {
			const char *p = pat + 1;
			int m = glob_class(&p, *s);

			if (m < 0) { /* malformed class: a literal '[' */
				if (*s != '[')
					return false;
				pat++;
			} else if (!m) {
				return false;
			} else {
				pat = p;
			}
		} else {
			if (*pat != *s)
				return false;
			pat++;
		}
		s++;
	}
	return *s == '\0';
}

bool repo_config_glob(const char *pattern, const char *path)
{
	return glob_at(pattern, path, 0);
}

static bool path_is_safe(const char *path)
{
	const char *seg;

	if (!*path || path[0] == '/')
		return false;
	for (seg = path; seg; seg = strchr(seg, '/') ? strchr(seg, '/') + 1 : NULL)
		if (strncmp(seg, "..", 2) == 0 && (seg[2] == '/' || seg[2] == '\0'))
			return false;
	return true;
}

/* Which rule refuses path: NULL when allowed. */
static const char *refusal(const repo_config *c, const char *path, const char **glob)
{
	*glob = NULL;
	if (!path_is_safe(path))
		return "is outside the repository";
	/* The config decides how a patch is proven (test, image, network, paths): a patch
	 * must never rewrite the rules it is judged by, whatever paths.allow says. */
	if (strcasecmp(path, REPO_CONFIG_PATH) == 0 ||
	    strcasecmp(path, ".github/autopatch.yaml") == 0)
		return "is autopatch's own configuration, which a patch may never change";
	for (char **d = c->deny; d && *d; d++)
		if (repo_config_glob(*d, path)) {
			*glob = *d;
			return "is refused by the paths.deny glob";
		}
	if (!c->allow || !c->allow[0])
		return NULL;
	for (char **a = c->allow; *a; a++)
		if (repo_config_glob(*a, path))
			return NULL;
	return "matches no paths.allow glob in " REPO_CONFIG_PATH;
}

bool repo_config_path_allowed(const repo_config *c, const char *path)
{
	const char *g;

	return refusal(c, path, &g) == NULL;
}

int repo_config_check_paths(const repo_config *c, const char *paths_nl)
{
	const char *p = paths_nl, *eol;
	char path[4096];

	while (p && *p) {
		const char *why, *g;
		size_t n;

		eol = strchr(p, '\n');
		n = eol ? (size_t)(eol - p) : strlen(p);
		if (n >= sizeof(path))
			return ap_error_set(AP_EDENIED,
					    "the patch touches a path longer than %zu bytes",
					    sizeof(path) - 1);
		memcpy(path, p, n);
		path[n] = '\0';
		p = eol ? eol + 1 : NULL;
		if (n == 0)
			continue;
		why = refusal(c, path, &g);
		if (why && g)
			return ap_error_set(
			    AP_EDENIED,
			    "the patch changes `%s`, which %s `%s` in " REPO_CONFIG_PATH, path, why,
			    g);
		if (why)
			return ap_error_set(AP_EDENIED, "the patch changes `%s`, which %s", path,
					    why);
	}
	return 0;
}

void repo_config_free(repo_config *c)
{
	if (!c)
		return;
	free(c->image);
	free(c->setup);
	free(c->test);
	free(c->test_source);
	free_list(c->allow);
	free_list(c->deny);
	free_list(c->network);
	free(c);
}

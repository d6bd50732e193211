/* SPDX-License-Identifier: MIT */
/* job/repo_config.c - `.github/autopatch.yml`: strict parse with libyaml, the test command
 * (configured, else agents/testcmd.h detects it), and the path globs the diff must respect
 * (see repo_config.h). */
#include "job/repo_config.h"

#include "agents/testcmd.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/fs.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#define MAX_LIST   64	/* entries in one glob or network list */
#define MAX_STRING 4096 /* one scalar value */
#define MAX_QUOTE  120	/* characters of the offending line quoted in an error */

static const char *const known_keys = "image, setup, test, max_iterations, paths, network, "
				      "agent_network, cache_key, setup_timeout, repro_timeout, "
				      "suite_timeout, allow_weak_evidence, allow_harness_changes";

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
	char what[AP_ERROR_MSG_MAX], quote[MAX_QUOTE + 4];
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

enum list_kind { LIST_GLOB, LIST_NET, LIST_STR };

/* true/false (YAML 1.1 spellings yes/no/on/off too), plain style only. */
static int get_bool(const struct ctx *cx, const char *key, const yaml_node_t *n, bool *out)
{
	static const char *const yes[] = {"true", "True", "yes", "on"};
	static const char *const no[] = {"false", "False", "no", "off"};
	const char *v;

	if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return cfg_error(cx, n->start_mark.line, "\"%s\" must be true or false", key);
	v = (const char *)n->data.scalar.value;
	for (size_t i = 0; i < 4; i++) {
		if (strcmp(v, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcmp(v, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return cfg_error(cx, n->start_mark.line, "\"%s\" must be true or false, got \"%.40s\"", key,
			 v);
}

/* The setup steps as one script for a shell (sh -c): one step as it is, several under set -e
 * one per line, so the first failing step stops it. */
static int join_setup(repo_config *c)
{
	ap_buf b = AP_BUF_INIT((size_t)MAX_LIST * (MAX_STRING + 1) + 16);
	int rc = 0;

	free(c->setup);
	c->setup = NULL;
	if (!c->setup_steps[0])
		return 0;
	if (c->setup_steps[1])
		rc = ap_buf_adds(&b, "set -e\n");
	for (char **p = c->setup_steps; *p && !rc; p++)
		rc = ap_buf_addf(&b, "%s%s", *p, p[1] ? "\n" : "");
	if (!rc && !(c->setup = strdup(ap_buf_str(&b))))
		rc = ap_error_set(AP_ENOMEM, "out of memory");
	ap_buf_release(&b);
	return rc;
}

static int get_list(const struct ctx *cx, const char *key, const yaml_node_t *n,
		    enum list_kind kind, char ***out);

/* `setup:` a command or a list of commands. */
static int get_setup(const struct ctx *cx, const yaml_node_t *n, repo_config *c)
{
	int rc = get_list(cx, "setup", n, LIST_STR, &c->setup_steps);

	return rc ? rc : join_setup(c);
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
		} else if (kind == LIST_STR) {
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
	if (empty_list(&c->allow) || empty_list(&c->deny) || empty_list(&c->network) ||
	    empty_list(&c->setup_steps) || empty_list(&c->cache_key)) {
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
			rc = get_setup(cx, v, c);
		else if (strcmp(name, "test") == 0)
			rc = get_string(cx, name, v, &c->test);
		else if (strcmp(name, "max_iterations") == 0)
			rc = get_int(cx, name, v, 1, REPO_CONFIG_MAX_ITER, &c->max_iterations);
		else if (strcmp(name, "paths") == 0)
			rc = parse_paths(cx, v, c);
		else if (strcmp(name, "network") == 0)
			rc = get_list(cx, name, v, LIST_NET, &c->network);
		else if (strcmp(name, "agent_network") == 0)
			rc = get_bool(cx, name, v, &c->agent_network);
		else if (strcmp(name, "cache_key") == 0)
			rc = get_list(cx, name, v, LIST_GLOB, &c->cache_key);
		else if (strcmp(name, "setup_timeout") == 0)
			rc = get_int(cx, name, v, 1, REPO_CONFIG_MAX_TIMEOUT, &c->setup_timeout);
		else if (strcmp(name, "repro_timeout") == 0)
			rc = get_int(cx, name, v, 1, REPO_CONFIG_MAX_TIMEOUT, &c->repro_timeout);
		else if (strcmp(name, "suite_timeout") == 0)
			rc = get_int(cx, name, v, 1, REPO_CONFIG_MAX_TIMEOUT, &c->suite_timeout);
		else if (strcmp(name, "allow_weak_evidence") == 0)
			rc = get_bool(cx, name, v, &c->allow_weak_evidence);
		else if (strcmp(name, "allow_harness_changes") == 0)
			rc = get_bool(cx, name, v, &c->allow_harness_changes);
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

/* No `test` in the file: ask the detector, and say in test_source what it chose and why, or
 * what it looked for. Only AP_ENOMEM and AP_EIO are errors; finding nothing is not. */
static int detect_test(repo_config *c, const char *repo_dir)
{
	int rc = testcmd_detect(&c->test, &c->test_why, repo_dir), n;

	free(c->test_source);
	c->test_source = NULL;
	if (rc == 0)
		n = asprintf(&c->test_source, "detected `%s` from %s (no `test` in %s)", c->test,
			     c->test_why, REPO_CONFIG_PATH);
	else if (rc == AP_ENOTFOUND)
		n = asprintf(&c->test_source, "no `test` in %s, and %s", REPO_CONFIG_PATH,
			     ap_error_last());
	else
		return rc;
	if (n < 0) {
		c->test_source = NULL;
		return ap_error_set(AP_ENOMEM, "out of memory");
	}
	ap_error_clear();
	return 0;
}

int repo_config_load(repo_config **out, const char *repo_dir)
{
	ap_buf b = AP_BUF_INIT(REPO_CONFIG_MAX_BYTES);
	repo_config *c = NULL;
	int rc;

	*out = NULL;
	/* Beneath the checkout, through no symlink in any component (common/beneath.h): a
	 * `.github -> /etc` in an untrusted checkout must not make the host read a host file. */
	rc = fs_read_file_at(&b, repo_dir, REPO_CONFIG_PATH, FS_READ_NOFOLLOW);
	if (rc == AP_ENOTFOUND) {
		ap_error_clear();
		rc = config_alloc(&c);
	} else if (rc == 0) {
		rc = repo_config_parse(&c, ap_buf_str(&b), b.len);
	}
	ap_buf_release(&b);
	if (rc)
		return rc;
	if (!c->test)
		rc = detect_test(c, repo_dir);
	if (rc) {
		repo_config_free(c);
		return rc;
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

const char *repo_config_path_refusal(const repo_config *c, const char *path, char *buf, size_t cap)
{
	for (char **d = c->deny; d && *d; d++)
		if (repo_config_glob(*d, path)) {
			if (!ap_fmt(buf, cap, "is refused by the paths.deny glob `%s` in %s", *d,
				    REPO_CONFIG_PATH))
				return buf;
			/* A glob too long to quote whole is not quoted cut: a cut one reads as
			 * another glob. */
			ap_error_clear();
			return "is refused by a paths.deny glob (too long to quote) "
			       "in " REPO_CONFIG_PATH;
		}
	if (!c->allow || !c->allow[0])
		return NULL;
	for (char **a = c->allow; *a; a++)
		if (repo_config_glob(*a, path))
			return NULL;
	(void)buf;
	(void)cap;
	return "matches no paths.allow glob in " REPO_CONFIG_PATH;
}

void repo_config_free(repo_config *c)
{
	if (!c)
		return;
	free(c->image);
	free(c->setup);
	free(c->test);
	free(c->test_source);
	free(c->test_why);
	free_list(c->allow);
	free_list(c->deny);
	free_list(c->network);
	free_list(c->setup_steps);
	free_list(c->cache_key);
	free(c);
}

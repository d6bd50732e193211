/* SPDX-License-Identifier: MIT */
/* common/config.c - `.env` + environment settings (see config.h). */
#include "common/config.h"
#include "common/buf.h"
#include "common/err.h"
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

int cfg_set(ap_config *c, const char *name, const char *value)
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
	FILE *f = fopen(path, "r");
	char line[16384];
	int lineno = 0, rc = 0;
	size_t total = 0;

	if (!f) {
		if (!required && errno == ENOENT)
			return 0;
		return ap_error_set(AP_EINVAL, "cannot read %s (%s): fix its permissions or path",
				    path, strerror(errno));
	}
	while (fgets(line, sizeof(line), f)) {
		char *p = line, *eq, *name;

		lineno++;
		total += strlen(line);
		if (total > ENV_FILE_CAP) {
			rc = ap_error_set(AP_EINVAL,
					  "%s is larger than 1 MiB: is it the right file?", path);
			break;
		}
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
		rc = cfg_set(c, name, unquote(eq + 1));
		if (rc)
			break;
	}
	fclose(f);
	return rc;
}

int cfg_load(ap_config **out, const char *env_file)
{
	ap_config *c;
	int rc;

	*out = NULL;
	rc = cfg_new_empty(&c);
	if (rc)
		return rc;
	rc = parse_env_file(c, env_file ? env_file : ".env", env_file != NULL);
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
		rc = cfg_set(c, name, eq + 1);
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

const char *cfg_get(const ap_config *c, const char *name)
{
	ssize_t i = find(c, name);

	return i >= 0 && c->values[i][0] ? c->values[i] : NULL;
}

const char *cfg_get_or(const ap_config *c, const char *name, const char *def)
{
	const char *v = cfg_get(c, name);

	return v ? v : def;
}

int cfg_get_int(const ap_config *c, const char *name, int64_t def, int64_t min, int64_t max,
		int64_t *out)
{
	const char *v = cfg_get(c, name);
	char *end;
	long long n;

	*out = def;
	if (!v)
		return 0;
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

int cfg_get_bytes(const ap_config *c, const char *name, int64_t def, int64_t min, int64_t max,
		  int64_t *out)
{
	const char *v = cfg_get(c, name);
	char *end;
	long long n, mult = 1;

	*out = def;
	if (!v)
		return 0;
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

int cfg_get_bool(const ap_config *c, const char *name, bool def, bool *out)
{
	const char *v = cfg_get(c, name);
	static const char *yes[] = {"1", "true", "yes", "on"}, *no[] = {"0", "false", "no", "off"};

	*out = def;
	if (!v)
		return 0;
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

static int register_file(const char *path)
{
	ap_buf b = AP_BUF_INIT(1024 * 1024);
	FILE *f = fopen(path, "r");
	char chunk[4096];
	size_t n;
	int rc = 0;

	if (!f)
		return 0; /* doctor and the App client report unreadable keys */
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		if ((rc = ap_buf_add(&b, chunk, n)))
			break;
	fclose(f);
	if (!rc)
		rc = redact_add_secret(ap_buf_str(&b));
	ap_buf_release(&b);
	return rc;
}

int cfg_register_secrets(const ap_config *c)
{
	static const char *names[] = {
	    "WEBHOOK_SECRET", "WEBHOOK_SECRET_PREVIOUS", "PRIVATE_KEY",	 "AUTOPATCH_LLM_API_KEY",
	    "OPENAI_API_KEY", "ANTHROPIC_API_KEY",	 "GITHUB_TOKEN", "GH_TOKEN",
	};
	int rc = 0;

	for (size_t i = 0; !rc && i < sizeof(names) / sizeof(names[0]); i++)
		rc = redact_add_secret(cfg_get(c, names[i]));
	if (!rc && cfg_get(c, "PRIVATE_KEY_PATH"))
		rc = register_file(cfg_get(c, "PRIVATE_KEY_PATH"));
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

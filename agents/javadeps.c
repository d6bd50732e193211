/* SPDX-License-Identifier: MIT */
/* agents/javadeps.c - the unresolved Java plugin or artifact named in a build's output (see
 * javadeps.h). */
#include "agents/javadeps.h"

#include "agents/tools.h"
#include "common/err.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCAN_MAX  (4u << 20) /* output read */
#define COORD_MAX 200	     /* a G:A:V coordinate */
#define HOST_MAX  120
/* Every snprintf below fits: each copies a length checked against COORD_MAX or HOST_MAX and
 * the destination's size first (fetch: 60 bytes of text and a host). */

/* Bounded strstr: needle in the first n bytes of hay. */
static const char *find_n(const char *hay, size_t n, const char *needle)
{
	size_t k = strlen(needle);

	for (size_t i = 0; i + k <= n; i++)
		if (hay[i] == needle[0] && memcmp(hay + i, needle, k) == 0)
			return hay + i;
	return NULL;
}

static bool coord_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '-' || c == '_' || c == ':' || c == '+';
}

/* The coordinate that starts at p (G:A[:type]:V), into out; false when it is not one. */
static bool coord_at(const char *p, const char *end, char *out, size_t n)
{
	size_t len = 0, colons = 0;

	while (p + len < end && coord_char(p[len]) && len < COORD_MAX)
		colons += p[len++] == ':';
	while (len && (p[len - 1] == '.' || p[len - 1] == ':'))
		colons -= p[--len] == ':';
	if (colons < 2 || len >= n)
		return false;
	snprintf(out, n, "%.*s", (int)len, p);
	return true;
}

/* The host of the first repository URL after "from/to ID (" or "Cannot access ID (". */
static void repo_host(const char *s, size_t n, char *out, size_t on)
{
	static const char *const marks[] = {"from/to ", "Cannot access ", "Could not GET '"};
	const char *end = s + n, *u = NULL, *h;
	size_t len = 0;

	out[0] = '\0';
	for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]) && !u; i++) {
		const char *m = find_n(s, n, marks[i]);

		if (m)
			u = find_n(m, (size_t)(end - m) < 300 ? (size_t)(end - m) : 300, "://");
	}
	if (!u)
		return;
	h = u + 3;
	while (h + len < end && len < HOST_MAX &&
	       ((h[len] >= 'a' && h[len] <= 'z') || (h[len] >= 'A' && h[len] <= 'Z') ||
		(h[len] >= '0' && h[len] <= '9') || h[len] == '.' || h[len] == '-'))
		len++;
	if (len && len < on && (h + len == end || h[len] == '/' || h[len] == ':' || h[len] == ')'))
		snprintf(out, on, "%.*s", (int)len, h);
}

/* The first thing that could not be resolved: its kind and coordinate. */
static bool first_unresolved(const char *s, size_t n, const char **kind, char *coord, size_t cn)
{
	static const struct {
		const char *before, *after, *kind;
	} pats[] = {
	    {"Plugin ", " or one of its dependencies could not be resolved", "the Maven plugin"},
	    {"The following artifacts could not be resolved: ", NULL, "the artifact"},
	    {"Could not find artifact ", NULL, "the artifact"},
	};
	const char *best = NULL, *end = s + n;

	for (size_t i = 0; i < sizeof(pats) / sizeof(pats[0]); i++) {
		const char *p = s, *hit;

		while ((hit = find_n(p, (size_t)(end - p), pats[i].before))) {
			const char *c = hit + strlen(pats[i].before);
			const char *eol = memchr(c, '\n', (size_t)(end - c));
			char tmp[COORD_MAX + 1];

			p = c;
			if (pats[i].after &&
			    !find_n(c, (size_t)((eol ? eol : end) - c), pats[i].after))
				continue;
			if (!coord_at(c, end, tmp, sizeof(tmp)))
				continue;
			if (!best || hit < best) {
				best = hit;
				*kind = pats[i].kind;
				snprintf(coord, cn, "%s", tmp);
			}
			break;
		}
	}
	return best != NULL;
}

/* Gradle: "Plugin [id: 'X', version: 'V'] was not found". */
static bool gradle_plugin(const char *s, size_t n, char *coord, size_t cn)
{
	const char *p = find_n(s, n, "Plugin [id: '"), *q;
	size_t len;

	if (!p)
		return false;
	p += strlen("Plugin [id: '");
	q = memchr(p, ']', (size_t)(s + n - p));
	if (!q || !find_n(q, (size_t)(s + n - q) < 40 ? (size_t)(s + n - q) : 40, "was not found"))
		return false;
	len = (size_t)(q - p);
	if (len >= cn || len > COORD_MAX)
		return false;
	snprintf(coord, cn, "[id: '%.*s]", (int)len, p);
	return true;
}

int javadeps_hint(const char *output, char **out)
{
	size_t n = output ? strnlen(output, SCAN_MAX) : 0;
	char coord[COORD_MAX + 8], host[HOST_MAX + 1], fetch[300];
	const char *kind = NULL;

	*out = NULL;
	if (!n)
		return 0;
	if (!first_unresolved(output, n, &kind, coord, sizeof(coord))) {
		if (!gradle_plugin(output, n, coord, sizeof(coord)))
			return 0;
		kind = "the Gradle plugin";
	}
	repo_host(output, n, host, sizeof(host));
	if (host[0])
		snprintf(fetch, sizeof(fetch), "with `%s:443` in `network:`", host);
	else
		snprintf(fetch, sizeof(fetch),
			 "with the host of the repository that serves it in `network:`");
	*out = tools_asprintf(
	    "The build could not resolve %s %s: it is not in Debian's packaged Maven "
	    "repository (/usr/share/maven-repo) that the java flavour resolves from without a "
	    "network, and the box has no network. Use a version Debian packages (see "
	    "/usr/share/maven-repo in the image), or fetch it in `setup:` (a step such as "
	    "`mvn -B -q test -DskipTests`) %s in .github/autopatch.yml.",
	    kind, coord, fetch);
	return *out ? 0 : ap_error_set(AP_ENOMEM, "out of memory");
}

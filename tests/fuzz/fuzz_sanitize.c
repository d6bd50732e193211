/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz_sanitize.c - the neutraliser (job/sanitize.h) on arbitrary bytes. The output
 * must be valid UTF-8 without control, invisible (other than the ZWSP it inserts) or fullwidth
 * characters; read the way markdown reads it (backslash escapes dropped), it must hold no
 * closing keyword with a reference, no `#N`, `GH-N`, `.../issues/N`, no `@` before a word
 * character (inside backticks or not), no `scheme://`, `www.`, HTML tag, markdown link, image
 * or link definition, no live character reference; a reader must see what the input said;
 * sanitizing twice must change nothing; every cut sanitize_cut() allows must stay dead; the
 * output is at most 8 bytes per input byte. */
#include "common/buf.h"
#include "job/sanitize.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static bool digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static bool alpha(unsigned char c)
{
	return (c | 32) >= 'a' && (c | 32) <= 'z';
}

static bool alnum(unsigned char c)
{
	return digit(c) || alpha(c);
}

static bool punct(unsigned char c)
{
	return c > 0x20 && c < 0x7F && !alnum(c);
}

/* s[i..] starts with w (lower case ASCII), any case. */
static bool at(const char *s, size_t n, size_t i, const char *w)
{
	size_t m = strlen(w);

	if (i + m > n)
		return false;
	for (size_t k = 0; k < m; k++) {
		unsigned char c = (unsigned char)s[i + k];

		if ((alpha(c) ? c | 32 : c) != (unsigned char)w[k])
			return false;
	}
	return true;
}

/* Valid UTF-8 with none of the characters GitHub would not show, except U+200B. */
static void check_chars(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;

	for (size_t i = 0; i < n;) {
		uint32_t c = p[i];
		size_t k = c < 0x80 ? 0 : c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC2 ? 1 : 9;

		if (k == 9 || i + k >= n + (k ? 0 : 1))
			abort();
		if (k)
			c &= 0x3F >> k;
		for (size_t j = 1; j <= k; j++) {
			if ((p[i + j] & 0xC0) != 0x80)
				abort();
			c = (c << 6) | (p[i + j] & 0x3F);
		}
		if ((k == 2 && c < 0x800) || (k == 3 && (c < 0x10000 || c > 0x10FFFF)) ||
		    (c >= 0xD800 && c <= 0xDFFF))
			abort();
		if ((c < 0x20 && c != '\n' && c != '\t') || (c >= 0x7F && c <= 0x9F) || c == 0xAD ||
		    (c >= 0x200C && c <= 0x200F) || (c >= 0x202A && c <= 0x202E) ||
		    (c >= 0x2060 && c <= 0x206F) || c == 0xFEFF || (c >= 0xFE00 && c <= 0xFE0F) ||
		    (c >= 0xFF01 && c <= 0xFF5E) || c == 0xFE5F || c == 0xFE6B ||
		    (c >= 0xE0000 && c <= 0xE0FFF))
			abort();
		i += k + 1;
	}
}

/* The output as markdown reads it: a backslash before ASCII punctuation dropped. esc[i] says
 * whether u[i] was escaped. */
static size_t unescape(const char *s, size_t n, char *u, bool *esc)
{
	size_t m = 0;

	for (size_t i = 0; i < n; i++) {
		bool e = s[i] == '\\' && i + 1 < n && punct((unsigned char)s[i + 1]);

		if (e)
			i++;
		esc[m] = e;
		u[m++] = s[i];
	}
	return m;
}

static bool ref_at(const char *u, size_t n, size_t j)
{
	size_t k = j;

	if ((u[j] == '#' && j + 1 < n && digit((unsigned char)u[j + 1])) ||
	    (at(u, n, j, "gh-") && j + 3 < n && digit((unsigned char)u[j + 3])) ||
	    at(u, n, j, "www."))
		return true;
	while (k < n && (alnum((unsigned char)u[k]) || strchr("_.-", u[k])))
		k++;
	if (k == j || k >= n || u[k] != '/')
		return false;
	for (k++; k < n && (alnum((unsigned char)u[k]) || strchr("_.-", u[k])); k++)
		;
	return k + 1 < n && u[k] == '#' && digit((unsigned char)u[k + 1]);
}

static void check_dead(const char *s, size_t n)
{
	static const char *const kw[] = {"resolves", "resolved", "resolve", "closes", "closed",
					 "close",    "fixes",	 "fixed",   "fix"};
	static const char *const paths[] = {"issues/", "pull/", "pulls/", "discussions/"};
	char *u = malloc(n + 1);
	bool *esc = malloc(n + 1);
	size_t m;

	if (!u || !esc)
		abort();
	m = unescape(s, n, u, esc);
	for (size_t i = 0; i < m; i++) {
		unsigned char c = (unsigned char)u[i], d = i + 1 < m ? (unsigned char)u[i + 1] : 0;

		if ((c == '#' && digit(d)) || (c == '@' && (alnum(d) || d == '_' || d == '-')) ||
		    (at(u, m, i, "gh-") && i + 3 < m && digit((unsigned char)u[i + 3])) ||
		    at(u, m, i, "://") || at(u, m, i, "www.") ||
		    (c == '<' && (alpha(d) || d == '/' || d == '!' || d == '?')) ||
		    (c == ']' && (d == '(' || d == '[' || d == ':')) || at(u, m, i, "\\href") ||
		    at(u, m, i, "\\url"))
			abort();
		for (size_t k = 0; k < 4; k++)
			if (at(u, m, i, paths[k]) && i + strlen(paths[k]) < m &&
			    digit((unsigned char)u[i + strlen(paths[k])]))
				abort();
		/* A character reference GitHub would decode: '&' not escaped, then #digits;,
		 * #xhex; or name; */
		if (c == '&' && !esc[i]) {
			size_t j = i + 1;

			if (j < m && u[j] == '#') {
				bool hex = j + 1 < m && (u[j + 1] | 32) == 'x';

				j += hex ? 2 : 1;
				if (j < m && (hex ? (digit((unsigned char)u[j]) ||
						     ((u[j] | 32) >= 'a' && (u[j] | 32) <= 'f'))
						  : digit((unsigned char)u[j])))
					abort(); /* even without the ';': a prefix of one */
			} else if (j < m && alpha((unsigned char)u[j])) {
				abort();
			}
		}
		for (size_t k = 0; k < sizeof(kw) / sizeof(kw[0]); k++) {
			size_t j = i + strlen(kw[k]);

			if (!at(u, m, i, kw[k]))
				continue;
			if (j < m && u[j] == ':')
				j++;
			if (j == i + strlen(kw[k]) && (j >= m || !strchr(" \t\n", u[j])))
				continue;
			while (j < m && strchr(" \t\n", u[j]))
				j++;
			if (j < m && ref_at(u, m, j))
				abort();
		}
	}
	free(u);
	free(esc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ap_buf out = AP_BUF_INIT((size_t)-2), again = AP_BUF_INIT((size_t)-2);
	char *vin, *vout;
	size_t cut;

	if (sanitize_append(&out, (const char *)data, size) || ap_buf_adds(&out, ""))
		abort();
	if (out.len > 8 * size)
		abort();
	check_chars(out.data, out.len);
	check_dead(out.data, out.len);
	/* Idempotent: the inserted ZWSPs are read away and put back in the same places. */
	if (sanitize_append(&again, out.data, out.len) || ap_buf_adds(&again, ""))
		abort();
	if (again.len != out.len || memcmp(again.data, out.data, out.len) != 0)
		abort();
	/* A reader sees what the input said. */
	vin = sanitize_visible((const char *)data, size);
	vout = sanitize_visible(out.data, out.len);
	if (!vin || !vout || strcmp(vin, vout) != 0)
		abort();
	/* Any allowed cut is dead too, with what progress.c writes after a cut. */
	cut = sanitize_cut(out.data, out.len, size ? data[0] * 3u + size / 2 : 0);
	if (cut > out.len)
		abort();
	if (cut < out.len) {
		static const char more[] = "\n\n(truncated)";
		char *p = malloc(cut + sizeof(more));

		if (!p)
			abort();
		memcpy(p, out.data, cut);
		memcpy(p + cut, more, sizeof(more));
		check_chars(p, cut);
		check_dead(p, cut + sizeof(more) - 1);
		free(p);
	}
	free(vin);
	free(vout);
	ap_buf_release(&out);
	ap_buf_release(&again);
	return 0;
}

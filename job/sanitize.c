/* SPDX-License-Identifier: MIT */
/* job/sanitize.c - neutralise model-influenced text for GitHub (see sanitize.h).
 *
 * Three passes over the text: read it as GitHub will (code points, invisible characters
 * dropped, look-alikes folded), then into units (HTML character references decoded, backslash
 * escapes seen through), mark where a zero-width space must go, and write the units back. */
#include "job/sanitize.h"

#include "common/err.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REPLACEMENT  0xFFFDu
#define MAX_REF_NAME 32
#define MAX_REF_SCAN 256 /* how far a reference after a closing keyword is looked for */

/* One character of the text as GitHub reads it. */
struct unit {
	uint32_t cp;
	bool esc; /* written back as a backslash escape (ASCII punctuation) */
	bool zw;  /* a ZWSP goes before it */
};

/* Named character references that are decoded; any other name is written back escaped. */
static const struct {
	const char *name;
	uint32_t cp;
} named_refs[] = {
    {"Tab", '\t'},
    {"NewLine", '\n'},
    {"excl", '!'},
    {"quot", '"'},
    {"QUOT", '"'},
    {"num", '#'},
    {"dollar", '$'},
    {"percnt", '%'},
    {"amp", '&'},
    {"AMP", '&'},
    {"apos", '\''},
    {"lpar", '('},
    {"rpar", ')'},
    {"ast", '*'},
    {"midast", '*'},
    {"plus", '+'},
    {"comma", ','},
    {"period", '.'},
    {"sol", '/'},
    {"colon", ':'},
    {"semi", ';'},
    {"lt", '<'},
    {"LT", '<'},
    {"equals", '='},
    {"gt", '>'},
    {"GT", '>'},
    {"quest", '?'},
    {"commat", '@'},
    {"lsqb", '['},
    {"lbrack", '['},
    {"bsol", '\\'},
    {"rsqb", ']'},
    {"rbrack", ']'},
    {"Hat", '^'},
    {"lowbar", '_'},
    {"UnderBar", '_'},
    {"grave", '`'},
    {"DiacriticalGrave", '`'},
    {"lcub", '{'},
    {"lbrace", '{'},
    {"verbar", '|'},
    {"vert", '|'},
    {"VerticalLine", '|'},
    {"rcub", '}'},
    {"rbrace", '}'},
    {"nbsp", 0xA0},
    {"NonBreakingSpace", 0xA0},
    {"copy", 0xA9},
    {"reg", 0xAE},
    {"trade", 0x2122},
    {"deg", 0xB0},
    {"middot", 0xB7},
    {"times", 0xD7},
    {"divide", 0xF7},
    {"plusmn", 0xB1},
    {"sect", 0xA7},
    {"para", 0xB6},
    {"laquo", 0xAB},
    {"raquo", 0xBB},
    {"ndash", 0x2013},
    {"mdash", 0x2014},
    {"lsquo", 0x2018},
    {"rsquo", 0x2019},
    {"ldquo", 0x201C},
    {"rdquo", 0x201D},
    {"bull", 0x2022},
    {"hellip", 0x2026},
    {"larr", 0x2190},
    {"rarr", 0x2192},
    {"ne", 0x2260},
    {"le", 0x2264},
    {"ge", 0x2265},
    {"shy", 0xAD},
    {"ZeroWidthSpace", 0x200B},
    {"NegativeVeryThinSpace", 0x200B},
    {"NegativeThinSpace", 0x200B},
    {"NegativeMediumSpace", 0x200B},
    {"NegativeThickSpace", 0x200B},
    {"zwnj", 0x200C},
    {"zwj", 0x200D},
    {"lrm", 0x200E},
    {"rlm", 0x200F},
    {"NoBreak", 0x2060},
    {"ApplyFunction", 0x2061},
    {"af", 0x2061},
    {"InvisibleTimes", 0x2062},
    {"it", 0x2062},
    {"InvisibleComma", 0x2063},
    {"ic", 0x2063},
};

/* Small form variants (U+FE50..U+FE6B) that stand for ASCII punctuation. */
static const char small_forms[] = ",\0.\0;:?!\0(){}\0\0#&*+-<>=\0\\$%@";

static bool is_digit(uint32_t c)
{
	return c >= '0' && c <= '9';
}

static bool is_alpha(uint32_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_alnum(uint32_t c)
{
	return is_digit(c) || is_alpha(c);
}

static bool is_xdigit(uint32_t c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool is_punct(uint32_t c)
{
	return c < 0x80 && c > 0x20 && c != 0x7F && !is_alnum(c);
}

static bool is_space(uint32_t c)
{
	return c == ' ' || c == '\t' || c == '\n';
}

static uint32_t lower(uint32_t c)
{
	return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* Characters GitHub renders as nothing: they could hide a pattern from a reader or from us. */
static bool is_invisible(uint32_t c)
{
	return c == 0xAD || c == 0x34F || c == 0x61C || c == 0x115F || c == 0x1160 || c == 0x17B4 ||
	       c == 0x17B5 || (c >= 0x180B && c <= 0x180F) || (c >= 0x200B && c <= 0x200F) ||
	       (c >= 0x202A && c <= 0x202E) || (c >= 0x2060 && c <= 0x206F) || c == 0x3164 ||
	       (c >= 0xFE00 && c <= 0xFE0F) || c == 0xFEFF || c == 0xFFA0 ||
	       (c >= 0xFFF0 && c <= 0xFFF8) || (c >= 0x1BCA0 && c <= 0x1BCA3) ||
	       (c >= 0x1D173 && c <= 0x1D17A) || (c >= 0xE0000 && c <= 0xE0FFF);
}

/* One code point as GitHub reads it: 0 to drop it, else the (folded) code point. */
static uint32_t read_cp(uint32_t c)
{
	if (c == '\t' || c == '\n')
		return c;
	if (c < 0x20 || (c >= 0x7F && c <= 0x9F) || is_invisible(c))
		return 0;
	if (c == 0x2028 || c == 0x2029)
		return '\n';
	if (c >= 0xFF01 && c <= 0xFF5E)
		return c - 0xFEE0;
	if (c == 0x3000)
		return ' ';
	if (c >= 0xFE50 && c <= 0xFE6B && small_forms[c - 0xFE50])
		return (unsigned char)small_forms[c - 0xFE50];
	return c;
}

/* Pass 1: bytes to code points as GitHub reads them. *n = how many; cps has room for len. */
static void read_text(const char *s, size_t len, uint32_t *cps, size_t *n)
{
	size_t i = 0, used;

	*n = 0;
	while (i < len) {
		uint32_t c = ap_utf8_decode(s + i, len - i, &used);

		i += used;
		if (c == '\r') /* CR LF and a lone CR are both a line break */
			c = i < len && s[i] == '\n' ? 0 : '\n';
		c = read_cp(c);
		if (c)
			cps[(*n)++] = c;
	}
}

/* An HTML character reference (as CommonMark recognises them) at cps[i] == '&': returns its
 * length in code points and sets *cp (0 when the name is not in named_refs), or 0 when there
 * is none. */
static size_t char_ref(const uint32_t *cps, size_t n, size_t i, uint32_t *cp)
{
	size_t j = i + 1, start;
	uint32_t v = 0;

	*cp = 0;
	if (j < n && cps[j] == '#') {
		bool hex = j + 1 < n && (cps[j + 1] == 'x' || cps[j + 1] == 'X');
		size_t max = hex ? 6 : 7;

		j += hex ? 2 : 1;
		start = j;
		while (j < n && j - start < max && (hex ? is_xdigit(cps[j]) : is_digit(cps[j]))) {
			uint32_t d = is_digit(cps[j]) ? cps[j] - '0' : lower(cps[j]) - 'a' + 10;

			v = v * (hex ? 16 : 10) + d;
			j++;
		}
		if (j == start || j >= n || cps[j] != ';')
			return 0;
		if (v == 0 || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
			v = REPLACEMENT;
		*cp = v;
		return j + 1 - i;
	}
	start = j;
	while (j < n && j - start < MAX_REF_NAME && is_alnum(cps[j]))
		j++;
	if (j == start || !is_alpha(cps[start]) || j >= n || cps[j] != ';')
		return 0;
	for (size_t k = 0; k < sizeof(named_refs) / sizeof(named_refs[0]); k++) {
		const char *name = named_refs[k].name;
		size_t m = strlen(name), q;

		if (m != j - start)
			continue;
		for (q = 0; q < m && cps[start + q] == (unsigned char)name[q]; q++)
			;
		if (q == m) {
			*cp = named_refs[k].cp;
			break;
		}
	}
	return j + 1 - i;
}

/* Pass 2: code points to units. *n = how many; u has room for the code point count. */
static void read_units(const uint32_t *cps, size_t ncp, struct unit *u, size_t *n)
{
	size_t i = 0;

	*n = 0;
	while (i < ncp) {
		uint32_t c = cps[i], ref = 0;
		size_t rl = 0;

		if (c == '\\' && i + 1 < ncp && is_punct(cps[i + 1])) {
			u[(*n)++] = (struct unit){.cp = cps[i + 1], .esc = true};
			i += 2;
			continue;
		}
		if (c == '&' && (rl = char_ref(cps, ncp, i, &ref)) > 0 && !ref) {
			/* A name GitHub may know and we do not: shown as written. */
			u[(*n)++] = (struct unit){.cp = '&', .esc = true};
			i++;
			continue;
		}
		if (c == '&' && rl > 0) {
			i += rl;
			ref = read_cp(ref == '\r' ? '\n' : ref);
			if (ref == '\n' || ref == '\t')
				ref = ' ';
			if (ref)
				u[(*n)++] = (struct unit){.cp = ref, .esc = is_punct(ref)};
			continue;
		}
		u[(*n)++] = (struct unit){.cp = c};
		i++;
	}
	/* A plain '&' before something that could complete a reference once written out: '#' or
	 * a letter (a named reference starts with a letter, so `2>&1` stays as written). */
	for (size_t k = 0; k + 1 < *n; k++)
		if (u[k].cp == '&' && !u[k].esc && (u[k + 1].cp == '#' || is_alpha(u[k + 1].cp)))
			u[k].esc = true;
}

/* u[i..] starts with the ASCII word w (lower case), any case. */
static bool word_at(const struct unit *u, size_t n, size_t i, const char *w)
{
	size_t m = strlen(w);

	if (i + m > n)
		return false;
	for (size_t k = 0; k < m; k++)
		if (lower(u[i + k].cp) != (unsigned char)w[k])
			return false;
	return true;
}

/* u[..end) ends with the ASCII word w (lower case), any case. */
static bool word_before(const struct unit *u, size_t end, const char *w)
{
	size_t m = strlen(w);

	return end >= m && word_at(u, end, end - m, w);
}

/* The run of non-space units from i looks like an issue reference or a link. */
static bool ref_follows(const struct unit *u, size_t n, size_t i)
{
	static const char *const paths[] = {"issues/", "pull/", "pulls/", "discussions/"};

	if (word_at(u, n, i, "www.") ||
	    (word_at(u, n, i, "gh-") && i + 3 < n && is_digit(u[i + 3].cp)))
		return true;
	for (size_t j = i; j < n && j - i < MAX_REF_SCAN && !is_space(u[j].cp); j++) {
		if (u[j].cp == '#' && j + 1 < n && is_digit(u[j + 1].cp))
			return true;
		if (word_at(u, n, j, "://"))
			return true;
		for (size_t k = 0; k < sizeof(paths) / sizeof(paths[0]); k++)
			if (word_before(u, j + 1, paths[k]) && j + 1 < n && is_digit(u[j + 1].cp))
				return true;
	}
	return false;
}

/* A closing keyword at u[i] followed by a reference: the index right after the keyword, else
 * 0. */
static size_t closing_keyword(const struct unit *u, size_t n, size_t i)
{
	static const char *const kw[] = {"resolves", "resolved", "resolve", "closes", "closed",
					 "close",    "fixes",	 "fixed",   "fix"};

	if (i > 0 && (is_alnum(u[i - 1].cp) || u[i - 1].cp == '_'))
		return 0;
	for (size_t k = 0; k < sizeof(kw) / sizeof(kw[0]); k++) {
		size_t e = i + strlen(kw[k]), j;

		if (!word_at(u, n, i, kw[k]) || (e < n && (is_alnum(u[e].cp) || u[e].cp == '_')))
			continue;
		j = e;
		if (j < n && u[j].cp == ':')
			j++;
		while (j < n && is_space(u[j].cp))
			j++;
		return j < n && ref_follows(u, n, j) ? e : 0;
	}
	return 0;
}

/* Pass 3: mark where a ZWSP goes (see sanitize.h for the list). */
static void mark(struct unit *u, size_t n)
{
	static const char *const paths[] = {"issues/", "pull/", "pulls/", "discussions/"};

	for (size_t i = 0; i < n; i++) {
		uint32_t c = u[i].cp, next = i + 1 < n ? u[i + 1].cp : 0;
		size_t e;

		if (c == '#' && is_digit(next))
			u[i + 1].zw = true;
		if (c == '@' && (is_alnum(next) || next == '_' || next == '-'))
			u[i + 1].zw = true;
		if (c == '-' && is_digit(next) && word_before(u, i + 1, "gh-"))
			u[i + 1].zw = true;
		if (c == ':' && word_at(u, n, i + 1, "//"))
			u[i + 1].zw = true;
		if (c == '.' && word_before(u, i, "www"))
			u[i].zw = true;
		if (c == '<' && (is_alpha(next) || next == '/' || next == '!' || next == '?'))
			u[i + 1].zw = true;
		if (c == ']' && (next == '(' || next == '[' || next == ':'))
			u[i + 1].zw = true;
		if (c == '\\' && (word_at(u, n, i + 1, "href") || word_at(u, n, i + 1, "url")))
			u[i + 1].zw = true;
		if (c == '/' && is_digit(next))
			for (size_t k = 0; k < sizeof(paths) / sizeof(paths[0]); k++)
				if (word_before(u, i + 1, paths[k]))
					u[i + 1].zw = true;
		if (is_alpha(c) && (e = closing_keyword(u, n, i)) > 0)
			u[e].zw = true;
	}
}

/* Read s[0..len) into units: *out (caller frees) and *n. 0 or AP_ENOMEM. */
static int units_of(const char *s, size_t len, struct unit **out, size_t *n)
{
	uint32_t *cps = malloc((len + 1) * sizeof(*cps));
	struct unit *u = malloc((len + 1) * sizeof(*u));
	size_t ncp;

	*out = NULL;
	*n = 0;
	if (!cps || !u) {
		free(cps);
		free(u);
		return ap_error_set(AP_ENOMEM, "out of memory sanitizing text");
	}
	read_text(s, len, cps, &ncp);
	read_units(cps, ncp, u, n);
	free(cps);
	*out = u;
	return 0;
}

int sanitize_append(ap_buf *out, const char *s, size_t len)
{
	struct unit *u;
	char *text, *w;
	size_t n;
	int rc;

	rc = units_of(s, len, &u, &n);
	if (rc)
		return rc;
	mark(u, n);
	text = malloc(n * 8 + 1);
	if (!text) {
		free(u);
		return ap_error_set(AP_ENOMEM, "out of memory sanitizing text");
	}
	w = text;
	for (size_t i = 0; i < n; i++) {
		if (u[i].zw) {
			memcpy(w, SANITIZE_ZWSP, 3);
			w += 3;
		}
		if (u[i].esc)
			*w++ = '\\';
		w += ap_utf8_encode(w, u[i].cp);
	}
	rc = ap_buf_add(out, text, (size_t)(w - text));
	free(text);
	free(u);
	return rc;
}

char *sanitize_str(const char *s)
{
	ap_buf b = AP_BUF_INIT((size_t)-2);

	if (sanitize_append(&b, s, strlen(s)) != 0 || ap_buf_adds(&b, "") != 0) {
		ap_buf_release(&b);
		return NULL;
	}
	return ap_buf_take(&b);
}

char *sanitize_visible(const char *s, size_t len)
{
	struct unit *u;
	char *text, *w;
	size_t n;

	if (units_of(s, len, &u, &n) != 0)
		return NULL;
	text = malloc(n * 4 + 1);
	if (text) {
		w = text;
		for (size_t i = 0; i < n; i++)
			w += ap_utf8_encode(w, u[i].cp);
		*w = '\0';
	}
	free(u);
	return text;
}

size_t sanitize_cut(const char *s, size_t len, size_t max)
{
	size_t n = len < max ? len : max;

	if (n == len)
		return len;
	while (n > 0) {
		if (((unsigned char)s[n] & 0xC0) == 0x80) /* inside a character */
			n--;
		else if (len - n >= 3 && memcmp(s + n, SANITIZE_ZWSP, 3) == 0)
			n--; /* the character before needs the ZWSP after it */
		else
			break;
	}
	while (n > 0 && s[n - 1] == '\\')
		n--;
	return n;
}

/* SPDX-License-Identifier: MIT */
/* server/payload.c - strict JSON validation with field extraction (see payload.h). */
#include "server/payload.h"

#include "common/err.h"

#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* Keys longer than this are never wanted; they are validated but not kept. */
#define KEY_MAX 32
/* Wanted paths are at most this deep. */
#define PATH_MAX_DEPTH 3

static const char *const paths[PL_NFIELDS][PATH_MAX_DEPTH] = {
    [PL_ACTION] = {"action"},
    [PL_SENDER_TYPE] = {"sender", "type"},
    [PL_INSTALLATION_ID] = {"installation", "id"},
    [PL_LABEL_NAME] = {"label", "name"},
    [PL_ISSUE_NUMBER] = {"issue", "number"},
    [PL_ISSUE_PULL_REQUEST] = {"issue", "pull_request"},
    [PL_COMMENT_BODY] = {"comment", "body"},
    [PL_COMMENT_ASSOCIATION] = {"comment", "author_association"},
    [PL_COMMENT_ID] = {"comment", "id"},
    [PL_REPO_FULL_NAME] = {"repository", "full_name"},
    [PL_REPO_ID] = {"repository", "id"},
    [PL_PR_NUMBER] = {"pull_request", "number"},
    [PL_PR_HEAD_REF] = {"pull_request", "head", "ref"},
    [PL_ISSUE_TITLE] = {"issue", "title"},
    [PL_PR_TITLE] = {"pull_request", "title"},
};

static const char *const dotted[PL_NFIELDS] = {
    "action",
    "sender.type",
    "installation.id",
    "label.name",
    "issue.number",
    "issue.pull_request",
    "comment.body",
    "comment.author_association",
    "comment.id",
    "repository.full_name",
    "repository.id",
    "pull_request.number",
    "pull_request.head.ref",
    "issue.title",
    "pull_request.title",
};

const char *pl__field_path(enum pl_field f)
{
	return (unsigned)f < PL_NFIELDS ? dotted[f] : "?";
}

struct scan {
	const char *p, *end;
	int depth;
	/* Wanted fields whose path agrees with the keys of the value being parsed (a bit per
	 * field), and how many keys deep that value is. Once the mask is empty nothing below is
	 * looked at. */
	uint32_t mask;
	int nkeys;
	pl_fields *out;
	/* Fields whose path (or a prefix of it) was already visited: the first occurrence of a
	 * key wins at every level, as with cJSON_GetObjectItem. */
	uint32_t closed;
	int err; /* AP_EINVAL or AP_ENOMEM once failed */
};

static int fail(struct scan *s, int code)
{
	if (!s->err)
		s->err = code;
	return s->err;
}

static inline void skip_ws(struct scan *s)
{
	/* Most bodies are compact: the next byte is usually not white space. */
	while (s->p < s->end && (unsigned char)*s->p <= ' ' &&
	       (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

static int path_len(int f)
{
	int n = 0;

	while (n < PATH_MAX_DEPTH && paths[f][n])
		n++;
	return n;
}

/* The wanted field whose whole path is the current key path, or -1. */
static int wanted(const struct scan *s)
{
	if (!s->mask)
		return -1;
	for (int f = 0; f < PL_NFIELDS; f++)
		if ((s->mask & (UINT32_C(1) << f)) && path_len(f) == s->nkeys)
			return f;
	return -1;
}

/* Narrow mask to the fields whose key at depth is key. */
static uint32_t narrow(uint32_t mask, int depth, const char *key)
{
	uint32_t out = 0;

	for (int f = 0; mask && f < PL_NFIELDS; f++)
		if ((mask & (UINT32_C(1) << f)) && depth < PATH_MAX_DEPTH && paths[f][depth] &&
		    strcmp(paths[f][depth], key) == 0)
			out |= UINT32_C(1) << f;
	return out;
}

#ifndef __SSE2__
#define ONES  UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)

/* Non-zero when some byte of w may be '"', '\\' or a control character. */
static inline uint64_t special_in_word(uint64_t w)
{
	uint64_t quote = w ^ (ONES * '"'), bslash = w ^ (ONES * '\\');

	return (((quote - ONES) & ~quote) | ((bslash - ONES) & ~bslash) |
		((w - ONES * 0x20) & ~w)) &
	       HIGHS;
}
#endif

/* The first byte at or after q that is '"', '\\' or below 0x20, or end. Sixteen bytes at a
 * time with SSE2 (every x86-64 has it), else eight with a word test that may report false
 * positives, never false negatives (the byte loop settles them). */
static inline const char *plain_run(const char *q, const char *end)
{
#ifdef __SSE2__
	const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'),
		      ctl = _mm_set1_epi8(0x1f);

	while (end - q >= 16) {
		__m128i x = _mm_loadu_si128((const __m128i *)(const void *)q);
		/* min(x, 0x1f) == x exactly when x <= 0x1f (unsigned) */
		__m128i hit =
		    _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bslash)),
				 _mm_cmpeq_epi8(_mm_min_epu8(x, ctl), x));
		unsigned bits = (unsigned)_mm_movemask_epi8(hit);

		if (bits)
			return q + __builtin_ctz(bits);
		q += 16;
	}
#else
	while (end - q >= 8) {
		uint64_t w;

		memcpy(&w, q, 8);
		if (special_in_word(w))
			break;
		q += 8;
	}
#endif
	while (q < end && (unsigned char)*q >= 0x20 && *q != '"' && *q != '\\')
		q++;
	return q;
}

static int hex4(const char *p, unsigned *out)
{
	unsigned v = 0;

	for (int i = 0; i < 4; i++) {
		char c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18);
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Append k bytes of src to the decoded text (dst, room for dstcap, *n so far): *bad when
 * they do not fit. *n counts them either way. */
static inline void put_bytes(char *dst, size_t dstcap, size_t *n, bool *bad, const char *src,
			     size_t k)
{
	if (*n + k > dstcap)
		*bad = true;
	else
		memcpy(dst + *n, src, k);
	*n += k;
}

/* The code point of a \u escape at s->p (past the "\u"), joined with the low half of a
 * surrogate pair that follows. */
static int unicode_escape(struct scan *s, unsigned *cp)
{
	unsigned lo;

	if (s->end - s->p < 4 || hex4(s->p, cp))
		return fail(s, AP_EINVAL);
	s->p += 4;
	if (*cp >= 0xd800 && *cp <= 0xdbff && s->end - s->p >= 6 && s->p[0] == '\\' &&
	    s->p[1] == 'u' && hex4(s->p + 2, &lo) == 0 && lo >= 0xdc00 && lo <= 0xdfff) {
		*cp = 0x10000 + ((*cp - 0xd800) << 10) + (lo - 0xdc00);
		s->p += 6;
	}
	return 0;
}

/* The byte a one-letter escape \c stands for, or -1 when it is not one. */
static inline int simple_escape(unsigned char c)
{
	switch (c) {
	case '"':
	case '\\':
	case '/':
		return c;
	case 'b':
		return '\b';
	case 'f':
		return '\f';
	case 'n':
		return '\n';
	case 'r':
		return '\r';
	case 't':
		return '\t';
	default:
		return -1;
	}
}

/* Parse a string at s->p (on the opening quote). When dst is non-NULL, decode into it:
 * dst has room for dstcap bytes plus a NUL; *dstlen gets the decoded length, or SIZE_MAX when
 * the decoded text did not fit or contains U+0000 (the caller then treats it as absent).
 * Decoded text is never longer than the raw text. With nul_truncates an escaped U+0000 ends
 * the decoded text instead (cJSON does that to keys). */
static int parse_string(struct scan *s, char *dst, size_t dstcap, size_t *dstlen,
			bool nul_truncates)
{
	size_t n = 0;
	bool bad = false, cut = false;

	s->p++; /* opening quote */
	for (;;) {
		unsigned char c;
		int e;

		if (s->p >= s->end)
			return fail(s, AP_EINVAL);
		c = (unsigned char)*s->p;
		if (c == '"') {
			s->p++;
			break;
		}
		if (c < 0x20)
			return fail(s, AP_EINVAL);
		if (c != '\\') {
			/* Fast path: a run of plain bytes (plain_run). */
			const char *run = s->p, *q = plain_run(s->p, s->end);

			s->p = q;
			if (dst && !bad && !cut)
				put_bytes(dst, dstcap, &n, &bad, run, (size_t)(q - run));
			continue;
		}
		if (s->end - s->p < 2)
			return fail(s, AP_EINVAL);
		c = (unsigned char)s->p[1];
		s->p += 2;
		if (c == 'u') {
			unsigned cp;
			int rc = unicode_escape(s, &cp);

			if (rc)
				return rc;
			if (cp == 0 && nul_truncates)
				cut = true;
			else if (cp == 0)
				bad = true;
			if (dst && !bad && !cut) {
				char tmp[4];
				size_t k = put_utf8(tmp, cp);

				put_bytes(dst, dstcap, &n, &bad, tmp, k);
			}
			continue;
		}
		if ((e = simple_escape(c)) < 0)
			return fail(s, AP_EINVAL);
		c = (unsigned char)e;
		if (dst && !bad && !cut)
			put_bytes(dst, dstcap, &n, &bad, (const char *)&c, 1);
	}
	if (dst) {
		if (!bad)
			dst[n] = '\0';
		*dstlen = bad ? SIZE_MAX : n;
	}
	return 0;
}

/* RFC 8259 number; *id = its value when it is a plain positive integer up to 2^53, else 0. */
static int parse_number(struct scan *s, int64_t *id)
{
	bool integral = true, neg = false;
	uint64_t v = 0;
	bool overflow = false;

	if (s->p < s->end && *s->p == '-') {
		neg = true;
		s->p++;
	}
	if (s->p >= s->end)
		return fail(s, AP_EINVAL);
	if (*s->p == '0') {
		s->p++;
	} else if (*s->p >= '1' && *s->p <= '9') {
		while (s->p < s->end && *s->p >= '0' && *s->p <= '9') {
			if (v > (UINT64_C(1) << 53))
				overflow = true;
			else
				v = v * 10 + (uint64_t)(*s->p - '0');
			s->p++;
		}
	} else {
		return fail(s, AP_EINVAL);
	}
	if (s->p < s->end && *s->p == '.') {
		integral = false;
		s->p++;
		if (s->p >= s->end || *s->p < '0' || *s->p > '9')
			return fail(s, AP_EINVAL);
		while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
			s->p++;
	}
	if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
		integral = false;
		s->p++;
		if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
			s->p++;
		if (s->p >= s->end || *s->p < '0' || *s->p > '9')
			return fail(s, AP_EINVAL);
		while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
			s->p++;
	}
	*id =
	    (integral && !neg && !overflow && v >= 1 && v <= (UINT64_C(1) << 53)) ? (int64_t)v : 0;
	return 0;
}

static int literal(struct scan *s, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
		return fail(s, AP_EINVAL);
	s->p += n;
	return 0;
}

static int parse_value(struct scan *s);

static int parse_object(struct scan *s)
{
	uint32_t outer_mask = s->mask;
	int outer_nkeys = s->nkeys;
	char key[KEY_MAX + 1];

	if (++s->depth > PL_DEPTH_MAX)
		return fail(s, AP_EINVAL);
	s->p++; /* { */
	skip_ws(s);
	if (s->p < s->end && *s->p == '}') {
		s->p++;
		s->depth--;
		return 0;
	}
	for (;;) {
		/* Once every wanted field below this object was found, its remaining keys are
		 * only validated (a repository object has about 90). */
		bool track = (outer_mask & ~s->closed) && outer_nkeys < PATH_MAX_DEPTH;
		size_t klen = 0;
		uint32_t m;

		skip_ws(s);
		if (s->p >= s->end || *s->p != '"')
			return fail(s, AP_EINVAL);
		/* A key is cut at U+0000 like cJSON does, so both find the same key. */
		if (parse_string(s, track ? key : NULL, KEY_MAX, &klen, true))
			return s->err;
		m = track && klen != SIZE_MAX ? narrow(outer_mask, outer_nkeys, key) & ~s->closed
					      : 0;
		s->mask = m;
		s->nkeys = outer_nkeys + 1;
		skip_ws(s);
		if (s->p >= s->end || *s->p != ':')
			return fail(s, AP_EINVAL);
		s->p++;
		if (parse_value(s))
			return s->err;
		s->closed |= m;
		s->mask = outer_mask;
		s->nkeys = outer_nkeys;
		skip_ws(s);
		if (s->p < s->end && *s->p == ',') {
			s->p++;
			continue;
		}
		if (s->p < s->end && *s->p == '}') {
			s->p++;
			s->depth--;
			return 0;
		}
		return fail(s, AP_EINVAL);
	}
}

static int parse_array(struct scan *s)
{
	uint32_t outer_mask = s->mask;

	if (++s->depth > PL_DEPTH_MAX)
		return fail(s, AP_EINVAL);
	s->p++;	     /* [ */
	s->mask = 0; /* no wanted field lives inside an array */
	skip_ws(s);
	if (s->p < s->end && *s->p == ']') {
		s->p++;
		goto done;
	}
	for (;;) {
		if (parse_value(s))
			return s->err;
		skip_ws(s);
		if (s->p < s->end && *s->p == ',') {
			s->p++;
			continue;
		}
		if (s->p < s->end && *s->p == ']') {
			s->p++;
			goto done;
		}
		return fail(s, AP_EINVAL);
	}
done:
	s->depth--;
	s->mask = outer_mask;
	return 0;
}

/* Decode the string at s->p into a malloc'd copy for field (absent when unusable). */
static int take_string(struct scan *s, int field)
{
	const char *q = s->p;
	size_t raw, dlen;
	char *buf;

	/* Decoded text is never longer than the raw text: measure, then decode. */
	if (parse_string(s, NULL, 0, NULL, false))
		return s->err;
	raw = (size_t)(s->p - q);
	buf = malloc(raw + 1);
	if (!buf)
		return fail(s, AP_ENOMEM);
	s->p = q;
	parse_string(s, buf, raw, &dlen, false);
	if (dlen == SIZE_MAX)
		free(buf);
	else
		s->out->str[field] = buf;
	return 0;
}

static int parse_value(struct scan *s)
{
	int field = wanted(s);
	bool take = field >= 0; /* closed fields are never in the mask */

	skip_ws(s);
	if (s->p >= s->end)
		return fail(s, AP_EINVAL);
	switch (*s->p) {
	case '{':
		if (take)
			s->out->object[field] = true;
		return parse_object(s);
	case '[':
		return parse_array(s);
	case '"':
		return take ? take_string(s, field) : parse_string(s, NULL, 0, NULL, false);
	case 't':
		return literal(s, "true");
	case 'f':
		return literal(s, "false");
	case 'n':
		return literal(s, "null");
	default: {
		int64_t id = 0;

		if (parse_number(s, &id))
			return s->err;
		if (take)
			s->out->id[field] = id;
		return 0;
	}
	}
}

void pl_fields_release(pl_fields *f)
{
	if (!f)
		return;
	for (int i = 0; i < PL_NFIELDS; i++) {
		free(f->str[i]);
		f->str[i] = NULL;
	}
}

int pl_scan(const char *body, size_t len, pl_fields *out)
{
	struct scan s = {
	    .p = body, .end = body + len, .mask = (UINT32_C(1) << PL_NFIELDS) - 1, .out = out};

	memset(out, 0, sizeof(*out));
	skip_ws(&s);
	if (s.p >= s.end || *s.p != '{')
		return AP_EINVAL;
	if (parse_object(&s) == 0) {
		skip_ws(&s);
		if (s.p != s.end)
			fail(&s, AP_EINVAL);
	}
	if (s.err) {
		pl_fields_release(out);
		memset(out, 0, sizeof(*out));
		return s.err;
	}
	return 0;
}

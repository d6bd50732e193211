/* SPDX-License-Identifier: MIT */
/* common/redact.c - secret masking (see redact.h).
 *
 * Two kinds of matchers feed one list of spans:
 *   - literals: every registered secret expanded once into its variants (plain, trimmed, base64
 *     at three alignments in both alphabets, URL-encoded in both hex cases and form style,
 *     JSON-escaped once and twice, and for multi-line values each line and the "\n"-joined and
 *     literal-"\n" forms). A hash of each variant's first four bytes indexes them, so a text
 *     position costs one load, one multiply and one bit test unless a bucket is hit.
 *   - patterns: PCRE2 expressions for token formats, compiled once (JIT when available) and run
 *     anchored only where a keyword prefilter (first byte, then a short prefix) fires.
 * Overlapping spans are merged and each merged span becomes one REDACT_MASK.
 *
 * The stream redactor runs the same scanner over a held buffer with PCRE2_PARTIAL_HARD, so a
 * token that could still grow is reported as partial; it emits only the prefix before the
 * longest variant's reach, before any partial match and before any span that crosses the cut.
 */
#include "common/redact.h"

#include "common/err.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MIN_SECRET_LEN 6
#define NBUCKET_BITS   14
#define NBUCKETS       (1u << NBUCKET_BITS)
/* Longest keyword ("github_pat_") minus one: a keyword this close to the end may be cut. */
#define KEYWORD_REACH 10
/* Bytes the stream gathers beyond its hold-back before rescanning (amortises small writes). */
#define STREAM_BATCH 4096
/* An unterminated private-key block held longer than this is masked and then skipped. */
#define KEY_HOLD_CAP (64 * 1024)

/* ---- literal registry ---------------------------------------------------------------- */

struct variant {
	char *s;
	size_t len;
	size_t refs; /* registrations that produced this variant */
};

static pthread_rwlock_t reg_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct variant *vars; /* registered variants (order is not significant) */
static bool removing;	     /* add_variant() takes registrations back (write lock held) */
static size_t n_vars, cap_vars;
static size_t longest;			    /* length of the longest variant */
static uint64_t bucket_bits[NBUCKETS / 64]; /* bucket non-empty? */
static uint32_t bucket_start[NBUCKETS + 1]; /* CSR offsets into bucket_items */
static uint32_t *bucket_items;		    /* variant indexes, grouped by bucket */

static inline uint32_t hash4(const char *p)
{
	uint32_t k;

	memcpy(&k, p, 4);
	return (k * 0x9E3779B1u) >> (32 - NBUCKET_BITS);
}

/* Count one registration of a variant, or take one back while `removing`: a variant shared by
 * two secrets (a PEM line also registered alone) stays until both are removed. */
static int add_variant(const char *v, size_t len)
{
	char *copy;

	if (len < MIN_SECRET_LEN)
		return 0;
	for (size_t i = 0; i < n_vars; i++) {
		if (vars[i].len != len || memcmp(vars[i].s, v, len) != 0)
			continue;
		if (!removing) {
			vars[i].refs++;
		} else if (--vars[i].refs == 0) {
			free(vars[i].s);
			vars[i] = vars[--n_vars];
		}
		return 0;
	}
	if (removing)
		return 0;
	if (n_vars == cap_vars) {
		size_t ncap = cap_vars ? cap_vars * 2 : 32;
		struct variant *nv = realloc(vars, ncap * sizeof(*nv));

		if (!nv)
			return ap_error_set(AP_ENOMEM, "out of memory registering a secret");
		vars = nv;
		cap_vars = ncap;
	}
	copy = malloc(len + 1);
	if (!copy)
		return ap_error_set(AP_ENOMEM, "out of memory registering a secret");
	memcpy(copy, v, len);
	copy[len] = '\0';
	vars[n_vars].s = copy;
	vars[n_vars].len = len;
	vars[n_vars].refs = 1;
	n_vars++;
	return 0;
}

/* Rebuild the first-four-bytes index over vars (caller holds the write lock): a counting
 * sort of variant indexes by bucket, bucket_start[h]..bucket_start[h + 1] being bucket h. */
static int rebuild_index(void)
{
	uint32_t *items = NULL;

	memset(bucket_bits, 0, sizeof(bucket_bits));
	memset(bucket_start, 0, sizeof(bucket_start));
	longest = 0;
	for (size_t i = 0; i < n_vars; i++)
		if (vars[i].len > longest)
			longest = vars[i].len;
	if (n_vars) {
		items = malloc(n_vars * sizeof(*items));
		if (!items)
			return ap_error_set(AP_ENOMEM, "out of memory indexing secrets");
	}
	for (size_t i = 0; i < n_vars; i++)
		bucket_start[hash4(vars[i].s)]++;
	for (size_t b = 1; b < NBUCKETS; b++)
		bucket_start[b] += bucket_start[b - 1];
	bucket_start[NBUCKETS] = (uint32_t)n_vars;
	for (size_t i = n_vars; i-- > 0;) {
		uint32_t h = hash4(vars[i].s);

		items[--bucket_start[h]] = (uint32_t)i;
		bucket_bits[h >> 6] |= (uint64_t)1 << (h & 63);
	}
	free(bucket_items);
	bucket_items = items;
	return 0;
}

static const char b64_std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char b64_url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* Base64 of the value preceded by `shift` unknown bytes, keeping only the characters that
 * depend on the value alone, so the variant matches inside a longer encoded string such as
 * base64("user:" + secret). Registered in both alphabets. */
static int add_base64_variants(const char *v, size_t len, size_t shift)
{
	size_t total = len + shift, out_len = 0, start, end;
	unsigned char *in = calloc(total + 3, 1);
	char *std = malloc((total + 2) / 3 * 4 + 1);
	char *url = malloc((total + 2) / 3 * 4 + 1);
	int rc = AP_ENOMEM;

	if (!in || !std || !url) {
		ap_error_set(AP_ENOMEM, "out of memory registering a secret");
		goto out_free;
	}
	memcpy(in + shift, v, len);
	for (size_t i = 0; i < total; i += 3) {
		unsigned n = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];

		for (int k = 3; k >= 0; k--) {
			std[out_len] = b64_std[(n >> (6 * k)) & 63];
			url[out_len] = b64_url[(n >> (6 * k)) & 63];
			out_len++;
		}
	}
	start = (shift * 8 + 5) / 6;
	end = (total * 8) / 6;
	rc = 0;
	if (end > start) {
		rc = add_variant(std + start, end - start);
		if (!rc)
			rc = add_variant(url + start, end - start);
	}
out_free:
	free(in);
	free(std);
	free(url);
	return rc;
}

enum url_style { URL_UPPER, URL_LOWER, URL_FORM };

static int add_url_variant(const char *v, size_t len, enum url_style style)
{
	const char *hex = style == URL_LOWER ? "0123456789abcdef" : "0123456789ABCDEF";
	char *out = malloc(len * 3 + 1);
	size_t o = 0;
	int rc;

	if (!out)
		return ap_error_set(AP_ENOMEM, "out of memory registering a secret");
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)v[i];

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_' || c == '.' || c == '~') {
			out[o++] = (char)c;
		} else if (c == ' ' && style == URL_FORM) {
			out[o++] = '+';
		} else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	rc = add_variant(out, o);
	free(out);
	return rc;
}

/* JSON string escaping as cJSON prints it; `slash` also escapes '/' (other encoders do). The
 * result is malloc'd into *out / *out_len. */
static int json_escape(const char *v, size_t len, bool slash, char **out, size_t *out_len)
{
	static const char hex[] = "0123456789abcdef";
	char *o = malloc(len * 6 + 1);
	size_t n = 0;

	*out = NULL;
	if (!o)
		return ap_error_set(AP_ENOMEM, "out of memory registering a secret");
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)v[i];
		char esc = 0;

		switch (c) {
		case '"':
			esc = '"';
			break;
		case '\\':
			esc = '\\';
			break;
		case '\b':
			esc = 'b';
			break;
		case '\f':
			esc = 'f';
			break;
		case '\n':
			esc = 'n';
			break;
		case '\r':
			esc = 'r';
			break;
		case '\t':
			esc = 't';
			break;
		case '/':
			esc = slash ? '/' : 0;
			break;
		default:
			break;
		}
		if (esc) {
			o[n++] = '\\';
			o[n++] = esc;
		} else if (c < 0x20) {
			memcpy(o + n, "\\u00", 4);
			n += 4;
			o[n++] = hex[c >> 4];
			o[n++] = hex[c & 15];
		} else {
			o[n++] = (char)c;
		}
	}
	o[n] = '\0';
	*out = o;
	*out_len = n;
	return 0;
}

static int add_json_variants(const char *v, size_t len)
{
	char *once = NULL, *twice = NULL, *slashed = NULL;
	size_t once_len, twice_len, slashed_len;
	int rc;

	rc = json_escape(v, len, false, &once, &once_len);
	if (!rc)
		rc = add_variant(once, once_len);
	if (!rc)
		rc = json_escape(once, once_len, false, &twice, &twice_len);
	if (!rc)
		rc = add_variant(twice, twice_len);
	if (!rc)
		rc = json_escape(v, len, true, &slashed, &slashed_len);
	if (!rc)
		rc = add_variant(slashed, slashed_len);
	free(once);
	free(twice);
	free(slashed);
	return rc;
}

/* Every encoded form of one value. */
static int add_forms(const char *v, size_t len)
{
	int rc = add_variant(v, len);

	for (size_t s = 0; !rc && s < 3; s++)
		rc = add_base64_variants(v, len, s);
	if (!rc)
		rc = add_url_variant(v, len, URL_UPPER);
	if (!rc)
		rc = add_url_variant(v, len, URL_LOWER);
	if (!rc)
		rc = add_url_variant(v, len, URL_FORM);
	if (!rc)
		rc = add_json_variants(v, len);
	return rc;
}

/* Multi-line values (PEM keys): each line, and the lines joined without separators (the DER
 * base64 on one line). Armour lines ("-----BEGIN ...") are public and not registered. */
static int add_lines(const char *v, size_t len)
{
	ap_buf joined = AP_BUF_INIT(len + 1);
	size_t i = 0;
	int rc = 0;

	while (!rc && i < len) {
		const char *nl = memchr(v + i, '\n', len - i);
		size_t end = nl ? (size_t)(nl - v) : len, l = end - i;

		if (l && v[i + l - 1] == '\r')
			l--;
		if (l >= MIN_SECRET_LEN && strncmp(v + i, "-----", 5) != 0) {
			rc = add_forms(v + i, l);
			if (!rc)
				rc = ap_buf_add(&joined, v + i, l);
		}
		i = end + 1;
	}
	if (!rc && joined.len)
		rc = add_forms(joined.data, joined.len);
	ap_buf_release(&joined);
	return rc;
}

/* Replace every `from` (flen bytes) with `to` (tlen bytes); malloc'd result in *out. */
static int replace_all(const char *v, size_t len, const char *from, size_t flen, const char *to,
		       size_t tlen, char **out, size_t *out_len)
{
	ap_buf b = AP_BUF_INIT((size_t)-2);
	size_t i = 0;
	int rc = 0;

	*out = NULL;
	while (!rc && i < len) {
		if (len - i >= flen && memcmp(v + i, from, flen) == 0) {
			rc = ap_buf_add(&b, to, tlen);
			i += flen;
		} else {
			rc = ap_buf_add(&b, v + i, 1);
			i++;
		}
	}
	if (rc) {
		ap_buf_release(&b);
		return rc;
	}
	*out_len = b.len;
	*out = ap_buf_take(&b);
	return *out ? 0 : AP_ENOMEM;
}

/* The value as given, without trailing whitespace, in its real-newline and literal-"\n"
 * spellings (PRIVATE_KEY in .env is often written with literal \n), and line by line. */
static int add_secret_locked(const char *value, size_t len)
{
	char *alt = NULL;
	size_t alt_len = len;
	int rc = add_forms(value, len);

	while (alt_len && strchr(" \t\r\n", value[alt_len - 1]))
		alt_len--;
	if (!rc && alt_len != len)
		rc = add_forms(value, alt_len);
	if (!rc && memchr(value, '\n', len)) {
		rc = add_lines(value, len);
		if (!rc)
			rc = replace_all(value, alt_len, "\r\n", 2, "\\n", 2, &alt, &alt_len);
		if (!rc) {
			char *lit = NULL;
			size_t lit_len;

			rc = replace_all(alt, alt_len, "\n", 1, "\\n", 2, &lit, &lit_len);
			if (!rc)
				rc = add_forms(lit, lit_len);
			free(lit);
		}
	} else if (!rc && memmem(value, len, "\\n", 2)) {
		rc = replace_all(value, alt_len, "\\n", 2, "\n", 1, &alt, &alt_len);
		if (!rc)
			rc = add_forms(alt, alt_len);
		if (!rc)
			rc = add_lines(alt, alt_len);
	}
	free(alt);
	return rc;
}

/* Register one secret, or take one registration back when remove, and rebuild the index. */
static int change_secret(const char *value, bool remove)
{
	size_t len;
	int rc, rc2;

	if (!value)
		return 0;
	len = strlen(value);
	if (len < MIN_SECRET_LEN)
		return 0;
	pthread_rwlock_wrlock(&reg_lock);
	removing = remove;
	rc = add_secret_locked(value, len);
	removing = false;
	/* Index whatever was added, even after a failure, so partial registration still masks. */
	rc2 = rebuild_index();
	pthread_rwlock_unlock(&reg_lock);
	return rc ? rc : rc2;
}

int redact_add_secret(const char *value)
{
	return change_secret(value, false);
}

int redact_remove_secret(const char *value)
{
	return change_secret(value, true);
}

void redact__clear(void)
{
	pthread_rwlock_wrlock(&reg_lock);
	for (size_t i = 0; i < n_vars; i++)
		free(vars[i].s);
	free(vars);
	vars = NULL;
	n_vars = cap_vars = 0;
	longest = 0;
	rebuild_index();
	pthread_rwlock_unlock(&reg_lock);
}

size_t redact__variant_count(void)
{
	size_t n;

	pthread_rwlock_rdlock(&reg_lock);
	n = n_vars;
	pthread_rwlock_unlock(&reg_lock);
	return n;
}

/* ---- token patterns -------------------------------------------------------------------- */

enum pat_id { PAT_GITHUB, PAT_GITHUB_PAT, PAT_SK, PAT_AWS, PAT_PEM_BEGIN, PAT_PEM_END, PAT_N };

static const char *const pat_src[PAT_N] = {
    [PAT_GITHUB] = "gh[pousr]_[A-Za-z0-9]{36,255}",
    [PAT_GITHUB_PAT] = "github_pat_[A-Za-z0-9_]{82,255}",
    /* Anthropic, OpenAI project/service/admin keys, and legacy OpenAI keys (T3BlbkFJ is
     * base64 of "OpenAI"). */
    [PAT_SK] = ("sk-(?:ant-[A-Za-z0-9_-]{20,255}|(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,255}"
		"|[A-Za-z0-9_-]{10,100}T3BlbkFJ[A-Za-z0-9_-]{10,100})"),
    [PAT_AWS] = "(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])",
    [PAT_PEM_BEGIN] = "-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----",
    [PAT_PEM_END] = "-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----",
};

/* Keywords that start each pattern; the scanner tries a pattern only where one begins. */
static const struct {
	const char *kw;
	size_t len;
	enum pat_id pat;
} keywords[] = {
    {"ghp_", 4, PAT_GITHUB}, {"gho_", 4, PAT_GITHUB}, {"ghu_", 4, PAT_GITHUB},
    {"ghs_", 4, PAT_GITHUB}, {"ghr_", 4, PAT_GITHUB}, {"github_pat_", 11, PAT_GITHUB_PAT},
    {"sk-", 3, PAT_SK},	     {"AKIA", 4, PAT_AWS},    {"ASIA", 4, PAT_AWS},
    {"ABIA", 4, PAT_AWS},    {"ACCA", 4, PAT_AWS},    {"-----BEGIN", 10, PAT_PEM_BEGIN},
};

static pthread_once_t pat_once = PTHREAD_ONCE_INIT;
static pcre2_code *pat_code[PAT_N];
static int pat_err; /* nonzero if a pattern failed to compile (a programming error) */
static uint64_t first_pair[65536 / 64]; /* bit set for the first two bytes of each keyword */

static inline unsigned kw_pair(const char *p)
{
	return (unsigned)(unsigned char)p[0] << 8 | (unsigned char)p[1];
}

static void compile_patterns(void)
{
	for (int i = 0; i < PAT_N; i++) {
		/* Patterns other than the END search run anchored at a keyword. Anchoring at
		 * compile time (not match time) keeps the JIT usable. */
		uint32_t opts = i == PAT_PEM_END ? 0 : PCRE2_ANCHORED;
		PCRE2_SIZE erroff;
		int errcode;

		pat_code[i] = pcre2_compile((PCRE2_SPTR)pat_src[i], PCRE2_ZERO_TERMINATED, opts,
					    &errcode, &erroff, NULL);
		if (!pat_code[i]) {
			pat_err = errcode;
			continue;
		}
		/* JIT is an optimisation: without it pcre2_match() interprets. */
		(void)pcre2_jit_compile(pat_code[i], PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD);
	}
	for (size_t k = 0; k < sizeof(keywords) / sizeof(keywords[0]); k++)
		first_pair[kw_pair(keywords[k].kw) >> 6] |= (uint64_t)1
							    << (kw_pair(keywords[k].kw) & 63);
}

static int patterns_ready(void)
{
	pthread_once(&pat_once, compile_patterns);
	if (pat_err)
		return ap_error_set(
		    AP_EINVAL, "redaction pattern failed to compile (PCRE2 error %d)", pat_err);
	return 0;
}

/* ---- scanner --------------------------------------------------------------------------- */

struct span {
	size_t a, b; /* masked range [a, b) */
};

struct scan {
	const char *in;
	size_t len;
	bool final;	    /* the text is complete: no partial matches */
	struct span *spans; /* merged, sorted, disjoint */
	size_t n, cap;
	struct span inl[8];   /* first spans live here: log lines never allocate */
	size_t partial;	      /* first position of an unfinished match, SIZE_MAX if none */
	bool partial_key;     /* that partial match is an unterminated private-key block */
	size_t key_body;      /* ... whose BEGIN line ends here */
	pcre2_match_data *md; /* created on the first keyword hit */
};

static void scan_init(struct scan *sc, const char *in, size_t len, bool final)
{
	memset(sc, 0, sizeof(*sc));
	sc->in = in;
	sc->len = len;
	sc->final = final;
	sc->spans = sc->inl;
	sc->cap = sizeof(sc->inl) / sizeof(sc->inl[0]);
	sc->partial = SIZE_MAX;
}

static void scan_release(struct scan *sc)
{
	if (sc->spans != sc->inl)
		free(sc->spans);
	pcre2_match_data_free(sc->md);
}

/* Add [a, b), merging with the last span when they overlap (spans arrive sorted by a). */
static int add_span(struct scan *sc, size_t a, size_t b)
{
	if (sc->n && a < sc->spans[sc->n - 1].b) {
		if (b > sc->spans[sc->n - 1].b)
			sc->spans[sc->n - 1].b = b;
		return 0;
	}
	if (sc->n == sc->cap) {
		size_t ncap = sc->cap * 2;
		struct span *ns = sc->spans == sc->inl ? malloc(ncap * sizeof(*ns))
						       : realloc(sc->spans, ncap * sizeof(*ns));

		if (!ns)
			return ap_error_set(AP_ENOMEM, "out of memory redacting");
		if (sc->spans == sc->inl)
			memcpy(ns, sc->inl, sizeof(sc->inl));
		sc->spans = ns;
		sc->cap = ncap;
	}
	sc->spans[sc->n].a = a;
	sc->spans[sc->n].b = b;
	sc->n++;
	return 0;
}

enum { M_NONE, M_MATCH, M_PARTIAL };

/* Run pattern p at `at` (anchored patterns) or from `at` (END search). Returns M_* and sets
 * [*ma, *mb) for a match, *ma for a partial, or a negative AP_E* code. */
static int run_pattern(struct scan *sc, enum pat_id p, size_t at, size_t *ma, size_t *mb)
{
	PCRE2_SIZE *ov;
	int rc;

	if (!sc->md) {
		sc->md = pcre2_match_data_create(1, NULL);
		if (!sc->md)
			return ap_error_set(AP_ENOMEM, "out of memory redacting");
	}
	rc = pcre2_match(pat_code[p], (PCRE2_SPTR)sc->in, sc->len, at,
			 sc->final ? 0 : PCRE2_PARTIAL_HARD, sc->md, NULL);
	if (rc == PCRE2_ERROR_NOMATCH)
		return M_NONE;
	ov = pcre2_get_ovector_pointer(sc->md);
	if (rc == PCRE2_ERROR_PARTIAL) {
		*ma = ov[0];
		return M_PARTIAL;
	}
	if (rc < 0) /* match or depth limit: fail closed rather than let the text through */
		return ap_error_set(AP_EIO, "redaction pattern failed (PCRE2 error %d)", rc);
	*ma = ov[0];
	*mb = ov[1];
	return M_MATCH;
}

static void set_partial(struct scan *sc, size_t at, bool key, size_t key_body)
{
	if (at < sc->partial) {
		sc->partial = at;
		sc->partial_key = key;
		sc->key_body = key_body;
	}
}

/* Try the pattern whose keyword starts at i; returns the match end (> i) or 0. */
static int try_patterns(struct scan *sc, size_t i, size_t *end)
{
	const char *p = sc->in + i;
	size_t avail = sc->len - i, ma = 0, mb = 0, ea, eb;
	int m;

	*end = 0;
	for (size_t k = 0; k < sizeof(keywords) / sizeof(keywords[0]); k++) {
		if (keywords[k].kw[0] != *p || avail < keywords[k].len ||
		    memcmp(p, keywords[k].kw, keywords[k].len) != 0)
			continue;
		m = run_pattern(sc, keywords[k].pat, i, &ma, &mb);
		if (m < 0)
			return m;
		if (m == M_PARTIAL) {
			set_partial(sc, i, false, 0);
			return 0;
		}
		if (m == M_NONE)
			return 0;
		if (keywords[k].pat != PAT_PEM_BEGIN) {
			*end = mb;
			return 0;
		}
		/* A private-key block runs to its END line, or to the end of the text. */
		m = run_pattern(sc, PAT_PEM_END, mb, &ea, &eb);
		if (m < 0)
			return m;
		if (m == M_MATCH)
			*end = eb;
		else if (sc->final)
			*end = sc->len;
		else
			set_partial(sc, i, true, mb);
		return 0;
	}
	return 0;
}

/* Longest registered variant starting at i, or 0 (caller holds the read lock). */
static size_t literal_at(const char *in, size_t len, size_t i)
{
	uint32_t h = hash4(in + i);
	size_t best = 0;

	if (!(bucket_bits[h >> 6] >> (h & 63) & 1))
		return 0;
	for (uint32_t j = bucket_start[h]; j < bucket_start[h + 1]; j++) {
		const struct variant *v = &vars[bucket_items[j]];

		if (v->len > best && v->len <= len - i && memcmp(in + i, v->s, v->len) == 0)
			best = v->len;
	}
	return best;
}

/* Find every span that starts before `limit` (caller holds the read lock). In a non-final
 * scan, sc->partial receives the first position where a match may still be unfinished. */
static int scan_run(struct scan *sc, size_t limit)
{
	const char *in = sc->in;
	size_t len = sc->len;
	int rc;

	if (limit > len)
		limit = len;
	for (size_t i = 0; i < limit && i < sc->partial; i++) {
		size_t end = 0, lit;

		if (len - i >= 2 &&
		    (first_pair[kw_pair(in + i) >> 6] >> (kw_pair(in + i) & 63) & 1)) {
			rc = try_patterns(sc, i, &end);
			if (rc < 0)
				return rc;
		}
		if (n_vars && len - i >= 4) {
			lit = literal_at(in, len, i);
			if (lit && i + lit > end)
				end = i + lit;
		}
		if (end > i) {
			rc = add_span(sc, i, end);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* Append in[from, to) to out with every span inside it masked. */
static int emit_range(const struct scan *sc, size_t from, size_t to, ap_buf *out)
{
	size_t pos = from;
	int rc = 0;

	for (size_t k = 0; !rc && k < sc->n && sc->spans[k].a < to; k++) {
		if (sc->spans[k].b <= pos)
			continue;
		rc = ap_buf_add(out, sc->in + pos, sc->spans[k].a - pos);
		if (!rc)
			rc = ap_buf_adds(out, REDACT_MASK);
		pos = sc->spans[k].b;
	}
	if (!rc && to > pos)
		rc = ap_buf_add(out, sc->in + pos, to - pos);
	return rc;
}

int redact_append(ap_buf *out, const char *in, size_t len)
{
	struct scan sc;
	int rc = patterns_ready();

	if (rc)
		return rc;
	scan_init(&sc, in, len, true);
	pthread_rwlock_rdlock(&reg_lock);
	rc = scan_run(&sc, len);
	pthread_rwlock_unlock(&reg_lock);
	if (!rc)
		rc = emit_range(&sc, 0, len, out);
	scan_release(&sc);
	return rc;
}

char *redact_mem(const char *in, size_t len)
{
	ap_buf out = AP_BUF_INIT((size_t)-2);

	if (redact_append(&out, in, len)) {
		ap_buf_release(&out);
		return NULL;
	}
	return ap_buf_take(&out);
}

char *redact_str(const char *in)
{
	return redact_mem(in, strlen(in));
}

/* ---- streaming ------------------------------------------------------------------------- */

struct redact_stream {
	redact_sink_fn sink;
	void *ud;
	ap_buf held;  /* bytes not yet emitted */
	ap_buf out;   /* redacted bytes for the sink, handed over once the lock is released */
	size_t batch; /* bytes gathered beyond the hold-back before rescanning */
	bool in_key;  /* inside a private-key block already replaced by one mask */
};

int redact_stream_new(redact_stream **out, redact_sink_fn sink, void *ud)
{
	redact_stream *s;
	int rc = patterns_ready();

	*out = NULL;
	if (rc)
		return rc;
	s = calloc(1, sizeof(*s));
	if (!s)
		return ap_error_set(AP_ENOMEM, "out of memory creating a redaction stream");
	s->sink = sink;
	s->ud = ud;
	s->batch = STREAM_BATCH;
	ap_buf_init(&s->held, (size_t)-2);
	ap_buf_init(&s->out, (size_t)-2);
	*out = s;
	return 0;
}

void redact_stream_set_batch(redact_stream *s, size_t bytes)
{
	s->batch = bytes;
}

static void held_drop(redact_stream *s, size_t n)
{
	if (!s->held.data)
		return; /* nothing was ever written (flushing an unused stream) */
	memmove(s->held.data, s->held.data + n, s->held.len - n);
	s->held.len -= n;
	s->held.data[s->held.len] = '\0';
}

static void sink_out(redact_stream *s)
{
	if (s->out.len)
		s->sink(s->ud, s->out.data, s->out.len);
	ap_buf_reset(&s->out);
}

/* Skip the rest of a private-key block whose mask was already emitted. Returns 1 when the
 * block ended (processing continues), 0 when more input is needed, or an AP_E* code. */
static int skip_key(redact_stream *s, bool final)
{
	struct scan sc;
	size_t ma = 0, mb = 0;
	int m;

	scan_init(&sc, s->held.data, s->held.len, final);
	m = run_pattern(&sc, PAT_PEM_END, 0, &ma, &mb);
	scan_release(&sc);
	if (m < 0)
		return m;
	if (m == M_MATCH) {
		held_drop(s, mb);
		s->in_key = false;
		return 1;
	}
	held_drop(s, m == M_PARTIAL ? ma : s->held.len);
	return 0;
}

/* Bytes the stream must hold back: a variant or keyword starting there may be incomplete. */
static size_t hold_back(void)
{
	return (longest > KEYWORD_REACH + 1 ? longest : KEYWORD_REACH + 1) - 1;
}

/* One round over the held buffer (caller holds the read lock): emit everything when final,
 * else the prefix no future byte can change. Returns 1 to go round again, 0 when done. */
static int stream_step(redact_stream *s, bool final)
{
	struct scan sc;
	size_t len = s->held.len, safe, drop, mark = s->out.len;
	bool enter_key = false;
	int rc;

	if (s->in_key)
		return skip_key(s, final);
	safe = final ? len : (len > hold_back() ? len - hold_back() : 0);
	scan_init(&sc, s->held.data, len, final);
	rc = scan_run(&sc, safe);
	if (rc)
		goto out_scan;
	if (sc.partial < safe) {
		safe = sc.partial;
		/* An unterminated key block held too long: mask it now, skip its body later. */
		enter_key = sc.partial_key && len - sc.partial > KEY_HOLD_CAP;
	}
	for (size_t k = 0; k < sc.n; k++)
		if (sc.spans[k].a < safe && safe < sc.spans[k].b)
			safe = sc.spans[k].a;
	drop = enter_key ? sc.key_body : safe;
	rc = emit_range(&sc, 0, safe, &s->out);
	if (!rc && enter_key)
		rc = ap_buf_adds(&s->out, REDACT_MASK);
	if (rc) {
		/* Nothing of this round was emitted: it is redone from the held bytes. */
		ap_buf_truncate(&s->out, mark);
		goto out_scan;
	}
	held_drop(s, drop);
	s->in_key = enter_key;
	rc = enter_key;
out_scan:
	scan_release(&sc);
	return rc;
}

static int stream_process(redact_stream *s, bool final)
{
	int rc;

	do
		rc = stream_step(s, final);
	while (rc > 0 && s->held.len);
	return rc < 0 ? rc : 0;
}

int redact_stream_write(redact_stream *s, const char *p, size_t n)
{
	size_t tail;
	int rc = ap_buf_add(&s->held, p, n);

	if (rc)
		return rc;
	pthread_rwlock_rdlock(&reg_lock);
	tail = hold_back();
	if (s->held.len > tail && s->held.len - tail > s->batch)
		rc = stream_process(s, false);
	pthread_rwlock_unlock(&reg_lock);
	sink_out(s); /* outside the lock: the sink may log or register secrets */
	return rc;
}

int redact_stream_flush(redact_stream *s)
{
	int rc;

	pthread_rwlock_rdlock(&reg_lock);
	rc = stream_process(s, true);
	pthread_rwlock_unlock(&reg_lock);
	sink_out(s);
	return rc;
}

void redact_stream_free(redact_stream *s)
{
	if (!s)
		return;
	redact_stream_flush(s);
	ap_buf_release(&s->held);
	ap_buf_release(&s->out);
	free(s);
}

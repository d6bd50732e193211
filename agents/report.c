/* SPDX-License-Identifier: MIT */
/* agents/report.c - structured test results: parsers, classification, reading back (see
 * report.h). Everything here reads bytes that came out of a box. */
#include "agents/report.h"

#include "common/buf.h"
#include "common/err.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Storage of the ids and messages: chunks that are only appended to, so the strings handed out
 * stay where they are until report_release(). r->chunks is the current one. */
struct report_chunk {
	struct report_chunk *next;
	size_t used, size;
	char data[];
};

#define CHUNK_FIRST (8u << 10) /* doubling up to CHUNK_MAX: a small report stays small */
#define CHUNK_MAX   (1u << 20)

/* Room for n (at most CHUNK_FIRST) bytes in r's chunks: where they would go, or NULL on
 * ENOMEM. Nothing is taken until chunk_take(). */
static char *chunk_room(report *r, size_t n)
{
	struct report_chunk *c = r->chunks, *nc;
	size_t size;

	if (c && c->size - c->used >= n)
		return c->data + c->used;
	size = !c ? CHUNK_FIRST : c->size < CHUNK_MAX ? 2 * c->size : CHUNK_MAX;
	nc = malloc(sizeof(*nc) + size);
	if (!nc) {
		ap_error_set(AP_ENOMEM, "out of memory");
		return NULL;
	}
	nc->next = c;
	nc->used = 0;
	nc->size = size;
	r->chunks = nc;
	return nc->data;
}

static void chunk_take(report *r, size_t n)
{
	r->chunks->used += n;
}

void report_release(report *r)
{
	if (!r)
		return;
	while (r->chunks) {
		struct report_chunk *next = r->chunks->next;

		free(r->chunks);
		r->chunks = next;
	}
	free(r->tests);
	*r = (report)REPORT_INIT;
}

/* The input cap every parser applies first. */
static int check_input(size_t len)
{
	return len > REPORT_READ_CAP
		   ? ap_error_set(AP_ETOOBIG, "the report is larger than %u bytes", REPORT_READ_CAP)
		   : 0;
}

/* Room for more entries in r->tests. */
static int grow(report *r, size_t more)
{
	size_t na = r->alloc ? r->alloc : 64;
	report_test *nt;

	while (na - r->n < more)
		na *= 2;
	if (na == r->alloc)
		return 0;
	nt = realloc(r->tests, na * sizeof(*nt));
	if (!nt)
		return ap_error_set(AP_ENOMEM, "out of memory");
	r->tests = nt;
	r->alloc = na;
	return 0;
}

/* The id of raw bytes id[0..len) into out (REPORT_MAX_ID + 1 bytes): cleaned so that distinct
 * names stay distinct, cut at REPORT_MAX_ID, NUL-terminated. Its length. */
static size_t clean_id(char *out, const char *id, size_t len)
{
	size_t n = ap_utf8_clean(out, REPORT_MAX_ID, id, len, AP_UTF8_DISTINCT, NULL);

	out[n] = '\0';
	return n;
}

/* t's message: msg[0..len) cleaned into r's chunks, cut at REPORT_MAX_MESSAGE with "..." added;
 * NULL for none. */
static int set_message(report *r, report_test *t, const char *msg, size_t len)
{
	size_t n, used;
	char *p;

	t->message = NULL;
	if (!msg || !len)
		return 0;
	if (!(p = chunk_room(r, REPORT_MAX_MESSAGE + 4)))
		return AP_ENOMEM;
	n = ap_utf8_clean(p, REPORT_MAX_MESSAGE, msg, len, AP_UTF8_REPLACE, &used);
	if (used < len) {
		memcpy(p + n, "...", 3);
		n += 3;
	}
	p[n] = '\0';
	chunk_take(r, n + 1);
	t->message = p;
	return 0;
}

/* Index of id in a report that report_finish() sorted, or -1. */
static long find_index(const report *r, const char *id)
{
	size_t lo = 0, hi = r->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(r->tests[mid].id, id);

		if (c == 0)
			return (long)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

void report_share_ids(report *r, const report *other)
{
	r->share = other && other->sorted ? other : NULL;
}

int report_add(report *r, const char *id, size_t id_len, enum report_outcome o, const char *msg,
	       size_t msg_len, bool collection)
{
	report_test *t;
	const char *idp;
	char *p;
	size_t n;
	long i;
	int rc;

	if (!id_len)
		return 0;
	if (r->n >= REPORT_MAX_TESTS)
		return ap_error_set(AP_ETOOBIG, "the report lists more than %d tests",
				    REPORT_MAX_TESTS);
	if ((rc = grow(r, 1)))
		return rc;
	if (!(p = chunk_room(r, REPORT_MAX_ID + 1)))
		return AP_ENOMEM;
	n = clean_id(p, id, id_len);
	idp = p;
	if (r->share && (i = find_index(r->share, p)) >= 0)
		idp = r->share->tests[i].id; /* the room is not taken: used again */
	else
		chunk_take(r, n + 1);
	t = &r->tests[r->n];
	*t = (report_test){.id = idp, .outcome = (unsigned char)o, .collection = collection};
	if ((rc = set_message(r, t, msg, msg_len)))
		return rc;
	r->n++;
	r->sorted = false;
	return 0;
}

/* Append src's entries to dst, which takes over their storage; src is left empty. AP_ETOOBIG
 * when dst would list more than REPORT_MAX_TESTS, AP_ENOMEM (both unchanged on failure). */
static int report_move(report *dst, report *src)
{
	struct report_chunk **tail = &dst->chunks;
	int rc;

	if (src->n > REPORT_MAX_TESTS - dst->n)
		return ap_error_set(AP_ETOOBIG, "the report lists more than %d tests",
				    REPORT_MAX_TESTS);
	if ((rc = grow(dst, src->n)))
		return rc;
	if (src->n)
		memcpy(dst->tests + dst->n, src->tests, src->n * sizeof(*src->tests));
	dst->n += src->n;
	dst->sorted = dst->sorted && !src->n;
	dst->pytest = dst->pytest || src->pytest;
	while (*tail)
		tail = &(*tail)->next;
	*tail = src->chunks;
	src->chunks = NULL;
	report_release(src);
	return 0;
}

/* The next line at *p before end, without its "\n" or "\r\n": [*line, *le). Advances *p past
 * it; false at the end. */
static bool next_line(const char **p, const char *end, const char **line, const char **le)
{
	const char *nl;

	if (*p >= end)
		return false;
	nl = memchr(*p, '\n', (size_t)(end - *p));
	*line = *p;
	*le = nl ? nl : end;
	while (*le > *line && (*le)[-1] == '\r')
		(*le)--;
	*p = nl ? nl + 1 : end;
	return true;
}

/* ---- JUnit XML ---------------------------------------------------------------------------- */

/* Append the XML text [p, end) to b with the predefined and numeric entities decoded. Bytes
 * past b's cap are dropped (ap_buf refuses them). */
static void xml_decode(ap_buf *b, const char *p, const char *end)
{
	static const struct {
		const char *name;
		char c;
	} ents[] = {{"lt;", '<'}, {"gt;", '>'}, {"amp;", '&'}, {"quot;", '"'}, {"apos;", '\''}};

	while (p < end && b->len < b->cap) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *stop = amp ? amp : end;
		size_t room = b->cap - b->len;
		size_t n = (size_t)(stop - p);

		if (ap_buf_add(b, p, n < room ? n : room))
			return;
		if (!amp)
			return;
		p = amp + 1;
		bool done = false;
		for (size_t i = 0; i < sizeof(ents) / sizeof(ents[0]) && !done; i++) {
			size_t l = strlen(ents[i].name);

			if ((size_t)(end - p) >= l && memcmp(p, ents[i].name, l) == 0) {
				ap_buf_add(b, &ents[i].c, 1);
				p += l;
				done = true;
			}
		}
		if (!done && p < end && *p == '#') {
			const char *q = p + 1;
			unsigned long cp = 0;
			int base = 10, digits = 0;

			if (q < end && (*q == 'x' || *q == 'X')) {
				base = 16;
				q++;
			}
			while (q < end && digits < 8 && isxdigit((unsigned char)*q) &&
			       (base == 16 || isdigit((unsigned char)*q))) {
				cp = cp * (unsigned long)base +
				     (unsigned long)(isdigit((unsigned char)*q)
							 ? *q - '0'
							 : (tolower((unsigned char)*q) - 'a' + 10));
				q++;
				digits++;
			}
			if (digits && q < end && *q == ';') {
				char u[4];

				if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
					cp = '?';
				ap_buf_add(b, u, ap_utf8_encode(u, (uint32_t)cp));
				p = q + 1;
				done = true;
			}
		}
		if (!done)
			ap_buf_add(b, "&", 1);
	}
}

static const char *find_str(const char *p, const char *end, const char *needle)
{
	size_t n = strlen(needle);

	if (!p || (size_t)(end - p) < n)
		return NULL;
	return memmem(p, (size_t)(end - p), needle, n);
}

static bool is_name_char(char c)
{
	return isalnum((unsigned char)c) || c == '-' || c == '_' || c == ':' || c == '.';
}

/* One start or end tag: its name and the span of its attributes. */
struct tag {
	const char *name;
	size_t name_len;
	const char *attrs, *attrs_end;
	bool end_tag, self_closing;
};

/* Parse the tag at p ('<'), set *next past its '>'. false when it is not a tag. */
static bool parse_tag(const char *p, const char *end, struct tag *t, const char **next)
{
	const char *q = p + 1;
	char quote = 0;

	memset(t, 0, sizeof(*t));
	if (q < end && *q == '/') {
		t->end_tag = true;
		q++;
	}
	t->name = q;
	while (q < end && is_name_char(*q))
		q++;
	t->name_len = (size_t)(q - t->name);
	if (!t->name_len)
		return false;
	t->attrs = q;
	for (; q < end; q++) {
		if (quote) {
			if (*q == quote)
				quote = 0;
		} else if (*q == '"' || *q == '\'') {
			quote = *q;
		} else if (*q == '>') {
			break;
		}
	}
	t->attrs_end = q;
	if (q > t->attrs && q[-1] == '/' && !quote)
		t->self_closing = true;
	*next = q < end ? q + 1 : end;
	return true;
}

static bool tag_is(const struct tag *t, const char *name)
{
	return t->name_len == strlen(name) && memcmp(t->name, name, t->name_len) == 0;
}

/* The decoded value of attribute name into b (reset first); false when absent. */
static bool tag_attr(const struct tag *t, const char *name, ap_buf *b)
{
	size_t nl = strlen(name);
	const char *p = t->attrs, *end = t->attrs_end;

	ap_buf_reset(b);
	while (p < end) {
		while (p < end && (isspace((unsigned char)*p) || *p == '/'))
			p++;
		const char *an = p;
		while (p < end && is_name_char(*p))
			p++;
		size_t al = (size_t)(p - an);
		while (p < end && isspace((unsigned char)*p))
			p++;
		if (p >= end || *p != '=') {
			if (!al)
				p++; /* junk: skip a byte */
			continue;
		}
		p++;
		while (p < end && isspace((unsigned char)*p))
			p++;
		const char *v, *ve;
		if (p < end && (*p == '"' || *p == '\'')) {
			char qc = *p++;
			v = p;
			ve = memchr(p, qc, (size_t)(end - p));
			if (!ve)
				ve = end;
			p = ve < end ? ve + 1 : end;
		} else {
			v = p;
			while (p < end && !isspace((unsigned char)*p))
				p++;
			ve = p;
		}
		if (al == nl && memcmp(an, name, nl) == 0) {
			xml_decode(b, v, ve);
			return true;
		}
	}
	return false;
}

struct junit_case {
	bool open;
	ap_buf id;
	enum report_outcome outcome;
	bool collection;
	ap_buf msg;
	bool capturing; /* inside the <failure>/<error>/<skipped> that set the outcome */
	const char *capture_tag;
};

static int junit_emit(report *r, struct junit_case *c)
{
	int rc = 0;

	if (c->open)
		rc = report_add(r, ap_buf_str(&c->id), c->id.len, c->outcome, ap_buf_str(&c->msg),
				c->msg.len, c->collection);
	c->open = false;
	c->capturing = false;
	ap_buf_reset(&c->id);
	ap_buf_reset(&c->msg);
	return rc;
}

static int junit_start_case(report *r, struct junit_case *c, const struct tag *t, ap_buf *tmp)
{
	int rc = junit_emit(r, c);

	if (rc)
		return rc;
	c->open = true;
	c->outcome = REPORT_PASSED;
	c->collection = false;
	if (tag_attr(t, "classname", tmp) && tmp->len) {
		ap_buf_add(&c->id, tmp->data, tmp->len);
		ap_buf_adds(&c->id, "::");
	}
	if (tag_attr(t, "name", tmp))
		ap_buf_add(&c->id, ap_buf_str(tmp), tmp->len);
	return 0;
}

static int outcome_rank(enum report_outcome o)
{
	return o == REPORT_FAILED ? 3 : o == REPORT_ERROR ? 2 : o == REPORT_SKIPPED ? 1 : 0;
}

static void junit_result(struct junit_case *c, const struct tag *t, enum report_outcome o,
			 ap_buf *tmp)
{
	if (outcome_rank(o) <= outcome_rank(c->outcome) && c->outcome != REPORT_PASSED)
		return;
	c->outcome = o;
	ap_buf_reset(&c->msg);
	if (tag_attr(t, "message", tmp) && tmp->len) {
		ap_buf_add(&c->msg, tmp->data, tmp->len);
		if (o == REPORT_ERROR && strcmp(ap_buf_str(tmp), "collection failure") == 0)
			c->collection = true;
	}
	if (!t->self_closing) {
		c->capturing = true;
		c->capture_tag = o == REPORT_FAILED  ? "failure"
				 : o == REPORT_ERROR ? "error"
						     : "skipped";
		if (c->msg.len)
			ap_buf_adds(&c->msg, "\n");
	}
}

int report_parse_junit(report *r, const char *xml, size_t len)
{
	const char *p = xml, *end = xml + len, *next;
	struct junit_case c = {.id = AP_BUF_INIT(REPORT_MAX_ID),
			       .msg = AP_BUF_INIT(REPORT_MAX_MESSAGE + 1)};
	ap_buf tmp = AP_BUF_INIT(REPORT_MAX_MESSAGE + 1);
	struct tag t;
	int rc = 0;

	if ((rc = check_input(len)))
		return rc;
	while (p < end && !rc) {
		const char *lt = memchr(p, '<', (size_t)(end - p));

		if (c.capturing)
			xml_decode(&c.msg, p, lt ? lt : end);
		if (!lt)
			break;
		p = lt;
		if ((size_t)(end - p) >= 4 && memcmp(p, "<!--", 4) == 0) {
			const char *q = find_str(p + 4, end, "-->");
			p = q ? q + 3 : end;
			continue;
		}
		if ((size_t)(end - p) >= 9 && memcmp(p, "<![CDATA[", 9) == 0) {
			const char *q = find_str(p + 9, end, "]]>");
			const char *ce = q ? q : end;

			if (c.capturing) {
				size_t room = c.msg.cap - c.msg.len;
				size_t n = (size_t)(ce - (p + 9));

				ap_buf_add(&c.msg, p + 9, n < room ? n : room);
			}
			p = q ? q + 3 : end;
			continue;
		}
		if ((size_t)(end - p) >= 2 && p[1] == '?') {
			const char *q = find_str(p + 2, end, "?>");
			p = q ? q + 2 : end;
			continue;
		}
		if ((size_t)(end - p) >= 2 && p[1] == '!') {
			const char *gt = memchr(p, '>', (size_t)(end - p));
			const char *br = memchr(p, '[', gt ? (size_t)(gt - p) : (size_t)(end - p));
			const char *q = br ? find_str(br, end, "]>") : NULL;

			p = br ? (q ? q + 2 : end) : (gt ? gt + 1 : end);
			continue;
		}
		if (!parse_tag(p, end, &t, &next)) {
			p++;
			continue;
		}
		p = next;
		if (t.end_tag) {
			if (c.capturing && tag_is(&t, c.capture_tag))
				c.capturing = false;
			else if (tag_is(&t, "testcase"))
				rc = junit_emit(r, &c);
			continue;
		}
		if (tag_is(&t, "testsuite") && tag_attr(&t, "name", &tmp) &&
		    strcmp(ap_buf_str(&tmp), "pytest") == 0)
			r->pytest = true;
		if (tag_is(&t, "testcase")) {
			rc = junit_start_case(r, &c, &t, &tmp);
			if (!rc && t.self_closing)
				rc = junit_emit(r, &c);
		} else if (c.open && !c.capturing) {
			if (tag_is(&t, "failure"))
				junit_result(&c, &t, REPORT_FAILED, &tmp);
			else if (tag_is(&t, "error"))
				junit_result(&c, &t, REPORT_ERROR, &tmp);
			else if (tag_is(&t, "skipped"))
				junit_result(&c, &t, REPORT_SKIPPED, &tmp);
		}
	}
	if (!rc)
		rc = junit_emit(r, &c);
	ap_buf_release(&c.id);
	ap_buf_release(&c.msg);
	ap_buf_release(&tmp);
	return rc;
}

/* ---- a small string map (go -json needs per-test state while parsing) ------------------- */

struct slot {
	char *key;
	ap_buf out;	 /* the test's output so far (capped) */
	int result;	 /* -1 none yet, else enum report_outcome */
	bool is_package; /* a package-level entry */
	bool any_test;	 /* package: some test of it reported a result */
};

struct smap {
	struct slot *s;
	size_t n, cap; /* cap is a power of two */
	size_t *order; /* insertion order (indices into s) */
	size_t n_order;
};

static uint64_t fnv(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static void smap_free(struct smap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		if (m->s[i].key) {
			free(m->s[i].key);
			ap_buf_release(&m->s[i].out);
		}
	free(m->s);
	free(m->order);
	memset(m, 0, sizeof(*m));
}

static int smap_grow(struct smap *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 256;
	struct slot *ns = calloc(ncap, sizeof(*ns));
	size_t *no = realloc(m->order, ncap * sizeof(*no));

	if (!ns || !no) {
		free(ns);
		if (no)
			m->order = no;
		return ap_error_set(AP_ENOMEM, "out of memory");
	}
	m->order = no;
	m->n_order = 0;
	/* Re-insert in the old insertion order so the order survives. */
	size_t *old_order = malloc((m->n ? m->n : 1) * sizeof(*old_order));
	if (!old_order) {
		free(ns);
		return ap_error_set(AP_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < m->n; i++)
		old_order[i] = m->order[i];
	for (size_t k = 0; k < m->n; k++) {
		struct slot *o = &m->s[old_order[k]];
		size_t i = (size_t)fnv(o->key) & (ncap - 1);

		while (ns[i].key)
			i = (i + 1) & (ncap - 1);
		ns[i] = *o;
		m->order[m->n_order++] = i;
	}
	free(old_order);
	free(m->s);
	m->s = ns;
	m->cap = ncap;
	return 0;
}

/* The slot for key, created when missing. NULL on ENOMEM or past REPORT_MAX_TESTS. */
static struct slot *smap_get(struct smap *m, const char *key)
{
	size_t i;

	if (m->cap) {
		for (i = (size_t)fnv(key) & (m->cap - 1); m->s[i].key; i = (i + 1) & (m->cap - 1))
			if (strcmp(m->s[i].key, key) == 0)
				return &m->s[i];
	}
	if (m->n >= REPORT_MAX_TESTS) {
		ap_error_set(AP_ETOOBIG, "the report lists more than %d tests", REPORT_MAX_TESTS);
		return NULL;
	}
	if ((m->n + 1) * 2 > m->cap && smap_grow(m))
		return NULL;
	for (i = (size_t)fnv(key) & (m->cap - 1); m->s[i].key; i = (i + 1) & (m->cap - 1))
		;
	m->s[i].key = strdup(key);
	if (!m->s[i].key) {
		ap_error_set(AP_ENOMEM, "out of memory");
		return NULL;
	}
	ap_buf_init(&m->s[i].out, REPORT_MAX_MESSAGE + 1);
	m->s[i].result = -1;
	m->order[m->n_order++] = i;
	m->n++;
	return &m->s[i];
}

static const char *json_str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsString(v) && v->valuestring ? v->valuestring : NULL;
}

static void buf_add_capped(ap_buf *b, const char *s, size_t n)
{
	size_t room = b->cap - b->len;

	ap_buf_add(b, s, n < room ? n : room);
}

static int go_line(struct smap *m, const char *line, size_t n)
{
	cJSON *o = cJSON_ParseWithLength(line, n);
	const char *action, *pkg, *test, *output;
	char *key = NULL;
	struct slot *s, *ps;
	int rc = 0;

	if (!o)
		return 0;
	action = json_str(o, "Action");
	pkg = json_str(o, "Package");
	if (!pkg)
		pkg = json_str(o, "ImportPath");
	test = json_str(o, "Test");
	output = json_str(o, "Output");
	if (!action || !pkg || !*pkg)
		goto out;
	if (asprintf(&key, "%s%s%s", pkg, test ? "::" : "", test ? test : "") < 0) {
		key = NULL;
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto out;
	}
	if (!(s = smap_get(m, key))) {
		rc = AP_ENOMEM;
		goto out;
	}
	s->is_package = !test;
	/* go's own framing lines ("=== RUN   TestX", "=== PAUSE", "=== CONT") say nothing about
	 * why a test failed: the message starts with the test's own output. */
	if ((strcmp(action, "output") == 0 || strcmp(action, "build-output") == 0) && output &&
	    !(test && strncmp(output, "=== ", 4) == 0))
		buf_add_capped(&s->out, output, strlen(output));
	else if (strcmp(action, "pass") == 0)
		s->result = REPORT_PASSED;
	else if (strcmp(action, "fail") == 0 || strcmp(action, "build-fail") == 0)
		s->result = REPORT_FAILED;
	else if (strcmp(action, "skip") == 0)
		s->result = REPORT_SKIPPED;
	if (test && s->result >= 0) {
		free(key);
		key = strdup(pkg);
		if (!key || !(ps = smap_get(m, key))) {
			rc = key ? AP_ENOMEM : ap_error_set(AP_ENOMEM, "out of memory");
			goto out;
		}
		ps->is_package = true;
		ps->any_test = true;
	}
out:
	free(key);
	cJSON_Delete(o);
	return rc;
}

int report_parse_go_json(report *r, const char *text, size_t len)
{
	struct smap m = {0};
	const char *p = text, *end = text + len;
	int rc = 0;

	if ((rc = check_input(len)))
		return rc;
	const char *line, *le;
	while (!rc && next_line(&p, end, &line, &le))
		if (le > line && *line == '{')
			rc = go_line(&m, line, (size_t)(le - line));
	for (size_t k = 0; k < m.n_order && !rc; k++) {
		struct slot *s = &m.s[m.order[k]];

		if (!s->is_package) {
			if (s->result >= 0)
				rc = report_add(
				    r, s->key, strlen(s->key), (enum report_outcome)s->result,
				    s->result == REPORT_PASSED ? NULL : ap_buf_str(&s->out),
				    s->result == REPORT_PASSED ? 0 : s->out.len, false);
		} else if (s->result == REPORT_FAILED && !s->any_test) {
			/* A package that failed with no test result: it did not build. */
			rc = report_add(r, s->key, strlen(s->key), REPORT_ERROR,
					ap_buf_str(&s->out), s->out.len, true);
		}
	}
	smap_free(&m);
	return rc;
}

/* ---- cargo test --------------------------------------------------------------------------- */

static bool starts(const char *p, const char *end, const char *s)
{
	size_t n = strlen(s);

	return (size_t)(end - p) >= n && memcmp(p, s, n) == 0;
}

#define CARGO_TARGET_MAX 512

/* The test target a cargo line names, into tgt (cleaned later with the id): "Running
 * unittests src/lib.rs (target/debug/deps/calc-0f1e)" is "src/lib.rs", "Running tests/two.rs
 * (...)" is "tests/two.rs", an older "Running target/debug/deps/two-0f1e" is "two",
 * "Doc-tests calc" is "doc". False when the line names no target. */
static bool cargo_target(const char *line, const char *le, ap_buf *tgt)
{
	while (line < le && (*line == ' ' || *line == '\t'))
		line++;
	if (starts(line, le, "Doc-tests ")) {
		ap_buf_reset(tgt);
		ap_buf_adds(tgt, "doc");
		return true;
	}
	if (!starts(line, le, "Running "))
		return false;
	line += 8;
	if (starts(line, le, "unittests "))
		line += 10;
	const char *paren = find_str(line, le, " (");
	const char *e = paren && le[-1] == ')' ? paren : le;

	if (e == le) { /* a bare path: its file name without cargo's "-HASH" */
		for (const char *q = line; q < le; q++)
			if (*q == '/')
				line = q + 1;
		const char *dash = NULL;
		for (const char *q = line; q < le; q++)
			if (*q == '-')
				dash = q;
		e = dash ? dash : le;
	}
	if (e <= line || (size_t)(e - line) > CARGO_TARGET_MAX)
		return false;
	ap_buf_reset(tgt);
	ap_buf_add(tgt, line, (size_t)(e - line));
	return true;
}

/* "TARGET::NAME" (NAME alone before any target line) into id, capped at REPORT_MAX_ID. */
static void cargo_id(ap_buf *id, const ap_buf *tgt, const char *name, size_t n)
{
	ap_buf_reset(id);
	if (tgt->len) {
		ap_buf_add(id, tgt->data, tgt->len);
		ap_buf_adds(id, "::");
	}
	buf_add_capped(id, name, n);
}

int report_parse_cargo(report *r, const char *text, size_t len)
{
	const char *p = text, *end = text + len;
	report local = {.share = r->share};
	ap_buf block = AP_BUF_INIT(REPORT_MAX_MESSAGE + 1);
	ap_buf tgt = AP_BUF_INIT(CARGO_TARGET_MAX + 1), id = AP_BUF_INIT(2 * REPORT_MAX_ID + 1);
	char block_name[REPORT_MAX_ID + 1]; /* the open block's test, cleaned as its id is */
	bool in_block = false;
	int rc = 0;

	if ((rc = check_input(len)))
		return rc;
	/* Pass 1: the per-test lines, each under the target of the last "Running" line; a
	 * target that did not compile is one collection error. */
	const char *line, *le;
	while (!rc && next_line(&p, end, &line, &le)) {
		if (cargo_target(line, le, &tgt))
			continue;
		if (starts(line, le, "error: could not compile ")) {
			rc = report_add(&local, "cargo::build", 12, REPORT_ERROR, line,
					(size_t)(le - line), true);
		} else if (starts(line, le, "test ") && !starts(line, le, "test result:")) {
			const char *dots = find_str(line + 5, le, " ... ");

			if (dots) {
				const char *st = dots + 5;
				enum report_outcome o = REPORT_PASSED;
				bool known = true;

				if (starts(st, le, "ok"))
					o = REPORT_PASSED;
				else if (starts(st, le, "FAILED"))
					o = REPORT_FAILED;
				else if (starts(st, le, "ignored"))
					o = REPORT_SKIPPED;
				else
					known = false;
				cargo_id(&id, &tgt, line + 5, (size_t)(dots - (line + 5)));
				if (known && id.len)
					rc = report_add(&local, id.data, id.len, o, NULL, 0, false);
			}
		}
	}
	if (rc)
		goto out;
	report_finish(&local);
	/* Pass 2: "---- NAME stdout ----" blocks become the failure messages. */
	ap_buf_reset(&tgt);
	for (p = text; !rc && next_line(&p, end, &line, &le);) {
		bool header = starts(line, le, "---- ") && le - line > 17 &&
			      memcmp(le - 12, " stdout ----", 12) == 0;
		bool target = !header && cargo_target(line, le, &tgt);
		bool stop = header || target || starts(line, le, "failures:") ||
			    starts(line, le, "test result:");

		if (stop && in_block) {
			long i = find_index(&local, block_name);

			if (i >= 0 && !local.tests[i].message && block.len)
				rc = set_message(&local, &local.tests[i], block.data, block.len);
			ap_buf_reset(&block);
			in_block = false;
		}
		if (header) {
			cargo_id(&id, &tgt, line + 5, (size_t)(le - 12 - (line + 5)));
			clean_id(block_name, id.len ? id.data : "", id.len);
			in_block = true;
		} else if (in_block) {
			buf_add_capped(&block, line, (size_t)(le - line));
			buf_add_capped(&block, "\n", 1);
		}
	}
	if (!rc)
		rc = report_move(r, &local);
out:
	ap_buf_release(&block);
	ap_buf_release(&tgt);
	ap_buf_release(&id);
	report_release(&local);
	return rc;
}

/* ---- jest --json ------------------------------------------------------------------------ */

/* A path jest reports (absolute, in the run's tree /tmp/trees/SIDE/repo/...) as the
 * repository names it: the part after the tree's "/repo/", so the pristine and the patched
 * run name a test alike. */
static const char *tree_relative(const char *path)
{
	if (strncmp(path, "/tmp/trees/", 11) == 0) {
		const char *q = strstr(path + 11, "/repo/");

		if (q)
			return q + 6;
	}
	return path;
}

static int jest_file(report *r, const cJSON *file, ap_buf *id)
{
	const char *name = json_str(file, "name"), *msg = json_str(file, "message");
	const cJSON *tests = cJSON_GetObjectItemCaseSensitive(file, "assertionResults"), *t;
	bool any = false;
	int rc = 0;

	if (!name || !*name)
		return 0;
	name = tree_relative(name);
	cJSON_ArrayForEach (t, tests) {
		const char *full = json_str(t, "fullName"), *st = json_str(t, "status");
		const cJSON *fails = cJSON_GetObjectItemCaseSensitive(t, "failureMessages");
		const char *fm = cJSON_IsArray(fails) && cJSON_GetArraySize(fails) > 0 &&
					 cJSON_IsString(cJSON_GetArrayItem(fails, 0))
				     ? cJSON_GetArrayItem(fails, 0)->valuestring
				     : NULL;
		enum report_outcome o;

		if (!full || !st)
			continue;
		if (strcmp(st, "passed") == 0)
			o = REPORT_PASSED;
		else if (strcmp(st, "failed") == 0)
			o = REPORT_FAILED;
		else if (strcmp(st, "pending") == 0 || strcmp(st, "skipped") == 0 ||
			 strcmp(st, "todo") == 0 || strcmp(st, "disabled") == 0)
			o = REPORT_SKIPPED;
		else
			continue;
		ap_buf_reset(id);
		buf_add_capped(id, name, strlen(name));
		buf_add_capped(id, "::", 2);
		buf_add_capped(id, full, strlen(full));
		any = true;
		if ((rc = report_add(r, id->data, id->len, o, fm, fm ? strlen(fm) : 0, false)))
			return rc;
	}
	/* A file that failed without any test result did not load: a collection error. */
	const char *fst = json_str(file, "status");
	if (!any && fst && strcmp(fst, "failed") == 0)
		rc = report_add(r, name, strlen(name), REPORT_ERROR, msg, msg ? strlen(msg) : 0,
				true);
	return rc;
}

int report_parse_jest(report *r, const char *text, size_t len)
{
	ap_buf id = AP_BUF_INIT(2 * REPORT_MAX_ID + 1);
	cJSON *doc, *files, *f;
	int rc = 0;

	if (len > REPORT_JSON_CAP)
		return ap_error_set(AP_ETOOBIG, "the JSON report is larger than %u bytes",
				    REPORT_JSON_CAP);
	if (!(doc = cJSON_ParseWithLength(text, len)))
		return 0; /* malformed: nothing can be read */
	files = cJSON_GetObjectItemCaseSensitive(doc, "testResults");
	cJSON_ArrayForEach (f, files) {
		if ((rc = jest_file(r, f, &id)))
			break;
	}
	cJSON_Delete(doc);
	ap_buf_release(&id);
	return rc;
}

/* ---- report files ------------------------------------------------------------------------- */

static bool has_suffix(const char *name, size_t n, const char *sfx)
{
	size_t k = strlen(sfx);

	return n > k && memcmp(name + n - k, sfx, k) == 0;
}

enum report_format report_format_of(const char *name, size_t n)
{
	if (has_suffix(name, n, ".xml"))
		return REPORT_FORMAT_JUNIT;
	if (has_suffix(name, n, ".gojson"))
		return REPORT_FORMAT_GO_JSON;
	if (has_suffix(name, n, ".cargo"))
		return REPORT_FORMAT_CARGO;
	if (has_suffix(name, n, ".jestjson"))
		return REPORT_FORMAT_JEST;
	if (has_suffix(name, n, ".vitestjson"))
		return REPORT_FORMAT_VITEST;
	return REPORT_FORMAT_NONE;
}

const char *report_format_name(enum report_format f)
{
	switch (f) {
	case REPORT_FORMAT_JUNIT:
		return "JUnit XML";
	case REPORT_FORMAT_GO_JSON:
		return "`go test -json`";
	case REPORT_FORMAT_CARGO:
		return "cargo's per-test lines";
	case REPORT_FORMAT_JEST:
		return "jest's JSON report";
	case REPORT_FORMAT_VITEST:
		return "vitest's JSON report";
	default:
		return "no report";
	}
}

int report_parse_as(report *r, enum report_format f, const char *text, size_t len)
{
	switch (f) {
	case REPORT_FORMAT_JUNIT:
		return report_parse_junit(r, text, len);
	case REPORT_FORMAT_GO_JSON:
		return report_parse_go_json(r, text, len);
	case REPORT_FORMAT_CARGO:
		return report_parse_cargo(r, text, len);
	case REPORT_FORMAT_JEST:
	case REPORT_FORMAT_VITEST: /* vitest's json reporter writes jest's format */
		return report_parse_jest(r, text, len);
	default:
		return 0;
	}
}

/* ---- stopping early ----------------------------------------------------------------------- */

/* Whether line [p, le) holds needle. */
static bool line_has(const char *p, const char *le, const char *needle)
{
	return find_str(p, le, needle) != NULL;
}

const char *report_stopped_early(const char *text, size_t len, bool cargo_whole)
{
	const char *p = text, *end = text + len, *line, *le;
	bool reactor = false, failed = false;

	while (next_line(&p, end, &line, &le)) {
		if (!cargo_whole && starts(line, le, "error: test failed, to rerun pass"))
			return "cargo stopped at the first failing test target (it ran without "
			       "`--no-fail-fast`)";
		if (starts(line, le, "!!!") && line_has(line, le, "stopping after ") &&
		    line_has(line, le, " failure"))
			return "pytest stopped after the first failures (`-x`, `--exitfirst` or "
			       "`--maxfail`)";
		if (line_has(line, le, "Reactor Summary"))
			reactor = true;
		else if (reactor && line_has(line, le, " FAILURE ["))
			failed = true;
		else if (reactor && failed && le - line > 8 && memcmp(le - 8, " SKIPPED", 8) == 0)
			return "Maven skipped the modules after a failing one (it ran without "
			       "`-fae`, or they depend on the failing module)";
	}
	return NULL;
}

/* ---- a chain that stops ------------------------------------------------------------------- */

#define CHAIN_WORD 64 /* bytes of a word kept (the rest is cut: names are short) */

/* One simple command of a command line: its first words, unquoted and cut. */
struct chain_seg {
	char w[REPORT_CHAIN_WORDS][CHAIN_WORD];
	size_t n;
};

static const char *const chain_runners[] = {
    "pytest", "py.test", "tox",	      "nox",   "ctest", "jest",	   "mocha",
    "vitest", "gradle",	 "gradlew",   "mvn",   "mvnw",	"phpunit", "rspec",
    "ava",    "tap",	 "nosetests", "trial", "prove", "bats",	   NULL};

/* Whether a word of s from from on names tests ("test", "check") or a runner (`npx jest`). */
static bool has_word_test(const struct chain_seg *s, size_t from)
{
	for (size_t i = from; i < s->n; i++) {
		const char *b = strrchr(s->w[i], '/') ? strrchr(s->w[i], '/') + 1 : s->w[i];

		if (strstr(b, "test") || strstr(b, "check"))
			return true;
		for (const char *const *r = chain_runners; *r; r++)
			if (strcmp(b, *r) == 0)
				return true;
	}
	return false;
}

/* Whether the simple command s runs tests. */
static bool chain_seg_tests(const struct chain_seg *s)
{
	const char *const *runners = chain_runners;
	static const char *const wrappers[] = {"npm",	"pnpm", "yarn",	 "npx",	  "bun",    "make",
					       "gmake", "just", "ninja", "meson", "sh",	    "bash",
					       "dash",	"zsh",	"rake",	 "deno",  "dotnet", NULL};
	static const char *const prefixes[] = {"env", "time", "exec", "nice", "command", NULL};
	size_t i = 0;
	const char *w, *b;

	for (; i < s->n; i++) { /* VAR=value words and transparent prefixes */
		const char *eq = strchr(s->w[i], '=');
		bool pre = false;

		for (const char *const *p = prefixes; *p; p++)
			pre = pre || strcmp(s->w[i], *p) == 0;
		if (!pre && !(eq && eq != s->w[i] && !memchr(s->w[i], '/', (size_t)(eq - s->w[i]))))
			break;
	}
	if (i >= s->n)
		return false;
	w = s->w[i];
	b = strrchr(w, '/') ? strrchr(w, '/') + 1 : w;
	for (const char *const *r = runners; *r; r++)
		if (strcmp(b, *r) == 0)
			return true;
	if (strcmp(b, "go") == 0 || strcmp(b, "cargo") == 0)
		return i + 1 < s->n &&
		       (strcmp(s->w[i + 1], "test") == 0 || strcmp(s->w[i + 1], "nextest") == 0);
	if (strncmp(b, "python", 6) == 0) {
		for (size_t k = i + 1; k + 1 < s->n; k++)
			if (strcmp(s->w[k], "-m") == 0)
				return strcmp(s->w[k + 1], "pytest") == 0 ||
				       strcmp(s->w[k + 1], "unittest") == 0 ||
				       strcmp(s->w[k + 1], "tox") == 0 ||
				       strcmp(s->w[k + 1], "nox") == 0;
		return has_word_test(s, i + 1); /* python run_tests.py */
	}
	if (strcmp(b, "node") == 0 || strncmp(b, "nodejs", 6) == 0)
		return has_word_test(s, i + 1);
	for (const char *const *r = wrappers; *r; r++)
		if (strcmp(b, *r) == 0)
			return has_word_test(s, i + 1);
	return strstr(b, "test") != NULL || strstr(b, "check") != NULL; /* ./run-tests.sh */
}

enum chain_op { CHAIN_END, CHAIN_AND, CHAIN_OTHER };

/* The next simple command of *pp into s, and the operator that ends it. */
static enum chain_op chain_next(const char **pp, struct chain_seg *s)
{
	const char *p = *pp;
	char q = 0;
	size_t len = 0;
	bool in_word = false;
	enum chain_op op = CHAIN_END;

	s->n = 0;
	for (;; p++) {
		char c = *p;

		if (c == '\0') {
			break;
		} else if (q) { /* inside quotes */
			if (c == q) {
				q = 0;
				continue;
			}
			if (q == '"' && c == '\\' && p[1])
				c = *++p;
		} else if (c == '\'' || c == '"') {
			q = c;
			in_word = true;
			continue;
		} else if (c == '\\' && p[1]) {
			c = *++p;
		} else if (c == ' ' || c == '\t') {
			if (in_word && s->n < REPORT_CHAIN_WORDS)
				s->w[s->n++][len] = '\0';
			in_word = false;
			len = 0;
			continue;
		} else if (strchr(";&|\n(){}", c)) {
			op = c == '&' && p[1] == '&' ? CHAIN_AND : CHAIN_OTHER;
			p += (c == '&' && p[1] == '&') || (c == '|' && p[1] == '|') ? 2 : 1;
			break;
		}
		if (s->n < REPORT_CHAIN_WORDS) {
			if (len + 1 < CHAIN_WORD)
				s->w[s->n][len++] = c;
			in_word = true;
		}
	}
	if (in_word && s->n < REPORT_CHAIN_WORDS)
		s->w[s->n++][len] = '\0';
	*pp = p;
	return op;
}

const char *report_chain_stops(const char *cmd)
{
	struct chain_seg s;
	const char *p = cmd;
	bool armed = false; /* a command that runs tests was followed by && */
	bool last = false;  /* the last non-empty command ran tests (a group's status is its) */

	if (!cmd)
		return NULL;
	for (size_t k = 0; *p && k < REPORT_CHAIN_SEGMENTS; k++) {
		enum chain_op op = chain_next(&p, &s);
		bool tests = chain_seg_tests(&s);

		if (armed && tests)
			return "the test command runs several test commands joined by `&&`, which "
			       "stops at the first one that fails";
		if (s.n)
			last = tests;
		armed = armed || (last && op == CHAIN_AND);
		if (op == CHAIN_END)
			break;
	}
	return NULL;
}

/* ---- naming a test ------------------------------------------------------------------------ */

/* s normalised into out (at most max - 1 bytes): "::", "/", "#", " " and "." are all one
 * separator ".", a ".py" or ".rs" before a separator or the end is dropped, leading "./" and
 * separators are dropped. So a pytest node id and its JUnit id, a Go package path and
 * "pkg.TestX", Maven's Class#method and its JUnit id compare equal. */
static size_t norm_name(char *out, size_t max, const char *s)
{
	size_t n = 0;

	while (*s == '.' || *s == '/' || *s == ' ')
		s++;
	while (*s && n + 1 < max) {
		size_t sep = strncmp(s, "::", 2) == 0				  ? 2
			     : (*s == '/' || *s == '#' || *s == ' ' || *s == '.') ? 1
										  : 0;

		if ((strncmp(s, ".py", 3) == 0 || strncmp(s, ".rs", 3) == 0) &&
		    (!s[3] || s[3] == ':' || s[3] == '/' || s[3] == ' ' || s[3] == '#')) {
			s += 3;
			continue;
		}
		if (sep) {
			if (n && out[n - 1] != '.')
				out[n++] = '.';
			s += sep;
			continue;
		}
		out[n++] = *s++;
	}
	while (n && out[n - 1] == '.')
		n--;
	out[n] = '\0';
	return n;
}

/* The id without a parameter suffix "[...]" (pytest's parametrised tests), its length. */
static size_t base_len(const char *id)
{
	const char *b = strchr(id, '[');

	return b ? (size_t)(b - id) : strlen(id);
}

size_t report_match(const report *r, const char *name, const report_test **out, size_t max,
		    bool *ambiguous)
{
	char want[REPORT_MAX_ID + 1], have[REPORT_MAX_ID + 1];
	size_t wl, n = 0;
	const char *first = NULL;

	*ambiguous = false;
	if (!name || !(wl = norm_name(want, sizeof(want), name)))
		return 0;
	/* Two passes: the exact name (with any parameters) first, else a suffix of ids. */
	for (int pass = 0; pass < 2 && n == 0; pass++) {
		for (size_t i = 0; i < r->n; i++) {
			const char *id = r->tests[i].id;
			size_t hl = norm_name(have, sizeof(have), id);
			bool hit;

			if (pass == 0)
				hit = hl >= wl && memcmp(have, want, wl) == 0 &&
				      (hl == wl || have[wl] == '[');
			else
				hit = hl > wl && have[hl - wl - 1] == '.' &&
				      memcmp(have + hl - wl, want, wl) == 0;
			if (!hit)
				continue;
			if (!first)
				first = id;
			else if (base_len(id) != base_len(first) ||
				 strncmp(id, first, base_len(first)) != 0)
				*ambiguous = true;
			if (n < max)
				out[n] = &r->tests[i];
			n++;
		}
	}
	return n;
}

/* ---- sorting, lookup, counts ------------------------------------------------------------ */

static int cmp_test(const void *a, const void *b)
{
	return strcmp(((const report_test *)a)->id, ((const report_test *)b)->id);
}

/* Entries by index (ud: the entries): by id, then in the order they were added. */
static int cmp_index(const void *a, const void *b, void *ud)
{
	const report_test *t = ud;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	int c = strcmp(t[x].id, t[y].id);

	return c ? c : (x > y) - (x < y);
}

/* Sort r->tests by id, equal ids in the order they were added. An array of 4-byte indices is
 * sorted and the entries are then moved in place, so the sort needs 8 bytes per entry (qsort
 * of the entries themselves would take a copy of all of them); without those, the entries are
 * sorted directly. */
static void sort_tests(report *r)
{
	uint32_t *idx = malloc(r->n * sizeof(*idx));

	if (!idx) {
		qsort(r->tests, r->n, sizeof(*r->tests), cmp_test);
		return;
	}
	for (size_t i = 0; i < r->n; i++)
		idx[i] = (uint32_t)i;
	qsort_r(idx, r->n, sizeof(*idx), cmp_index, r->tests);
	/* Position j takes the entry at idx[j]: follow each cycle of the permutation once. */
	for (size_t i = 0; i < r->n; i++) {
		report_test first = r->tests[i];
		size_t j = i;

		while (idx[j] != i) {
			size_t k = idx[j];

			r->tests[j] = r->tests[k];
			idx[j] = (uint32_t)j;
			j = k;
		}
		if (j != i)
			r->tests[j] = first;
		idx[j] = (uint32_t)j;
	}
	free(idx);
}

void report_finish(report *r)
{
	size_t w = 0;

	if (r->sorted)
		return;
	if (r->n > 1)
		sort_tests(r);
	for (size_t i = 0; i < r->n; i++) {
		if (w > 0 && strcmp(r->tests[w - 1].id, r->tests[i].id) == 0) {
			report_test *k = &r->tests[w - 1], *d = &r->tests[i];

			if (outcome_rank((enum report_outcome)d->outcome) >
			    outcome_rank((enum report_outcome)k->outcome)) {
				k->outcome = d->outcome;
				k->message = d->message;
			}
			k->collection = k->collection || d->collection;
			continue;
		}
		r->tests[w++] = r->tests[i];
	}
	r->n = w;
	r->sorted = true;
	/* What the doubling left unused goes back (when shrinking fails, the block stays). */
	if (r->alloc - r->n > r->n / 8 + 64) {
		report_test *nt = realloc(r->tests, (r->n ? r->n : 1) * sizeof(*nt));

		if (nt) {
			r->tests = nt;
			r->alloc = r->n ? r->n : 1;
		}
	}
}

const report_test *report_find(const report *r, const char *id)
{
	long i = r->sorted ? find_index(r, id) : -1;

	return i >= 0 ? &r->tests[i] : NULL;
}

void report_count(const report *r, report_counts *c)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; r && i < r->n; i++) {
		switch (r->tests[i].outcome) {
		case REPORT_PASSED:
			c->passed++;
			break;
		case REPORT_FAILED:
			c->failed++;
			break;
		case REPORT_SKIPPED:
			c->skipped++;
			break;
		default:
			c->errors++;
			if (r->tests[i].collection)
				c->collection++;
		}
	}
}

void report_traj_tests(traj *t, const char *dir, const report *r)
{
	static const char *const status[] = {"passed", "skipped", "error", "failed"};
	traj_line *l = traj_line_begin(t, "tester_tests");

	if (!l)
		return;
	traj_line_raw(l, ",\"dir\":");
	traj_line_string(l, dir);
	traj_line_raw(l, ",\"tests\":[");
	for (size_t i = 0; i < r->n; i++) {
		traj_line_raw(l, i ? ",{\"name\":" : "{\"name\":");
		traj_line_string(l, r->tests[i].id);
		traj_line_raw(l, ",\"status\":\"");
		traj_line_raw(l, status[r->tests[i].outcome <= REPORT_FAILED ? r->tests[i].outcome
									     : REPORT_ERROR]);
		traj_line_raw(l, "\"}");
	}
	traj_line_raw(l, "]");
	traj_line_end(l);
}

/* ---- runners ---------------------------------------------------------------------------- */

static bool word_end(char c)
{
	return c == '\0' || c == ' ' || c == '\t' || c == ';' || c == '&' || c == '|' || c == '\n';
}

/* Skip spaces and leading VAR=value assignments. */
static const char *skip_assignments(const char *p)
{
	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		const char *q = p;
		if (!(isalpha((unsigned char)*q) || *q == '_'))
			return p;
		while (isalnum((unsigned char)*q) || *q == '_')
			q++;
		if (*q != '=')
			return p;
		while (!word_end(*q))
			q++;
		p = q;
	}
}

/* If p starts with word (followed by a word end), return the position after it. */
static const char *word(const char *p, const char *w)
{
	size_t n = strlen(w);

	while (*p == ' ' || *p == '\t')
		p++;
	return strncmp(p, w, n) == 0 && word_end(p[n]) ? p + n : NULL;
}

/* Where the runner's own words end in cmd (where flags may be inserted), and which runner. */
static enum report_runner runner_at(const char *cmd, const char **after)
{
	const char *p = skip_assignments(cmd), *q;

	*after = NULL;
	if ((q = word(p, "pytest")) || (q = word(p, "py.test"))) {
		*after = q;
		return REPORT_RUNNER_PYTEST;
	}
	if (strncmp(p, "python", 6) == 0) {
		const char *v = p + 6;

		while (isdigit((unsigned char)*v) || *v == '.')
			v++;
		if (word_end(*v) && (q = word(v, "-m")) && (q = word(q, "pytest"))) {
			*after = q;
			return REPORT_RUNNER_PYTEST;
		}
	}
	if ((q = word(p, "go")) && (q = word(q, "test"))) {
		*after = q;
		return REPORT_RUNNER_GO;
	}
	if ((q = word(p, "cargo")) && (q = word(q, "test"))) {
		*after = q;
		return REPORT_RUNNER_CARGO;
	}
	if ((q = word(p, "node")) && (q = word(q, "--test"))) {
		*after = q;
		return REPORT_RUNNER_NODE;
	}
	if ((q = word(p, "ctest"))) {
		*after = q;
		return REPORT_RUNNER_CTEST;
	}
	return REPORT_RUNNER_OTHER;
}

enum report_runner report_runner_of(const char *cmd)
{
	const char *after;

	return runner_at(cmd, &after);
}

char *report_instrument(const char *cmd, const char *report_dir)
{
	const char *after;
	char *out = NULL;
	const char *ins = NULL;
	char flags[1024];

	switch (runner_at(cmd, &after)) {
	case REPORT_RUNNER_NODE:
		/* A cut destination would send the report elsewhere: NULL instead. */
		if (ap_fmt(flags, sizeof(flags),
			   " --test-reporter=spec --test-reporter-destination=stdout "
			   "--test-reporter=junit --test-reporter-destination=%s/node.xml",
			   report_dir))
			return NULL;
		ins = flags;
		break;
	default:
		return strdup(cmd);
	}
	if (asprintf(&out, "%.*s%s%s", (int)(after - cmd), cmd, ins, after) < 0)
		return NULL;
	return out;
}

/* ---- classification --------------------------------------------------------------------- */

enum report_class report_classify(const report_run *run)
{
	report_counts c;

	if (run->timed_out)
		return REPORT_TIMEOUT;
	if (run->oom)
		return REPORT_OOM;
	if (run->exit_code == 128 + 9)
		return REPORT_KILLED; /* partial results of a killed run do not count */
	report_count(run->report, &c);
	if (run->report && run->report->n > 0) {
		if (c.collection)
			return REPORT_COLLECTION;
		return REPORT_RAN;
	}
	if (run->exit_code == 127)
		return REPORT_NOT_FOUND;
	if (run->exit_code == 126)
		return REPORT_NOT_EXECUTABLE;
	if (run->runner == REPORT_RUNNER_PYTEST) {
		/* pytest's documented exit codes: 2 interrupted (collection errors), 3 internal
		 * error, 4 usage error, 5 no tests collected. */
		if (run->exit_code == 5)
			return REPORT_NO_TESTS;
		if (run->exit_code == 2)
			return REPORT_COLLECTION;
		if (run->exit_code == 3 || run->exit_code == 4)
			return REPORT_NOTHING_RAN;
	}
	if (run->have_report)
		return run->exit_code == 0 ? REPORT_NO_TESTS : REPORT_NOTHING_RAN;
	return REPORT_EXIT_ONLY;
}

const char *report_class_name(enum report_class c)
{
	switch (c) {
	case REPORT_RAN:
		return "tests executed";
	case REPORT_EXIT_ONLY:
		return "ran, but gave no per-test results (exit status only)";
	case REPORT_COLLECTION:
		return "collection or import errors: tests could not be loaded";
	case REPORT_NOT_FOUND:
		return "command not found (exit 127)";
	case REPORT_NOT_EXECUTABLE:
		return "not executable (exit 126)";
	case REPORT_TIMEOUT:
		return "killed by the deadline";
	case REPORT_OOM:
		return "killed: out of memory";
	case REPORT_KILLED:
		return "killed (SIGKILL) without reaching the deadline";
	case REPORT_NO_TESTS:
		return "no tests collected";
	case REPORT_NOTHING_RAN:
		return "failed before any test ran";
	}
	return "unknown";
}

bool report_class_ran(enum report_class c)
{
	return c == REPORT_RAN || c == REPORT_EXIT_ONLY;
}

/* ---- reading back ----------------------------------------------------------------------- */

int report_sections(const char *text, size_t len, const char *nonce, report_section *out,
		    size_t max, size_t *n)
{
	char marker[96];
	size_t ml;
	const char *p = text, *end = text + len;

	*n = 0;
	if (!nonce || !*nonce || strlen(nonce) > 64)
		return ap_error_set(AP_EINVAL, "report_sections: bad nonce");
	ml = (size_t)snprintf(marker, sizeof(marker), "\n@@ap:%s:", nonce); /* 7 + 64 < 96 */
	p = memmem(p, (size_t)(end - p), marker, ml);
	while (p && *n < max) {
		const char *h = p + ml, *nl, *next, *q;
		report_section *s = &out[*n];
		long long size = 0;
		bool digits = false;

		nl = memchr(h, '\n', (size_t)(end - h));
		if (!nl)
			nl = end;
		for (q = h; q < nl && isdigit((unsigned char)*q) && size < (1LL << 50); q++) {
			size = size * 10 + (*q - '0');
			digits = true;
		}
		s->size = digits ? size : -1;
		while (q < nl && *q != ':')
			q++;
		s->name = q < nl ? q + 1 : nl;
		s->name_len = (size_t)(nl - s->name);
		s->data = nl < end ? nl + 1 : end;
		next = s->data < end ? memmem(s->data, (size_t)(end - s->data), marker, ml) : NULL;
		s->len = (size_t)((next ? next : end) - s->data);
		(*n)++;
		p = next;
	}
	return 0;
}

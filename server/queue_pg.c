/* SPDX-License-Identifier: MIT */
/* server/queue_pg.c - the queue's PostgreSQL driver (libpq; see queue_db.h).
 *
 * One PGconn per handle. A connection the server dropped (restart, failover) is re-opened on
 * the next statement outside a transaction; inside one, every statement fails until the
 * caller's ROLLBACK, so nothing runs half a transaction on a fresh connection. Prepared
 * statements are cached per connection (by the SQL literal's address) and forgotten on a
 * reconnect. Statements built at run time (the look-up of a batch's active jobs: one text per
 * count) are prepared too, in the q__stmt_lru keyed by their text and parameter types, the
 * least recently used one deallocated: a count seen before then costs the server no parse,
 * analysis or planning. Array parameters (QV_ARRAY; the ingest batch's columns) are sent in
 * the binary array format. Texts, single or in arrays, are stored as valid UTF-8 (PostgreSQL
 * refuses anything else): invalid bytes become '?'.
 */
#include "common/clock.h"
#include "common/err.h"
#include "server/queue_db.h"

#include <assert.h>
#include <libpq-fe.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PG_STMT_CACHE 64
#define PG_MAX_ARGS   16
#define PG_INT8OID    20
#define PG_TEXTOID    25
#define PG_BYTEAOID   17
/* The array types of those three (pg_type.typarray). */
#define PG_INT8ARRAYOID	 1016
#define PG_TEXTARRAYOID	 1009
#define PG_BYTEAARRAYOID 1001
/* pg_advisory_lock key of the schema migrations ("autopatc"). */
#define PG_MIGRATE_LOCK "7022358425149453411"
#define PG_CHANNEL	"autopatch_jobs"

struct q__db {
	PGconn *conn;
	char *uri;
	char *shown; /* uri without its password, for messages */
	struct {
		const char *sql;
		char name[16];
	} cache[PG_STMT_CACHE];
	int ncache, seq;
	q__stmt_lru texts; /* run-time texts; stmt: the statement's malloc'd name */
	bool in_tx;	   /* a BEGIN is open on this connection */
	bool tx_broken;	   /* the connection was lost inside it */
	bool listening;
	/* A BEGIN not sent yet: it goes with the transaction's first statement, in one round
	 * trip (a round trip is ~50 us on loopback, more under load). in_tx is already set. */
	const char *begin_pending;
};

struct q__res {
	PGresult *pg;
};

bool q__is_pg_uri(const char *target)
{
	return target && (strncmp(target, "postgresql://", 13) == 0 ||
			  strncmp(target, "postgres://", 11) == 0);
}

/* The URI with the password of its user-info part replaced by "***". */
static char *mask_uri(const char *uri)
{
	const char *p = strstr(uri, "://"), *at, *colon, *end;
	char *out;

	if (!p)
		return strdup(uri);
	p += 3;
	end = p + strcspn(p, "/?");
	at = memchr(p, '@', (size_t)(end - p));
	colon = at ? memchr(p, ':', (size_t)(at - p)) : NULL;
	if (!colon)
		return strdup(uri);
	if (asprintf(&out, "%.*s:***%s", (int)(colon - uri), uri, at) < 0)
		return NULL;
	return out;
}

static bool starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void free_name(void *ud, void *name)
{
	(void)ud;
	free(name);
}

/* Forget every prepared run-time text (the server forgot them with the connection). */
static void texts_clear(q__db *d)
{
	q__lru_clear(&d->texts, free_name, NULL);
}

/* AP_EUNAVAIL for a lost connection, AP_EIO for failures worth retrying (deadlock,
 * serialization, the server shutting down or short of resources, a prepared statement the
 * server no longer has), else AP_EINVAL. */
static int pg_fail(q__db *d, const PGresult *res, const char *what)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *msg = res ? PQresultErrorMessage(res) : PQerrorMessage(d->conn);
	int code = AP_EINVAL;
	size_t n;

	if (!msg || !*msg)
		msg = PQerrorMessage(d->conn);
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		n--;
	if (PQstatus(d->conn) != CONNECTION_OK)
		code = AP_EUNAVAIL;
	else if (state && (starts(state, "40") || starts(state, "53") || starts(state, "57") ||
			   starts(state, "08") || starts(state, "55P03")))
		code = AP_EIO;
	/* Our prepared statements are gone (a pooler's or someone's DISCARD ALL): forget them
	 * all, and the retry prepares what it needs again. */
	if (state && strcmp(state, "26000") == 0) {
		d->ncache = 0;
		texts_clear(d);
		code = AP_EIO;
	}
	return ap_error_set(code, "database %s: %s failed: %.*s", d->shown, what, (int)n, msg);
}

static void pg_close(q__db *d)
{
	if (!d)
		return;
	texts_clear(d);
	PQfinish(d->conn);
	free(d->uri);
	free(d->shown);
	free(d);
}

static PGconn *connect_uri(const char *uri)
{
	/* Later keywords win: the URI's own connect_timeout or application_name overrides. */
	const char *keys[] = {"connect_timeout", "application_name", "keepalives_idle", "dbname",
			      NULL};
	const char *vals[] = {"10", "autopatch", "30", uri, NULL};

	return PQconnectdbParams(keys, vals, 1);
}

/* NOTICEs ("relation already exists, skipping") are not the server's log. */
static void quiet(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

static int pg_open(q__db **out, const char *uri, bool create)
{
	q__db *d;
	int rc;

	(void)create;
	*out = NULL;
	d = calloc(1, sizeof(*d));
	if (!d || !(d->uri = strdup(uri)) || !(d->shown = mask_uri(uri))) {
		pg_close(d);
		return ap_error_set(AP_ENOMEM, "out of memory");
	}
	d->conn = connect_uri(uri);
	if (!d->conn || PQstatus(d->conn) != CONNECTION_OK) {
		const char *m = d->conn ? PQerrorMessage(d->conn) : "out of memory";
		size_t n = strlen(m);

		while (n && (m[n - 1] == '\n' || m[n - 1] == ' '))
			n--;
		rc = ap_error_set(AP_EUNAVAIL, "cannot connect to database %s: %.*s", d->shown,
				  (int)n, m);
		pg_close(d);
		return rc;
	}
	PQsetNoticeProcessor(d->conn, quiet, NULL);
	*out = d;
	return 0;
}

/* Before a statement: a connection the server dropped is opened again (outside a
 * transaction only). */
static int ensure_conn(q__db *d)
{
	if (PQstatus(d->conn) == CONNECTION_OK)
		return 0;
	if (d->in_tx && !d->begin_pending) {
		d->tx_broken = true;
		return ap_error_set(AP_EUNAVAIL, "database %s: connection lost in a transaction",
				    d->shown);
	}
	PQreset(d->conn);
	PQsetNoticeProcessor(d->conn, quiet, NULL);
	d->ncache = 0;
	texts_clear(d);
	d->listening = false;
	if (PQstatus(d->conn) != CONNECTION_OK)
		return ap_error_set(AP_EUNAVAIL, "database %s is unreachable: %s", d->shown,
				    PQerrorMessage(d->conn));
	return 0;
}

/* sql with ?N turned into $N, and each bare ? into the next $N (a statement uses one style;
 * the shared SQL never has '?' inside a literal). */
static char *dollar_sql(const char *sql)
{
	size_t bare = 0, len = 0;
	char *out, *o;
	int next = 1;

	for (const char *p = sql; *p; p++, len++)
		bare += *p == '?' && (p[1] < '0' || p[1] > '9');
	out = malloc(len + bare * 10 + 1);
	if (!out)
		return NULL;
	o = out;
	for (const char *p = sql; *p; p++) {
		if (*p != '?') {
			*o++ = *p;
			continue;
		}
		*o++ = '$';
		if (p[1] < '0' || p[1] > '9')
			o += sprintf(o, "%d", next++);
	}
	*o = '\0';
	return out;
}

/* A copy of s[0..n) with every invalid UTF-8 sequence replaced by '?', or NULL when s is
 * valid already (*tmp then stays NULL). */
static int utf8_clean(const char *s, size_t n, char **tmp)
{
	const unsigned char *u = (const unsigned char *)s;
	bool valid = true;
	char *out = NULL;

	*tmp = NULL;
	for (int pass = 0; pass < 2; pass++) {
		size_t i = 0;

		while (i < n) {
			size_t len = u[i] < 0x80		      ? 1
				     : (u[i] >= 0xc2 && u[i] <= 0xdf) ? 2
				     : (u[i] >= 0xe0 && u[i] <= 0xef) ? 3
				     : (u[i] >= 0xf0 && u[i] <= 0xf4) ? 4
								      : 0;
			bool ok = len > 0 && i + len <= n;

			for (size_t k = 1; ok && k < len; k++)
				ok = (u[i + k] & 0xc0) == 0x80;
			if (ok && len == 3)
				ok = !(u[i] == 0xe0 && u[i + 1] < 0xa0) &&
				     !(u[i] == 0xed && u[i + 1] > 0x9f);
			if (ok && len == 4)
				ok = !(u[i] == 0xf0 && u[i + 1] < 0x90) &&
				     !(u[i] == 0xf4 && u[i + 1] > 0x8f);
			if (!ok) {
				valid = false;
				if (out)
					out[i] = '?';
				len = 1;
			}
			i += len;
		}
		if (valid)
			return 0;
		if (out)
			break;
		out = malloc(n + 1);
		if (!out)
			return ap_error_set(AP_ENOMEM, "out of memory");
		memcpy(out, s, n);
		out[n] = '\0';
	}
	*tmp = out;
	return 0;
}

/* After a statement without parameters ran (ok: it succeeded). */
static void track_tx(q__db *d, const char *sql, bool ok)
{
	if (starts(sql, "BEGIN") && ok) {
		d->in_tx = true;
		d->tx_broken = false;
	} else if (strcmp(sql, "COMMIT") == 0 || strcmp(sql, "ROLLBACK") == 0) {
		d->in_tx = false;
		d->tx_broken = false;
	}
}

/* The parameters of one statement in libpq's form. */
struct pg_params {
	Oid *types;
	const char **vals;
	int *lens, *fmts;
	char (*nums)[24];
	char **tmp; /* copies of texts that had to be cut or cleaned */
	int n;
};

static void params_release(struct pg_params *pp)
{
	for (int i = 0; pp->tmp && i < pp->n; i++)
		free(pp->tmp[i]);
	free(pp->types);
	free(pp->vals);
	free(pp->lens);
	free(pp->fmts);
	free(pp->nums);
	free(pp->tmp);
}

static void put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

/* How many bytes element e is sent as (element_bytes gives them; cleaning a text keeps its
 * length); 0 for a NULL element. */
static size_t element_len(const q__val *e)
{
	if (e->t == QV_INT)
		return 8;
	if (!e->s)
		return 0;
	return e->t == QV_BLOB ? e->n : q__text_len(e->s);
}

/* The bytes one element of an array is sent as: an int in 8 big-endian bytes (into num),
 * a text cut at q__text_len and with invalid UTF-8 made '?' (*tmp: a cleaned copy to free),
 * a blob as is. *p NULL: a NULL element. */
static int element_bytes(const q__val *e, unsigned char num[8], const char **p, size_t *n,
			 char **tmp)
{
	*tmp = NULL;
	if (e->t == QV_INT) {
		uint64_t u = (uint64_t)e->i;

		for (int b = 0; b < 8; b++)
			num[b] = (unsigned char)(u >> (56 - 8 * b));
		*p = (const char *)num;
		*n = 8;
		return 0;
	}
	*p = e->s;
	*n = 0;
	if (!e->s)
		return 0;
	if (e->t == QV_BLOB) {
		*n = e->n;
		return 0;
	}
	*n = q__text_len(e->s);
	if (utf8_clean(e->s, *n, tmp))
		return ap_error_set(AP_ENOMEM, "out of memory");
	if (*tmp)
		*p = *tmp;
	return 0;
}

/* v (a QV_ARRAY) in PostgreSQL's binary array format (array_recv): one dimension, a NULL
 * flag, the element type, the length and lower bound, then each element's length (-1: NULL)
 * and bytes. *out (the caller frees) holds *len bytes; *type is the array type's OID. */
static int array_build(const q__val *v, Oid *type, char **out, size_t *len)
{
	unsigned char num[8], *buf, *o;
	bool nulls = false;
	size_t total = 20;
	const char *p;
	char *tmp;
	size_t n;
	int rc;

	*out = NULL;
	if (v->et != QV_INT && v->et != QV_TEXT && v->et != QV_BLOB)
		return ap_error_set(AP_EINVAL, "array of an unknown element type");
	if (v->n > INT32_MAX)
		return ap_error_set(AP_EINVAL, "array of %zu elements", v->n);
	for (size_t k = 0; k < v->n; k++) {
		if (v->a[k].t != v->et)
			return ap_error_set(AP_EINVAL, "array element %zu of another type", k);
		n = element_len(&v->a[k]);
		nulls |= v->a[k].t != QV_INT && !v->a[k].s;
		if (n > INT32_MAX || total > SIZE_MAX / 2)
			return ap_error_set(AP_EINVAL, "array element %zu too large", k);
		total += 4 + n;
	}
	*type = v->et == QV_INT	   ? PG_INT8ARRAYOID
		: v->et == QV_BLOB ? PG_BYTEAARRAYOID
				   : PG_TEXTARRAYOID;
	if (!(buf = malloc(total)))
		return ap_error_set(AP_ENOMEM, "out of memory");
	put32(buf, 1);
	put32(buf + 4, nulls);
	put32(buf + 8, v->et == QV_INT ? PG_INT8OID : v->et == QV_BLOB ? PG_BYTEAOID : PG_TEXTOID);
	put32(buf + 12, (uint32_t)v->n);
	put32(buf + 16, 1);
	o = buf + 20;
	for (size_t k = 0; k < v->n; k++) {
		if ((rc = element_bytes(&v->a[k], num, &p, &n, &tmp))) {
			free(buf);
			return rc;
		}
		assert(n == element_len(&v->a[k])); /* the size pass counted the same */
		put32(o, p ? (uint32_t)n : UINT32_MAX);
		if (n)
			memcpy(o + 4, p, n);
		o += 4 + n;
		free(tmp);
	}
	*out = (char *)buf;
	*len = (size_t)(o - buf);
	return 0;
}

static int params_build(struct pg_params *pp, const q__val *args, int nargs)
{
	size_t n = nargs > 0 ? (size_t)nargs : 1;
	int rc;

	memset(pp, 0, sizeof(*pp));
	pp->n = nargs;
	pp->types = calloc(n, sizeof(*pp->types));
	pp->vals = calloc(n, sizeof(*pp->vals));
	pp->lens = calloc(n, sizeof(*pp->lens));
	pp->fmts = calloc(n, sizeof(*pp->fmts));
	pp->nums = calloc(n, sizeof(*pp->nums));
	pp->tmp = calloc(n, sizeof(*pp->tmp));
	if (!pp->types || !pp->vals || !pp->lens || !pp->fmts || !pp->nums || !pp->tmp)
		return ap_error_set(AP_ENOMEM, "out of memory");
	for (int i = 0; i < nargs; i++) {
		const q__val *v = &args[i];

		pp->types[i] = v->t == QV_INT	 ? PG_INT8OID
			       : v->t == QV_BLOB ? PG_BYTEAOID
						 : PG_TEXTOID;
		if (v->t == QV_ARRAY) {
			size_t len = 0;

			if ((rc = array_build(v, &pp->types[i], &pp->tmp[i], &len)))
				return rc;
			if (len > INT_MAX)
				return ap_error_set(AP_EINVAL, "array parameter too large");
			pp->vals[i] = pp->tmp[i];
			pp->lens[i] = (int)len;
			pp->fmts[i] = 1;
		} else if (v->t == QV_INT) {
			snprintf(pp->nums[i], sizeof(pp->nums[i]), "%lld", (long long)v->i);
			pp->vals[i] = pp->nums[i];
		} else if (!v->s) {
			pp->vals[i] = NULL;
		} else if (v->t == QV_BLOB) {
			pp->vals[i] = v->s;
			pp->lens[i] = (int)v->n;
			pp->fmts[i] = 1;
		} else {
			size_t len = q__text_len(v->s);

			if ((rc = utf8_clean(v->s, len, &pp->tmp[i])))
				return rc;
			if (!pp->tmp[i] && len != strlen(v->s) &&
			    !(pp->tmp[i] = strndup(v->s, len)))
				return ap_error_set(AP_ENOMEM, "out of memory");
			pp->vals[i] = pp->tmp[i] ? pp->tmp[i] : v->s;
		}
	}
	return 0;
}

/* The name of sql's prepared statement on this connection, preparing it the first time. */
static int prepared(q__db *d, const char *sql, const struct pg_params *pp, const char **name)
{
	int slot = d->ncache < PG_STMT_CACHE ? d->ncache : PG_STMT_CACHE - 1;
	PGresult *res;
	char *text;
	int rc;

	for (int i = 0; i < d->ncache; i++)
		if (d->cache[i].sql == sql) {
			*name = d->cache[i].name;
			return 0;
		}
	text = dollar_sql(sql);
	if (!text)
		return ap_error_set(AP_ENOMEM, "out of memory");
	snprintf(d->cache[slot].name, sizeof(d->cache[slot].name), "q%d", d->seq++);
	res = PQprepare(d->conn, d->cache[slot].name, text, pp->n, pp->types);
	free(text);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		rc = pg_fail(d, res, "prepare");
		PQclear(res);
		return rc;
	}
	PQclear(res);
	d->cache[slot].sql = sql;
	if (slot == d->ncache)
		d->ncache++;
	*name = d->cache[slot].name;
	return 0;
}

/* q__stmt_lru's drop: the server forgets the statement too. Inside a failed transaction the
 * DEALLOCATE fails and the statement lives on with the connection, unnamed here: a little
 * server memory. */
static void deallocate(void *ud, void *stmt)
{
	q__db *d = ud;
	char sql[32];

	snprintf(sql, sizeof(sql), "DEALLOCATE %s", (const char *)stmt); /* "t"/"q" and an int */
	PQclear(PQexec(d->conn, sql));
	free(stmt);
}

/* The name of run-time text sql's prepared statement, preparing it when it is not cached;
 * *name NULL: too long to keep, run it unprepared. */
static int text_prepared(q__db *d, const char *sql, const struct pg_params *pp, const char **name)
{
	size_t key_len = (size_t)pp->n * sizeof(*pp->types);
	PGresult *res;
	char *text, *made;
	int rc;

	*name = NULL;
	if (strlen(sql) > Q_LRU_TEXT_MAX)
		return 0;
	if ((*name = q__lru_find(&d->texts, sql, pp->types, key_len)))
		return 0;
	text = dollar_sql(sql);
	made = malloc(16);
	if (!text || !made) {
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto out_free;
	}
	snprintf(made, 16, "t%d", d->seq++);
	res = PQprepare(d->conn, made, text, pp->n, pp->types);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		rc = pg_fail(d, res, "prepare");
		PQclear(res);
		goto out_free;
	}
	PQclear(res);
	if (q__lru_add(&d->texts, sql, pp->types, key_len, made, deallocate, d)) {
		deallocate(d, made); /* prepared but not kept */
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		made = NULL;
		goto out_free;
	}
	free(text);
	*name = made;
	return 0;
out_free:
	free(text);
	free(made);
	return rc;
}

/* Hold BEGIN (sql) back until the transaction's first statement: the transaction is open
 * from here on for the caller. */
static void defer_begin(q__db *d, const char *sql)
{
	d->begin_pending = sql;
	d->in_tx = true;
	d->tx_broken = false;
}

/* The pending BEGIN and one statement (the prepared statement name, else text), sent
 * together in libpq's pipeline mode and answered in one round trip: the statement's result,
 * or BEGIN's when BEGIN failed (the statement is then not run); NULL when nothing could be
 * sent or read (PQerrorMessage says why). */
static PGresult *with_begin(q__db *d, const char *name, const char *text,
			    const struct pg_params *pp)
{
	const char *begin = d->begin_pending;
	PGresult *res = NULL, *r;
	bool sent;

	d->begin_pending = NULL;
	if (!PQenterPipelineMode(d->conn))
		return NULL;
	sent = PQsendQueryParams(d->conn, begin, 0, NULL, NULL, NULL, NULL, 0) &&
	       (name ? PQsendQueryPrepared(d->conn, name, pp->n, pp->vals, pp->lens, pp->fmts, 0)
		     : PQsendQueryParams(d->conn, text, pp->n, pp->types, pp->vals, pp->lens,
					 pp->fmts, 0)) &&
	       PQpipelineSync(d->conn);
	/* Each query's results end with a NULL; a failed BEGIN's error is kept (the
	 * statement then only reports PGRES_PIPELINE_ABORTED). */
	for (int q = 0; sent && q < 2; q++)
		while ((r = PQgetResult(d->conn))) {
			if (!res && (q == 1 || PQresultStatus(r) != PGRES_COMMAND_OK))
				res = r;
			else
				PQclear(r);
		}
	while ((r = PQgetResult(d->conn))) {
		bool sync = PQresultStatus(r) == PGRES_PIPELINE_SYNC;

		PQclear(r);
		if (sync)
			break;
	}
	PQexitPipelineMode(d->conn);
	return res;
}

/* One statement on a live connection; once: built at run time (prepared through the text
 * cache, or not at all when too long). */
static int run_stmt(q__db *d, const char *sql, bool once, const q__val *args, int nargs,
		    q__res **rows, int64_t *changes)
{
	struct pg_params pp;
	const char *name = NULL;
	PGresult *res = NULL;
	ExecStatusType st;
	int rc;

	if (nargs == 0 && !rows) {
		memset(&pp, 0, sizeof(pp));
		res = d->begin_pending ? with_begin(d, NULL, sql, &pp) : PQexec(d->conn, sql);
		track_tx(d, sql, PQresultStatus(res) == PGRES_COMMAND_OK);
		goto check;
	}
	if ((rc = params_build(&pp, args, nargs)))
		goto out;
	if (once && (rc = text_prepared(d, sql, &pp, &name)))
		goto out;
	if (once && !name) {
		char *text = dollar_sql(sql);

		if (!text) {
			rc = ap_error_set(AP_ENOMEM, "out of memory");
			goto out;
		}
		res = d->begin_pending ? with_begin(d, NULL, text, &pp)
				       : PQexecParams(d->conn, text, nargs, pp.types, pp.vals,
						      pp.lens, pp.fmts, 0);
		free(text);
	} else {
		if (!once && (rc = prepared(d, sql, &pp, &name)))
			goto out;
		res = d->begin_pending
			  ? with_begin(d, name, NULL, &pp)
			  : PQexecPrepared(d->conn, name, nargs, pp.vals, pp.lens, pp.fmts, 0);
	}
check:
	st = PQresultStatus(res);
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		rc = pg_fail(d, res, nargs ? "statement" : sql);
		if (PQstatus(d->conn) != CONNECTION_OK && d->in_tx)
			d->tx_broken = true;
		goto out;
	}
	if (changes) {
		const char *n = PQcmdTuples(res);

		*changes = n && *n ? strtoll(n, NULL, 10) : 0;
	}
	if (rows) {
		q__res *r = malloc(sizeof(*r));

		if (!r) {
			rc = ap_error_set(AP_ENOMEM, "out of memory");
			goto out;
		}
		r->pg = res;
		res = NULL;
		*rows = r;
	}
	rc = 0;
out:
	PQclear(res);
	params_release(&pp);
	return rc;
}

static int exec_any(q__db *d, const char *sql, bool once, const q__val *args, int nargs,
		    q__res **rows, int64_t *changes)
{
	int rc;

	if (rows)
		*rows = NULL;
	/* BEGIN waits for the transaction's first statement, to go in its round trip; a
	 * transaction that ends before one ran sent nothing. */
	if (!d->in_tx && nargs == 0 && !rows && starts(sql, "BEGIN")) {
		if ((rc = ensure_conn(d)))
			return rc;
		defer_begin(d, sql);
		return 0;
	}
	if (d->begin_pending && nargs == 0 && !rows &&
	    (strcmp(sql, "COMMIT") == 0 || strcmp(sql, "ROLLBACK") == 0)) {
		d->begin_pending = NULL;
		track_tx(d, sql, true);
		return 0;
	}
	/* A ROLLBACK after the connection was lost: the server already dropped the
	 * transaction. */
	if (d->in_tx && (d->tx_broken || PQstatus(d->conn) != CONNECTION_OK) &&
	    (strcmp(sql, "ROLLBACK") == 0)) {
		track_tx(d, sql, true);
		return 0;
	}
	if ((rc = ensure_conn(d)))
		return rc;
	/* A statement outside a transaction, or the first of one (with its BEGIN), that fails
	 * because the server dropped the connection (a restart) is sent once more on a new
	 * one: nothing of it happened. */
	if (!d->in_tx || d->begin_pending) {
		const char *begin = d->begin_pending;

		rc = run_stmt(d, sql, once, args, nargs, rows, changes);
		if (rc != AP_EUNAVAIL || PQstatus(d->conn) == CONNECTION_OK || (d->in_tx && !begin))
			return rc;
		d->in_tx = false;
		if (ensure_conn(d))
			return rc;
		ap_error_clear();
		if (begin)
			defer_begin(d, begin);
	}
	return run_stmt(d, sql, once, args, nargs, rows, changes);
}

static int pg_exec(q__db *d, const char *sql, const q__val *args, int nargs, q__res **rows,
		   int64_t *changes)
{
	return exec_any(d, sql, false, args, nargs, rows, changes);
}

static int pg_exec_once(q__db *d, const char *sql, const q__val *args, int nargs, q__res **rows,
			int64_t *changes)
{
	return exec_any(d, sql, true, args, nargs, rows, changes);
}

static int pg_script(q__db *d, const char *sql)
{
	PGresult *res;
	int rc = 0;

	if ((rc = ensure_conn(d)))
		return rc;
	if (d->begin_pending) { /* a script inside the transaction runs after its BEGIN */
		res = PQexec(d->conn, d->begin_pending);
		d->begin_pending = NULL;
		if (PQresultStatus(res) != PGRES_COMMAND_OK)
			rc = pg_fail(d, res, "BEGIN");
		PQclear(res);
		if (rc)
			return rc;
	}
	res = PQexec(d->conn, sql);
	if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK)
		rc = pg_fail(d, res, "migration");
	PQclear(res);
	return rc;
}

/* A session advisory lock: a second replica starting at the same moment waits here until
 * the first has migrated, then finds nothing to do. */
static int pg_migrate_lock(q__db *d)
{
	int rc;

	if ((rc = pg_script(d, "SELECT pg_advisory_lock(" PG_MIGRATE_LOCK ")")))
		return rc;
	if ((rc = pg_script(d, "BEGIN"))) {
		pg_script(d, "SELECT pg_advisory_unlock(" PG_MIGRATE_LOCK ")");
		return rc;
	}
	d->in_tx = true;
	return 0;
}

static int pg_migrate_unlock(q__db *d, bool commit)
{
	int rc = pg_script(d, commit ? "COMMIT" : "ROLLBACK");

	d->in_tx = false;
	if (!commit)
		rc = 0;
	pg_script(d, "SELECT pg_advisory_unlock(" PG_MIGRATE_LOCK ")");
	return rc;
}

static int pg_notify(q__db *d)
{
	return pg_script(d, "NOTIFY " PG_CHANNEL);
}

static int pg_wait(q__db *d, int timeout_ms, bool *woken)
{
	int64_t until = ap_mono_ms() + timeout_ms;
	PGnotify *n;
	int rc;

	*woken = false;
	if ((rc = ensure_conn(d)) || (!d->listening && (rc = pg_script(d, "LISTEN " PG_CHANNEL)))) {
		struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};

		nanosleep(&ts, NULL);
		return rc;
	}
	d->listening = true;
	for (;;) {
		struct pollfd pfd = {PQsocket(d->conn), POLLIN, 0};
		int64_t left = until - ap_mono_ms();

		if (PQconsumeInput(d->conn) == 0)
			return ap_error_set(AP_EUNAVAIL, "database %s: listening failed: %s",
					    d->shown, PQerrorMessage(d->conn));
		while ((n = PQnotifies(d->conn))) {
			*woken = true;
			PQfreemem(n);
		}
		if (*woken || left <= 0)
			return 0;
		if (pfd.fd < 0 || poll(&pfd, 1, (int)left) < 0)
			return ap_error_set(AP_EUNAVAIL, "database %s: listening failed", d->shown);
	}
}

static int pg_res_rows(const q__res *r)
{
	return r ? PQntuples(r->pg) : 0;
}

static bool pg_res_null(const q__res *r, int row, int col)
{
	return PQgetisnull(r->pg, row, col) != 0;
}

static int64_t pg_res_int(const q__res *r, int row, int col)
{
	return strtoll(PQgetvalue(r->pg, row, col), NULL, 10);
}

static const char *pg_res_text(const q__res *r, int row, int col)
{
	return PQgetisnull(r->pg, row, col) ? NULL : PQgetvalue(r->pg, row, col);
}

static int pg_res_blob(const q__res *r, int row, int col, unsigned char **out, size_t *n)
{
	unsigned char *raw;
	size_t len = 0;

	*out = NULL;
	*n = 0;
	if (PQgetisnull(r->pg, row, col))
		return 0;
	raw = PQunescapeBytea((const unsigned char *)PQgetvalue(r->pg, row, col), &len);
	if (!raw)
		return ap_error_set(AP_ENOMEM, "out of memory");
	*out = malloc(len + 1);
	if (!*out) {
		PQfreemem(raw);
		return ap_error_set(AP_ENOMEM, "out of memory");
	}
	memcpy(*out, raw, len);
	(*out)[len] = '\0';
	*n = len;
	PQfreemem(raw);
	return 0;
}

static void pg_res_free(q__res *r)
{
	if (!r)
		return;
	PQclear(r->pg);
	free(r);
}

static const char *const pg_migrations[] = {
    Q_SCHEMA_V1("BIGSERIAL PRIMARY KEY", "BIGINT", "BYTEA"),
    Q_SCHEMA_V2("BIGINT"),
    Q_SCHEMA_V3("BIGSERIAL PRIMARY KEY", "BIGINT"),
};

const q__driver q__pg_driver = {
    .name = "postgresql",
    .shared = true,
    .arrays = true,
    .begin_write = "BEGIN",
    .begin_read = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
    .day_lock = "SELECT pg_advisory_xact_lock(hashtext(?1))",
    .migrations = pg_migrations,
    .nmigrations = (int)(sizeof(pg_migrations) / sizeof(pg_migrations[0])),
    .open = pg_open,
    .close = pg_close,
    .exec = pg_exec,
    .exec_once = pg_exec_once,
    .script = pg_script,
    .migrate_lock = pg_migrate_lock,
    .migrate_unlock = pg_migrate_unlock,
    .notify = pg_notify,
    .wait = pg_wait,
    .autocheckpoint = NULL,
    .checkpoint = NULL,
    .res_rows = pg_res_rows,
    .res_null = pg_res_null,
    .res_int = pg_res_int,
    .res_text = pg_res_text,
    .res_blob = pg_res_blob,
    .res_free = pg_res_free,
};

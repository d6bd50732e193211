/* SPDX-License-Identifier: MIT */
/* tests/sandbox/test_egress_sni.c - the server name (SNI) parser of TLS ClientHellos that the
 * egress proxy checks against the CONNECT host (sandbox/egress_policy.c): ClientHellos built
 * byte by byte here (with and without SNI, other names, every truncation, lying lengths, two
 * names, huge extensions, fragments across records, ECH) and real ones from OpenSSL. */
#include "sandbox/egress_policy.h"

#include <openssl/ssl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* A growing byte string; lengths are written as placeholders and filled in afterwards. */
struct bytes {
	uint8_t b[80000];
	size_t n;
};

static void put(struct bytes *h, const void *p, size_t n)
{
	assert_true(h->n + n <= sizeof(h->b));
	memcpy(h->b + h->n, p, n);
	h->n += n;
}

static void put8(struct bytes *h, unsigned v)
{
	uint8_t b = (uint8_t)v;

	put(h, &b, 1);
}

static void put16(struct bytes *h, unsigned v)
{
	put8(h, v >> 8);
	put8(h, v);
}

/* Reserve a k-byte length at the current end; fill_len() writes what followed it. */
static size_t mark(struct bytes *h, size_t k)
{
	size_t at = h->n;

	for (size_t i = 0; i < k; i++)
		put8(h, 0);
	return at;
}

static void fill_len(struct bytes *h, size_t at, size_t k)
{
	size_t v = h->n - at - k;

	for (size_t i = 0; i < k; i++)
		h->b[at + i] = (uint8_t)(v >> (8 * (k - 1 - i)));
}

/* What a built ClientHello contains. Every length field's offset (in the message) is kept so
 * a test can make it lie. */
struct hello {
	const char *names[4];  /* server_name entries (none: no server_name extension) */
	size_t name_lens[4];   /* 0: strlen */
	unsigned name_type;    /* of every entry (0 = host_name) */
	bool sni_twice;	       /* a second server_name extension */
	bool no_extensions;    /* stop after the compression methods */
	bool ech;	       /* add encrypted_client_hello */
	size_t session_id_len; /* 32 by default below */
	size_t padding;	       /* bytes of a padding extension (21) after server_name */
	size_t len_at[16];     /* offsets of length fields in the message */
	size_t len_size[16];   /* their sizes */
	size_t n_lens;
};

static void note_len(struct hello *o, size_t at, size_t k)
{
	o->len_at[o->n_lens] = at;
	o->len_size[o->n_lens] = k;
	o->n_lens++;
}

static void put_sni_ext(struct bytes *h, struct hello *o)
{
	size_t ext, list;

	put16(h, 0); /* server_name */
	ext = mark(h, 2);
	note_len(o, ext, 2);
	list = mark(h, 2);
	note_len(o, list, 2);
	for (size_t i = 0; i < 4 && o->names[i]; i++) {
		size_t n = o->name_lens[i] ? o->name_lens[i] : strlen(o->names[i]);

		put8(h, o->name_type);
		put16(h, (unsigned)n);
		if (i == 0)
			note_len(o, h->n - 2, 2);
		put(h, o->names[i], n);
	}
	fill_len(h, list, 2);
	fill_len(h, ext, 2);
}

/* The handshake message: type 1, 24-bit length, ClientHello body. */
static void build_hello(struct bytes *h, struct hello *o)
{
	static const uint8_t suites[] = {0x13, 0x01, 0x13, 0x02, 0xc0, 0x2f};
	uint8_t rnd[32];
	size_t msg, sid, cs, comp, exts;

	h->n = 0;
	o->n_lens = 0;
	memset(rnd, 0xa5, sizeof(rnd));
	put8(h, 1);
	msg = mark(h, 3);
	note_len(o, msg, 3);
	put16(h, 0x0303);
	put(h, rnd, sizeof(rnd));
	sid = mark(h, 1);
	note_len(o, sid, 1);
	for (size_t i = 0; i < o->session_id_len; i++)
		put8(h, (unsigned)i);
	fill_len(h, sid, 1);
	cs = mark(h, 2);
	note_len(o, cs, 2);
	put(h, suites, sizeof(suites));
	fill_len(h, cs, 2);
	comp = mark(h, 1);
	note_len(o, comp, 1);
	put8(h, 0);
	fill_len(h, comp, 1);
	if (!o->no_extensions) {
		exts = mark(h, 2);
		note_len(o, exts, 2);
		put16(h, 0x0a0a); /* a GREASE extension, empty */
		put16(h, 0);
		put16(h, 43); /* supported_versions: TLS 1.3, 1.2 */
		put16(h, 5);
		put8(h, 4);
		put16(h, 0x0304);
		put16(h, 0x0303);
		if (o->names[0])
			put_sni_ext(h, o);
		if (o->sni_twice)
			put_sni_ext(h, o);
		if (o->ech) {
			put16(h, 0xfe0d);
			put16(h, 4);
			put16(h, 0x0001);
			put16(h, 0x0203);
		}
		if (o->padding) {
			put16(h, 21);
			put16(h, (unsigned)o->padding);
			for (size_t i = 0; i < o->padding; i++)
				put8(h, 0);
		}
		fill_len(h, exts, 2);
	}
	fill_len(h, msg, 3);
}

/* The message in TLS records of at most frag bytes each. */
static void wrap_records(struct bytes *out, const struct bytes *msg, size_t frag)
{
	out->n = 0;
	for (size_t off = 0; off < msg->n; off += frag) {
		size_t n = msg->n - off < frag ? msg->n - off : frag;

		put8(out, 22);
		put16(out, 0x0301);
		put16(out, (unsigned)n);
		put(out, msg->b + off, n);
	}
}

static struct bytes msg_buf, rec_buf;

/* A default hello naming `name`, in one record. */
static struct bytes *hello_for(const char *name)
{
	struct hello o = {.names = {name}, .session_id_len = 32};

	build_hello(&msg_buf, &o);
	wrap_records(&rec_buf, &msg_buf, 16384);
	return &rec_buf;
}

static enum egp_sni_status parse(const struct bytes *b, char *out)
{
	return egp_sni_from_client_hello(b->b, b->n, out, EGP_HOST_MAX + 1);
}

static void test_sni_is_read_and_compared(void **state)
{
	char out[EGP_HOST_MAX + 1];

	(void)state;
	assert_int_equal(parse(hello_for("allowed.example"), out), EGP_SNI_OK);
	assert_string_equal(out, "allowed.example");
	assert_true(egp_sni_matches(out, "allowed.example"));
	assert_false(egp_sni_matches(out, "other.example"));

	assert_int_equal(parse(hello_for("Allowed.EXAMPLE"), out), EGP_SNI_OK);
	assert_string_equal(out, "Allowed.EXAMPLE"); /* as sent */
	assert_true(egp_sni_matches(out, "allowed.example"));

	assert_int_equal(parse(hello_for("other.example"), out), EGP_SNI_OK);
	assert_false(egp_sni_matches(out, "allowed.example"));
}

static void test_sni_match_has_no_trailing_dot_or_prefix_games(void **state)
{
	(void)state;
	assert_false(egp_sni_matches("allowed.example.", "allowed.example"));
	assert_false(egp_sni_matches("allowed.example", "allowed.example."));
	assert_false(egp_sni_matches("allowed.exampl", "allowed.example"));
	assert_false(egp_sni_matches("allowed.example.evil", "allowed.example"));
	assert_false(egp_sni_matches("x.allowed.example", "allowed.example"));
	assert_false(egp_sni_matches("", ""));
	assert_false(egp_sni_matches("allowed-example", "allowed.example"));
}

static void test_no_sni_is_missing(void **state)
{
	struct hello o = {.session_id_len = 32};
	char out[EGP_HOST_MAX + 1];

	(void)state;
	build_hello(&msg_buf, &o);
	wrap_records(&rec_buf, &msg_buf, 16384);
	assert_int_equal(parse(&rec_buf, out), EGP_SNI_MISSING);
	assert_string_equal(out, "");
	o.no_extensions = true; /* a TLS 1.0-style hello without any extension */
	build_hello(&msg_buf, &o);
	wrap_records(&rec_buf, &msg_buf, 16384);
	assert_int_equal(parse(&rec_buf, out), EGP_SNI_MISSING);
}

/* Every proper prefix of a valid ClientHello is "need more", never a verdict; the whole
 * one is OK; and bytes after it (the client's next records) change nothing. Also when the
 * hello is fragmented into records of 1, 7 and 100 bytes. */
static void test_every_truncation_needs_more(void **state)
{
	static const size_t frags[] = {16384, 100, 7, 1};
	static const uint8_t ccs[] = {20, 3, 3, 0, 1, 1};
	struct hello o = {.names = {"allowed.example"}, .session_id_len = 32};
	char out[EGP_HOST_MAX + 1];

	(void)state;
	build_hello(&msg_buf, &o);
	for (size_t f = 0; f < sizeof(frags) / sizeof(frags[0]); f++) {
		wrap_records(&rec_buf, &msg_buf, frags[f]);
		for (size_t n = 0; n < rec_buf.n; n++) {
			enum egp_sni_status st =
			    egp_sni_from_client_hello(rec_buf.b, n, out, sizeof(out));

			if (st != EGP_SNI_NEED_MORE)
				fail_msg("fragments of %zu, prefix of %zu/%zu bytes: status %d",
					 frags[f], n, rec_buf.n, st);
		}
		assert_int_equal(parse(&rec_buf, out), EGP_SNI_OK);
		assert_string_equal(out, "allowed.example");
		put(&rec_buf, ccs, sizeof(ccs));
		assert_int_equal(parse(&rec_buf, out), EGP_SNI_OK);
	}
}

/* Each length field made to lie by -1, +1 and to its maximum: never OK, and never a read
 * past what is given (ASan in scripts/test.sh; the fuzz target too). A length that claims
 * more than arrived may only mean "need more"; one that claims less or is out of range is
 * malformed. */
static void test_lying_lengths_are_refused(void **state)
{
	struct hello o = {.names = {"allowed.example"}, .session_id_len = 32};
	char out[EGP_HOST_MAX + 1];

	(void)state;
	build_hello(&msg_buf, &o);
	assert_true(o.n_lens >= 8);
	for (size_t i = 0; i < o.n_lens; i++) {
		static const long deltas[] = {-1, 1, 1000000};

		for (size_t d = 0; d < 3; d++) {
			struct bytes m = msg_buf;
			size_t at = o.len_at[i], k = o.len_size[i], v = 0;
			enum egp_sni_status st;

			for (size_t j = 0; j < k; j++)
				v = v << 8 | m.b[at + j];
			v = deltas[d] == 1000000 ? ((size_t)1 << (8 * k)) - 1
						 : (size_t)((long)v + deltas[d]);
			for (size_t j = 0; j < k; j++)
				m.b[at + j] = (uint8_t)(v >> (8 * (k - 1 - j)));
			wrap_records(&rec_buf, &m, 16384);
			st = parse(&rec_buf, out);
			if (st == EGP_SNI_OK || st == EGP_SNI_MISSING)
				fail_msg("length field %zu (offset %zu) %+ld: status %d", i, at,
					 deltas[d], st);
			assert_string_equal(out, "");
		}
	}
}

static void test_specific_lies(void **state)
{
	struct hello o = {.names = {"allowed.example"}, .session_id_len = 32};
	char out[EGP_HOST_MAX + 1];
	struct bytes m;

	(void)state;
	/* handshake length one short: the record carries more than the ClientHello */
	build_hello(&msg_buf, &o);
	m = msg_buf;
	m.b[3]--;
	wrap_records(&rec_buf, &m, 16384);
	assert_int_equal(parse(&rec_buf, out), EGP_SNI_MALFORMED);
	/* handshake length one long: the extensions no longer end where the message does */
	m = msg_buf;
	m.b[3]++;
	wrap_records(&rec_buf, &m, 16384);
	assert_int_equal(parse(&rec_buf, out), EGP_SNI_MALFORMED);
	/* fragmented: after the first record another must follow; anything else is malformed */
	wrap_records(&rec_buf, &msg_buf, 100);
	rec_buf.n = 105;
	assert_int_equal(parse(&rec_buf, out), EGP_SNI_NEED_MORE);
	put(&rec_buf, "GET / HTTP/1.1\r\n", 16);
	assert_int_equal(parse(&rec_buf, out), EGP_SNI_MALFORMED);
	/* record length longer than the ClientHello; shorter: the rest is no record */
	wrap_records(&rec_buf, &msg_buf, 16384);
	rec_buf.b[4]++;
	assert_int_equal(parse(&rec_buf, out), EGP_SNI_MALFORMED);
	rec_buf.b[4] -= 2;
	assert_int_equal(parse(&rec_buf, out), EGP_SNI_MALFORMED);
	/* a session id longer than 32 bytes */
	o.session_id_len = 33;
	build_hello(&msg_buf, &o);
	wrap_records(&rec_buf, &msg_buf, 16384);
	assert_int_equal(parse(&rec_buf, out), EGP_SNI_MALFORMED);
	/* a zero-length record, a record above 2^14 */
	{
		static const uint8_t empty[] = {22, 3, 1, 0, 0};
		static const uint8_t big[] = {22, 3, 1, 0x40, 0x01, 1};

		assert_int_equal(egp_sni_from_client_hello(empty, sizeof(empty), out, sizeof(out)),
				 EGP_SNI_MALFORMED);
		assert_int_equal(egp_sni_from_client_hello(big, sizeof(big), out, sizeof(out)),
				 EGP_SNI_MALFORMED);
	}
}

static void test_two_names_or_odd_names_are_malformed(void **state)
{
	struct hello two = {.names = {"allowed.example", "other.example"}, .session_id_len = 32};
	struct hello twice = {.names = {"allowed.example"}, .sni_twice = true};
	struct hello type1 = {.names = {"allowed.example"}, .name_type = 1};
	struct hello nul = {.names = {"allowed.example\0.evil"}, .name_lens = {21}};
	struct hello space = {.names = {"allowed example"}};
	struct hello empty = {.names = {""}};
	struct hello *bad[] = {&two, &twice, &type1, &nul, &space, &empty};
	char long_name[300], out[EGP_HOST_MAX + 1];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		build_hello(&msg_buf, bad[i]);
		wrap_records(&rec_buf, &msg_buf, 16384);
		if (parse(&rec_buf, out) != EGP_SNI_MALFORMED)
			fail_msg("case %zu was not refused", i);
		assert_string_equal(out, "");
	}
	memset(long_name, 'a', sizeof(long_name));
	for (size_t i = 63; i < 253; i += 64)
		long_name[i] = '.';
	long_name[253] = '\0';
	assert_int_equal(parse(hello_for(long_name), out), EGP_SNI_OK);
	assert_int_equal(strlen(out), 253);
	long_name[253] = 'a';
	long_name[254] = '\0';
	assert_int_equal(parse(hello_for(long_name), out), EGP_SNI_MALFORMED);
	/* an output buffer too small for any host name */
	hello_for("a.example");
	assert_int_equal(egp_sni_from_client_hello(rec_buf.b, rec_buf.n, out, 16),
			 EGP_SNI_MALFORMED);
}

static void test_huge_hellos_are_too_big(void **state)
{
	struct hello o = {.names = {"allowed.example"}, .padding = 20000};
	static const uint8_t huge_hs[] = {22, 3, 1, 0, 4, 1, 0xff, 0xff, 0xff};
	char out[EGP_HOST_MAX + 1];

	(void)state;
	build_hello(&msg_buf, &o);
	wrap_records(&rec_buf, &msg_buf, 16384);
	assert_int_equal(parse(&rec_buf, out), EGP_SNI_TOO_BIG);
	assert_int_equal(egp_sni_from_client_hello(huge_hs, sizeof(huge_hs), out, sizeof(out)),
			 EGP_SNI_TOO_BIG);
	/* just under the cap is fine; many tiny records' headers count towards it */
	o.padding = 16384 - 5 - 200;
	build_hello(&msg_buf, &o);
	wrap_records(&rec_buf, &msg_buf, 16384);
	assert_true(rec_buf.n <= EGP_HELLO_MAX);
	assert_int_equal(parse(&rec_buf, out), EGP_SNI_OK);
	wrap_records(&rec_buf, &msg_buf, 64);
	assert_int_equal(parse(&rec_buf, out), EGP_SNI_TOO_BIG);
}

static void test_not_tls_and_ech(void **state)
{
	static const struct {
		const char *bytes;
		size_t n;
	} not_tls[] = {
	    {"GET / HTTP/1.1\r\nHost: allowed.example\r\n\r\n", 40},
	    {"\x80\x2e\x01\x03\x01", 5},		 /* SSLv2-style hello */
	    {"\x16\x04\x01\x00\x10", 5},		 /* not version 3 */
	    {"\x16\x03\x05\x00\x10", 5},		 /* not 3.0 .. 3.4 */
	    {"\x17\x03\x03\x00\x10", 5},		 /* application data */
	    {"\x16\x03\x03\x00\x04\x02\x00\x00\x00", 9}, /* a ServerHello */
	    {"SSH-2.0-OpenSSH_9.2\r\n", 21},
	};
	struct hello ech = {.names = {"allowed.example"}, .ech = true};
	char out[EGP_HOST_MAX + 1];

	(void)state;
	for (size_t i = 0; i < sizeof(not_tls) / sizeof(not_tls[0]); i++)
		assert_int_equal(egp_sni_from_client_hello((const uint8_t *)not_tls[i].bytes,
							   not_tls[i].n, out, sizeof(out)),
				 EGP_SNI_NOT_TLS);
	/* the first bytes decide at once */
	assert_int_equal(egp_sni_from_client_hello((const uint8_t *)"G", 1, out, sizeof(out)),
			 EGP_SNI_NOT_TLS);
	assert_int_equal(egp_sni_from_client_hello((const uint8_t *)"", 0, out, sizeof(out)),
			 EGP_SNI_NEED_MORE);
	build_hello(&msg_buf, &ech);
	wrap_records(&rec_buf, &msg_buf, 16384);
	assert_int_equal(parse(&rec_buf, out), EGP_SNI_ECH);
	for (int st = EGP_SNI_NEED_MORE; st <= EGP_SNI_TOO_BIG; st++)
		assert_true(strlen(egp_sni_status_reason((enum egp_sni_status)st)) > 10);
}

/* The first flight of a real TLS client (OpenSSL, TLS 1.2 + 1.3 offers, its default
 * extensions), with and without a server name. */
static size_t openssl_hello(const char *name, uint8_t *buf, size_t cap)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl;
	BIO *rb, *wb;
	int n;

	assert_non_null(ctx);
	ssl = SSL_new(ctx);
	assert_non_null(ssl);
	rb = BIO_new(BIO_s_mem());
	wb = BIO_new(BIO_s_mem());
	SSL_set_bio(ssl, rb, wb);
	if (name)
		assert_int_equal(SSL_set_tlsext_host_name(ssl, name), 1);
	SSL_set_connect_state(ssl);
	assert_true(SSL_do_handshake(ssl) <= 0); /* wants to read the ServerHello */
	n = BIO_read(wb, buf, (int)cap);
	assert_true(n > 0);
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	return (size_t)n;
}

static void test_real_openssl_hellos(void **state)
{
	uint8_t buf[EGP_HELLO_MAX];
	char out[EGP_HOST_MAX + 1];
	size_t n;

	(void)state;
	n = openssl_hello("allowed.example", buf, sizeof(buf));
	assert_int_equal(egp_sni_from_client_hello(buf, n, out, sizeof(out)), EGP_SNI_OK);
	assert_string_equal(out, "allowed.example");
	for (size_t i = 0; i < n; i++)
		assert_int_equal(egp_sni_from_client_hello(buf, i, out, sizeof(out)),
				 EGP_SNI_NEED_MORE);
	n = openssl_hello(NULL, buf, sizeof(buf));
	assert_int_equal(egp_sni_from_client_hello(buf, n, out, sizeof(out)), EGP_SNI_MISSING);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sni_is_read_and_compared),
	    cmocka_unit_test(test_sni_match_has_no_trailing_dot_or_prefix_games),
	    cmocka_unit_test(test_no_sni_is_missing),
	    cmocka_unit_test(test_every_truncation_needs_more),
	    cmocka_unit_test(test_lying_lengths_are_refused),
	    cmocka_unit_test(test_specific_lies),
	    cmocka_unit_test(test_two_names_or_odd_names_are_malformed),
	    cmocka_unit_test(test_huge_hellos_are_too_big),
	    cmocka_unit_test(test_not_tls_and_ech),
	    cmocka_unit_test(test_real_openssl_hellos),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

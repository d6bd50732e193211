/* SPDX-License-Identifier: MIT */
/* sandbox/egress_policy.c - the egress allow-list policy (see egress_policy.h).
 *
 * Only libc and common/err: this file is also compiled into the proxy program, which runs in a
 * container of the sandbox image where autopatch's other libraries are not installed.
 */
#include "sandbox/egress_policy.h"

#include "common/err.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool all_digits(const char *s, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isdigit((unsigned char)s[i]))
			return false;
	return true;
}

/* WHATWG URL "ends in a number": the last label is decimal digits or 0x followed by hex. */
static bool label_is_numeric(const char *s, size_t n)
{
	if (all_digits(s, n))
		return true;
	if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		for (size_t i = 2; i < n; i++)
			if (!isxdigit((unsigned char)s[i]))
				return false;
		return true;
	}
	return false;
}

bool egp_is_ip_literal(const char *host)
{
	char tmp[EGP_HOST_MAX + 2];
	struct in_addr a4;
	struct in6_addr a6;
	size_t n = strlen(host);
	const char *last;

	if (strpbrk(host, ":[]%"))
		return true; /* IPv6 in any form, or a zone index: never a DNS name */
	if (n == 0 || n > EGP_HOST_MAX + 1)
		return false;
	memcpy(tmp, host, n + 1);
	if (tmp[n - 1] == '.')
		tmp[--n] = '\0';
	if (n == 0)
		return false;
	if (inet_aton(tmp, &a4) || inet_pton(AF_INET6, tmp, &a6) == 1)
		return true;
	last = strrchr(tmp, '.');
	last = last ? last + 1 : tmp;
	return label_is_numeric(last, strlen(last));
}

int egp_host_normalize(char out[EGP_HOST_MAX + 1], const char *host, size_t len,
		       const char **reason)
{
	char raw[EGP_HOST_MAX + 2];
	size_t label = 0;

	*reason = NULL;
	out[0] = '\0';
	if (len == 0) {
		*reason = "empty host name";
		return AP_EINVAL;
	}
	if (len > EGP_HOST_MAX + 1) {
		*reason = "host name longer than 253 bytes";
		return AP_EINVAL;
	}
	memcpy(raw, host, len);
	raw[len] = '\0';
	if (memchr(host, '\0', len)) {
		*reason = "NUL byte in host name";
		return AP_EINVAL;
	}
	if (egp_is_ip_literal(raw)) {
		*reason = "IP address literals are not allowed: name the host";
		return AP_EDENIED;
	}
	if (raw[len - 1] == '.')
		raw[--len] = '\0';
	if (len == 0 || len > EGP_HOST_MAX) {
		*reason = "not a valid host name";
		return AP_EINVAL;
	}
	for (size_t i = 0; i <= len; i++) {
		unsigned char c = (unsigned char)raw[i];

		if (c == '.' || c == '\0') {
			if (label == 0 || label > 63 || raw[i - 1] == '-' ||
			    raw[i - label] == '-') {
				*reason = "not a valid host name";
				out[0] = '\0';
				return AP_EINVAL;
			}
			label = 0;
			out[i] = (char)c;
			continue;
		}
		if (!isalnum(c) && c != '-' && c != '_') {
			*reason = "not a valid host name";
			out[0] = '\0';
			return AP_EINVAL;
		}
		out[i] = (char)tolower(c);
		label++;
	}
	return 0;
}

static int parse_port(const char *s, size_t n, uint16_t *out)
{
	unsigned long v = 0;

	if (!all_digits(s, n) || n > 5)
		return AP_EINVAL;
	for (size_t i = 0; i < n; i++)
		v = v * 10 + (unsigned long)(s[i] - '0');
	if (v == 0 || v > 65535)
		return AP_EINVAL;
	*out = (uint16_t)v;
	return 0;
}

int egp_rule_parse(egp_rule *out, const char *entry)
{
	const char *colon, *host = entry, *reason;
	int rc;

	memset(out, 0, sizeof(*out));
	colon = strrchr(entry, ':');
	if (!colon)
		return ap_error_set(AP_EINVAL,
				    "egress allow-list entry \"%.80s\" has no port "
				    "(write host:port)",
				    entry);
	if (parse_port(colon + 1, strlen(colon + 1), &out->port) < 0)
		return ap_error_set(AP_EINVAL, "egress allow-list entry \"%.80s\": bad port",
				    entry);
	if (strncmp(host, "*.", 2) == 0) {
		out->subdomains = true;
		host += 2;
	}
	rc = egp_host_normalize(out->host, host, (size_t)(colon - host), &reason);
	if (rc < 0)
		return ap_error_set(AP_EINVAL, "egress allow-list entry \"%.80s\": %s", entry,
				    reason);
	return 0;
}

bool egp_rule_match(const egp_rule *r, const char *host, uint16_t port)
{
	size_t hn, rn;

	if (port != r->port)
		return false;
	if (!r->subdomains)
		return strcmp(host, r->host) == 0;
	hn = strlen(host);
	rn = strlen(r->host);
	return hn > rn + 1 && host[hn - rn - 1] == '.' && strcmp(host + hn - rn, r->host) == 0;
}

bool egp_allowed(const egp_rule *rules, size_t n, const char *host, uint16_t port)
{
	for (size_t i = 0; i < n; i++)
		if (egp_rule_match(&rules[i], host, port))
			return true;
	return false;
}

static bool in4(uint32_t a, uint32_t net, unsigned prefix)
{
	uint32_t mask = prefix ? ~0u << (32 - prefix) : 0;

	return (a & mask) == net;
}

static enum egp_class classify4(uint32_t a)
{
	if (a == 0xffffffffu)
		return EGP_BROADCAST;
	if (in4(a, 0x00000000u, 8))
		return EGP_UNSPECIFIED;
	if (in4(a, 0x7f000000u, 8))
		return EGP_LOOPBACK;
	if (in4(a, 0xa9fe0000u, 16))
		return EGP_LINK_LOCAL;
	if (in4(a, 0xe0000000u, 4))
		return EGP_MULTICAST;
	if (in4(a, 0x0a000000u, 8) || in4(a, 0xac100000u, 12) || in4(a, 0xc0a80000u, 16))
		return EGP_PRIVATE;
	if (in4(a, 0x64400000u, 10))
		return EGP_CGNAT;
	if (in4(a, 0xc0000000u, 24) || /* 192.0.0.0/24 IETF protocol assignments */
	    in4(a, 0xc0000200u, 24) || /* 192.0.2.0/24 TEST-NET-1 */
	    in4(a, 0xc0586300u, 24) || /* 192.88.99.0/24 6to4 relay anycast */
	    in4(a, 0xc6120000u, 15) || /* 198.18.0.0/15 benchmarking */
	    in4(a, 0xc6336400u, 24) || /* 198.51.100.0/24 TEST-NET-2 */
	    in4(a, 0xcb007100u, 24) || /* 203.0.113.0/24 TEST-NET-3 */
	    in4(a, 0xf0000000u, 4))    /* 240.0.0.0/4 */
		return EGP_RESERVED;
	return EGP_PUBLIC;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static bool prefix_eq(const uint8_t *a, const uint8_t *net, unsigned prefix)
{
	unsigned full = prefix / 8, rest = prefix % 8;

	if (memcmp(a, net, full) != 0)
		return false;
	if (rest == 0)
		return true;
	return ((a[full] ^ net[full]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

static enum egp_class classify6(const uint8_t *a)
{
	static const uint8_t zero[16];
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b};
	static const uint8_t nat64_local[6] = {0, 0x64, 0xff, 0x9b, 0, 1};
	static const uint8_t teredo[4] = {0x20, 0x01, 0, 0};
	static const uint8_t doc[4] = {0x20, 0x01, 0x0d, 0xb8};
	static const uint8_t discard[8] = {0x01, 0x00};

	if (memcmp(a, zero, 16) == 0)
		return EGP_UNSPECIFIED;
	if (memcmp(a, zero, 15) == 0 && a[15] == 1)
		return EGP_LOOPBACK;
	if (memcmp(a, mapped, 12) == 0 || memcmp(a, nat64, 12) == 0)
		return classify4(be32(a + 12));
	if (a[0] == 0x20 && a[1] == 0x02) /* 2002::/16 6to4 carries an IPv4 address */
		return classify4(be32(a + 2));
	if (prefix_eq(a, nat64_local, 48))
		return EGP_PRIVATE;
	if (a[0] == 0xff)
		return EGP_MULTICAST;
	if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
		return EGP_LINK_LOCAL;
	if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0)
		return EGP_PRIVATE; /* fec0::/10, deprecated site-local */
	if ((a[0] & 0xfe) == 0xfc)
		return EGP_ULA;
	if (prefix_eq(a, teredo, 32) || prefix_eq(a, doc, 32) || prefix_eq(a, discard, 64))
		return EGP_RESERVED;
	if ((a[0] & 0xe0) == 0x20)
		return EGP_PUBLIC; /* 2000::/3, global unicast */
	return EGP_RESERVED;
}

enum egp_class egp_classify(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

		return classify4(ntohl(s4->sin_addr.s_addr));
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

		return classify6(s6->sin6_addr.s6_addr);
	}
	return EGP_RESERVED;
}

const char *egp_class_name(enum egp_class c)
{
	static const char *names[] = {"public",	     "private",	 "CGNAT",      "unique-local",
				      "reserved",    "loopback", "link-local", "multicast",
				      "unspecified", "broadcast"};

	if ((unsigned)c < sizeof(names) / sizeof(names[0]))
		return names[c];
	return "unknown";
}

int egp_net_parse(egp_net *out, const char *cidr)
{
	char addr[64];
	const char *slash = strchr(cidr, '/');
	size_t alen;
	unsigned long prefix;
	char *end;
	unsigned max;

	memset(out, 0, sizeof(*out));
	if (!slash || (alen = (size_t)(slash - cidr)) == 0 || alen >= sizeof(addr))
		return ap_error_set(AP_EINVAL, "egress network \"%.80s\" is not address/prefix",
				    cidr);
	memcpy(addr, cidr, alen);
	addr[alen] = '\0';
	if (inet_pton(AF_INET, addr, out->addr) == 1) {
		out->family = AF_INET;
		max = 32;
	} else if (inet_pton(AF_INET6, addr, out->addr) == 1) {
		out->family = AF_INET6;
		max = 128;
	} else {
		return ap_error_set(AP_EINVAL, "egress network \"%.80s\": bad address", cidr);
	}
	if (!all_digits(slash + 1, strlen(slash + 1)) || strlen(slash + 1) > 3)
		return ap_error_set(AP_EINVAL, "egress network \"%.80s\": bad prefix", cidr);
	prefix = strtoul(slash + 1, &end, 10);
	if (prefix > max)
		return ap_error_set(AP_EINVAL, "egress network \"%.80s\": prefix above %u", cidr,
				    max);
	out->prefix = (unsigned)prefix;
	for (unsigned bit = out->prefix; bit < max; bit++)
		if (out->addr[bit / 8] & (0x80 >> (bit % 8)))
			return ap_error_set(AP_EINVAL, "egress network \"%.80s\" has host bits set",
					    cidr);
	return 0;
}

bool egp_net_contains(const egp_net *net, const struct sockaddr *sa)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	const uint8_t *a;

	if (sa->sa_family == AF_INET) {
		if (net->family != AF_INET)
			return false;
		a = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr.s_addr;
		return prefix_eq(a, net->addr, net->prefix);
	}
	if (sa->sa_family != AF_INET6)
		return false;
	a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
	if (net->family == AF_INET6)
		return prefix_eq(a, net->addr, net->prefix);
	return memcmp(a, mapped, 12) == 0 && prefix_eq(a + 12, net->addr, net->prefix);
}

bool egp_class_openable(enum egp_class c)
{
	return c == EGP_PRIVATE || c == EGP_CGNAT || c == EGP_ULA || c == EGP_RESERVED;
}

int egp_addr_allowed(const struct sockaddr *sa, const egp_net *nets, size_t n, enum egp_class *cls)
{
	*cls = egp_classify(sa);
	if (*cls == EGP_PUBLIC)
		return 0;
	if (!egp_class_openable(*cls))
		return AP_EDENIED; /* loopback, link-local, multicast, unspecified, broadcast */
	for (size_t i = 0; i < n; i++)
		if (egp_net_contains(&nets[i], sa))
			return 0;
	return AP_EDENIED;
}

static bool is_tchar(unsigned char c)
{
	return isupper(c) || c == '-' || c == '_';
}

/* Split an authority "host[:port]" and normalise the host. */
static int parse_authority(egp_target *out, const char *a, size_t n, uint16_t def_port,
			   const char **reason)
{
	const char *colon = NULL;
	size_t hn = n;

	if (n > 0 && a[0] == '[') {
		*reason = "IP address literals are not allowed: name the host";
		return AP_EDENIED;
	}
	if (memchr(a, '@', n)) {
		*reason = "user information in the request target is not allowed";
		return AP_EINVAL;
	}
	for (size_t i = n; i > 0; i--) {
		if (a[i - 1] == ':') {
			colon = a + i - 1;
			break;
		}
	}
	if (colon && memchr(a, ':', (size_t)(colon - a))) {
		/* more than one colon: a bare IPv6 address, possibly with a port */
		*reason = "IP address literals are not allowed: name the host";
		return AP_EDENIED;
	}
	if (colon) {
		hn = (size_t)(colon - a);
		if (parse_port(colon + 1, n - hn - 1, &out->port) < 0) {
			*reason = "bad port in the request target";
			return AP_EINVAL;
		}
	} else if (def_port) {
		out->port = def_port;
	} else {
		*reason = "CONNECT needs host:port";
		return AP_EINVAL;
	}
	return egp_host_normalize(out->host, a, hn, reason);
}

int egp_parse_request_line(egp_target *out, const char *line, size_t len, const char **reason)
{
	const char *sp1, *sp2, *target, *end = line + len;
	size_t mlen, tlen;

	memset(out, 0, sizeof(*out));
	*reason = NULL;
	sp1 = memchr(line, ' ', len);
	if (!sp1) {
		*reason = "malformed request line";
		return AP_EINVAL;
	}
	mlen = (size_t)(sp1 - line);
	target = sp1 + 1;
	sp2 = memchr(target, ' ', (size_t)(end - target));
	if (!sp2 || mlen == 0 || mlen >= sizeof(out->method) || (size_t)(end - sp2 - 1) != 8 ||
	    memcmp(sp2 + 1, "HTTP/1.", 7) != 0 || (sp2[8] != '0' && sp2[8] != '1')) {
		*reason = "malformed request line";
		return AP_EINVAL;
	}
	for (size_t i = 0; i < mlen; i++) {
		if (!is_tchar((unsigned char)line[i])) {
			*reason = "malformed request method";
			return AP_EINVAL;
		}
	}
	memcpy(out->method, line, mlen);
	out->method[mlen] = '\0';
	tlen = (size_t)(sp2 - target);
	if (tlen == 0) {
		*reason = "malformed request line";
		return AP_EINVAL;
	}
	for (size_t i = 0; i < tlen; i++) {
		unsigned char c = (unsigned char)target[i];

		if (c <= 0x20 || c >= 0x7f) {
			*reason = "control or non-ASCII byte in the request target";
			return AP_EINVAL;
		}
	}
	if (strcmp(out->method, "CONNECT") == 0) {
		out->connect = true;
		return parse_authority(out, target, tlen, 0, reason);
	}
	if (tlen >= 8 && strncasecmp(target, "https://", 8) == 0) {
		*reason = "https:// request targets are not proxied: use CONNECT";
		return AP_EINVAL;
	}
	if (tlen < 7 || strncasecmp(target, "http://", 7) != 0) {
		*reason = "only CONNECT and absolute http:// request targets are proxied";
		return AP_EINVAL;
	}
	{
		const char *auth = target + 7, *tend = target + tlen, *p = auth;

		while (p < tend && *p != '/' && *p != '?' && *p != '#')
			p++;
		if (p < tend && *p == '#') {
			*reason = "fragment in the request target";
			return AP_EINVAL;
		}
		out->path_off = (size_t)(p - line);
		out->path_len = (size_t)(tend - p);
		return parse_authority(out, auth, (size_t)(p - auth), 80, reason);
	}
}

/* --- the server name of a TLS ClientHello ------------------------------------------------ */

#define TLS_RECORD_HANDSHAKE	   22
#define TLS_RECORD_MAX		   16384 /* largest TLSPlaintext fragment */
#define TLS_HANDSHAKE_CLIENT_HELLO 1
#define TLS_EXT_SERVER_NAME	   0x0000
#define TLS_EXT_ECH		   0xfe0d /* encrypted_client_hello */
#define TLS_EXT_ESNI		   0xffce /* encrypted_server_name (draft) */
#define TLS_SNI_HOST_NAME	   0

/* Reads the reassembled handshake message: have bytes arrived, pos of them read. Invariant:
 * pos <= have, and pos <= every limit passed in. */
struct hello_rd {
	const uint8_t *p;
	size_t have;
	size_t pos;
};

/* Take n bytes that must end at or before limit (the end an enclosing length declared):
 * MALFORMED when they would not, NEED_MORE when they have not arrived yet. */
static enum egp_sni_status rd_take(struct hello_rd *r, size_t n, size_t limit, const uint8_t **out)
{
	if (n > limit - r->pos)
		return EGP_SNI_MALFORMED;
	if (n > r->have - r->pos)
		return EGP_SNI_NEED_MORE;
	*out = r->p + r->pos;
	r->pos += n;
	return EGP_SNI_OK;
}

/* A big-endian number of k (1..3) bytes. */
static enum egp_sni_status rd_num(struct hello_rd *r, size_t k, size_t limit, size_t *v)
{
	const uint8_t *b;
	enum egp_sni_status st = rd_take(r, k, limit, &b);

	*v = 0;
	for (size_t i = 0; st == EGP_SNI_OK && i < k; i++)
		*v = *v << 8 | b[i];
	return st;
}

/* A length of k bytes and the block it announces, which must fit below limit: *end. */
static enum egp_sni_status rd_block(struct hello_rd *r, size_t k, size_t limit, size_t *end)
{
	size_t n;
	enum egp_sni_status st = rd_num(r, k, limit, &n);

	if (st != EGP_SNI_OK)
		return st;
	if (n > limit - r->pos)
		return EGP_SNI_MALFORMED;
	*end = r->pos + n;
	return EGP_SNI_OK;
}

/* The server_name extension's body, [r->pos, end): a ServerNameList with exactly one
 * host_name entry. */
static enum egp_sni_status rd_server_name(struct hello_rd *r, size_t end, const uint8_t **name,
					  size_t *name_len)
{
	size_t list_end, name_end, type;
	enum egp_sni_status st;

	*name = NULL;
	if ((st = rd_block(r, 2, end, &list_end)) != EGP_SNI_OK)
		return st;
	if (list_end != end || r->pos == list_end)
		return EGP_SNI_MALFORMED;
	while (r->pos < list_end) {
		const uint8_t *b;

		if ((st = rd_num(r, 1, list_end, &type)) != EGP_SNI_OK)
			return st;
		if (type != TLS_SNI_HOST_NAME)
			return EGP_SNI_MALFORMED;
		if ((st = rd_block(r, 2, list_end, &name_end)) != EGP_SNI_OK)
			return st;
		*name_len = name_end - r->pos;
		if ((st = rd_take(r, *name_len, name_end, &b)) != EGP_SNI_OK)
			return st;
		if (*name || *name_len == 0 || *name_len > EGP_HOST_MAX)
			return EGP_SNI_MALFORMED; /* a second entry, or not a host name */
		for (size_t i = 0; i < *name_len; i++)
			if (b[i] <= 0x20 || b[i] >= 0x7f)
				return EGP_SNI_MALFORMED;
		*name = b;
	}
	return EGP_SNI_OK;
}

/* The ClientHello body after its 4-byte handshake header, up to limit. */
static enum egp_sni_status rd_client_hello(struct hello_rd *r, size_t limit, const uint8_t **name,
					   size_t *name_len)
{
	uint8_t seen[65536 / 8];
	const uint8_t *b;
	size_t end, ext_end, type;
	bool ech = false;
	enum egp_sni_status st;

	*name = NULL;
	if ((st = rd_take(r, 2, limit, &b)) != EGP_SNI_OK)
		return st;
	if (b[0] != 3)
		return EGP_SNI_MALFORMED;		    /* legacy_version 3.x */
	if ((st = rd_take(r, 32, limit, &b)) != EGP_SNI_OK) /* random */
		return st;
	if ((st = rd_block(r, 1, limit, &end)) != EGP_SNI_OK)
		return st;
	if (end - r->pos > 32)
		return EGP_SNI_MALFORMED;
	if ((st = rd_take(r, end - r->pos, end, &b)) != EGP_SNI_OK) /* session id */
		return st;
	if ((st = rd_block(r, 2, limit, &end)) != EGP_SNI_OK)
		return st;
	if (end - r->pos < 2 || (end - r->pos) % 2 != 0)
		return EGP_SNI_MALFORMED;
	if ((st = rd_take(r, end - r->pos, end, &b)) != EGP_SNI_OK) /* cipher suites */
		return st;
	if ((st = rd_block(r, 1, limit, &end)) != EGP_SNI_OK)
		return st;
	if (end == r->pos)
		return EGP_SNI_MALFORMED;
	if ((st = rd_take(r, end - r->pos, end, &b)) != EGP_SNI_OK) /* compression methods */
		return st;
	if (r->pos == limit)
		return EGP_SNI_MISSING; /* no extensions at all */
	if ((st = rd_block(r, 2, limit, &ext_end)) != EGP_SNI_OK)
		return st;
	if (ext_end != limit)
		return EGP_SNI_MALFORMED; /* nothing may follow the extensions */
	memset(seen, 0, sizeof(seen));
	while (r->pos < ext_end) {
		if ((st = rd_num(r, 2, ext_end, &type)) != EGP_SNI_OK ||
		    (st = rd_block(r, 2, ext_end, &end)) != EGP_SNI_OK)
			return st;
		if (seen[type / 8] & (1u << (type % 8)))
			return EGP_SNI_MALFORMED; /* the same extension twice */
		seen[type / 8] |= (uint8_t)(1u << (type % 8));
		if (type == TLS_EXT_ECH || type == TLS_EXT_ESNI)
			ech = true;
		if (type == TLS_EXT_SERVER_NAME)
			st = rd_server_name(r, end, name, name_len);
		else
			st = rd_take(r, end - r->pos, end, &b);
		if (st != EGP_SNI_OK)
			return st;
	}
	if (ech)
		return EGP_SNI_ECH;
	return *name ? EGP_SNI_OK : EGP_SNI_MISSING;
}

enum egp_sni_status egp_sni_from_client_hello(const uint8_t *buf, size_t len, char *out,
					      size_t outcap)
{
	uint8_t hs[EGP_HELLO_MAX];
	size_t pos = 0, records = 0, declared = 0, hs_have = 0, hs_need = 0, name_len = 0;
	const uint8_t *name = NULL;
	struct hello_rd r;
	enum egp_sni_status st;

	if (outcap == 0)
		return EGP_SNI_MALFORMED;
	out[0] = '\0';
	if (outcap < EGP_HOST_MAX + 1)
		return EGP_SNI_MALFORMED;
	/* The records: gather their payloads until the handshake message is complete. Only the
	 * very first bytes decide "not TLS"; after them a wrong byte is a malformed hello. */
	while (pos < len && (hs_need == 0 || hs_have < hs_need)) {
		enum egp_sni_status wrong = pos == 0 ? EGP_SNI_NOT_TLS : EGP_SNI_MALFORMED;
		size_t rlen, take;

		if (buf[pos] != TLS_RECORD_HANDSHAKE)
			return wrong;
		if (len - pos < 2)
			break;
		if (buf[pos + 1] != 3)
			return wrong;
		if (len - pos < 3)
			break;
		if (buf[pos + 2] > 4)
			return wrong;
		if (len - pos < 5)
			break;
		rlen = (size_t)buf[pos + 3] << 8 | buf[pos + 4];
		if (rlen == 0 || rlen > TLS_RECORD_MAX)
			return EGP_SNI_MALFORMED;
		records++;
		declared += rlen;
		if (records * 5 + declared > EGP_HELLO_MAX)
			return EGP_SNI_TOO_BIG;
		pos += 5;
		take = rlen < len - pos ? rlen : len - pos;
		memcpy(hs + hs_have, buf + pos, take); /* hs_have + take <= declared: fits */
		hs_have += take;
		pos += take;
		if (hs_have >= 1 && hs[0] != TLS_HANDSHAKE_CLIENT_HELLO)
			return records == 1 ? EGP_SNI_NOT_TLS : EGP_SNI_MALFORMED;
		if (hs_need == 0 && hs_have >= 4) {
			hs_need = 4 + ((size_t)hs[1] << 16 | (size_t)hs[2] << 8 | hs[3]);
			if (hs_need == 4)
				return EGP_SNI_MALFORMED;
		}
		if (hs_need && declared > hs_need)
			return EGP_SNI_MALFORMED; /* a record carries more than the ClientHello */
		if (hs_need && records * 5 + hs_need > EGP_HELLO_MAX)
			return EGP_SNI_TOO_BIG;
	}
	if (hs_need == 0)
		return EGP_SNI_NEED_MORE;
	r = (struct hello_rd){.p = hs, .have = hs_have, .pos = 4};
	st = rd_client_hello(&r, hs_need, &name, &name_len);
	if (st != EGP_SNI_OK)
		return st;
	memcpy(out, name, name_len);
	out[name_len] = '\0';
	return EGP_SNI_OK;
}

const char *egp_sni_status_reason(enum egp_sni_status st)
{
	switch (st) {
	case EGP_SNI_OK:
		return "the TLS ClientHello names the CONNECT host";
	case EGP_SNI_NEED_MORE:
		return "no complete TLS ClientHello arrived in time";
	case EGP_SNI_NOT_TLS:
		return "the tunnel did not start with a TLS ClientHello (CONNECT carries TLS only)";
	case EGP_SNI_MALFORMED:
		return "malformed TLS ClientHello";
	case EGP_SNI_MISSING:
		return "the TLS ClientHello names no server (SNI missing)";
	case EGP_SNI_ECH:
		return "the TLS ClientHello hides its server name (encrypted ClientHello)";
	case EGP_SNI_TOO_BIG:
		return "TLS ClientHello larger than 16 KiB";
	}
	return "malformed TLS ClientHello";
}

bool egp_sni_matches(const char *sni, const char *host)
{
	size_t i = 0;

	for (; sni[i] && host[i]; i++) {
		unsigned char a = (unsigned char)sni[i], b = (unsigned char)host[i];

		if (a >= 'A' && a <= 'Z')
			a = (unsigned char)(a - 'A' + 'a');
		if (b >= 'A' && b <= 'Z')
			b = (unsigned char)(b - 'A' + 'a');
		if (a != b)
			return false;
	}
	return sni[i] == '\0' && host[i] == '\0' && i > 0;
}

/* SPDX-License-Identifier: MIT */
/* sandbox/egress_policy.h - the egress allow-list policy: which host:port a sandbox may reach.
 *
 * Pure functions, no I/O and no dependency beyond libc and common/err, so the same code is
 * linked into the host (to validate the allow-list before anything is created) and into the
 * stand-alone proxy program that runs in the proxy container (sandbox/egress_proxy.c).
 *
 * The policy, in the order the proxy applies it:
 *   1. the request names a host by DNS name: IP literals are refused in every spelling
 *      (dotted, short "127.1", decimal "2130706433", hex "0x7f000001", octal, IPv6, bracketed);
 *   2. host:port is on the allow-list ("host:port" exact, or "*.suffix:port" for any name
 *      strictly below suffix);
 *   3. every address the name resolves to is a public unicast address; loopback, link-local
 *      (169.254/16 with the cloud metadata address, fe80::/10), multicast, unspecified and
 *      broadcast are always refused; private (RFC 1918, fec0::/10), CGNAT (100.64/10), IPv6 ULA
 *      (fc00::/7) and reserved/documentation ranges are refused unless the operator listed a
 *      network containing the address (a package mirror on the LAN).
 */
#ifndef AP_EGRESS_POLICY_H
#define AP_EGRESS_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define EGP_HOST_MAX 253 /* longest DNS name, without the trailing dot */

/* One allow-list entry. */
typedef struct egp_rule {
	char host[EGP_HOST_MAX + 1]; /* lower case, no trailing dot, no "*." */
	bool subdomains;	     /* entry was "*.host:port": names below host, not host */
	uint16_t port;
} egp_rule;

/* An operator-listed network whose private addresses may be reached ("10.20.0.0/16"). */
typedef struct egp_net {
	int family;	  /* AF_INET or AF_INET6 */
	uint8_t addr[16]; /* network address, 4 or 16 bytes used */
	unsigned prefix;  /* prefix length */
} egp_net;

enum egp_class {
	EGP_PUBLIC,	 /* global unicast */
	EGP_PRIVATE,	 /* RFC 1918, IPv6 site-local, local-use NAT64 */
	EGP_CGNAT,	 /* 100.64.0.0/10 */
	EGP_ULA,	 /* fc00::/7 */
	EGP_RESERVED,	 /* documentation, benchmarking, 240/4, Teredo, other special ranges */
	EGP_LOOPBACK,	 /* 127/8, ::1 */
	EGP_LINK_LOCAL,	 /* 169.254/16 (metadata), fe80::/10 */
	EGP_MULTICAST,	 /* 224/4, ff00::/8 */
	EGP_UNSPECIFIED, /* 0.0.0.0/8, :: */
	EGP_BROADCAST,	 /* 255.255.255.255 */
};

/* What a proxy request asks for. */
typedef struct egp_target {
	bool connect;	 /* CONNECT host:port (a tunnel) rather than absolute-URI HTTP */
	char method[16]; /* request method, upper case */
	char host[EGP_HOST_MAX + 1]; /* normalised host name */
	uint16_t port;
	size_t path_off; /* absolute-URI: offset of the path in the request line */
	size_t path_len; /* its length (0 means "/") */
} egp_target;

/* Parse an allow-list entry "host:port" or "*.suffix:port" into out. AP_EINVAL with a sentence
 * (ap_error_last) for anything else, including IP literals and missing or zero ports. */
int egp_rule_parse(egp_rule *out, const char *entry);

/* True when host is an IP address in any spelling a resolver or URL parser would accept:
 * dotted quad and its short, decimal, octal and hex forms, a name whose last label is numeric,
 * IPv6 with or without brackets or zone. Applies to the raw, un-normalised host. */
bool egp_is_ip_literal(const char *host);

/* Normalise host[0..len) into out (lower case, one trailing dot removed). Returns 0, AP_EDENIED
 * for an IP literal, AP_EINVAL for anything that is not a DNS name; *reason then points to a
 * static sentence. */
int egp_host_normalize(char out[EGP_HOST_MAX + 1], const char *host, size_t len,
		       const char **reason);

/* Does the rule allow host (normalised) on port? */
bool egp_rule_match(const egp_rule *r, const char *host, uint16_t port);

/* Does any of the n rules allow host:port? */
bool egp_allowed(const egp_rule *rules, size_t n, const char *host, uint16_t port);

/* Classify an AF_INET or AF_INET6 address. IPv4-mapped, NAT64 and 6to4 IPv6 addresses are
 * classified by the IPv4 address they carry. Other families are EGP_RESERVED. */
enum egp_class egp_classify(const struct sockaddr *sa);

/* "public", "private", "loopback", ... */
const char *egp_class_name(enum egp_class c);

/* Parse "a.b.c.d/n" or "v6/n" (host bits must be zero). AP_EINVAL with a sentence otherwise. */
int egp_net_parse(egp_net *out, const char *cidr);

/* Is the address inside the network? IPv4-mapped IPv6 addresses match IPv4 networks. */
bool egp_net_contains(const egp_net *net, const struct sockaddr *sa);

/* May the proxy connect to this resolved address? Public addresses yes; private, CGNAT, ULA and
 * reserved ones only inside one of the n operator networks; loopback, link-local, multicast,
 * unspecified and broadcast never. Returns 0 or AP_EDENIED with *cls set to the class. */
int egp_addr_allowed(const struct sockaddr *sa, const egp_net *nets, size_t n, enum egp_class *cls);

/* Parse a proxy request line (without CRLF): "CONNECT host:port HTTP/1.x" or
 * "METHOD http://host[:port][/path] HTTP/1.x". Returns 0, AP_EINVAL for a malformed line or
 * unsupported form (origin-form, https:// absolute-URI, userinfo), AP_EDENIED for an IP literal;
 * *reason then points to a static sentence. */
int egp_parse_request_line(egp_target *out, const char *line, size_t len, const char **reason);

#endif

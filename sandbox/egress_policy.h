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
 *      network containing the address (a package mirror on the LAN);
 *   4. a CONNECT tunnel, on any port, starts with a TLS ClientHello whose server name (SNI)
 *      is the CONNECT host (egp_sni_from_client_hello, egp_sni_matches): no domain fronting
 *      through an allowed address, no other protocol in the tunnel.
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

/* Can an operator network (AUTOPATCH_EGRESS_ALLOW_NETS) open this class? True for private,
 * CGNAT, ULA and reserved; false for public (always open) and the never-reachable classes. */
bool egp_class_openable(enum egp_class c);

/* May the proxy connect to this resolved address? Public addresses yes; private, CGNAT, ULA and
 * reserved ones only inside one of the n operator networks; loopback, link-local, multicast,
 * unspecified and broadcast never. Returns 0 or AP_EDENIED with *cls set to the class. */
int egp_addr_allowed(const struct sockaddr *sa, const egp_net *nets, size_t n, enum egp_class *cls);

/* Parse a proxy request line (without CRLF): "CONNECT host:port HTTP/1.x" or
 * "METHOD http://host[:port][/path] HTTP/1.x". Returns 0, AP_EINVAL for a malformed line or
 * unsupported form (origin-form, https:// absolute-URI, userinfo), AP_EDENIED for an IP literal;
 * *reason then points to a static sentence. */
int egp_parse_request_line(egp_target *out, const char *line, size_t len, const char **reason);

/*
 * The server name a TLS ClientHello asks for (SNI), so the proxy can check that a CONNECT
 * tunnel goes to the host it was opened for and not to another site behind the same address
 * (domain fronting). buf[0..len) is what the client sent after the tunnel opened, possibly
 * only its beginning.
 *
 * The parser reads the TLS records (type 22, version 3.x, 1..16384 bytes each; a ClientHello
 * may be fragmented across several), reassembles the handshake message, and walks it:
 * handshake header (type 1), legacy version, random, session id (<= 32), cipher suites (even,
 * >= 2), compression methods (>= 1), extensions (their block ends exactly where the message
 * does, which ends exactly where a record does; no extension type twice). The server_name
 * extension must hold exactly one entry, of type host_name, 1..253 printable ASCII bytes
 * other than a space. Every length is checked against the one that encloses it before
 * anything is read, and against what has arrived.
 *
 * Returns:
 *   EGP_SNI_OK        *out holds the name (NUL-terminated, as sent: not lower-cased);
 *   EGP_SNI_NEED_MORE buf is a proper prefix of what could still be a valid ClientHello;
 *                     every proper prefix of a valid ClientHello gives this;
 *   EGP_SNI_NOT_TLS   the first bytes are not a TLS handshake record starting a ClientHello;
 *   EGP_SNI_MALFORMED a length lies, a field is out of range, or the name is not a name;
 *   EGP_SNI_MISSING   a valid ClientHello without a server_name extension;
 *   EGP_SNI_ECH       it carries encrypted_client_hello (or the ESNI draft), whose hidden
 *                     inner name the proxy cannot check;
 *   EGP_SNI_TOO_BIG   the ClientHello would need more than EGP_HELLO_MAX bytes.
 * out must hold at least EGP_HOST_MAX + 1 bytes (outcap smaller: EGP_SNI_MALFORMED); it is ""
 * unless the result is EGP_SNI_OK. Pure function: no allocation, ~24 KiB of stack.
 */
#define EGP_HELLO_MAX 16384 /* bytes of records a ClientHello may take, headers included */

enum egp_sni_status {
	EGP_SNI_OK,
	EGP_SNI_NEED_MORE,
	EGP_SNI_NOT_TLS,
	EGP_SNI_MALFORMED,
	EGP_SNI_MISSING,
	EGP_SNI_ECH,
	EGP_SNI_TOO_BIG,
};

enum egp_sni_status egp_sni_from_client_hello(const uint8_t *buf, size_t len, char *out,
					      size_t outcap);

/* A sentence for a refusal status ("the tunnel did not start with a TLS ClientHello", ...). */
const char *egp_sni_status_reason(enum egp_sni_status st);

/* Does the ClientHello's server name equal the CONNECT host (normalised, egp_host_normalize)?
 * ASCII case is ignored; nothing else is: a trailing dot, an IP literal or any other byte
 * difference is a mismatch. */
bool egp_sni_matches(const char *sni, const char *host);

#endif

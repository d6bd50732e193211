/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz_egress.c - libFuzzer target over the egress proxy's parsers, which read bytes
 * the sandbox controls: the request line, host names, allow-list entries, CIDRs and the TLS
 * ClientHello's server name (SNI).
 *
 * Checked invariants: an accepted request names a normalised, non-literal host with a port,
 * and its path lies inside the line; an accepted entry round-trips through the matcher. The
 * SNI parser returns a known status, a name of 1..253 printable bytes only with OK (and ""
 * otherwise), and is consistent as bytes arrive: once a prefix gets a verdict, the whole
 * input gets one too, and an OK prefix gives the same OK (the proxy parses a growing buffer).
 */
#include "sandbox/egress_policy.h"

#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static void check_host(const char *h)
{
	if (h[0] == '\0' || egp_is_ip_literal(h))
		abort();
	for (const char *p = h; *p; p++)
		if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '.' ||
		      *p == '-' || *p == '_'))
			abort();
}

static void check_sni(const uint8_t *data, size_t size)
{
	char name[EGP_HOST_MAX + 1], early[EGP_HOST_MAX + 1];
	size_t cut = size ? size * data[size - 1] / 256 : 0;
	enum egp_sni_status st = egp_sni_from_client_hello(data, size, name, sizeof(name));
	enum egp_sni_status st_cut = egp_sni_from_client_hello(data, cut, early, sizeof(early));

	if ((unsigned)st > EGP_SNI_TOO_BIG || (unsigned)st_cut > EGP_SNI_TOO_BIG)
		abort();
	if (st == EGP_SNI_OK) {
		size_t n = strlen(name);

		if (n == 0 || n > EGP_HOST_MAX || !egp_sni_matches(name, name))
			abort();
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)name[i] <= 0x20 || (unsigned char)name[i] >= 0x7f)
				abort();
	} else if (name[0] != '\0') {
		abort();
	}
	if (st_cut != EGP_SNI_NEED_MORE && st == EGP_SNI_NEED_MORE)
		abort(); /* more bytes undid a verdict */
	if (st_cut == EGP_SNI_OK && (st != EGP_SNI_OK || strcmp(name, early) != 0))
		abort(); /* more bytes changed an accepted name */
	if (st_cut != EGP_SNI_NEED_MORE && st_cut != EGP_SNI_OK && st == EGP_SNI_OK)
		abort(); /* more bytes turned a refusal into an accepted name */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	char host[EGP_HOST_MAX + 1];
	const char *reason;
	egp_target t;
	egp_rule r;
	egp_net n;

	check_sni(data, size);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	if (egp_parse_request_line(&t, s, size, &reason) == 0) {
		check_host(t.host);
		if (t.port == 0 || t.path_off + t.path_len > size)
			abort();
	} else if (!reason) {
		abort();
	}
	if (egp_host_normalize(host, s, size, &reason) == 0)
		check_host(host);
	if (egp_rule_parse(&r, s) == 0) {
		check_host(r.host);
		if (!r.subdomains && !egp_rule_match(&r, r.host, r.port))
			abort();
	}
	if (egp_net_parse(&n, s) == 0 && n.prefix > (n.family == AF_INET ? 32u : 128u))
		abort();
	free(s);
	return 0;
}

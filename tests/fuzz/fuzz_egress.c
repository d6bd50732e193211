/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz_egress.c - libFuzzer target over the egress proxy's parsers, which read bytes
 * the sandbox controls: the request line, host names, allow-list entries and CIDRs.
 *
 * Checked invariants: an accepted request names a normalised, non-literal host with a port,
 * and its path lies inside the line; an accepted entry round-trips through the matcher.
 */
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "sandbox/egress_policy.h"

static void check_host(const char *h)
{
	if (h[0] == '\0' || egp_is_ip_literal(h))
		abort();
	for (const char *p = h; *p; p++)
		if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '.' ||
		      *p == '-' || *p == '_'))
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	char host[EGP_HOST_MAX + 1];
	const char *reason;
	egp_target t;
	egp_rule r;
	egp_net n;

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

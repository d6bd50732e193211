/* SPDX-License-Identifier: MIT */
/* tests/sandbox/test_egress_policy.c - the egress allow-list policy: entries, host:port
 * matching, IP literals in every spelling, address classes, request lines. */
#include "common/err.h"
#include "sandbox/egress_policy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

static struct sockaddr_storage addr(const char *text)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, text, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
		ss.ss_family = AF_INET;
	} else {
		assert_int_equal(
		    inet_pton(AF_INET6, text, &((struct sockaddr_in6 *)&ss)->sin6_addr), 1);
		ss.ss_family = AF_INET6;
	}
	return ss;
}

static enum egp_class cls(const char *text)
{
	struct sockaddr_storage ss = addr(text);

	return egp_classify((struct sockaddr *)&ss);
}

static void test_rule_parse_accepts_names_and_wildcards(void **state)
{
	egp_rule r;

	(void)state;
	assert_int_equal(egp_rule_parse(&r, "Deb.Debian.ORG.:443"), 0);
	assert_string_equal(r.host, "deb.debian.org");
	assert_int_equal(r.port, 443);
	assert_false(r.subdomains);
	assert_int_equal(egp_rule_parse(&r, "*.pythonhosted.org:443"), 0);
	assert_string_equal(r.host, "pythonhosted.org");
	assert_true(r.subdomains);
	assert_int_equal(egp_rule_parse(&r, "mirror_1.internal:8080"), 0);
}

static void test_rule_parse_refuses_bad_entries(void **state)
{
	static const char *bad[] = {"example.org",
				    "example.org:",
				    "example.org:0",
				    "example.org:65536",
				    "example.org:8o",
				    ":80",
				    "127.0.0.1:80",
				    "[::1]:443",
				    "::1:443",
				    "2130706433:80",
				    "0x7f000001:80",
				    "a..b:80",
				    "-a.org:80",
				    "a-.org:80",
				    "exa mple.org:80",
				    "ex%41mple.org:80",
				    "user@host.org:80",
				    "*.:80",
				    NULL};
	egp_rule r;

	(void)state;
	for (const char **p = bad; *p; p++) {
		int rc = egp_rule_parse(&r, *p);

		if (rc != AP_EINVAL)
			fail_msg("entry \"%s\" was accepted", *p);
		assert_true(strlen(ap_error_last()) > 0);
	}
}

static void test_rule_match_exact_and_suffix(void **state)
{
	egp_rule rules[2];

	(void)state;
	assert_int_equal(egp_rule_parse(&rules[0], "mirror.example:443"), 0);
	assert_int_equal(egp_rule_parse(&rules[1], "*.cdn.example:80"), 0);
	assert_true(egp_allowed(rules, 2, "mirror.example", 443));
	assert_false(egp_allowed(rules, 2, "mirror.example", 80));
	assert_false(egp_allowed(rules, 2, "mirror.example.evil", 443));
	assert_false(egp_allowed(rules, 2, "xmirror.example", 443));
	assert_false(egp_allowed(rules, 2, "sub.mirror.example", 443));
	assert_true(egp_allowed(rules, 2, "a.cdn.example", 80));
	assert_true(egp_allowed(rules, 2, "a.b.cdn.example", 80));
	assert_false(egp_allowed(rules, 2, "cdn.example", 80));
	assert_false(egp_allowed(rules, 2, "evilcdn.example", 80));
	assert_false(egp_allowed(rules, 2, "a.cdn.example", 443));
	assert_false(egp_allowed(rules, 0, "mirror.example", 443));
}

static void test_ip_literals_in_every_form(void **state)
{
	static const char *lit[] = {
	    "127.0.0.1",  "127.1",	  "2130706433",	     "0x7f000001",	 "0x7f.0.0.1",
	    "0177.0.0.1", "017700000001", "169.254.169.254", "169.254.169.254.", "10.0.0.1",
	    "0",	  "::1",	  "[::1]",	     "::ffff:127.0.0.1", "fe80::1%eth0",
	    "1.2.3.4.5",  "example.123",  "example.0x1f",    "[fd00::1]",	 "0x",
	    NULL};
	static const char *names[] = {"example.org",
				      "deb.debian.org",
				      "1password.com",
				      "123.example.org",
				      "x0x1f.org",
				      "mirror",
				      NULL};
	const char *reason;
	char out[EGP_HOST_MAX + 1];

	(void)state;
	for (const char **p = lit; *p; p++) {
		if (!egp_is_ip_literal(*p))
			fail_msg("\"%s\" not seen as an IP literal", *p);
		assert_int_equal(egp_host_normalize(out, *p, strlen(*p), &reason), AP_EDENIED);
		assert_non_null(strstr(reason, "IP address"));
	}
	for (const char **p = names; *p; p++) {
		if (egp_is_ip_literal(*p))
			fail_msg("\"%s\" wrongly seen as an IP literal", *p);
		assert_int_equal(egp_host_normalize(out, *p, strlen(*p), &reason), 0);
	}
}

static void test_address_classes_v4(void **state)
{
	(void)state;
	assert_int_equal(cls("93.184.216.34"), EGP_PUBLIC);
	assert_int_equal(cls("8.8.8.8"), EGP_PUBLIC);
	assert_int_equal(cls("127.0.0.1"), EGP_LOOPBACK);
	assert_int_equal(cls("127.255.255.254"), EGP_LOOPBACK);
	assert_int_equal(cls("10.1.2.3"), EGP_PRIVATE);
	assert_int_equal(cls("172.16.0.1"), EGP_PRIVATE);
	assert_int_equal(cls("172.31.255.255"), EGP_PRIVATE);
	assert_int_equal(cls("172.32.0.1"), EGP_PUBLIC);
	assert_int_equal(cls("192.168.1.1"), EGP_PRIVATE);
	assert_int_equal(cls("169.254.169.254"), EGP_LINK_LOCAL);
	assert_int_equal(cls("100.64.0.1"), EGP_CGNAT);
	assert_int_equal(cls("100.127.255.255"), EGP_CGNAT);
	assert_int_equal(cls("100.128.0.1"), EGP_PUBLIC);
	assert_int_equal(cls("224.0.0.1"), EGP_MULTICAST);
	assert_int_equal(cls("239.255.255.250"), EGP_MULTICAST);
	assert_int_equal(cls("0.0.0.0"), EGP_UNSPECIFIED);
	assert_int_equal(cls("0.1.2.3"), EGP_UNSPECIFIED);
	assert_int_equal(cls("255.255.255.255"), EGP_BROADCAST);
	assert_int_equal(cls("240.0.0.1"), EGP_RESERVED);
	assert_int_equal(cls("192.0.2.2"), EGP_RESERVED);
	assert_int_equal(cls("203.0.113.80"), EGP_RESERVED);
	assert_int_equal(cls("198.18.0.1"), EGP_RESERVED);
}

static void test_address_classes_v6(void **state)
{
	(void)state;
	assert_int_equal(cls("2606:4700::1111"), EGP_PUBLIC);
	assert_int_equal(cls("::"), EGP_UNSPECIFIED);
	assert_int_equal(cls("::1"), EGP_LOOPBACK);
	assert_int_equal(cls("fe80::1"), EGP_LINK_LOCAL);
	assert_int_equal(cls("febf::1"), EGP_LINK_LOCAL);
	assert_int_equal(cls("fc00::1"), EGP_ULA);
	assert_int_equal(cls("fd12:3456::1"), EGP_ULA);
	assert_int_equal(cls("fec0::1"), EGP_PRIVATE);
	assert_int_equal(cls("ff02::1"), EGP_MULTICAST);
	assert_int_equal(cls("2001:db8::1"), EGP_RESERVED);
	assert_int_equal(cls("2001:0::1"), EGP_RESERVED);
	/* IPv6 forms that carry an IPv4 address are judged by it */
	assert_int_equal(cls("::ffff:127.0.0.1"), EGP_LOOPBACK);
	assert_int_equal(cls("::ffff:169.254.169.254"), EGP_LINK_LOCAL);
	assert_int_equal(cls("::ffff:10.0.0.1"), EGP_PRIVATE);
	assert_int_equal(cls("::ffff:8.8.8.8"), EGP_PUBLIC);
	assert_int_equal(cls("64:ff9b::a9fe:a9fe"), EGP_LINK_LOCAL);
	assert_int_equal(cls("2002:7f00:1::1"), EGP_LOOPBACK);
	assert_int_equal(cls("2002:0808:0808::1"), EGP_PUBLIC);
	assert_int_equal(cls("::127.0.0.1"), EGP_RESERVED);
}

static void test_addr_allowed_and_operator_networks(void **state)
{
	egp_net nets[2];
	enum egp_class c;
	struct sockaddr_storage a;

	(void)state;
	assert_int_equal(egp_net_parse(&nets[0], "172.30.0.0/16"), 0);
	assert_int_equal(egp_net_parse(&nets[1], "fd00:1::/32"), 0);
	a = addr("8.8.8.8");
	assert_int_equal(egp_addr_allowed((struct sockaddr *)&a, NULL, 0, &c), 0);
	a = addr("172.30.5.6");
	assert_int_equal(egp_addr_allowed((struct sockaddr *)&a, NULL, 0, &c), AP_EDENIED);
	assert_int_equal(c, EGP_PRIVATE);
	assert_int_equal(egp_addr_allowed((struct sockaddr *)&a, nets, 2, &c), 0);
	a = addr("::ffff:172.30.5.6");
	assert_int_equal(egp_addr_allowed((struct sockaddr *)&a, nets, 2, &c), 0);
	a = addr("172.31.0.1");
	assert_int_equal(egp_addr_allowed((struct sockaddr *)&a, nets, 2, &c), AP_EDENIED);
	a = addr("fd00:1:2::3");
	assert_int_equal(egp_addr_allowed((struct sockaddr *)&a, nets, 2, &c), 0);
	/* loopback, link-local, multicast, unspecified: never, even inside a listed network */
	assert_int_equal(egp_net_parse(&nets[0], "0.0.0.0/0"), 0);
	assert_int_equal(egp_net_parse(&nets[1], "::/0"), 0);
	static const char *never[] = {
	    "127.0.0.1", "169.254.169.254", "224.0.0.1", "0.0.0.0",	    "::1",
	    "fe80::1",	 "ff02::1",	    "::",	 "255.255.255.255", NULL};
	for (const char **p = never; *p; p++) {
		a = addr(*p);
		if (egp_addr_allowed((struct sockaddr *)&a, nets, 2, &c) != AP_EDENIED)
			fail_msg("%s was allowed", *p);
	}
	a = addr("10.9.9.9");
	assert_int_equal(egp_addr_allowed((struct sockaddr *)&a, nets, 2, &c), 0);
}

static void test_net_parse_refuses_bad_cidrs(void **state)
{
	static const char *bad[] = {"10.0.0.0",	   "10.0.0.0/33", "10.0.0.1/8", "x/8",
				    "10.0.0.0/",   "/8",	  "fd00::/129", "fd00::1/64",
				    "10.0.0.0/-1", NULL};
	egp_net n;

	(void)state;
	for (const char **p = bad; *p; p++)
		if (egp_net_parse(&n, *p) != AP_EINVAL)
			fail_msg("\"%s\" was accepted", *p);
}

static int parse(egp_target *t, const char *line, const char **reason)
{
	return egp_parse_request_line(t, line, strlen(line), reason);
}

static void test_request_lines(void **state)
{
	egp_target t;
	const char *reason, *line;

	(void)state;
	assert_int_equal(parse(&t, "CONNECT Mirror.Example:443 HTTP/1.1", &reason), 0);
	assert_true(t.connect);
	assert_string_equal(t.host, "mirror.example");
	assert_int_equal(t.port, 443);
	line = "GET http://mirror.example:8080/simple/x/?a=1 HTTP/1.1";
	assert_int_equal(parse(&t, line, &reason), 0);
	assert_false(t.connect);
	assert_string_equal(t.method, "GET");
	assert_int_equal(t.port, 8080);
	assert_int_equal(t.path_len, strlen("/simple/x/?a=1"));
	assert_memory_equal(line + t.path_off, "/simple/x/?a=1", t.path_len);
	assert_int_equal(parse(&t, "HEAD HTTP://mirror.example HTTP/1.0", &reason), 0);
	assert_int_equal(t.port, 80);
	assert_int_equal(t.path_len, 0);

	assert_int_equal(parse(&t, "CONNECT 127.0.0.1:443 HTTP/1.1", &reason), AP_EDENIED);
	assert_int_equal(parse(&t, "CONNECT [::1]:443 HTTP/1.1", &reason), AP_EDENIED);
	assert_int_equal(parse(&t, "CONNECT ::1:443 HTTP/1.1", &reason), AP_EDENIED);
	assert_int_equal(parse(&t, "CONNECT 2130706433:443 HTTP/1.1", &reason), AP_EDENIED);
	assert_int_equal(parse(&t, "GET http://0x7f000001/ HTTP/1.1", &reason), AP_EDENIED);
	assert_int_equal(parse(&t, "GET http://169.254.169.254/latest/meta-data HTTP/1.1", &reason),
			 AP_EDENIED);
	assert_int_equal(parse(&t, "CONNECT mirror.example HTTP/1.1", &reason), AP_EINVAL);
	assert_int_equal(parse(&t, "GET /simple/ HTTP/1.1", &reason), AP_EINVAL);
	assert_non_null(strstr(reason, "absolute"));
	assert_int_equal(parse(&t, "GET https://mirror.example/ HTTP/1.1", &reason), AP_EINVAL);
	assert_int_equal(parse(&t, "GET http://u:p@mirror.example/ HTTP/1.1", &reason), AP_EINVAL);
	assert_int_equal(parse(&t, "GET http://mirror.example/ HTTP/2.0", &reason), AP_EINVAL);
	assert_int_equal(parse(&t, "GET http://mirror.example/ HTTP/1.1 x", &reason), AP_EINVAL);
	assert_int_equal(parse(&t, "get http://mirror.example/ HTTP/1.1", &reason), AP_EINVAL);
	assert_int_equal(parse(&t, "GET http://mirror.example/\x01 HTTP/1.1", &reason), AP_EINVAL);
	assert_int_equal(parse(&t, "GET http://mirror.example:99999/ HTTP/1.1", &reason),
			 AP_EINVAL);
	assert_int_equal(parse(&t, "", &reason), AP_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rule_parse_accepts_names_and_wildcards),
	    cmocka_unit_test(test_rule_parse_refuses_bad_entries),
	    cmocka_unit_test(test_rule_match_exact_and_suffix),
	    cmocka_unit_test(test_ip_literals_in_every_form),
	    cmocka_unit_test(test_address_classes_v4),
	    cmocka_unit_test(test_address_classes_v6),
	    cmocka_unit_test(test_addr_allowed_and_operator_networks),
	    cmocka_unit_test(test_net_parse_refuses_bad_cidrs),
	    cmocka_unit_test(test_request_lines),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

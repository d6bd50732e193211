/* SPDX-License-Identifier: MIT */
/* tests/job/test_sanitize.c - the neutraliser for text that leaves autopatch (job/sanitize.h):
 * every way GitHub closes, links or back-references an issue, mentions someone, links or embeds
 * is dead in the output, also when obfuscated; what a reader sees is unchanged; ordinary prose,
 * code and paths come through byte for byte; autopatch's own `Fixes #N` stays live. */
#include "common/buf.h"
#include "common/redact.h"
#include "job/progress.h"
#include "job/sanitize.h"

#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define ZW SANITIZE_ZWSP

/* What GitHub would turn into a closing reference, a reference, a mention, a link or HTML, on
 * the raw output bytes (a ZWSP is not whitespace, not a digit and not a word character). A
 * backslash before ASCII punctuation is dropped first, as markdown does. */
static const char *const live_patterns[] = {
    "(close[sd]?|fix(e[sd])?|resolve[sd]?):?[[:space:]]*(#[0-9]|gh-[0-9]|[[:alnum:]_.-]+/"
    "[[:alnum:]_.-]+#[0-9]|https?:|www\\.)",
    "#[0-9]",
    "gh-[0-9]",
    "(issues|pulls?|discussions)/[0-9]",
    "@[[:alnum:]_-]",
    "://",
    "www\\.",
    "<[[:alpha:]/!?]",
    "\\]\\(",
    "\\]\\[",
    "\\]:",
    "&(#[0-9]{1,7}|#[xX][[:xdigit:]]{1,6}|[[:alpha:]][[:alnum:]]*);",
    "\\\\(href|url)",
};

static char *unescape(const char *s)
{
	char *out = malloc(strlen(s) + 1), *w = out;

	assert_non_null(out);
	for (; *s; s++) {
		if (*s == '\\' && s[1] && strchr("!\"#$%&'()*+,-./:;<=>?@[]^_`{|}~\\", s[1]))
			s++;
		*w++ = *s;
	}
	*w = '\0';
	return out;
}

/* The first live pattern in s (NULL when none). Escaped '&' is not an entity start. */
static const char *live(const char *s)
{
	static char why[256];
	char *u = unescape(s);
	const char *found = NULL;

	for (size_t i = 0; !found && i < sizeof(live_patterns) / sizeof(live_patterns[0]); i++) {
		regex_t re;
		regmatch_t m;
		const char *hay = i == 11 ? s : u; /* entities: on the raw text ("\&" is literal) */

		assert_int_equal(regcomp(&re, live_patterns[i], REG_EXTENDED | REG_ICASE), 0);
		while (regexec(&re, hay, 1, &m, 0) == 0) {
			if (i == 11 && m.rm_so > 0 && hay[m.rm_so - 1] == '\\') {
				hay += m.rm_so + 1;
				continue;
			}
			snprintf(why, sizeof(why), "pattern %zu at \"%.40s\"", i, hay + m.rm_so);
			found = why;
			break;
		}
		regfree(&re);
	}
	free(u);
	return found;
}

static char *clean(const char *in)
{
	char *out = sanitize_str(in);

	assert_non_null(out);
	return out;
}

/* in comes out dead, reads the same, and sanitizing again changes nothing. */
static void check_dead(const char *in)
{
	char *out = clean(in), *again = clean(out), *vin, *vout;
	const char *why = live(out);

	if (why)
		fail_msg("live in output of \"%s\": %s: \"%s\"", in, why, out);
	assert_string_equal(again, out);
	vin = sanitize_visible(in, strlen(in));
	vout = sanitize_visible(out, strlen(out));
	assert_string_equal(vin, vout);
	free(vin);
	free(vout);
	free(again);
	free(out);
}

/* in comes out dead and a reader sees `visible`. */
static void check_reads(const char *in, const char *visible)
{
	char *out = clean(in), *v;

	check_dead(in);
	v = sanitize_visible(out, strlen(out));
	assert_string_equal(v, visible);
	free(v);
	free(out);
}

static void check_same(const char *in)
{
	char *out = clean(in);

	assert_string_equal(out, in);
	free(out);
}

static void test_closing_keywords_every_form(void **state)
{
	static const char *const kw[] = {"close",    "closes", "closed",  "fix",
					 "fixes",    "fixed",  "resolve", "resolves",
					 "resolved", "FIXES",  "Closes",  "ReSoLvEd"};
	static const char *const refs[] = {
	    "#2",
	    "GH-3",
	    "gh-3",
	    "other/repo#4",
	    "octo-org/some.repo_x#42",
	    "https://github.com/OWNER/REPO/issues/2",
	    "https://github.com/OWNER/REPO/pull/5",
	    "http://github.com/OWNER/REPO/pulls/6",
	    "https://ghe.corp.example/OWNER/REPO/issues/7",
	    "github.com/OWNER/REPO/issues/8",
	    "https://github.com/OWNER/REPO/discussions/9",
	    "www.github.com/o/r/issues/10",
	};
	char in[256];

	(void)state;
	for (size_t k = 0; k < sizeof(kw) / sizeof(kw[0]); k++)
		for (size_t r = 0; r < sizeof(refs) / sizeof(refs[0]); r++) {
			snprintf(in, sizeof(in), "%s %s", kw[k], refs[r]);
			check_dead(in);
			snprintf(in, sizeof(in), "This PR %s: %s, and %s\n%s", kw[k], refs[r],
				 kw[k], refs[r]);
			check_dead(in);
		}
	/* The ZWSP sits right after the keyword and in the reference. */
	check_reads("Fixes #2", "Fixes #2");
	{
		char *out = clean("Fixes #2");

		assert_string_equal(out, "Fixes" ZW " #" ZW "2");
		free(out);
	}
}

static void test_bare_references_and_mentions(void **state)
{
	(void)state;
	check_reads("see #12 and GH-13, other/repo#14", "see #12 and GH-13, other/repo#14");
	check_reads("thanks @admin and @octo-org/security-team!",
		    "thanks @admin and @octo-org/security-team!");
	check_dead("mail a.b@example.com or user_1@x.org");
	check_dead("@-dash @_under @9digits");
	check_dead("owner/repo@0123abcd");
	check_dead("https://github.com/o/r/issues/3#issuecomment-1");
	{
		char *out = clean("@admin");

		assert_string_equal(out, "@" ZW "admin");
		free(out);
	}
}

static void test_images_links_and_html(void **state)
{
	(void)state;
	check_reads("![x](https://evil.example/p.png)", "![x](https://evil.example/p.png)");
	check_reads("[click](https://evil.example)", "[click](https://evil.example)");
	check_dead("[click](//evil.example) [rel](/o/r/issues/1) [x]( https://evil.example )");
	check_dead("[x][ref] and [ref]\n\n[ref]: https://evil.example \"t\"");
	check_dead("[x]: evil.example");
	check_dead("<img src=\"https://evil.example/p.png\"> <IMG SRC=x>");
	check_dead("<a href=\"https://evil.example\">click</a>");
	check_dead("<https://evil.example> <mailto:x@evil.example> <!-- hidden -->");
	check_dead("<details><summary>x</summary>y</details> <picture> <video src=x>");
	check_dead("see https://evil.example/x?y=1 or HTTP://EVIL.EXAMPLE or ftp://x");
	check_dead("www.evil.example and WWW.EVIL.EXAMPLE");
	check_dead("$\\href{https://evil.example}{x}$ $\\url{//evil.example}$");
	check_dead("javascript:alert(1) data:text/html,x");
	/* The text stays readable: link text and URL are both still there. */
	check_reads("<img src=x>", "<img src=x>");
}

static void test_unicode_and_entity_tricks(void **state)
{
	(void)state;
	/* Fullwidth and small forms are folded, so they are read (and neutralised) as ASCII. */
	check_reads("Fixes \xef\xbc\x83"
		    "2",
		    "Fixes #2"); /* FULLWIDTH # */
	check_reads("Fixes \xef\xb9\x9f"
		    "2",
		    "Fixes #2"); /* SMALL # */
	check_reads("\xef\xbc\xa0"
		    "admin",
		    "@admin"); /* FULLWIDTH @ */
	check_reads("\xef\xb9\xab"
		    "admin",
		    "@admin");							/* SMALL @ */
	check_reads("Fixes \xef\xbc\x83\xef\xbc\x92", "Fixes #2");		/* ＃２ */
	check_reads("https\xef\xbc\x9a//evil.example", "https://evil.example"); /* ： */
	/* Zero-width and other invisible characters are dropped, so they hide nothing. */
	check_reads("Fixes\xe2\x80\x8d #2", "Fixes #2"); /* ZWJ after the keyword */
	check_reads("Fixes #\xe2\x80\x8b"
		    "2",
		    "Fixes #2");		     /* ZWSP inside the ref */
	check_reads("Fi\xc2\xadxes #2", "Fixes #2"); /* soft hyphen */
	check_reads("@\xe2\x81\xa0"
		    "admin",
		    "@admin"); /* word joiner */
	check_reads("h\xe2\x80\x8cttps://evil.example", "https://evil.example");
	check_reads("www\xef\xbb\xbf.evil.example", "www.evil.example"); /* BOM */
	check_reads("Fixes \xe2\x80\xae#2", "Fixes #2");		 /* RLO */
	check_reads("Fixes #\xf3\xa0\x80\xb2"
		    "2",
		    "Fixes #2"); /* tag character */
	check_reads("Fixes #\xef\xb8\x8f"
		    "2",
		    "Fixes #2"); /* variation selector */
	check_reads("Fixes\r\n#2", "Fixes\n#2");
	/* HTML character references are decoded before the check. */
	check_reads("Fixes &#35;2", "Fixes #2");
	check_reads("Fixes &#x23;2", "Fixes #2");
	check_reads("Fixes &#X23;&#50;", "Fixes #2");
	check_reads("Fixes &num;2", "Fixes #2");
	check_reads("Fixes #&#8203;2", "Fixes #2");
	check_reads("Fixes #&zwj;2", "Fixes #2");
	check_reads("&commat;admin &#64;root", "@admin @root");
	check_reads("https&colon;&sol;&sol;evil.example", "https://evil.example");
	check_reads("&lt;img src=x&gt;", "<img src=x>");
	check_reads("&#91;x&#93;&#40;https://evil.example&#41;", "[x](https://evil.example)");
	check_reads("&#x21;[x](y)", "![x](y)");
	check_reads("Fixes &#65283;2", "Fixes #2"); /* a reference to a fullwidth # */
	check_reads("Fixes #&#0;2", "Fixes #\xef\xbf\xbd"
				    "2");
	/* Double encoding stays literal, and a plain '&' cannot complete a reference. */
	check_reads("&amp;#35;2", "&#35;2");
	check_reads("&&#110;um;1", "&num;1");
	check_reads("&foo;#1", "&foo;#1");
	/* Backslash escapes are seen through (markdown drops the backslash). */
	check_reads("Fixes \\#2", "Fixes #2");
	check_reads("GH\\-3 \\@admin", "GH-3 @admin");
	check_reads("https\\:\\/\\/evil.example", "https://evil.example");
	check_reads("[x]\\(y)", "[x](y)");
	/* Nested and combined. */
	check_dead("F&#105;xes: &#x23;&#x32; \xef\xbc\xa0\xe2\x80\x8b"
		   "adm&#105;n ![&#x78;](ht&#116;ps"
		   "&#58;//evil.example/p.png)");
	check_dead("[![img](https://evil.example/a.png)](https://evil.example)");
	check_dead("<<img src=x>> [[x]](y) ((#1)) ##1 #\\#1 @@a");
	/* Invalid UTF-8 becomes U+FFFD; NUL and control bytes are dropped. */
	{
		char in[] = "a\xff#\xc0"
			    "1\x01 b";
		char *out = sanitize_str(in), *v = sanitize_visible(out, strlen(out));

		assert_string_equal(v, "a\xef\xbf\xbd#\xef\xbf\xbd"
				       "1 b");
		assert_null(live(out));
		free(v);
		free(out);
	}
	{
		ap_buf b = AP_BUF_INIT(100);

		assert_int_equal(sanitize_append(&b, "a\0#1", 4), 0);
		assert_string_equal(ap_buf_str(&b), "a#" ZW "1");
		ap_buf_release(&b);
	}
}

/* Decision: code is neutralised too. GitHub does not link `#N` inside code, but whether it
 * reads closing keywords, mentions or links there is not documented; an invisible ZWSP costs
 * the reader nothing. The code reads the same. */
static void test_code_is_neutralised_and_reads_the_same(void **state)
{
	(void)state;
	check_reads("```\nFixes #2 @admin https://evil.example\n```\n",
		    "```\nFixes #2 @admin https://evil.example\n```\n");
	check_reads("`@admin` and `Closes #3`", "`@admin` and `Closes #3`");
	check_reads("    indented: see GH-4\n", "    indented: see GH-4\n");
}

static void test_ordinary_text_survives_byte_for_byte(void **state)
{
	(void)state;
	check_same("mean() now returns 0.0 for an empty list instead of dividing by zero; "
		   "tests/test_mean_empty.py reproduces the crash.");
	check_same("This fixes the crash. It fixed two bugs; closing the file resolves the leak.");
	check_same("Fix: return 0.0 from mean() when values is empty, before dividing.");
	check_same("def mean(values):\n    if not values:  # empty input\n        return 0.0\n"
		   "    return total(values) / len(values)\n");
	check_same("if (a < b && c > d) { x = y & z; p = q->r; } // a<=b, i++ < n");
	check_same("src/calc/ops.py\ntests/test_repro.py\ndocs/issues.md\nC:\\Users\\me\\x.txt");
	check_same("**bold** _it_ ~~gone~~\n- item\n1. first\n> quote\n\n| a | b |\n|--|--|\n"
		   "| 1 | 2 |\n### Heading\n# Title");
	check_same("issue number 5, section 3.2, 50% of cases, $HOME, 2 + 2 = 4, a#b, C# code");
	check_same("ZeroDivisionError: division by zero\nE   assert 1 == 2\n1 failed in 0.05s");
	check_same(
	    "caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x8e\x89");
	check_same("\ttabs\tand\nnewlines\n");
	check_same("");
}

static void test_cut_never_leaves_a_live_prefix(void **state)
{
	const char *s = "ab#" ZW "1 \\#" ZW "2";
	size_t len = strlen(s);

	(void)state;
	assert_int_equal(sanitize_cut(s, len, 100), len);
	assert_int_equal(sanitize_cut(s, len, 3), 2); /* not "ab#" before the ZWSP */
	assert_int_equal(sanitize_cut(s, len, 4), 2); /* not inside the ZWSP */
	assert_int_equal(sanitize_cut(s, len, 6), 6); /* "ab#" ZWSP */
	assert_int_equal(sanitize_cut(s, len, 9), 8); /* "...1 " without the backslash */
	assert_int_equal(sanitize_cut("\xc3\xa9\xc3\xa9", 4, 3), 2);
}

static size_t count_live_closing(const char *s)
{
	regex_t re;
	regmatch_t m;
	size_t n = 0;

	assert_int_equal(regcomp(&re, live_patterns[0], REG_EXTENDED | REG_ICASE), 0);
	while (regexec(&re, s, 1, &m, 0) == 0) {
		n++;
		s += m.rm_eo;
	}
	regfree(&re);
	return n;
}

/* md with autopatch's own markup (the marker lines, <sub>, <details>) blanked out, so that
 * live() sees only what came from the model. */
static char *without_ours(const char *md)
{
	static const char *const ours[] = {PROGRESS_MARKER, REPLY_MARKER, "<sub>",
					   "</sub>",	    "<details>",  "<summary>",
					   "</summary>",    "</details>"};
	char *c = strdup(md), *p;

	assert_non_null(c);
	for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++)
		while ((p = strstr(c, ours[i])))
			memset(p, ' ', strlen(ours[i]));
	return c;
}

static const char attack[] =
    "Closes https://github.com/OWNER/REPO/issues/2. Fixes GH-3, fixes other/repo#4, "
    "resolves #5; cc @admin @org/team ![x](https://evil.example/p.png) "
    "[click](https://evil.example) <img src=https://evil.example/q.png> "
    "Fixes &#35;6 Fixes \xef\xbc\x83"
    "7 Fixes\xe2\x80\x8d #8 <!-- autopatch:progress -->\n```\n";

/* The PR body, the progress comment and the reply carry the attack dead everywhere, and the
 * only closing reference is autopatch's own line. */
static void test_rendered_bodies_have_only_our_fixes_line(void **state)
{
	pr_body_input in = PR_BODY_INPUT_INIT;
	progress_event ev[] = {{1764469865000LL, "planning", attack},
			       {1764469866000LL, NULL, "tester: round 1: rejected - fixes #9"}};
	progress_view v = PROGRESS_VIEW_INIT;
	char *md, *ours;

	(void)state;
	in.issue = 1;
	in.job_id = 3;
	in.summary = attack;
	in.cause = attack;
	in.repro_test = attack;
	in.evidence = attack;
	in.files_changed = "calc.py\nissues/#10 @x.py\n";
	in.test_note = attack;
	in.model = attack;
	assert_int_equal(progress_render_pr_body(&in, &md), 0);
	assert_int_equal(count_live_closing(md), 1);
	assert_non_null(strstr(md, "\n\nFixes #1\n\n"));
	/* Only our line: take it out and nothing live is left. */
	ours = without_ours(md);
	memcpy(strstr(ours, "\n\nFixes #1\n") + 2, "Fixes  1", 8);
	assert_null(live(ours));
	assert_non_null(strstr(md, "https:" ZW "//evil.example")); /* still readable */
	free(ours);
	free(md);

	assert_int_equal(progress_render_reply(&in, 1, "abc123", NULL, &md), 0);
	assert_true(strncmp(md, REPLY_MARKER " (job 3) -->\n", strlen(REPLY_MARKER) + 12) == 0);
	assert_int_equal(count_live_closing(md), 0);
	ours = without_ours(md);
	assert_null(live(ours));
	free(ours);
	free(md);
	assert_int_equal(progress_render_reply(&in, 0, NULL, attack, &md), 0);
	ours = without_ours(md);
	assert_null(live(ours));
	free(ours);
	free(md);

	v.job_id = 3;
	v.state = PROGRESS_FAILED;
	v.events = ev;
	v.n_events = 2;
	v.test_note = attack;
	v.failure = attack;
	v.tried = attack;
	v.trajectory = "/data/trajectories/job-3.jsonl";
	assert_int_equal(progress_render_comment(&v, &md), 0);
	assert_true(strncmp(md, PROGRESS_MARKER "\n", strlen(PROGRESS_MARKER) + 1) == 0);
	assert_null(strstr(md + 1, "<!-- autopatch"));
	ours = without_ours(md);
	assert_null(live(ours));
	free(ours);
	free(md);

	/* The PR link autopatch got from GitHub stays a link. */
	v.state = PROGRESS_SUCCEEDED;
	v.pr_url = "https://github.com/octo/calc/pull/2";
	assert_int_equal(progress_render_comment(&v, &md), 0);
	assert_non_null(strstr(md, "**Pull request:** https://github.com/octo/calc/pull/2\n"));
	free(md);
}

/* An unclosed code block in model prose is closed before our own text, and one that is inside
 * a list item is left alone (closing it would open a new block). */
static void test_prose_cannot_swallow_what_follows(void **state)
{
	pr_body_input in = PR_BODY_INPUT_INIT;
	char *md;

	(void)state;
	in.issue = 4;
	in.summary = "look:\n````python\nx = 1\n```\n";
	in.cause = "- item\n   ```\n   code\n";
	assert_int_equal(progress_render_pr_body(&in, &md), 0);
	assert_non_null(strstr(md, "```\n\n````\n\n\n### Suspected cause"));
	assert_non_null(strstr(md, "   code\n\n\n"));
	assert_null(strstr(md, "   code\n\n````"));
	assert_null(strstr(md, "   code\n\n```\n"));
	free(md);
}

/* A secret the model spells with character references or zero-width characters is masked as
 * the reader would see it. */
static void test_secret_spelled_with_entities_is_redacted(void **state)
{
	pr_body_input in = PR_BODY_INPUT_INIT;
	char *md, *vis;

	(void)state;
	assert_int_equal(redact_add_secret("canary-secret-4242"), 0);
	in.issue = 1;
	in.summary = "the key is canary&#45;secret&#x2d;4242 or canary-\xe2\x80\x8bsecret-4242";
	assert_int_equal(progress_render_pr_body(&in, &md), 0);
	vis = sanitize_visible(md, strlen(md));
	assert_null(strstr(vis, "canary-secret-4242"));
	assert_non_null(strstr(vis, REDACT_MASK));
	free(vis);
	free(md);
	redact__clear();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_closing_keywords_every_form),
	    cmocka_unit_test(test_bare_references_and_mentions),
	    cmocka_unit_test(test_images_links_and_html),
	    cmocka_unit_test(test_unicode_and_entity_tricks),
	    cmocka_unit_test(test_code_is_neutralised_and_reads_the_same),
	    cmocka_unit_test(test_ordinary_text_survives_byte_for_byte),
	    cmocka_unit_test(test_cut_never_leaves_a_live_prefix),
	    cmocka_unit_test(test_rendered_bodies_have_only_our_fixes_line),
	    cmocka_unit_test(test_prose_cannot_swallow_what_follows),
	    cmocka_unit_test(test_secret_spelled_with_entities_is_redacted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

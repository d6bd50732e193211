/* SPDX-License-Identifier: MIT */
/* job/sanitize.h - neutralise text the model can influence before it reaches GitHub.
 *
 * Everything autopatch writes on GitHub that the model could have shaped (the fixer's summary,
 * the suspected cause, the reproduction test, the Tester's evidence, failure text, event lines)
 * passes through sanitize_append() when progress.c renders it. The result keeps the text
 * readable but cannot, in any markdown context (prose, tables, inline code, fenced code):
 *
 * - close, link or back-reference an issue or PR: `#N`, `GH-N`, `owner/repo#N`, and the
 *   `.../issues/N`, `.../pull/N`, `.../pulls/N`, `.../discussions/N` paths of any host
 *   (github.com and any GitHub Enterprise host alike), with or without a closing keyword;
 * - mention anyone: `@user`, `@org/team` (and e-mail autolinks, `owner/repo@sha`);
 * - link or embed: no autolink (`scheme://`, `www.`), no HTML (`<img>`, `<a>`, `<details>`,
 *   `<!--`, `<https://...>`), no markdown link or image (`[x](..)`, `![x](..)`, `[x][ref]`,
 *   `[ref]: url`), no MathJax `\href` / `\url`.
 *
 * How: the text is first read the way GitHub will read it — invalid UTF-8 becomes U+FFFD,
 * control and invisible characters (zero-width spaces and joiners, bidi controls, soft
 * hyphens, variation selectors, tag characters ...) are dropped, fullwidth and small-form
 * ASCII look-alikes (`＃`, `＠`, `﹟`, `：`) become ASCII, HTML character references
 * (`&#35;`, `&#x40;`, `&num;`, `&commat;` ...) are decoded, backslash escapes (`\#`) are seen
 * through. In that reading, a zero-width space (U+200B) is inserted wherever one of the forms
 * above would start: after `#` before a digit, after `GH-`, after `@`, between `:` and `//`,
 * between `www` and `.`, after `issues/` (etc.) before a digit, after `<`, between `]` and
 * `(`/`[`/`:`, after `\` before `href`/`url`, and right after a closing keyword (close[sd],
 * fix(es|ed), resolve[sd]; any case) that is followed by a reference. The text stays visible
 * (the link text, the URL, the `@name`), only GitHub no longer turns it into a link, mention
 * or reference. ZWSP was chosen over wrapping in backticks because it works the same in every
 * context (a backtick inside an existing code span would end it) and keeps tables intact.
 *
 * Characters that came from an HTML character reference are written back as literal text:
 * ASCII punctuation with a backslash escape (`&#42;` becomes `\*`), newlines as a space. A
 * named reference outside a small table (`&nbsp;`, `&amp;`, `&num;`, `&copy;` ...) keeps its
 * spelling with its `&` escaped (`\&foo;`), so GitHub shows it as written and decodes nothing.
 * The transformation is idempotent: sanitizing sanitized text returns it unchanged.
 *
 * What survives unchanged: ordinary prose (including words like "fixes" not followed by a
 * reference), code, file paths, markdown emphasis, lists, headings and tables. Autopatch's own
 * `Fixes #N` line is written by progress.c outside these functions and stays live.
 *
 * Pure functions (no I/O, no global state); thread-safe.
 */
#ifndef AP_JOB_SANITIZE_H
#define AP_JOB_SANITIZE_H

#include "common/buf.h"

#include <stddef.h>

/* The character inserted to break a link, mention or reference (U+200B, UTF-8). */
#define SANITIZE_ZWSP "\xe2\x80\x8b"

/* Append the neutralised form of s[0..len) (any bytes; NUL bytes are dropped) to out.
 * Returns 0, AP_ENOMEM, or AP_ETOOBIG when the result does not fit out's cap; on failure out
 * is unchanged. The result is valid UTF-8 and at most 8 * len bytes. */
int sanitize_append(ap_buf *out, const char *s, size_t len);

/* sanitize_append() of the C string s into a new string (caller frees). NULL on ENOMEM. */
char *sanitize_str(const char *s);

/* The text a reader sees when GitHub renders s[0..len) as markdown prose, after the reading
 * described above (invisible characters dropped, look-alikes folded, character references
 * decoded, backslash escapes removed), for checks such as redaction of a secret the model
 * spelled with entities or zero-width characters. New string (caller frees), NULL on ENOMEM. */
char *sanitize_visible(const char *s, size_t len);

/* The length of the longest prefix of sanitized text s[0..len) of at most max bytes that can
 * be cut off safely: it ends on a character boundary, not right before an inserted ZWSP (so
 * the character it protects is cut with it) and not on a backslash. */
size_t sanitize_cut(const char *s, size_t len, size_t max);

#endif

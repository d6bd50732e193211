/* SPDX-License-Identifier: MIT */
/* github/patch.c - the host-side diff policy over the diff's own bytes: libgit2's parse, the
 * raw headers read again and compared with it, and every path rule on both paths of every
 * delta; and the contents of both sides of every delta, computed from the base commit and the
 * diff alone (see patch.h). */
#include "github/patch.h"

#include "common/err.h"

#include <ctype.h>
#include <git2.h>
#include <git2/sys/mempack.h>
#include <git2/sys/odb_backend.h>
#include <git2/sys/path.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_CAP   4096 /* bytes of one path */
#define QUOTE_CAP  200	/* bytes of a path or header line quoted in a sentence */
#define PHRASE_CAP 600	/* bytes of one rule phrase */
/* The phrases built with snprintf below fit PHRASE_CAP: a sentence of under 100 bytes with at
 * most QUOTE_CAP (or 64) bytes of a name and numbers. */
#define LIST_PATH 1024 /* bytes of one path in a file list */

/* One `diff --git` section of the raw text: [start, end). */
struct section {
	const char *start, *end;
};

/* One check: the rules and, when there is a base, its HEAD tree. */
struct check {
	const gh_patch_rules *rules;
	git_repository *repo;
	git_tree *tree;
};

/* ---- sentences ------------------------------------------------------------------------ */

/* Append s[0..n) with control bytes, DEL, backslash and backtick as \ooo, at most cap bytes of
 * s (then "..."). The result is safe inside `...` in markdown and in one log line. */
static void put_escaped(ap_buf *b, const char *s, size_t n, size_t cap)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (i == cap) {
			ap_buf_adds(b, "...");
			return;
		}
		if (ch < 0x20 || ch == 0x7f || ch == '\\' || ch == '`')
			ap_buf_addf(b, "\\%03o", ch);
		else
			ap_buf_add(b, s + i, 1);
	}
}

static void put_path(ap_buf *b, const char *path)
{
	ap_buf_adds(b, "`");
	put_escaped(b, path, strlen(path), QUOTE_CAP);
	ap_buf_adds(b, "`");
}

/* "adds `x`", "renames `a` to `b`", ...: what the delta does. */
static void put_action(ap_buf *b, const git_diff_delta *d)
{
	switch (d->status) {
	case GIT_DELTA_ADDED:
		ap_buf_adds(b, "adds ");
		put_path(b, d->new_file.path);
		break;
	case GIT_DELTA_DELETED:
		ap_buf_adds(b, "deletes ");
		put_path(b, d->old_file.path);
		break;
	case GIT_DELTA_RENAMED:
	case GIT_DELTA_COPIED:
		ap_buf_adds(b, d->status == GIT_DELTA_RENAMED ? "renames " : "copies ");
		put_path(b, d->old_file.path);
		ap_buf_adds(b, " to ");
		put_path(b, d->new_file.path);
		break;
	default:
		ap_buf_adds(b, d->old_file.mode && d->new_file.mode &&
				       d->old_file.mode != d->new_file.mode
				   ? "changes the mode of "
				   : "changes ");
		put_path(b, d->new_file.path);
		break;
	}
}

/* AP_EDENIED with "the patch <action>: `<path>` <phrase>". */
static int refuse(const git_diff_delta *d, const char *path, const char *phrase)
{
	ap_buf b = AP_BUF_INIT(2048);
	int rc;

	ap_buf_adds(&b, "the patch ");
	put_action(&b, d);
	ap_buf_adds(&b, ": ");
	put_path(&b, path);
	ap_buf_addf(&b, " %s", phrase);
	rc = ap_error_set(AP_EDENIED, "%s", b.data ? b.data : "the patch is refused");
	ap_buf_release(&b);
	return rc;
}

/* Whether a header line names an absolute path ("a//etc/x", "\"b//x"): libgit2 drops the extra
 * slash, so the raw text is the only place it shows. */
static bool raw_absolute(const char *line, const char *eol)
{
	for (const char *p = line; p + 3 <= eol; p++)
		if ((p[0] == 'a' || p[0] == 'b') && p[1] == '/' && p[2] == '/' &&
		    (p == line || p[-1] == ' ' || p[-1] == '"'))
			return true;
	return false;
}

/* AP_EDENIED for a raw line [line, eol) that does not say what libgit2 parsed. */
static int mismatch(const git_diff_delta *d, const char *line, const char *eol, const char *why)
{
	ap_buf b = AP_BUF_INIT(2048);
	int rc;

	if (raw_absolute(line, eol))
		why = "names an absolute path, outside the repository";

	ap_buf_adds(&b, "the patch's header line `");
	put_escaped(&b, line, (size_t)(eol - line), QUOTE_CAP);
	ap_buf_addf(&b, "` %s (libgit2 parsed ", why);
	put_path(&b, d->old_file.path);
	ap_buf_adds(&b, " -> ");
	put_path(&b, d->new_file.path);
	ap_buf_adds(&b, "); a diff whose headers disagree with its content is refused");
	rc = ap_error_set(AP_EDENIED, "%s", b.data ? b.data : "the patch is refused");
	ap_buf_release(&b);
	return rc;
}

/* ---- path rules ----------------------------------------------------------------------- */

/* Bytes of an HFS+ ignorable code point (U+200C-200F, U+202A-202E, U+206A-206F, U+FEFF) at
 * u, else 0: HFS+ drops them, so ".g\u200cit" is ".git" there. */
static size_t hfs_ignorable(const unsigned char *u, size_t n)
{
	if (n < 3)
		return 0;
	if (u[0] == 0xe2 && u[1] == 0x80 &&
	    ((u[2] >= 0x8c && u[2] <= 0x8f) || (u[2] >= 0xaa && u[2] <= 0xae)))
		return 3;
	if (u[0] == 0xe2 && u[1] == 0x81 && u[2] >= 0xaa && u[2] <= 0xaf)
		return 3;
	if (u[0] == 0xef && u[1] == 0xbb && u[2] == 0xbf)
		return 3;
	return 0;
}

/* The name a case-insensitive NTFS or HFS+ filesystem would see for component s[0..n):
 * ignorables dropped, ASCII lower-cased, an NTFS stream (":...") cut, trailing dots and spaces
 * cut. out has room for cap bytes plus the NUL. */
static void fold(const char *s, size_t n, char *out, size_t cap)
{
	size_t o = 0, skip;

	for (size_t i = 0; i < n && o < cap;) {
		skip = hfs_ignorable((const unsigned char *)s + i, n - i);
		if (skip) {
			i += skip;
			continue;
		}
		if (s[i] == ':')
			break;
		out[o++] = (char)tolower((unsigned char)s[i++]);
	}
	while (o > 0 && (out[o - 1] == '.' || out[o - 1] == ' '))
		o--;
	out[o] = '\0';
}

/* The built-in rules for one path, then the caller's: NULL or the phrase in buf. */
static const char *path_phrase(const struct check *c, const char *path, char *buf, size_t cap)
{
	char comp[2][PATH_CAP + 1], f[PATH_CAP + 1];
	size_t len = strlen(path), ncomp = 0;
	const char *p = path;

	if (len == 0)
		return "is an empty path";
	if (len > PATH_CAP)
		return "is longer than 4096 bytes";
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)path[i] < 0x20 || path[i] == 0x7f)
			return "has a control character in its name";
	if (strchr(path, '\\'))
		return "has a backslash, which Windows reads as a path separator";
	if (path[0] == '/')
		return "is an absolute path, outside the repository";
	for (;;) {
		size_t n = strcspn(p, "/");

		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return "has a `.`, `..` or empty component, which can reach outside the "
			       "repository";
		fold(p, n, f, PATH_CAP);
		if (strcmp(f, ".git") == 0 || strcmp(f, "git~1") == 0) {
			snprintf(buf, cap,
				 "has a component that is or folds to `.git` (`%.*s`); nothing in "
				 "or named .git may be changed",
				 (int)(n > 64 ? 64 : n), p);
			/* The component passed the control-byte check; a backtick stays harmless
			 * only escaped, so fall back to a plain sentence. */
			return memchr(p, '`', n) ? "has a component that is or folds to `.git`; "
						   "nothing in or named .git may be changed"
						 : buf;
		}
		if (git_path_is_gitfile(p, n, GIT_PATH_GITFILE_GITMODULES, GIT_PATH_FS_GENERIC))
			return "is `.gitmodules` (in some spelling); submodules are not allowed";
		if (ncomp < 2)
			memcpy(comp[ncomp], f, strlen(f) + 1);
		ncomp++;
		p += n;
		if (!*p)
			break;
		p++;
	}
	if (ncomp >= 2 && strcmp(comp[0], ".github") == 0 && strcmp(comp[1], "workflows") == 0 &&
	    !(c->rules && c->rules->allow_workflows))
		return "is under .github/workflows/; workflow changes are not allowed "
		       "(AUTOPATCH_ALLOW_WORKFLOW_CHANGES)";
	if (ncomp == 2 && strcmp(comp[0], ".github") == 0 &&
	    (strcmp(comp[1], "autopatch.yml") == 0 || strcmp(comp[1], "autopatch.yaml") == 0))
		return "is autopatch's own configuration, which a patch may never change";
	if (c->rules && c->rules->path_rule)
		return c->rules->path_rule(c->rules->ud, path, buf, cap);
	return NULL;
}

/* The phrase refusing mode m, or NULL for a regular file (or 0, not stated). */
static const char *mode_phrase(unsigned m, char *buf, size_t cap)
{
	if (m == 0 || m == GIT_FILEMODE_BLOB || m == GIT_FILEMODE_BLOB_EXECUTABLE)
		return NULL;
	if (m == GIT_FILEMODE_LINK)
		return "is a symlink (mode 120000); a patch may not add, change or remove symlinks";
	if (m == GIT_FILEMODE_COMMIT)
		return "is a submodule (mode 160000); submodules are not allowed";
	snprintf(buf, cap, "has mode %06o; only regular files (100644, 100755) may be changed", m);
	return buf;
}

/* ---- the base commit ------------------------------------------------------------------ */

static int open_base(struct check *c, const char *dir)
{
	git_object *obj = NULL;

	if (git_repository_open_ext(&c->repo, dir, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0 ||
	    git_revparse_single(&obj, c->repo, "HEAD^{tree}") < 0) {
		const git_error *e = git_error_last();

		return ap_error_set(AP_EIO, "cannot read the base commit of the patch: %s",
				    e && e->message ? e->message : "libgit2 error");
	}
	c->tree = (git_tree *)obj;
	return 0;
}

/* No proper prefix of path may be anything but a directory in the base tree: writing under a
 * symlink or a submodule leaves the repository. NULL or the phrase. */
static const char *prefix_phrase(const struct check *c, const char *path, char *buf, size_t cap)
{
	char pre[PATH_CAP + 1];
	const char *slash = path;

	while ((slash = strchr(slash, '/')) != NULL) {
		git_tree_entry *e = NULL;
		size_t n = (size_t)(slash - path);
		git_filemode_t m;

		memcpy(pre, path, n);
		pre[n] = '\0';
		slash++;
		if (git_tree_entry_bypath(&e, c->tree, pre) != 0)
			continue;
		m = git_tree_entry_filemode(e);
		git_tree_entry_free(e);
		if (m == GIT_FILEMODE_TREE)
			continue;
		snprintf(buf, cap, "goes through `%.*s`, which is %s in the base commit",
			 (int)(n > QUOTE_CAP ? QUOTE_CAP : n), pre,
			 m == GIT_FILEMODE_LINK	    ? "a symlink"
			 : m == GIT_FILEMODE_COMMIT ? "a submodule"
						    : "a file");
		return memchr(pre, '`', n) ? "goes through something that is not a directory in "
					     "the base commit"
					   : buf;
	}
	return NULL;
}

/* ---- the raw headers ------------------------------------------------------------------ */

static const char *line_end(const char *p, const char *end)
{
	const char *nl = memchr(p, '\n', (size_t)(end - p));

	return nl ? nl : end;
}

static bool starts(const char *line, const char *eol, const char *s)
{
	size_t n = strlen(s);

	return (size_t)(eol - line) >= n && memcmp(line, s, n) == 0;
}

/* Decode the C-quoted name at *pp (which starts with '"'), as git writes it (\a \b \t \n \v
 * \f \r \" \\ and \ooo), into buf (cap bytes); *len gets its length and *pp moves past the
 * closing quote. false for a malformed or over-long name. */
static bool unquote(const char **pp, const char *eol, char *buf, size_t cap, size_t *len)
{
	static const char esc[] = "a\ab\bt\tn\nv\vf\fr\r\"\"\\\\";
	const char *p = *pp + 1, *e;
	size_t o = 0;

	for (; p < eol && *p != '"'; o++) {
		int ch = (unsigned char)*p++;

		if (ch == '\\') {
			if (p >= eol)
				return false;
			ch = (unsigned char)*p++;
			e = strchr(esc, ch);
			if (ch && e && (e - esc) % 2 == 0) {
				ch = (unsigned char)e[1];
			} else {
				if (ch < '0' || ch > '3' || eol - p < 2 || p[0] < '0' ||
				    p[0] > '7' || p[1] < '0' || p[1] > '7')
					return false;
				ch = ((ch - '0') << 6) | ((p[0] - '0') << 3) | (p[1] - '0');
				p += 2;
			}
		}
		if (o >= cap)
			return false;
		buf[o] = (char)ch;
	}
	if (p >= eol)
		return false; /* no closing quote */
	*pp = p + 1;
	*len = o;
	return true;
}

/* One name of a header at *pp (before eol), C-quoted ("a/\303\251") or plain, that must be
 * exactly prefix + path. Advances *pp past it. */
static bool match_name(const char **pp, const char *eol, const char *prefix, const char *path)
{
	char buf[PATH_CAP + 8];
	size_t pl = strlen(prefix), n = strlen(path), o = 0;
	const char *p = *pp;

	if (p < eol && *p == '"') {
		if (!unquote(&p, eol, buf, sizeof(buf), &o))
			return false;
		if (o != pl + n || memcmp(buf, prefix, pl) != 0 || memcmp(buf + pl, path, n) != 0)
			return false;
	} else {
		if ((size_t)(eol - p) < pl + n || memcmp(p, prefix, pl) != 0 ||
		    memcmp(p + pl, path, n) != 0)
			return false;
		p += pl + n;
	}
	*pp = p;
	return true;
}

/* A name that ends its line (git adds a TAB after a plain name holding a space). */
static bool match_last(const char *p, const char *eol, const char *prefix, const char *path)
{
	if (!match_name(&p, eol, prefix, path))
		return false;
	if (p + 1 == eol && *p == '\t')
		p++;
	return p == eol;
}

/* The octal mode at p (to eol): only regular-file modes pass. */
static int raw_mode(const git_diff_delta *d, const char *path, const char *p, const char *eol,
		    const char *line)
{
	char buf[PHRASE_CAP];
	const char *phrase;
	unsigned m = 0;
	size_t n = 0;

	for (; p < eol && *p >= '0' && *p <= '7' && n < 8; p++, n++)
		m = m * 8 + (unsigned)(*p - '0');
	if (n == 0 || p != eol)
		return mismatch(d, line, eol, "has a malformed mode");
	phrase = mode_phrase(m, buf, sizeof(buf));
	return phrase ? refuse(d, path, phrase) : 0;
}

/* The `+++` line (line to eol) that follows the `---` line must name delta d's new path. */
static int plus_line(const git_diff_delta *d, const char *line, const char *eol)
{
	const char *q;

	if (!starts(line, eol, "+++ "))
		return mismatch(d, line, eol, "should be the `+++` line");
	q = line + 4;
	if (!(d->status == GIT_DELTA_DELETED
		  ? (size_t)(eol - q) == 9 && memcmp(q, "/dev/null", 9) == 0
		  : match_last(q, eol, "b/", d->new_file.path)))
		return mismatch(d, line, eol, "does not name the new path");
	return 0;
}

/* After the header lines of section s: a rename or copy of delta d had both its lines
 * (renamed, copied), two paths only with one, a binary change its data. */
static int section_complete(const struct section *s, const git_diff_delta *d, bool renamed,
			    bool copied, bool binary)
{
	const char *old = d->old_file.path, *new = d->new_file.path;
	const char *line = s->start, *eol = line_end(line, s->end);

	if ((d->status == GIT_DELTA_RENAMED && !renamed) ||
	    (d->status == GIT_DELTA_COPIED && !copied) ||
	    (d->status != GIT_DELTA_RENAMED && d->status != GIT_DELTA_COPIED &&
	     strcmp(old, new) != 0))
		return mismatch(d, line, eol, "names two paths without a rename or copy");
	if ((d->flags & GIT_DIFF_FLAG_BINARY) && !binary)
		return refuse(d, new,
			      "is a binary change without its data; only `git diff --binary` "
			      "patches can be checked");
	return 0;
}

/* The extended header lines of one section must say what libgit2 parsed for delta d. */
static int verify_section(const struct section *s, const git_diff_delta *d)
{
	const char *old = d->old_file.path, *new = d->new_file.path;
	const char *line = s->start, *eol = line_end(line, s->end), *q;
	bool rename_from = false, rename_to = false, copy_from = false, copy_to = false;
	bool binary = false, want_plus = false;
	int rc = 0;

	q = line + strlen("diff --git ");
	if (!match_name(&q, eol, "a/", old) || q >= eol || *q++ != ' ' ||
	    !match_name(&q, eol, "b/", new) || q != eol)
		return mismatch(d, line, eol, "does not name the paths libgit2 read");
	for (line = eol < s->end ? eol + 1 : s->end; line < s->end && !rc;
	     line = eol < s->end ? eol + 1 : s->end) {
		eol = line_end(line, s->end);
		if (want_plus) {
			want_plus = false;
			if ((rc = plus_line(d, line, eol)))
				return rc;
			break; /* the hunks follow */
		}
		if (starts(line, eol, "@@"))
			break;
		if (starts(line, eol, "GIT binary patch")) {
			binary = true;
			break;
		}
		if (starts(line, eol, "Binary files "))
			return refuse(d, new,
				      "is a binary change without its data (\"Binary files ... "
				      "differ\"); only `git diff --binary` patches can be checked");
		if (starts(line, eol, "old mode ") || starts(line, eol, "deleted file mode "))
			rc = raw_mode(d, old, line + (line[0] == 'o' ? 9 : 18), eol, line);
		else if (starts(line, eol, "new mode ") || starts(line, eol, "new file mode "))
			rc = raw_mode(d, new, line + (line[4] == 'm' ? 9 : 14), eol, line);
		else if (starts(line, eol, "index ")) {
			const char *sp = memchr(line + 6, ' ', (size_t)(eol - line - 6));

			if (sp)
				rc = raw_mode(d, d->status == GIT_DELTA_DELETED ? old : new, sp + 1,
					      eol, line);
		} else if (starts(line, eol, "similarity index ") ||
			   starts(line, eol, "dissimilarity index ")) {
			continue;
		} else if (starts(line, eol, "rename from ") || starts(line, eol, "copy from ")) {
			bool ren = line[0] == 'r';

			if (d->status != (ren ? GIT_DELTA_RENAMED : GIT_DELTA_COPIED) ||
			    !match_last(line + (ren ? 12 : 10), eol, "", old))
				return mismatch(d, line, eol, "does not name the old path");
			*(ren ? &rename_from : &copy_from) = true;
		} else if (starts(line, eol, "rename to ") || starts(line, eol, "copy to ")) {
			bool ren = line[0] == 'r';

			if (d->status != (ren ? GIT_DELTA_RENAMED : GIT_DELTA_COPIED) ||
			    !match_last(line + (ren ? 10 : 8), eol, "", new))
				return mismatch(d, line, eol, "does not name the new path");
			*(ren ? &rename_to : &copy_to) = true;
		} else if (starts(line, eol, "--- ")) {
			q = line + 4;
			if (!(d->status == GIT_DELTA_ADDED
				  ? (size_t)(eol - q) == 9 && memcmp(q, "/dev/null", 9) == 0
				  : match_last(q, eol, "a/", old)))
				return mismatch(d, line, eol, "does not name the old path");
			want_plus = true;
		} else {
			return mismatch(d, line, eol, "is not a git extended header line");
		}
	}
	if (rc)
		return rc;
	if (want_plus)
		return mismatch(d, s->start, line_end(s->start, s->end),
				"starts a section whose `+++` line is missing");
	return section_complete(s, d, rename_from && rename_to, copy_from && copy_to, binary);
}

/* The `diff --git` sections of the raw text, in order. *n gets their count. */
static int split_sections(const char *diff, size_t len, struct section **out, size_t *n)
{
	const char *line = diff, *end = diff + len;
	struct section *s = NULL;
	size_t count = 0, alloc = 0;

	*out = NULL;
	*n = 0;
	while (line < end) {
		const char *eol = line_end(line, end);

		if (starts(line, eol, "diff --git ")) {
			if (count == alloc) {
				size_t na = alloc ? alloc * 2 : 16;
				struct section *ns = realloc(s, na * sizeof(*s));

				if (!ns) {
					free(s);
					return ap_error_set(AP_ENOMEM, "out of memory");
				}
				s = ns;
				alloc = na;
			}
			if (count)
				s[count - 1].end = line;
			s[count].start = line;
			s[count].end = end;
			count++;
		}
		line = eol < end ? eol + 1 : end;
	}
	*out = s;
	*n = count;
	return 0;
}

/* The header lines git writes between `diff --git` and the content, each at most once. */
static const char *const header_kinds[] = {
    "--- ",
    "+++ ",
    "old mode ",
    "new mode ",
    "deleted file mode ",
    "new file mode ",
    "index ",
    "similarity index ",
    "dissimilarity index ",
    "rename from ",
    "rename to ",
    "copy from ",
    "copy to ",
};

/* A name field that starts quoted must decode to its end (libgit2 leaks on some that don't). */
static bool quoted_ok(const char *p, const char *eol)
{
	char buf[PATH_CAP + 8];
	size_t n;

	if (p >= eol || *p != '"')
		return true;
	if (!unquote(&p, eol, buf, sizeof(buf), &n))
		return false;
	return p == eol || (p + 1 == eol && *p == '\t');
}

/* The names of a `diff --git` line: a quoted first name must decode and be followed by a
 * space, a quoted last name (after a ` "`) must decode to the end of the line. */
static bool git_line_ok(const char *p, const char *eol)
{
	char buf[PATH_CAP + 8];
	size_t n;

	if (p < eol && *p == '"') {
		if (!unquote(&p, eol, buf, sizeof(buf), &n) || p >= eol || *p != ' ')
			return false;
		return quoted_ok(p + 1, eol);
	}
	if (eol == p || eol[-1] != '"')
		return true;
	for (const char *q = eol - 1; q > p; q--)
		if (q[-1] == ' ' && *q == '"' && quoted_ok(q, eol))
			return true;
	return false;
}

/* The shape of the raw text before libgit2 reads it: no header line twice in one section and
 * nothing but content after the `+++` line. libgit2 reads such a section too (and keeps only
 * one of the repeated names), so the raw text alone decides. */
static int raw_shape(const char *diff, size_t len)
{
	const char *line = diff, *end = diff + len, *why = NULL, *eol = diff;
	bool in_header = false, after_plus = false;
	unsigned seen = 0;
	ap_buf b = AP_BUF_INIT(1024);
	int rc;

	for (; line < end; line = eol < end ? eol + 1 : end) {
		eol = line_end(line, end);
		if (starts(line, eol, "diff --git ")) {
			in_header = true;
			after_plus = false;
			seen = 0;
			if (!git_line_ok(line + 11, eol)) {
				why = "has a malformed quoted name";
				break;
			}
			continue;
		}
		if (!in_header)
			continue;
		if (starts(line, eol, "@@") || starts(line, eol, "GIT binary patch") ||
		    starts(line, eol, "Binary files ")) {
			in_header = false;
			continue;
		}
		if (after_plus) {
			why = "follows the `+++` line of its section";
			break;
		}
		for (unsigned k = 0; k < sizeof(header_kinds) / sizeof(header_kinds[0]); k++) {
			if (!starts(line, eol, header_kinds[k]))
				continue;
			if (seen & (1u << k))
				why = "repeats a header line of its section";
			else if (!quoted_ok(line + strlen(header_kinds[k]), eol))
				why = "has a malformed quoted name";
			seen |= 1u << k;
			after_plus = k == 1;
			break;
		}
		if (why)
			break;
	}
	if (!why)
		return 0;
	ap_buf_adds(&b, "the patch's header line `");
	put_escaped(&b, line, (size_t)(eol - line), QUOTE_CAP);
	ap_buf_addf(&b, "` %s; git never writes that, so it is refused", why);
	rc = ap_error_set(AP_EDENIED, "%s", b.data ? b.data : "the patch is refused");
	ap_buf_release(&b);
	return rc;
}

/* ---- one delta ------------------------------------------------------------------------ */

/* Every rule on both paths of delta d (modes from the base when the diff does not say). */
static int check_delta(const struct check *c, const git_diff_delta *d)
{
	const char *paths[2] = {d->old_file.path, d->new_file.path}, *phrase;
	bool has_old = d->status != GIT_DELTA_ADDED, has_new = d->status != GIT_DELTA_DELETED;
	unsigned old_mode = d->old_file.mode, new_mode = d->new_file.mode;
	char buf[PHRASE_CAP];

	for (int i = 0; i < 2; i++) {
		if (i == 1 && strcmp(paths[0], paths[1]) == 0)
			break;
		phrase = path_phrase(c, paths[i], buf, sizeof(buf));
		if (!phrase && c->tree)
			phrase = prefix_phrase(c, paths[i], buf, sizeof(buf));
		if (phrase)
			return refuse(d, paths[i], phrase);
	}
	if (has_old && c->tree) {
		git_tree_entry *e = NULL;
		unsigned base_mode;

		if (git_tree_entry_bypath(&e, c->tree, paths[0]) != 0)
			return refuse(d, paths[0],
				      "is not in the base commit the patch applies to");
		base_mode = git_tree_entry_filemode(e);
		git_tree_entry_free(e);
		if (old_mode && old_mode != base_mode) {
			snprintf(buf, sizeof(buf),
				 "has mode %06o in the base commit, not %06o as the patch says",
				 base_mode, old_mode);
			return refuse(d, paths[0], buf);
		}
		old_mode = base_mode;
	} else if (has_old && !old_mode) {
		return refuse(d, paths[0],
			      "has no mode in the patch and there is no base commit to look it up "
			      "in");
	}
	if (has_old && (phrase = mode_phrase(old_mode, buf, sizeof(buf))) != NULL)
		return refuse(d, paths[0], phrase);
	if (has_new && !new_mode)
		new_mode = old_mode; /* a pure rename or copy keeps the mode */
	if (has_new && !new_mode)
		return refuse(d, paths[1], "has no mode in the patch");
	if (has_new && (phrase = mode_phrase(new_mode, buf, sizeof(buf))) != NULL)
		return refuse(d, paths[1], phrase);
	return 0;
}

/* ---- entry points --------------------------------------------------------------------- */

/* The raw checks that come before libgit2, then libgit2's parse: 0 with *out, or AP_EDENIED
 * (AP_ENOMEM) with the sentence. */
static int parse_diff(const char *diff, size_t len, git_diff **out)
{
	const git_error *e;
	int rc;

	*out = NULL;
	if (memchr(diff, '\0', len))
		return ap_error_set(AP_EDENIED, "the patch contains a NUL byte; a git diff never "
						"does (binary changes are base85 text)");
	rc = raw_shape(diff, len);
	if (rc)
		return rc;
	if (git_diff_from_buffer(out, diff, len) == 0)
		return 0;
	e = git_error_last();
	*out = NULL;
	return ap_error_set(AP_EDENIED, "the patch does not parse as a git diff: %s",
			    e && e->message ? e->message : "libgit2 refused it");
}

/* Each entry point holds a libgit2 reference for its call (reference counted: cheap while
 * gh_git holds one, as in the daemon), so `autopatch fix` needs no set-up. */
static int lib_init(void)
{
	const git_error *e;

	if (git_libgit2_init() >= 0)
		return 0;
	e = git_error_last();
	return ap_error_set(AP_EIO, "libgit2 failed to initialise: %s",
			    e && e->message ? e->message : "unknown error");
}

static int check(const char *diff, size_t len, const gh_patch_rules *rules)
{
	struct check c = {rules, NULL, NULL};
	struct section *sec = NULL;
	git_diff *d = NULL;
	size_t nsec = 0, ndelta;
	int rc;

	if (len == 0)
		return 0;
	rc = parse_diff(diff, len, &d);
	if (rc)
		return rc;
	rc = split_sections(diff, len, &sec, &nsec);
	if (rc)
		goto out;
	ndelta = git_diff_num_deltas(d);
	if (ndelta == 0) {
		rc = ap_error_set(AP_EDENIED,
				  "the patch holds no file change that libgit2 can read");
		goto out;
	}
	if (nsec != ndelta) {
		rc =
		    ap_error_set(AP_EDENIED,
				 "the patch has %zu `diff --git` header%s but libgit2 read %zu "
				 "file change%s; a diff whose headers disagree with its content is "
				 "refused",
				 nsec, nsec == 1 ? "" : "s", ndelta, ndelta == 1 ? "" : "s");
		goto out;
	}
	if (rules && rules->base_dir && (rc = open_base(&c, rules->base_dir)) != 0)
		goto out;
	for (size_t i = 0; i < ndelta && !rc; i++) {
		git_diff_delta dd = *git_diff_get_delta(d, i);

		/* libgit2 cannot split "a/x y b/x y" and leaves the side a new or deleted file
		 * lacks unset: it is the other one. */
		if (!dd.old_file.path && dd.status == GIT_DELTA_ADDED)
			dd.old_file.path = dd.new_file.path;
		if (!dd.new_file.path && dd.status == GIT_DELTA_DELETED)
			dd.new_file.path = dd.old_file.path;
		if (!dd.old_file.path || !dd.new_file.path) {
			rc = ap_error_set(AP_EDENIED,
					  "the patch has a file change whose paths libgit2 cannot "
					  "tell apart (%.200s)",
					  dd.new_file.path   ? dd.new_file.path
					  : dd.old_file.path ? dd.old_file.path
							     : "no path");
			break;
		}
		rc = verify_section(&sec[i], &dd);
		if (!rc)
			rc = check_delta(&c, &dd);
	}
out:
	git_tree_free(c.tree);
	git_repository_free(c.repo);
	git_diff_free(d);
	free(sec);
	return rc;
}

int gh_patch_check(const char *diff, size_t len, const gh_patch_rules *rules)
{
	int rc = lib_init();

	if (rc)
		return rc;
	rc = check(diff, len, rules);
	git_libgit2_shutdown();
	return rc;
}

int gh_patch__list(struct git_diff *d, ap_buf *out)
{
	size_t n = git_diff_num_deltas(d);

	for (size_t i = 0; i < n; i++) {
		const git_diff_delta *x = git_diff_get_delta(d, i);
		const char *oldp = x->old_file.path ? x->old_file.path : "";
		const char *newp = x->new_file.path ? x->new_file.path : oldp;

		if (x->status == GIT_DELTA_RENAMED || x->status == GIT_DELTA_COPIED) {
			put_escaped(out, oldp, strlen(oldp), LIST_PATH);
			ap_buf_adds(out, " -> ");
			put_escaped(out, newp, strlen(newp), LIST_PATH);
			if (x->status == GIT_DELTA_COPIED)
				ap_buf_adds(out, " (copy)");
		} else if (x->status == GIT_DELTA_DELETED) {
			put_escaped(out, oldp, strlen(oldp), LIST_PATH);
			ap_buf_adds(out, " (deleted)");
		} else {
			put_escaped(out, newp, strlen(newp), LIST_PATH);
		}
		if (ap_buf_adds(out, "\n") != 0)
			return ap_error_set(AP_ETOOBIG, "the list of changed files is too long");
	}
	return 0;
}

int gh_patch_files(const char *diff, size_t len, char **out)
{
	ap_buf b = AP_BUF_INIT(1u << 20);
	git_diff *d = NULL;
	int rc;

	*out = NULL;
	rc = lib_init();
	if (rc)
		return rc;
	rc = parse_diff(diff, len, &d);
	if (rc) {
		git_libgit2_shutdown();
		return rc == AP_EDENIED ? AP_EINVAL : rc;
	}
	rc = gh_patch__list(d, &b);
	git_diff_free(d);
	git_libgit2_shutdown();
	if (!rc) {
		*out = ap_buf_take(&b);
		if (!*out)
			rc = ap_error_set(AP_ENOMEM, "out of memory");
	}
	ap_buf_release(&b);
	return rc;
}

/* ---- the files of a diff with their contents ------------------------------------------ */

enum { APPLY = 0, SKIP_BINARY, SKIP_BIG };

/* One gh_patch_read_files() call: the base, its in-memory object database for the applied
 * blobs, and what the apply callback decided for each delta. */
struct reader {
	const gh_patch_read_opts *o;
	git_diff *diff;
	git_repository *repo;
	git_tree *tree;
	git_odb *odb;
	unsigned char *skip; /* per delta: APPLY, SKIP_BINARY or SKIP_BIG */
	size_t ndelta;
	size_t next;  /* index of the delta the callback sees next */
	size_t spent; /* base bytes admitted to the apply */
	bool order;   /* the callback saw a delta out of order */
};

/* The delta's base blob: its entry in the base tree (caller frees), or NULL. */
static git_tree_entry *base_entry(const struct reader *r, const char *path)
{
	git_tree_entry *e = NULL;

	if (!path || git_tree_entry_bypath(&e, r->tree, path) != 0) {
		git_error_clear();
		return NULL;
	}
	return e;
}

/* libgit2's apply calls this before each delta, in order: > 0 leaves the delta out (binary,
 * or its base too big for the caps), 0 applies it. */
static int admit_delta(const git_diff_delta *d, void *payload)
{
	struct reader *r = payload;
	const git_diff_delta *want;
	git_tree_entry *e;
	git_object_t type;
	size_t i = r->next++, size = 0;

	want = i < r->ndelta ? git_diff_get_delta(r->diff, i) : NULL;
	if (!want || want->status != d->status ||
	    (want->new_file.path && d->new_file.path &&
	     strcmp(want->new_file.path, d->new_file.path) != 0)) {
		r->order = true;
		return -1;
	}
	if (d->flags & GIT_DIFF_FLAG_BINARY) {
		r->skip[i] = SKIP_BINARY;
		return 1;
	}
	if (d->status == GIT_DELTA_ADDED)
		return 0;
	e = base_entry(r, d->old_file.path);
	if (!e)
		return 0; /* libgit2 says it does not apply */
	if (git_tree_entry_type(e) == GIT_OBJECT_BLOB &&
	    git_odb_read_header(&size, &type, r->odb, git_tree_entry_id(e)) != 0) {
		git_error_clear();
		size = SIZE_MAX;
	}
	git_tree_entry_free(e);
	if (size > r->o->file_cap || size > r->o->total_cap - r->spent) {
		r->skip[i] = SKIP_BIG;
		return 1;
	}
	r->spent += size;
	return 0;
}

/* A malloc'd, NUL-terminated copy of blob id's bytes into *data (*len), or *too_big when it
 * is larger than cap. */
static int copy_blob(const struct reader *r, const git_oid *id, size_t cap, char **data,
		     size_t *len, bool *too_big)
{
	git_blob *blob = NULL;
	git_object_size_t size;
	const git_error *e;

	if (git_blob_lookup(&blob, r->repo, id) != 0) {
		e = git_error_last();
		return ap_error_set(AP_EIO, "cannot read a blob of the patch: %s",
				    e && e->message ? e->message : "libgit2 error");
	}
	size = git_blob_rawsize(blob);
	if (size > cap) {
		*too_big = true;
		git_blob_free(blob);
		return 0;
	}
	*data = malloc((size_t)size + 1);
	if (!*data) {
		git_blob_free(blob);
		return ap_error_set(AP_ENOMEM, "out of memory");
	}
	if (size)
		memcpy(*data, git_blob_rawcontent(blob), (size_t)size);
	(*data)[size] = '\0';
	*len = (size_t)size;
	git_blob_free(blob);
	return 0;
}

static char status_char(git_delta_t s)
{
	switch (s) {
	case GIT_DELTA_ADDED:
		return 'A';
	case GIT_DELTA_DELETED:
		return 'D';
	case GIT_DELTA_RENAMED:
		return 'R';
	case GIT_DELTA_COPIED:
		return 'C';
	default:
		return 'M';
	}
}

/* Fill f for delta i from the base tree and the applied index. */
static int read_delta(const struct reader *r, git_index *applied, size_t i, gh_patch_file *f)
{
	const git_diff_delta *d = git_diff_get_delta(r->diff, i);
	const char *oldp = d->old_file.path ? d->old_file.path : d->new_file.path;
	const char *newp = d->new_file.path ? d->new_file.path : d->old_file.path;
	git_tree_entry *e = NULL;
	int rc = 0;

	if (!oldp || !newp)
		return ap_error_set(AP_EINVAL, "the patch has a file change without a path");
	f->status = status_char(d->status);
	f->old_path = strdup(oldp);
	f->new_path = strdup(newp);
	if (!f->old_path || !f->new_path)
		return ap_error_set(AP_ENOMEM, "out of memory");
	f->binary = r->skip[i] == SKIP_BINARY;
	f->too_big = r->skip[i] == SKIP_BIG;
	if (f->status != 'A') {
		e = base_entry(r, oldp);
		f->old_mode = d->old_file.mode ? d->old_file.mode
					       : (e ? (unsigned)git_tree_entry_filemode(e) : 0);
		if (!e && r->skip[i] == APPLY)
			rc = ap_error_set(AP_EINVAL,
					  "the patch does not apply to the base commit: `%.200s` "
					  "is not there",
					  oldp);
		else if (e && r->skip[i] == APPLY)
			rc = copy_blob(r, git_tree_entry_id(e), r->o->file_cap, &f->old_data,
				       &f->old_len, &f->too_big);
		git_tree_entry_free(e);
		if (rc)
			return rc;
	}
	if (f->status != 'D') {
		const git_index_entry *ie = git_index_get_bypath(applied, newp, 0);

		f->new_mode = d->new_file.mode ? d->new_file.mode : ie ? ie->mode : f->old_mode;
		if (r->skip[i] != APPLY)
			return 0;
		if (!ie)
			return ap_error_set(AP_EINVAL,
					    "the patch does not apply to the base commit: `%.200s` "
					    "is not there once it is applied",
					    newp);
		rc = copy_blob(r, &ie->id, r->o->file_cap, &f->new_data, &f->new_len, &f->too_big);
	}
	return rc;
}

/* The base repository with an in-memory object database in front for what the apply writes. */
static int open_reader(struct reader *r, const char *dir)
{
	git_odb_backend *mem = NULL;
	struct check c = {NULL, NULL, NULL};
	const git_error *e;
	int rc = open_base(&c, dir);

	r->repo = c.repo;
	r->tree = c.tree;
	if (rc)
		return rc;
	if (git_repository_odb(&r->odb, r->repo) != 0 || git_mempack_new(&mem) != 0)
		goto fail;
	if (git_odb_add_backend(r->odb, mem, 1000) != 0) {
		mem->free(mem);
		goto fail;
	}
	return 0;
fail:
	e = git_error_last();
	return ap_error_set(AP_EIO, "cannot set up the base commit of the patch: %s",
			    e && e->message ? e->message : "libgit2 error");
}

static int read_files(const char *diff, size_t len, const gh_patch_read_opts *o,
		      gh_patch_file **out, size_t *n)
{
	git_apply_options ao;
	struct reader r = {.o = o};
	struct section *sec = NULL;
	gh_patch_file *files = NULL;
	git_index *applied = NULL;
	const git_error *e;
	size_t nsec = 0;
	int rc;

	rc = parse_diff(diff, len, &r.diff);
	if (rc) {
		rc = rc == AP_EDENIED ? AP_EINVAL : rc;
		goto out;
	}
	if ((rc = split_sections(diff, len, &sec, &nsec)) != 0)
		goto out;
	r.ndelta = git_diff_num_deltas(r.diff);
	if (r.ndelta == 0 || nsec != r.ndelta) {
		rc = ap_error_set(AP_EINVAL,
				  r.ndelta == 0
				      ? "the patch holds no file change that libgit2 can read"
				      : "the patch's `diff --git` headers and libgit2 disagree on "
					"how many files it changes");
		goto out;
	}
	if ((rc = open_reader(&r, o->base_dir)) != 0)
		goto out;
	r.skip = calloc(r.ndelta, 1);
	files = calloc(r.ndelta, sizeof(*files));
	if (!r.skip || !files) {
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto out;
	}
	git_apply_options_init(&ao, GIT_APPLY_OPTIONS_VERSION);
	ao.delta_cb = admit_delta;
	ao.payload = &r;
	if (git_apply_to_tree(&applied, r.repo, r.tree, r.diff, &ao) != 0) {
		e = git_error_last();
		rc =
		    r.order
			? ap_error_set(AP_EIO, "libgit2 applied the patch's files out of order")
			: ap_error_set(AP_EINVAL, "the patch does not apply to the base commit: %s",
				       e && e->message ? e->message : "libgit2 refused it");
		goto out;
	}
	for (size_t i = 0; i < r.ndelta && !rc; i++)
		rc = read_delta(&r, applied, i, &files[i]);
	if (!rc) {
		*out = files;
		*n = r.ndelta;
		files = NULL;
	}
out:
	gh_patch_files_free(files, r.ndelta);
	git_index_free(applied);
	free(r.skip);
	free(sec);
	git_tree_free(r.tree);
	git_odb_free(r.odb);
	git_repository_free(r.repo);
	git_diff_free(r.diff);
	return rc;
}

int gh_patch_read_files(const char *diff, size_t len, const gh_patch_read_opts *o,
			gh_patch_file **out, size_t *n)
{
	int rc;

	*out = NULL;
	*n = 0;
	if (!o || o->version != GH_PATCH_READ_OPTS_VERSION || !o->base_dir)
		return ap_error_set(AP_EINVAL, "reading a patch's files needs its base repository");
	if (len == 0)
		return 0;
	rc = lib_init();
	if (rc)
		return rc;
	rc = read_files(diff, len, o, out, n);
	git_libgit2_shutdown();
	return rc;
}

void gh_patch_files_free(gh_patch_file *f, size_t n)
{
	if (!f)
		return;
	for (size_t i = 0; i < n; i++) {
		free(f[i].old_path);
		free(f[i].new_path);
		free(f[i].old_data);
		free(f[i].new_data);
	}
	free(f);
}

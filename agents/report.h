/* SPDX-License-Identifier: MIT */
/* agents/report.h - structured test results: the Tester decides from these, never from an
 * exit code or scraped text that can mean something else.
 *
 * A test runner in the box writes a machine-readable report to a file outside the tree it
 * tests (pytest --junitxml via PYTEST_ADDOPTS, `go test -json`, node's junit reporter,
 * `ctest --output-junit`), or the JUnit files Maven/Gradle/jest write in the tree, or cargo's
 * per-test lines on stdout; the Tester reads them back with REPORT_READ_CAP and parses them
 * here. Every parser takes outside bytes: it is capped (input, tests, id and message lengths),
 * never allocates from a length the input states, and has a libFuzzer target
 * (tests/fuzz/fuzz_report.c).
 *
 * Ids and messages are text made from bytes out of a box: report_add() stores them as valid
 * UTF-8 without NUL bytes (common/buf.h), so they can go into JSON, prompts and comments as
 * they are. A message has every invalid byte and NUL replaced by U+FFFD; an id is cleaned
 * with AP_UTF8_DISTINCT (an invalid byte or NUL becomes U+FFFD and its two hex digits, a U+FFFD
 * of the input gains a '~'), which is deterministic and keeps distinct ids distinct: two
 * tests whose names differ only in invalid bytes are still two tests, so one cannot stand in
 * for the other between the pristine and the patched run. Valid names are kept as they are.
 *
 * Memory: a report of REPORT_MAX_TESTS tests costs about 24 bytes per test plus its id (and
 * the message of a test that did not pass): ids and messages live in the report's own
 * chunks, not in one allocation each.
 *
 * Each run is also classified (report_classify): tests executed, collection/import/build
 * errors, command not found (127), not executable (126), killed by the deadline, out of
 * memory, killed otherwise, nothing collected, failed before any test ran, or - for runners
 * that give no per-test results - an exit status only. None of these but the first two is
 * ever "the test failed".
 */
#ifndef AP_REPORT_H
#define AP_REPORT_H

#include "agents/traj.h"

#include <stdbool.h>
#include <stddef.h>

#define REPORT_READ_CAP	   (64u << 20) /* bytes of reports and output read back per run */
#define REPORT_MAX_TESTS   1000000     /* test entries per report */
#define REPORT_MAX_ID	   4096	       /* bytes of one test id */
#define REPORT_MAX_MESSAGE 4000	       /* bytes of one failure message kept (cut beyond) */

enum report_outcome {
	REPORT_PASSED,
	REPORT_SKIPPED,
	REPORT_ERROR, /* an error outside the test body: fixture, set-up, collection */
	REPORT_FAILED /* an assertion or an exception raised in the test */
};

/* One test. The strings belong to the report (its chunks): valid UTF-8 without NUL, never to
 * be freed or changed by the caller, valid until report_release(). */
typedef struct report_test {
	const char *id;	       /* "classname::name" (JUnit), "package::Test" (go), cargo's path */
	const char *message;   /* failure, error or skip message (capped), or NULL */
	unsigned char outcome; /* enum report_outcome */
	bool collection;       /* an error collecting, importing or building tests, not a test */
} report_test;

struct report_chunk;

/* A set of per-test outcomes. Owned by the caller; report_release() frees the contents. A
 * zeroed struct is an empty report, as REPORT_INIT. */
typedef struct report {
	report_test *tests;
	size_t n, alloc;
	bool sorted; /* report_finish() ran: sorted by id, duplicates merged */
	bool pytest; /* a JUnit report pytest wrote (<testsuite name="pytest">): there <error>
		      * is an error outside the test body (fixture, set-up), not in the test */
	struct report_chunk *chunks; /* storage of the ids and messages (report.c) */
	const struct report *share;  /* ids found here are not stored again (report_share_ids) */
} report;

#define REPORT_INIT                                                                                \
	{                                                                                          \
		NULL, 0, 0, false, false, NULL, NULL                                               \
	}

void report_release(report *r);

/* From now on, an id that the finished report other also lists is not stored again in r: r's
 * entry points at other's string. For the second run of the same suite (the patched run after
 * the pristine one), whose ids are nearly all the first run's: it saves the bytes of each such
 * id (some 30 MiB of a million short ones; the lookups add about 0.3 s). other must not change,
 * and must stay alive, as long as r's ids are read (release r first). Comparisons are
 * unchanged: the strings are equal. other NULL, or not finished, stops the sharing. */
void report_share_ids(report *r, const report *other);

/* Add one entry: id and msg (may be NULL) are any bytes, copied cleaned (see above); the id is
 * cut at REPORT_MAX_ID bytes, the message at REPORT_MAX_MESSAGE with "..." added, both on a
 * character boundary. AP_ETOOBIG past REPORT_MAX_TESTS, AP_ENOMEM. An empty id is ignored. */
int report_add(report *r, const char *id, size_t id_len, enum report_outcome o, const char *msg,
	       size_t msg_len, bool collection);

/* Parsers: append what the text holds to r. 0 (also when the text holds no test), AP_ETOOBIG
 * when len passes REPORT_READ_CAP or the tests REPORT_MAX_TESTS, AP_ENOMEM. Malformed input
 * is never an error: what can be read is kept, the rest ignored. */

/* JUnit XML, one or more documents concatenated: every <testcase> (classname::name; name alone
 * without classname), failed with <failure>, error with <error>, skipped with <skipped>;
 * pytest's "collection failure" errors are marked collection. Comments, CDATA, processing
 * instructions and DOCTYPE are skipped; only the five predefined and numeric entities are
 * decoded (no entity expansion). */
int report_parse_junit(report *r, const char *xml, size_t len);

/* `go test -json` lines: "package::Test" per test (subtests are their own tests); a package
 * that fails without any test result (build failure) is one collection error. Lines that are
 * not JSON are ignored. */
int report_parse_go_json(report *r, const char *text, size_t len);

/* cargo test / libtest output: "test NAME ... ok|FAILED|ignored", with the "---- NAME stdout
 * ----" blocks as failure messages. With cargo's own lines in the text (its stderr), each test
 * is "TARGET::NAME" under the last "Running" line's target ("src/lib.rs", "tests/two.rs",
 * "doc" for doc-tests), and "error: could not compile" is a collection error
 * ("cargo::build"). */
int report_parse_cargo(report *r, const char *text, size_t len);

/* jest's `--json` report: "FILE::full name" per test (FILE relative to the run's tree, so both
 * runs name a test alike); passed, failed, skipped (pending, todo, disabled); a file that
 * failed without any test result (it did not load) is one collection error. At most
 * REPORT_JSON_CAP bytes (one document, parsed whole), else AP_ETOOBIG. */
#define REPORT_JSON_CAP (16u << 20)
int report_parse_jest(report *r, const char *text, size_t len);

/* The report files a run writes into its report directory (agents/shims.h), by name. */
enum report_format {
	REPORT_FORMAT_NONE,    /* not a report */
	REPORT_FORMAT_JUNIT,   /* *.xml */
	REPORT_FORMAT_GO_JSON, /* *.gojson: `go test -json` */
	REPORT_FORMAT_CARGO,   /* *.cargo: cargo test's output, stderr included */
	REPORT_FORMAT_JEST,    /* *.jestjson: jest --json */
	REPORT_FORMAT_VITEST   /* *.vitestjson: vitest's json reporter (jest's format) */
};

/* The format of a report file named name[0..n) (not NUL-terminated). */
enum report_format report_format_of(const char *name, size_t n);

/* "JUnit XML", "`go test -json`", ... (static text). */
const char *report_format_name(enum report_format f);

/* The parser of f (nothing for REPORT_FORMAT_NONE), as the parsers above. */
int report_parse_as(report *r, enum report_format f, const char *text, size_t len);

/* Whether a run's output shows that its runner stopped at a first failure, leaving later
 * tests unrun: cargo without --no-fail-fast ("error: test failed, to rerun pass"; cargo up to
 * 1.67 prints it with --no-fail-fast too when one target failed, so cargo_whole - cargo ran
 * with --no-fail-fast, through the shim - turns that one off), pytest's "!!! stopping after N
 * failures !!!", a Maven reactor summary with SKIPPED modules after a FAILURE. A sentence
 * (static text) or NULL. Such a suite run is never evidence. */
const char *report_stopped_early(const char *text, size_t len, bool cargo_whole);

/* Whether the shell command cmd chains test runs with `&&` (`go test ./a && go test ./b`,
 * `pytest tests/unit && pytest tests/e2e`): a command that runs tests (a runner, `npm test`,
 * `make check`, a script named like a test) followed by `&&` and, later on, another one. When
 * such a command fails, the runs after the first failing one never started, so its suite run
 * is never evidence. A sentence (static text) or NULL. Quotes are honoured; the words are read
 * bounded (REPORT_CHAIN_WORDS per simple command, REPORT_CHAIN_SEGMENTS commands). */
#define REPORT_CHAIN_WORDS    8
#define REPORT_CHAIN_SEGMENTS 256
const char *report_chain_stops(const char *cmd);

/* The tests of the finished report r that name (a test as its runner names it: a pytest node
 * id, "pkg::TestX" or "example.com/m/pkg::TestX" for Go, "tests/two.rs::name" for cargo,
 * "FILE::full name" for jest, "suite::title" for mocha, "Class#method" or "Class::method" for
 * JUnit, a ctest name) stands for. Ids and name are compared normalised: "::", "/", "#", "." and
 * spaces are one separator, ".py"/".rs" before one are dropped. The exact name matches, with any
 * "[...]" parameters of a parametrised test; only when nothing matches exactly, ids that end in the
 * name at a separator do. Up to max matches go to out; the count is returned; *ambiguous is
 * set when they are more than one test (not merely parameters of one). */
size_t report_match(const report *r, const char *name, const report_test **out, size_t max,
		    bool *ambiguous);

/* Sort by id and merge duplicates (the worst outcome wins: failed, error, skipped, passed;
 * among equals the first one added). Needed before report_find(). Cannot fail: when the few
 * megabytes it sorts with are not available, it sorts in place instead. */
void report_finish(report *r);

/* The entry for id after report_finish(), or NULL. */
const report_test *report_find(const report *r, const char *id);

/* Append r's tests to the trajectory as one "tester_tests" event (agents/traj.h): {"dir": dir,
 * "tests": [{"name": id, "status": "passed" | "failed" | "skipped" | "error"}, ...]}, written
 * test by test (traj_line_begin()), so it costs a few kilobytes however long the report is.
 * t may be NULL. */
void report_traj_tests(traj *t, const char *dir, const report *r);

typedef struct report_counts {
	size_t passed, failed, errors, skipped;
	size_t collection; /* of errors: collection/import/build errors */
} report_counts;

void report_count(const report *r, report_counts *c);

/* ---- runners ------------------------------------------------------------------------------ */

enum report_runner {
	REPORT_RUNNER_OTHER, /* JUnit files the run writes in the tree, else exit status only */
	REPORT_RUNNER_PYTEST,
	REPORT_RUNNER_GO,
	REPORT_RUNNER_CARGO,
	REPORT_RUNNER_NODE,
	REPORT_RUNNER_CTEST
};

/* Which runner a shell command starts with (after VAR=value assignments): pytest,
 * `python[3] -m pytest`, `go test`, `cargo test`, `node --test`, ctest. */
enum report_runner report_runner_of(const char *cmd);

/* The command with the flags that make its runner write a report into report_dir (an
 * absolute path without shell metacharacters): `go test -json`, node's junit reporter to
 * report_dir/node.xml, `ctest --output-junit report_dir/ctest.xml`. pytest needs no change
 * (PYTEST_ADDOPTS does it, see the Tester), cargo neither. malloc'd, NULL on ENOMEM or for a
 * report_dir too long to fit the flags (AP_ETOOBIG; never cut). */
char *report_instrument(const char *cmd, const char *report_dir);

/* ---- classification ----------------------------------------------------------------------- */

enum report_class {
	REPORT_RAN,	       /* tests ran and reported per test */
	REPORT_EXIT_ONLY,      /* the command ran to an exit status; no per-test results */
	REPORT_COLLECTION,     /* collection / import / build errors */
	REPORT_NOT_FOUND,      /* exit 127: command not found */
	REPORT_NOT_EXECUTABLE, /* exit 126: found but not executable */
	REPORT_TIMEOUT,	       /* killed by the deadline */
	REPORT_OOM,	       /* killed by the out-of-memory killer */
	REPORT_KILLED,	       /* SIGKILL without deadline or OOM */
	REPORT_NO_TESTS,       /* nothing collected */
	REPORT_NOTHING_RAN     /* failed before any test ran */
};

/* What is known about one run. */
typedef struct report_run {
	int exit_code;
	bool timed_out;
	bool oom;		   /* the box's OOM-kill counter rose during the run */
	enum report_runner runner; /* of the command, report_runner_of() */
	bool have_report;	   /* a report file existed, or the runner reports on stdout */
	const report *report;	   /* per-test results (may be empty) */
} report_run;

enum report_class report_classify(const report_run *run);

/* A few words for a class: "tests executed", "command not found (exit 127)", ... */
const char *report_class_name(enum report_class c);

/* Whether tests (or at least the command) ran: REPORT_RAN or REPORT_EXIT_ONLY. */
bool report_class_ran(enum report_class c);

/* ---- reading back ------------------------------------------------------------------------ */

/* The Tester reads a run's artefacts back in one command whose stdout is a series of
 * sections, each introduced by a line "@@ap:<nonce>:<size>:<name>" (size: the file's size in
 * bytes, or a number for "oom") and followed by at most the cap's bytes of the file. The nonce
 * is chosen by the host per read, so a test's output cannot fake a boundary by accident.
 * Sections may contain anything (also NULs). */
typedef struct report_section {
	const char *name; /* not NUL-terminated: name_len bytes */
	size_t name_len;
	const char *data; /* points into the text */
	size_t len;
	long long size; /* as the box stated it; -1 when unreadable */
} report_section;

#define REPORT_MAX_SECTIONS 256

/* Split text into at most max sections (extra ones are ignored). *n receives the count. 0, or
 * AP_EINVAL when the nonce is empty. Borrowed pointers into text. */
int report_sections(const char *text, size_t len, const char *nonce, report_section *out,
		    size_t max, size_t *n);

#endif

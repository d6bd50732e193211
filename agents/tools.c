/* SPDX-License-Identifier: MIT */
/* agents/tools.c - tool schemas, argument checks and fixed-argv commands (see tools.h). */
#include "agents/tools.h"

#include "common/buf.h"
#include "common/err.h"
#include "common/jsonnum.h"
#include "common/redact.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PATH_LEN	1024
#define MAX_FILE_BYTES	(1u << 20)
#define MAX_PATTERN_LEN 1000
#define MAX_COMMAND_LEN 8192

enum ptype { P_STR, P_INT, P_BOOL };

typedef struct param {
	const char *name;
	enum ptype type;
	bool required;
	bool is_path;
	long min, max; /* integer bounds, or string length bounds */
} param;

typedef struct tool_def {
	const char *name;
	bool builder_only;
	const char *description;
	const char *schema;
	param params[6];
} tool_def;

/* clang-format off */
static const tool_def DEFS[] = {
	{"list_files", false,
	 "List files and directories under a workspace path (relative), up to max_depth levels, "
	 "skipping .git.",
	 "{\"type\":\"object\",\"properties\":{"
	 "\"path\":{\"type\":\"string\",\"description\":\"directory relative to the repository "
	 "root; default .\"},"
	 "\"max_depth\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":8}},"
	 "\"additionalProperties\":false}",
	 {{"path", P_STR, false, true, 1, MAX_PATH_LEN}, {"max_depth", P_INT, false, false, 1, 8}}},
	{"read_file", false,
	 "Read a text file (path relative to the repository root) with line numbers, from "
	 "start_line (1-based) for at most max_lines lines.",
	 "{\"type\":\"object\",\"properties\":{"
	 "\"path\":{\"type\":\"string\"},"
	 "\"start_line\":{\"type\":\"integer\",\"minimum\":1},"
	 "\"max_lines\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":500}},"
	 "\"required\":[\"path\"],\"additionalProperties\":false}",
	 {{"path", P_STR, true, true, 1, MAX_PATH_LEN}, {"start_line", P_INT, false, false, 1, 10000000},
	  {"max_lines", P_INT, false, false, 1, 500}}},
	{"search_code", false,
	 "Search file contents for a fixed string (default) or an extended regular expression; "
	 "optional directory path and file glob (e.g. *.py); returns file:line:text, capped.",
	 "{\"type\":\"object\",\"properties\":{"
	 "\"pattern\":{\"type\":\"string\"},"
	 "\"regex\":{\"type\":\"boolean\"},"
	 "\"path\":{\"type\":\"string\"},"
	 "\"glob\":{\"type\":\"string\"},"
	 "\"max_matches\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":200}},"
	 "\"required\":[\"pattern\"],\"additionalProperties\":false}",
	 {{"pattern", P_STR, true, false, 1, MAX_PATTERN_LEN}, {"regex", P_BOOL, false, false, 0, 0},
	  {"path", P_STR, false, true, 1, MAX_PATH_LEN}, {"glob", P_STR, false, false, 1, 200},
	  {"max_matches", P_INT, false, false, 1, 200}}},
	{"write_file", true,
	 "Create or overwrite a file (path relative to the repository root) with the given "
	 "content. Parent directories are created.",
	 "{\"type\":\"object\",\"properties\":{"
	 "\"path\":{\"type\":\"string\"},"
	 "\"content\":{\"type\":\"string\"}},"
	 "\"required\":[\"path\",\"content\"],\"additionalProperties\":false}",
	 {{"path", P_STR, true, true, 1, MAX_PATH_LEN},
	  {"content", P_STR, true, false, 0, MAX_FILE_BYTES}}},
	{"replace_in_file", true,
	 "Replace the exact text old with new in a file. old must occur exactly once; include "
	 "enough surrounding lines to make it unique.",
	 "{\"type\":\"object\",\"properties\":{"
	 "\"path\":{\"type\":\"string\"},"
	 "\"old\":{\"type\":\"string\"},"
	 "\"new\":{\"type\":\"string\"}},"
	 "\"required\":[\"path\",\"old\",\"new\"],\"additionalProperties\":false}",
	 {{"path", P_STR, true, true, 1, MAX_PATH_LEN}, {"old", P_STR, true, false, 1, MAX_FILE_BYTES},
	  {"new", P_STR, true, false, 0, MAX_FILE_BYTES}}},
	{"run", true,
	 "Run a shell command in the repository root inside the sandbox (no network). Returns the "
	 "exit status and the head and tail of stdout and stderr.",
	 "{\"type\":\"object\",\"properties\":{"
	 "\"command\":{\"type\":\"string\"},"
	 "\"timeout_s\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":600}},"
	 "\"required\":[\"command\"],\"additionalProperties\":false}",
	 {{"command", P_STR, true, false, 1, MAX_COMMAND_LEN},
	  {"timeout_s", P_INT, false, false, 1, 600}}},
	{"finish", true,
	 "Declare the work done: the reproduction test file you wrote (fails before the fix, passes "
	 "after), the test in it as the runner names it (test_id: a pytest node id "
	 "`tests/test_x.py::test_y`, Go `pkg/path::TestX`, cargo `tests/two.rs::name` or "
	 "`src/lib.rs::tests::name`, jest `FILE::full name`, mocha `suite::title`, Maven "
	 "`Class#method`, unittest `pkg.tests.test_x.TestX.test_y`, a ctest name), the command that runs just that test "
	 "from the repository root, and a short summary of the fix. The Tester then checks it "
	 "from the per-test results; you get its verdict.",
	 "{\"type\":\"object\",\"properties\":{"
	 "\"test_path\":{\"type\":\"string\"},"
	 "\"test_id\":{\"type\":\"string\"},"
	 "\"test_command\":{\"type\":\"string\"},"
	 "\"summary\":{\"type\":\"string\"}},"
	 "\"required\":[\"test_path\",\"test_command\",\"summary\"],\"additionalProperties\":false}",
	 {{"test_path", P_STR, true, true, 1, MAX_PATH_LEN},
	  {"test_id", P_STR, false, false, 1, 4096},
	  {"test_command", P_STR, true, false, 1, MAX_COMMAND_LEN},
	  {"summary", P_STR, true, false, 1, 20000}}},
};
/* clang-format on */

#define NDEFS (sizeof(DEFS) / sizeof(DEFS[0]))

static llm_tool planner_tools[NDEFS], builder_tools[NDEFS];
static size_t n_planner, n_builder;
static pthread_once_t tools_once = PTHREAD_ONCE_INIT;

static void tools_init(void)
{
	for (size_t i = 0; i < NDEFS; i++) {
		llm_tool t = {DEFS[i].name, DEFS[i].description, DEFS[i].schema};
		if (!DEFS[i].builder_only)
			planner_tools[n_planner++] = t;
		builder_tools[n_builder++] = t;
	}
}

const llm_tool *tools_offered(enum tool_set set, size_t *n)
{
	pthread_once(&tools_once, tools_init);
	*n = set == TOOLS_PLANNER ? n_planner : n_builder;
	return set == TOOLS_PLANNER ? planner_tools : builder_tools;
}

static const tool_def *find_def(enum tool_set set, const char *name)
{
	for (size_t i = 0; i < NDEFS; i++)
		if (strcmp(DEFS[i].name, name) == 0)
			return set == TOOLS_PLANNER && DEFS[i].builder_only ? NULL : &DEFS[i];
	return NULL;
}

const char *tools_path_refusal(const char *path)
{
	size_t len = strlen(path);
	if (len == 0)
		return "the path is empty";
	if (len > MAX_PATH_LEN)
		return "the path is too long";
	if (path[0] == '/')
		return "absolute paths are not allowed: give a path relative to the repository "
		       "root";
	if (path[0] == '~')
		return "paths starting with ~ are not allowed";
	/* Walk components: refuse "..", and ".git" (the Tester's diff relies on it). */
	const char *p = path;
	while (*p) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return "'..' path components are not allowed: the path must stay inside "
			       "the "
			       "workspace";
		if (n == 4 && memcmp(p, ".git", 4) == 0)
			return "the .git directory is off limits";
		p += n;
		while (*p == '/')
			p++;
	}
	return NULL;
}

char *tools_asprintf(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

/* Whether argument value v of tool name breaks p's rules (type, length or range, a refused
 * path); *why says how (NULL when out of memory). */
static bool param_bad(const char *name, const param *p, const cJSON *v, char **why)
{
	int64_t n;

	switch (p->type) {
	case P_STR:
		if (!cJSON_IsString(v)) {
			*why = tools_asprintf("%s: argument '%s' must be a string", name, p->name);
			return true;
		}
		size_t len = strlen(v->valuestring);
		if ((long)len < p->min || (long)len > p->max) {
			*why = tools_asprintf("%s: argument '%s' must be %ld to %ld bytes long",
					      name, p->name, p->min, p->max);
			return true;
		}
		if (p->is_path) {
			const char *r = tools_path_refusal(v->valuestring);
			/* "." names the root for the directory arguments. */
			if (r && strcmp(v->valuestring, ".") != 0) {
				*why = tools_asprintf("%s: %s: refused path '%.200s': %s", name,
						      p->name, v->valuestring, r);
				return true;
			}
		}
		break;
	case P_INT:
		if (!ap_json_int(v, &n)) {
			*why =
			    tools_asprintf("%s: argument '%s' must be an integer", name, p->name);
			return true;
		}
		if (n < p->min || n > p->max) {
			*why = tools_asprintf("%s: argument '%s' must be between %ld and %ld", name,
					      p->name, p->min, p->max);
			return true;
		}
		break;
	case P_BOOL:
		if (!cJSON_IsBool(v)) {
			*why = tools_asprintf("%s: argument '%s' must be true or false", name,
					      p->name);
			return true;
		}
		break;
	}
	return false;
}

/* Whether the arguments o of tool d (name) hold one its schema does not name, or miss a
 * required one, or one breaks its rules; *why says how (NULL when out of memory). */
static bool args_bad(const tool_def *d, const char *name, const cJSON *o, char **why)
{
	const cJSON *it;

	cJSON_ArrayForEach (it, o) {
		bool known = false;
		for (size_t i = 0; i < 6 && d->params[i].name; i++)
			if (strcmp(d->params[i].name, it->string) == 0)
				known = true;
		if (!known) {
			*why = tools_asprintf("%s: unknown argument '%.100s'; schema: %s", name,
					      it->string, d->schema);
			return true;
		}
	}
	for (size_t i = 0; i < 6 && d->params[i].name; i++) {
		const param *p = &d->params[i];
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, p->name);

		if (!v || cJSON_IsNull(v)) {
			if (p->required) {
				*why = tools_asprintf("%s: missing required argument '%s'", name,
						      p->name);
				return true;
			}
			continue;
		}
		if (param_bad(name, p, v, why))
			return true;
	}
	return false;
}

cJSON *tools_check_args(enum tool_set set, const char *name, const char *args, char **why)
{
	const tool_def *d = find_def(set, name);
	*why = NULL;
	if (!d) {
		size_t n;
		const llm_tool *offered = tools_offered(set, &n);
		ap_buf names = AP_BUF_INIT(1024);
		for (size_t i = 0; i < n; i++)
			ap_buf_addf(&names, "%s%s", i ? ", " : "", offered[i].name);
		*why = tools_asprintf("unknown tool '%.100s'; available tools: %s", name,
				      ap_buf_str(&names));
		ap_buf_release(&names);
		return NULL;
	}
	cJSON *o = args && *args ? cJSON_ParseWithOpts(args, NULL, true) : cJSON_CreateObject();
	if (!o || !cJSON_IsObject(o)) {
		*why = tools_asprintf("%s: arguments must be a JSON object matching the schema %s",
				      name, d->schema);
		cJSON_Delete(o);
		return NULL;
	}
	if (!args_bad(d, name, o, why))
		return o;
	cJSON_Delete(o);
	if (!*why)
		*why = strdup("out of memory");
	return NULL;
}

/* ---- fixed scripts ----------------------------------------------------------------------
 * Each runs as `sh -c SCRIPT sh ROOT ARG...`: the script text is ours and constant, model
 * text arrives only as positional parameters. `resolve` confines a path with realpath inside
 * the box, so a symlink pointing out of the workspace is refused too. */

#define RESOLVE_FN                                                                                 \
	"resolve() { r=$(realpath -m -- \"$1/$2\") || exit 5; "                                    \
	"case \"$r\" in \"$1\"|\"$1\"/*) ;; *) echo \"refused path '$2': it resolves outside "     \
	"the workspace\" >&2; exit 4;; esac; }; "

static const char SCRIPT_LIST[] =
    RESOLVE_FN "resolve \"$1\" \"$2\"; [ -d \"$r\" ] || { echo \"not a directory: $2\" >&2; "
	       "exit 3; }; cd \"$r\" && find . -mindepth 1 -maxdepth \"$3\" -name .git -prune "
	       "-o -type d -printf '%p/\\n' -o -print | sed 's|^\\./||' | LC_ALL=C sort | "
	       "head -n 500";

static const char SCRIPT_READ[] =
    RESOLVE_FN "resolve \"$1\" \"$2\"; [ -f \"$r\" ] || { echo \"no such file: $2\" >&2; "
	       "exit 3; }; n=$(wc -l < \"$r\"); "
	       "awk -v s=\"$3\" -v c=\"$4\" 'NR>=s && NR<s+c {printf \"%6d  %s\\n\", NR, $0}' "
	       "\"$r\"; e=$(($3+$4-1)); [ $e -gt $n ] && e=$n; "
	       "echo \"[$2: lines $3-$e of $n]\"";

/* $2 pattern, $3 path, $4 max, $5 -F|-E, $6 glob or "" */
static const char SCRIPT_SEARCH[] =
    RESOLVE_FN "resolve \"$1\" \"$3\"; [ -e \"$r\" ] || { echo \"no such path: $3\" >&2; "
	       "exit 3; }; cd \"$1\" || exit 5; rel=${r#\"$1\"}; rel=${rel#/}; "
	       "[ -z \"$rel\" ] && rel=.; "
	       "out=$(grep -rnI --exclude-dir=.git \"$5\" ${6:+\"--include=$6\"} -e \"$2\" -- "
	       "\"$rel\" | head -n \"$4\"); st=$?; "
	       "if [ -z \"$out\" ]; then echo \"no matches\"; else printf '%s\\n' \"$out\" | "
	       "sed 's|^\\./||'; fi";

static const char SCRIPT_WRITE[] =
    RESOLVE_FN "resolve \"$1\" \"$2\"; [ -d \"$r\" ] && { echo \"is a directory: $2\" >&2; "
	       "exit 3; }; mkdir -p -- \"$(dirname -- \"$r\")\" && cat > \"$r\" && "
	       "echo \"wrote $(wc -c < \"$r\") bytes to $2\"";

static const char SCRIPT_CAT[] =
    RESOLVE_FN "resolve \"$1\" \"$2\"; [ -f \"$r\" ] || { echo \"no such file: $2\" >&2; "
	       "exit 3; }; cat -- \"$r\"";

static const char SCRIPT_EXISTS[] =
    RESOLVE_FN "resolve \"$1\" \"$2\"; [ -f \"$r\" ] || { echo \"no such file: $2 (write "
	       "the reproduction test first)\" >&2; exit 3; }";

void tools_argv_free(tool_argv *a)
{
	for (size_t i = 0; i < 16; i++)
		free(a->argv[i]);
	free(a->stdin_data);
	memset(a, 0, sizeof(*a));
}

static const char *str_arg(const cJSON *o, const char *k, const char *def)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : def;
}

static long int_arg(const cJSON *o, const char *k, long def)
{
	return (long)ap_json_int_or(o, k, def);
}

static int set_argv(tool_argv *a, const char *script, const char *const *rest, size_t n)
{
	a->argv[0] = strdup("sh");
	a->argv[1] = strdup("-c");
	a->argv[2] = strdup(script);
	a->argv[3] = strdup("sh");
	for (size_t i = 0; i < n && i + 4 < 15; i++)
		a->argv[4 + i] = strdup(rest[i]);
	for (size_t i = 0; i < 4 + n && i < 15; i++)
		if (!a->argv[i])
			return AP_ENOMEM;
	return 0;
}

int tools_build_argv(const tool_ctx *ctx, const char *name, const cJSON *args, tool_argv *out)
{
	char num1[32], num2[32];
	memset(out, 0, sizeof(*out));
	out->timeout_s = 30;
	if (strcmp(name, "list_files") == 0) {
		snprintf(num1, sizeof(num1), "%ld", int_arg(args, "max_depth", 3));
		const char *rest[] = {ctx->root, str_arg(args, "path", "."), num1};
		return set_argv(out, SCRIPT_LIST, rest, 3);
	}
	if (strcmp(name, "read_file") == 0) {
		snprintf(num1, sizeof(num1), "%ld", int_arg(args, "start_line", 1));
		snprintf(num2, sizeof(num2), "%ld", int_arg(args, "max_lines", 200));
		const char *rest[] = {ctx->root, str_arg(args, "path", ""), num1, num2};
		return set_argv(out, SCRIPT_READ, rest, 4);
	}
	if (strcmp(name, "search_code") == 0) {
		const cJSON *re = cJSON_GetObjectItemCaseSensitive(args, "regex");
		snprintf(num1, sizeof(num1), "%ld", int_arg(args, "max_matches", 50));
		const char *rest[] = {
		    ctx->root, str_arg(args, "pattern", ""),   str_arg(args, "path", "."),
		    num1,      cJSON_IsTrue(re) ? "-E" : "-F", str_arg(args, "glob", "")};
		return set_argv(out, SCRIPT_SEARCH, rest, 6);
	}
	if (strcmp(name, "write_file") == 0) {
		const char *rest[] = {ctx->root, str_arg(args, "path", "")};
		const char *content = str_arg(args, "content", "");
		out->stdin_len = strlen(content);
		out->stdin_data = strdup(content);
		if (!out->stdin_data)
			return AP_ENOMEM;
		return set_argv(out, SCRIPT_WRITE, rest, 2);
	}
	if (strcmp(name, "cat") == 0) {
		const char *rest[] = {ctx->root, str_arg(args, "path", "")};
		return set_argv(out, SCRIPT_CAT, rest, 2);
	}
	if (strcmp(name, "exists") == 0) {
		const char *rest[] = {ctx->root, str_arg(args, "path", "")};
		return set_argv(out, SCRIPT_EXISTS, rest, 2);
	}
	if (strcmp(name, "run") == 0) {
		long t = int_arg(args, "timeout_s", ctx->run_timeout_s);
		out->timeout_s = (int)(t > ctx->run_timeout_s ? ctx->run_timeout_s : t);
		out->argv[0] = strdup("sh");
		out->argv[1] = strdup("-c");
		out->argv[2] = strdup(str_arg(args, "command", "true"));
		return out->argv[0] && out->argv[1] && out->argv[2] ? 0 : AP_ENOMEM;
	}
	return ap_error_set(AP_EINVAL, "no argv for tool %s", name);
}

char *tools_replace_once(const char *text, const char *old, const char *new_text, int *count)
{
	size_t ol = strlen(old);
	const char *first = NULL;
	int n = 0;
	for (const char *p = text; (p = strstr(p, old)) != NULL; p += ol) {
		if (!first)
			first = p;
		n++;
	}
	*count = n;
	if (n != 1)
		return NULL;
	size_t pre = (size_t)(first - text), nl = strlen(new_text), rest = strlen(first + ol);
	char *r = malloc(pre + nl + rest + 1);
	if (!r) {
		*count = -1;
		return NULL;
	}
	memcpy(r, text, pre);
	memcpy(r + pre, new_text, nl);
	memcpy(r + pre + nl, first + ol, rest + 1);
	return r;
}

char *tools_head_tail(const char *text, size_t len, size_t cap)
{
	size_t half = cap / 2, hn, hused, start, tn, k;
	char *head = NULL, *tail = NULL, *r = NULL;

	if (len <= cap && ap_utf8_clean(NULL, 0, text, len, AP_UTF8_REPLACE, NULL) <= cap)
		return ap_utf8_clean_dup(text, len);
	head = malloc(half + 1);
	if (!head)
		return NULL;
	hn = ap_utf8_clean(head, half, text, len, AP_UTF8_REPLACE, &hused);
	/* The tail: from a character's start, no more characters than fit in half. */
	start = len > half && len - half > hused ? len - half : hused;
	for (k = 0; k < 3 && start < len && ((unsigned char)text[start] & 0xC0) == 0x80; k++)
		start++;
	tn = ap_utf8_clean(NULL, 0, text + start, len - start, AP_UTF8_REPLACE, NULL);
	while (tn > half) {
		ap_utf8_decode(text + start, len - start, &k);
		tn -= ap_utf8_clean(NULL, 0, text + start, k, AP_UTF8_REPLACE, NULL);
		start += k;
	}
	tail = malloc(tn + 1);
	if (tail) {
		ap_utf8_clean(tail, tn, text + start, len - start, AP_UTF8_REPLACE, NULL);
		if (asprintf(&r, "%.*s\n[... %zu bytes omitted ...]\n%.*s", (int)hn, head,
			     start - hused, (int)tn, tail) < 0)
			r = NULL;
	}
	free(head);
	free(tail);
	return r;
}

void tool_finish_release(tool_finish *f)
{
	if (!f)
		return;
	free(f->test_path);
	free(f->test_command);
	free(f->test_id);
	free(f->summary);
	memset(f, 0, sizeof(*f));
}

void tools_traj_command(traj *t, const char *type, const char *command, const char *dir,
			const sbx_result *r)
{
	cJSON *o = cJSON_CreateObject();
	char *tail;

	cJSON_AddStringToObject(o, "dir", dir);
	cJSON_AddStringToObject(o, "command", command);
	cJSON_AddNumberToObject(o, "exit", r->exit_code);
	cJSON_AddBoolToObject(o, "timed_out", r->timed_out);
	cJSON_AddNumberToObject(o, "millis", (double)r->millis);
	tail = tools_head_tail(r->out ? r->out : "", r->out_len, 4000);
	if (tail)
		cJSON_AddStringToObject(o, "stdout", tail);
	free(tail);
	tail = tools_head_tail(r->err ? r->err : "", r->err_len, 2000);
	if (tail)
		cJSON_AddStringToObject(o, "stderr", tail);
	free(tail);
	traj_event(t, type, o);
}

/* The "sandbox_exec" event of one command: its argv (each word cut at 200 bytes). */
static void traj_exec(const tool_ctx *ctx, const tool_argv *a, const sbx_result *r)
{
	ap_buf line = AP_BUF_INIT(8192);

	for (char *const *w = a->argv; *w; w++)
		ap_buf_addf(&line, "%s%s%.200s%s%s", w == a->argv ? "" : " ",
			    strpbrk(*w, " \t\n'\"") ? "'" : "", *w, strlen(*w) > 200 ? "..." : "",
			    strpbrk(*w, " \t\n'\"") ? "'" : "");
	tools_traj_command(ctx->traj, "sandbox_exec", ap_buf_str(&line), ctx->root, r);
	ap_buf_release(&line);
}

/* Run an argv in the box. */
static int exec_argv(const tool_ctx *ctx, const tool_argv *a, sbx_result *res)
{
	sbx_cmd cmd = SBX_CMD_INIT;
	int rc;
	cmd.argv = (const char *const *)a->argv;
	cmd.workdir = ctx->root;
	cmd.stdin_data = a->stdin_data;
	cmd.stdin_len = a->stdin_len;
	cmd.timeout_s = a->timeout_s;
	cmd.output_cap = 1u << 20;
	cmd.cancel = ctx->cancel;
	rc = sbx_exec(ctx->box, &cmd, res);
	if (!rc && ctx->traj)
		traj_exec(ctx, a, res);
	return rc;
}

static char *format_run(const tool_ctx *ctx, const sbx_result *r)
{
	char *o = tools_head_tail(r->out ? r->out : "", r->out_len, ctx->result_cap / 2);
	char *e = tools_head_tail(r->err ? r->err : "", r->err_len, ctx->result_cap / 2);
	char *s = NULL;
	if (o && e &&
	    asprintf(&s, "exit status: %d%s\n--- stdout ---\n%s\n--- stderr ---\n%s", r->exit_code,
		     r->timed_out ? " (timed out, killed)" : "", o, e) < 0)
		s = NULL;
	free(o);
	free(e);
	return s;
}

/* Run a fixed script; exit 0 → stdout is the answer, else stderr is an error for the model. */
static int run_script(const tool_ctx *ctx, const tool_argv *a, char **out, bool *is_error)
{
	sbx_result r = SBX_RESULT_INIT;
	int rc = exec_argv(ctx, a, &r);
	if (rc)
		goto out;
	*is_error = r.exit_code != 0;
	if (r.exit_code == 0)
		*out = tools_head_tail(r.out ? r.out : "", r.out_len, ctx->result_cap);
	else if (r.err_len)
		*out = tools_head_tail(r.err, r.err_len, ctx->result_cap);
	else
		*out = tools_asprintf("failed with exit status %d", r.exit_code);
	if (!*out)
		rc = AP_ENOMEM;
out:
	sbx_result_release(&r);
	return rc;
}

static int do_replace(const tool_ctx *ctx, const cJSON *args, char **out, bool *is_error)
{
	tool_argv a;
	sbx_result r = SBX_RESULT_INIT;
	const char *path = str_arg(args, "path", "");
	int rc = tools_build_argv(ctx, "cat", args, &a);
	if (rc)
		goto out_argv;
	if ((rc = exec_argv(ctx, &a, &r)))
		goto out_argv;
	if (r.exit_code != 0) {
		*is_error = true;
		*out = tools_head_tail(r.err ? r.err : "", r.err_len, ctx->result_cap);
		goto out_argv;
	}
	if (r.truncated || strlen(r.out ? r.out : "") != r.out_len) {
		*is_error = true;
		*out = tools_asprintf(
		    "replace_in_file: %s is binary or larger than 1 MiB; use write_file", path);
		goto out_argv;
	}
	int count = 0;
	char *updated = tools_replace_once(r.out ? r.out : "", str_arg(args, "old", ""),
					   str_arg(args, "new", ""), &count);
	if (!updated) {
		*is_error = true;
		if (count < 0)
			rc = AP_ENOMEM;
		else if (count == 0)
			*out = tools_asprintf(
			    "replace_in_file: the text to replace was not found in %s "
			    "(it must match exactly, including whitespace); read the "
			    "file again",
			    path);
		else
			*out = tools_asprintf(
			    "replace_in_file: the text to replace occurs %d times in %s; "
			    "include more surrounding lines so it matches once",
			    count, path);
		goto out_argv;
	}
	tools_argv_free(&a);
	cJSON *wargs = cJSON_CreateObject();
	cJSON_AddStringToObject(wargs, "path", path);
	cJSON_AddStringToObject(wargs, "content", updated);
	free(updated);
	rc = tools_build_argv(ctx, "write_file", wargs, &a);
	cJSON_Delete(wargs);
	if (!rc)
		rc = run_script(ctx, &a, out, is_error);
	if (!rc && !*is_error) {
		free(*out);
		*out = tools_asprintf("replaced 1 occurrence in %s", path);
	}
out_argv:
	tools_argv_free(&a);
	sbx_result_release(&r);
	if (!rc && !*out)
		rc = AP_ENOMEM;
	return rc;
}

int tools_call(const tool_ctx *ctx, enum tool_set set, const char *name, const char *args,
	       char **out, bool *is_error, bool *finished, tool_finish *fin)
{
	char *why = NULL;
	tool_argv a;
	int rc = 0;
	*out = NULL;
	*is_error = false;
	*finished = false;
	memset(&a, 0, sizeof(a));
	cJSON *o = tools_check_args(set, name, args, &why);
	if (!o) {
		*is_error = true;
		*out = why;
		return why ? 0 : AP_ENOMEM;
	}
	if (strcmp(name, "replace_in_file") == 0) {
		rc = do_replace(ctx, o, out, is_error);
		goto out;
	}
	if (strcmp(name, "finish") == 0) {
		cJSON *p = cJSON_CreateObject();
		if (!p || !cJSON_AddStringToObject(p, "path", str_arg(o, "test_path", ""))) {
			cJSON_Delete(p);
			rc = AP_ENOMEM;
			goto out;
		}
		rc = tools_build_argv(ctx, "exists", p, &a);
		cJSON_Delete(p);
		if (rc || (rc = run_script(ctx, &a, out, is_error)))
			goto out;
		if (*is_error)
			goto out;
		free(*out);
		fin->test_path = strdup(str_arg(o, "test_path", ""));
		fin->test_command = strdup(str_arg(o, "test_command", ""));
		if (*str_arg(o, "test_id", "") &&
		    !(fin->test_id = strdup(str_arg(o, "test_id", "")))) {
			rc = AP_ENOMEM;
			goto out;
		}
		fin->summary = strdup(str_arg(o, "summary", ""));
		*out = strdup("submitted to the Tester");
		if (!fin->test_path || !fin->test_command || !fin->summary || !*out) {
			rc = AP_ENOMEM;
			goto out;
		}
		*finished = true;
		goto out;
	}
	if ((rc = tools_build_argv(ctx, name, o, &a)))
		goto out;
	if (strcmp(name, "run") == 0) {
		sbx_result r = SBX_RESULT_INIT;
		rc = exec_argv(ctx, &a, &r);
		if (!rc) {
			*out = format_run(ctx, &r);
			*is_error = false;
			if (!*out)
				rc = AP_ENOMEM;
		}
		sbx_result_release(&r);
		goto out;
	}
	rc = run_script(ctx, &a, out, is_error);
out:
	tools_argv_free(&a);
	cJSON_Delete(o);
	return rc;
}

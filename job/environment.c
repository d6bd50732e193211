/* SPDX-License-Identifier: MIT */
/* job/environment.c - toolchain image choice, the setup phase, the environment cache and the
 * blocked-egress report (see environment.h). */
#include "job/environment.h"

#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/stats.h"
#include "job/env_cache.h"
#include "job/repo_config.h"
#include "sandbox/egress.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <openssl/evp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define TAIL_CAP	      4000	 /* output tail kept for a failure sentence */
#define BUILD_TAIL_MAX	      400	 /* of it quoted after a failed image build */
#define LIVE_LINE_MAX	      160	 /* characters of the live setup line */
#define LIVE_INTERVAL_MS      1000	 /* least time between live updates */
#define LIST_CAP	      (1u << 20) /* ENV_FILES_LIST read back */
#define SBX_DENIAL_REPORT_MAX 64
#define SETUP_ERR_MAX	      1000  /* a setup failure's sentence (common/err.c keeps 1023) */
#define BUILD_PROGRESS_MS     15000 /* least time between first-use build progress lines */

const char *const env_flavors[] = {"node", "go", "rust", "java", "python", "c", NULL};

static const char *const default_flavor = "python";

/* One first-use build of a flavour image (env_check_image). */
struct build_ctx {
	const ap_config *cfg;
	env_choice *c;
	const char *cmd; /* the build program, run as `cmd --flavor NAME` */
	void (*live_fn)(void *ud, const char *msg);
	void *ud;
	int64_t start; /* ap_mono_ms() when the build began */
	int log_fd;    /* the build's log, or -1 */
	char log[PATH_MAX];
};

/* Marker files at the top of a checkout, in the order they decide. */
static const struct {
	const char *file;
	const char *flavor;
} markers[] = {
    {"package.json", "node"},
    {"go.mod", "go"},
    {"Cargo.toml", "rust"},
    {"pom.xml", "java"},
    {"build.gradle", "java"},
    {"build.gradle.kts", "java"},
    {"pyproject.toml", "python"},
    {"setup.py", "python"},
    {"setup.cfg", "python"},
    {"requirements.txt", "python"},
    {"Pipfile", "python"},
    {"pytest.ini", "python"},
    {"tox.ini", "python"},
    {"conftest.py", "python"},
    {"CMakeLists.txt", "c"},
    {"Makefile", "c"},
    {"makefile", "c"},
    {"GNUmakefile", "c"},
};

/* Which flavour has a command (the first word of a step or of the test command). */
static const struct {
	const char *cmd;
	const char *flavor;
} tools[] = {
    {"npm", "node"},	  {"npx", "node"},	 {"node", "node"},     {"nodejs", "node"},
    {"yarn", "node"},	  {"pnpm", "node"},	 {"go", "go"},	       {"gofmt", "go"},
    {"cargo", "rust"},	  {"rustc", "rust"},	 {"mvn", "java"},      {"gradle", "java"},
    {"java", "java"},	  {"javac", "java"},	 {"pip", "python"},    {"pip3", "python"},
    {"python", "python"}, {"python3", "python"}, {"pytest", "python"}, {"tox", "python"},
    {"gcc", "c"},	  {"g++", "c"},		 {"cc", "c"},	       {"cmake", "c"},
    {"ctest", "c"},	  {"make", "c"},	 {"pkg-config", "c"},
};

static void note(const env_setup_opts *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note(const env_setup_opts *o, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (!o->note)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	o->note(o->ud, msg);
}

/* ---- the image ---- */

bool env_is_flavor(const char *name)
{
	for (size_t i = 0; name && env_flavors[i]; i++)
		if (strcmp(name, env_flavors[i]) == 0)
			return true;
	return false;
}

int env_flavor_image(const ap_config *cfg, const char *flavor, char *out, size_t n)
{
	bool dflt = strcmp(flavor, default_flavor) == 0;
	int rc = dflt
		     ? ap_fmt(out, n, "%s", cfg_str(cfg, "AUTOPATCH_SANDBOX_IMAGE"))
		     : ap_fmt(out, n, "%s:%s", cfg_str(cfg, "AUTOPATCH_FLAVOR_REPOSITORY"), flavor);

	if (rc)
		return ap_error_set(
		    rc, "%s is too long for an image reference (at most %zu bytes)",
		    dflt ? "AUTOPATCH_SANDBOX_IMAGE" : "AUTOPATCH_FLAVOR_REPOSITORY", n - 1);
	return 0;
}

/* A regular file (no link) at the top of the checkout, through the safe reader. */
static bool has_file(const char *repo_dir, const char *name)
{
	ap_buf b = AP_BUF_INIT(1);
	int rc = fs_read_file_at(&b, repo_dir, name, FS_READ_NOFOLLOW);

	ap_buf_release(&b);
	ap_error_clear();
	return rc == 0 || rc == AP_ETOOBIG;
}

/* A regular *.py file at the top of the checkout (no link followed). */
static bool has_top_py(const char *repo_dir)
{
	int fd = open(repo_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	bool found = false;
	int n = 0;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	while (!found && n++ < 2000 && (de = readdir(d)) != NULL) {
		size_t len = strlen(de->d_name);
		struct stat st;

		if (len > 3 && strcmp(de->d_name + len - 3, ".py") == 0 &&
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode))
			found = true;
	}
	closedir(d);
	return found;
}

int env_choose_image(env_choice *out, const ap_config *cfg, const char *repo_dir,
		     const char *image_field, const char *source)
{
	char prefix[300];
	int rc;

	memset(out, 0, sizeof(*out));
	if (image_field && env_is_flavor(image_field)) {
		snprintf(out->flavor, sizeof(out->flavor), "%s", image_field); /* a known flavour */
		if ((rc = env_flavor_image(cfg, out->flavor, out->image, sizeof(out->image))))
			return rc;
		snprintf(out->why, sizeof(out->why), "`image: %s` in %s", image_field,
			 source ? source : REPO_CONFIG_PATH);
		return 0;
	}
	if (image_field) {
		if (strlen(image_field) >= sizeof(out->image))
			return ap_error_set(AP_EINVAL, "`image: %.80s...` is too long",
					    image_field);
		snprintf(out->image, sizeof(out->image), "%s", image_field);
		snprintf(out->why, sizeof(out->why), "`image: %.200s` in %s", image_field,
			 source ? source : REPO_CONFIG_PATH);
		/* autopatch-sandbox:go is the go flavour, however it was named. */
		snprintf(prefix, sizeof(prefix),
			 "%s:", cfg_str(cfg, "AUTOPATCH_FLAVOR_REPOSITORY"));
		if (strncmp(image_field, prefix, strlen(prefix)) == 0 &&
		    env_is_flavor(image_field + strlen(prefix)))
			snprintf(out->flavor, sizeof(out->flavor), "%s",
				 image_field + strlen(prefix));
		return 0;
	}
	for (size_t i = 0; i < sizeof(markers) / sizeof(markers[0]); i++) {
		/* A Makefile often only wraps another toolchain: Python sources at the top
		 * make it a Python project. */
		if (strcmp(markers[i].flavor, "c") == 0 && has_top_py(repo_dir)) {
			snprintf(out->flavor, sizeof(out->flavor), "%s", "python");
			snprintf(out->why, sizeof(out->why),
				 "Python files at the top of the checkout");
			break;
		}
		if (has_file(repo_dir, markers[i].file)) {
			snprintf(out->flavor, sizeof(out->flavor), "%s", markers[i].flavor);
			snprintf(out->why, sizeof(out->why), "%s in the checkout", markers[i].file);
			break;
		}
	}
	if (!out->flavor[0]) {
		snprintf(out->flavor, sizeof(out->flavor), "%s", default_flavor);
		snprintf(out->why, sizeof(out->why),
			 "the default: no package.json, go.mod, Cargo.toml, pom.xml, build.gradle, "
			 "CMakeLists.txt or Makefile in the checkout");
	}
	return env_flavor_image(cfg, out->flavor, out->image, sizeof(out->image));
}

void env_describe_choice(const env_choice *c, char *out, size_t n)
{
	if (c->flavor[0])
		snprintf(out, n, "sandbox image %s (flavour %s: %s)", c->image, c->flavor, c->why);
	else
		snprintf(out, n, "sandbox image %s (%s)", c->image, c->why);
}

static pthread_mutex_t build_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *tail_lines(const char *t);

/* The build script next to this checkout: deploy/sandbox-image/build.sh one, two or three
 * directories above the running binary (build/autopatch, build/cli/..., an install prefix). */
static bool default_build_cmd(char *out, size_t n)
{
	static const char rel[] = "/deploy/sandbox-image/build.sh";
	char exe[PATH_MAX], *slash;
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (len <= 0)
		return false;
	exe[len] = '\0';
	for (int up = 0; up < 3; up++) {
		slash = strrchr(exe, '/');
		if (!slash || slash == exe)
			return false;
		*slash = '\0';
		if (strlen(exe) + sizeof(rel) <= n) {
			snprintf(out, n, "%s%s", exe, rel);
			if (access(out, X_OK) == 0)
				return true;
		}
	}
	return false;
}

/* The build's environment: ours, with AUTOPATCH_FLAVOR_REPOSITORY set to the configured one
 * (it may come from the env file), so the script tags the image the job looks for. */
static char **build_env(const ap_config *cfg, char *repo_var, size_t n)
{
	size_t count = 0, j = 0;
	char **env;

	/* Fits: only a flavour is built, and its image (repository included) fit 256 bytes. */
	snprintf(repo_var, n, "AUTOPATCH_FLAVOR_REPOSITORY=%s",
		 cfg_str(cfg, "AUTOPATCH_FLAVOR_REPOSITORY"));
	while (environ[count])
		count++;
	env = calloc(count + 2, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < count; i++)
		if (strncmp(environ[i], "AUTOPATCH_FLAVOR_REPOSITORY=", 28) != 0)
			env[j++] = environ[i];
	env[j] = repo_var;
	return env;
}

/* Where the build's whole output is kept: $AUTOPATCH_DATA_DIR/sandbox-builds/FLAVOR-TIME.log. */
static int open_build_log(const ap_config *cfg, const env_choice *c, char *path, size_t n)
{
	char dir[PATH_MAX];
	time_t now = (time_t)ap_wall_s();
	struct tm tm;
	int fd;

	if (strlen(cfg_str(cfg, "AUTOPATCH_DATA_DIR")) > PATH_MAX - 64)
		return -1;
	/* Fits: the length was checked above (the log is best-effort: no log, no error). */
	snprintf(dir, sizeof(dir), "%.3900s/sandbox-builds", cfg_str(cfg, "AUTOPATCH_DATA_DIR"));
	if (fs_mkdir_p(dir, 0700) != 0)
		return -1;
	gmtime_r(&now, &tm);
	snprintf(path, n, "%.3950s/%.15s-%04d%02d%02dT%02d%02d%02dZ.log", dir, c->flavor,
		 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		path[0] = '\0';
	return fd;
}

/* The last non-empty line of the tail, for the progress line. */
static void last_line(const char *tail, size_t tlen, char *out, size_t n)
{
	size_t end = tlen, start;

	while (end && (tail[end - 1] == '\n' || tail[end - 1] == '\r'))
		end--;
	start = end;
	while (start && tail[start - 1] != '\n')
		start--;
	if (end - start >= n)
		start = end - (n - 1);
	snprintf(out, n, "%.*s", (int)(end - start), tail + start);
}

/* The running build's progress, every BUILD_PROGRESS_MS: the progress line and the log. */
static void build_progress(const struct build_ctx *bc, const char *tail, size_t tlen)
{
	char line[LIVE_LINE_MAX + 1], msg[LIVE_LINE_MAX + 600];

	last_line(tail, tlen, line, sizeof(line));
	snprintf(msg, sizeof(msg),
		 "building the sandbox image %s (first use): %lld s so far%s%s (log: %s)",
		 bc->c->image, (long long)((ap_mono_ms() - bc->start) / 1000), line[0] ? "; " : "",
		 line, bc->log[0] ? bc->log : "not kept");
	ap_info("%s", msg);
	if (bc->live_fn)
		bc->live_fn(bc->ud, msg);
}

/* Read the build's output until it ends or the deadline passes: into the log, its tail kept,
 * progress reported. Returns whether the deadline passed (the group is then killed). */
static bool follow_build(struct build_ctx *bc, int rfd, pid_t pid, int64_t deadline, char *tail,
			 size_t *tlen)
{
	char buf[4096];
	int64_t next = ap_mono_ms() + BUILD_PROGRESS_MS;

	for (;;) {
		struct pollfd p = {rfd, POLLIN, 0};
		int64_t left = deadline - ap_mono_ms();
		ssize_t got;

		if (left <= 0) {
			kill(-pid, SIGKILL);
			return true;
		}
		if (ap_mono_ms() >= next) {
			build_progress(bc, tail, *tlen);
			next = ap_mono_ms() + BUILD_PROGRESS_MS;
		}
		if (poll(&p, 1, left > 1000 ? 1000 : (int)left) <= 0)
			continue;
		got = read(rfd, buf, sizeof(buf));
		if (got <= 0)
			return false;
		if (bc->log_fd >= 0 && write(bc->log_fd, buf, (size_t)got) != got) {
			close(bc->log_fd); /* a full disk: the build goes on without its log */
			bc->log_fd = -1;
		}
		for (ssize_t i = 0; i < got; i++) {
			if (*tlen == TAIL_CAP) {
				memmove(tail, tail + TAIL_CAP / 2, TAIL_CAP / 2);
				*tlen = TAIL_CAP / 2;
			}
			tail[(*tlen)++] = buf[i];
		}
	}
}

/* The build command --flavor NAME on the host, in its own process group, output to the log and
 * a pipe we keep the tail of, within the build timeout (the whole group is killed after it).
 * AP_ENOTFOUND with the sentence when it cannot run, fails or times out: the image is still
 * not there, and the build is what must change. */
static int build_flavor(struct build_ctx *bc)
{
	const env_choice *c = bc->c;
	char *argv[] = {(char *)bc->cmd, "--flavor", (char *)c->flavor, NULL}, **envp;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	char tail[TAIL_CAP + 1] = "", what[1200], repo_var[300];
	size_t tlen = 0;
	int64_t timeout_s = 1200;
	int pfd[2], status = 0, rc;
	bool timed_out;
	const char *tl;
	pid_t pid;

	if ((rc = cfg_int(bc->cfg, "AUTOPATCH_SANDBOX_BUILD_TIMEOUT_S", 1, 86400, &timeout_s)))
		return rc;
	snprintf(what, sizeof(what),
		 "the sandbox image %s for the %s flavour (%s) is not built on this host, and "
		 "building it on first use failed: `%.200s --flavor %s`",
		 c->image, c->flavor, c->why, bc->cmd, c->flavor);
	if (!(envp = build_env(bc->cfg, repo_var, sizeof(repo_var))))
		return ap_error_set(AP_ENOMEM, "out of memory");
	if (pipe2(pfd, O_CLOEXEC) != 0) {
		free(envp);
		return ap_error_set(AP_EIO, "pipe: %s", strerror(errno));
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
	posix_spawnattr_setpgroup(&attr, 0);
	rc = posix_spawn(&pid, bc->cmd, &fa, &attr, argv, envp);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	free(envp);
	close(pfd[1]);
	if (rc != 0) {
		close(pfd[0]);
		return ap_error_set(AP_ENOTFOUND, "%s could not be run: %s", what, strerror(rc));
	}
	timed_out = follow_build(bc, pfd[0], pid, bc->start + timeout_s * 1000, tail, &tlen);
	close(pfd[0]);
	tail[tlen] = '\0';
	waitpid(pid, &status, 0);
	if (!timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	/* The sentence is capped at 1 KiB: keep the end of the tail, where the error is. */
	tl = tail_lines(tail);
	if (strlen(tl) > BUILD_TAIL_MAX)
		tl += strlen(tl) - BUILD_TAIL_MAX;
	if (timed_out)
		return ap_error_set(AP_ENOTFOUND,
				    "%s did not finish within AUTOPATCH_SANDBOX_BUILD_TIMEOUT_S "
				    "(%lld s); the build's log is %s; its output ended with:\n%s",
				    what, (long long)timeout_s, bc->log[0] ? bc->log : "not kept",
				    tl);
	return ap_error_set(
	    AP_ENOTFOUND,
	    "%s %s %d after %lld s; the build's log is %s; its output ended with:\n%s", what,
	    WIFEXITED(status) ? "exited with" : "was killed by signal",
	    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
	    (long long)((ap_mono_ms() - bc->start) / 1000), bc->log[0] ? bc->log : "not kept", tl);
}

/* Builds are serialised across this process's workers (build_lock) and across processes
 * sharing AUTOPATCH_DATA_DIR (a flock: two `autopatch fix` runs), so a flavour is built once;
 * whoever waited finds it present. *built: this call ran the build. */
static int build_locked(sbx_engine *e, struct build_ctx *bc, bool *built)
{
	const char *data = cfg_str(bc->cfg, "AUTOPATCH_DATA_DIR");
	env_choice *c = bc->c;
	char lock[4200];
	int fd, rc;

	if ((rc = ap_fmt(lock, sizeof(lock), "%s/sandbox-build.lock", data)))
		return ap_error_set(rc, "AUTOPATCH_DATA_DIR is too long for the build lock: %s",
				    ap_error_last());
	if (fs_mkdir_p(data, 0700) != 0)
		ap_error_clear();
	pthread_mutex_lock(&build_lock);
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd >= 0)
		while (flock(fd, LOCK_EX) != 0 && errno == EINTR)
			;
	/* Another job may have built it while this one waited. */
	rc = sbx_image_id(e, c->image, c->image_id, sizeof(c->image_id));
	if (rc == AP_ENOTFOUND) {
		ap_error_clear();
		*built = true;
		bc->start = ap_mono_ms();
		bc->log_fd = open_build_log(bc->cfg, c, bc->log, sizeof(bc->log));
		if (bc->log_fd < 0)
			ap_error_clear();
		rc = build_flavor(bc);
		if (bc->log_fd >= 0)
			close(bc->log_fd);
		if (rc == 0) {
			rc = sbx_image_id(e, c->image, c->image_id, sizeof(c->image_id));
			if (rc == AP_ENOTFOUND)
				rc =
				    ap_error_set(AP_ENOTFOUND,
						 "the build command `%.200s --flavor %s` exited "
						 "with 0, but the sandbox image %s is still not on "
						 "the Docker engine: the command must tag it so "
						 "(AUTOPATCH_FLAVOR_REPOSITORY:%s); its log is %s",
						 bc->cmd, c->flavor, c->image, c->flavor,
						 bc->log[0] ? bc->log : "not kept");
		}
	}
	if (fd >= 0)
		close(fd); /* releases the flock */
	pthread_mutex_unlock(&build_lock);
	return rc;
}

void env_image_toolchain(sbx_engine *e, const char *image, char *out, size_t n)
{
	char versions[240], suite[40];

	out[0] = '\0';
	if (sbx_image_label(e, image, "autopatch.toolchain", versions, sizeof(versions)) != 0) {
		ap_error_clear();
		return;
	}
	if (sbx_image_label(e, image, "autopatch.suite", suite, sizeof(suite)) != 0) {
		ap_error_clear();
		suite[0] = '\0';
	}
	snprintf(out, n, "%s%s%s%s", versions, suite[0] ? " (Debian " : "", suite,
		 suite[0] ? ")" : "");
}

static void read_toolchain(sbx_engine *e, env_choice *c)
{
	env_image_toolchain(e, c->image, c->toolchain, sizeof(c->toolchain));
}

/* A missing flavour that is not built here: the sentence with the command to build it. */
static int refuse_build(const env_choice *c, const char *why_not)
{
	return ap_error_set(AP_ENOTFOUND,
			    "the sandbox image %s for the %s flavour (%s) is not built on this "
			    "host, and %s: build it with `deploy/sandbox-image/build.sh --flavor "
			    "%s` (a few minutes)",
			    c->image, c->flavor, c->why, why_not, c->flavor);
}

int env_check_image(sbx_engine *e, const ap_config *cfg, env_choice *c,
		    void (*note_fn)(void *ud, const char *msg),
		    void (*live_fn)(void *ud, const char *msg), void *ud)
{
	struct build_ctx bc = {.cfg = cfg, .c = c, .live_fn = live_fn, .ud = ud, .log_fd = -1};
	char msg[PATH_MAX + 1024], cmd[PATH_MAX];
	bool on = true, built = false;
	int rc = sbx_image_id(e, c->image, c->image_id, sizeof(c->image_id));

	if (rc == 0)
		read_toolchain(e, c);
	if (rc != AP_ENOTFOUND)
		return rc;
	ap_error_clear();
	if (!c->flavor[0])
		return ap_error_set(
		    AP_ENOTFOUND,
		    "the sandbox image %s (%s) is not on the autopatch host's Docker "
		    "engine, and autopatch never pulls: run `docker pull %s` there, "
		    "or name another image in `image:`",
		    c->image, c->why, c->image);
	if ((rc = cfg_bool(cfg, "AUTOPATCH_SANDBOX_BUILD", &on)))
		return rc;
	if (!on)
		return refuse_build(c, "AUTOPATCH_SANDBOX_BUILD=off keeps this host from building "
				       "it on first use");
	if (cfg_is_set(cfg, "AUTOPATCH_SANDBOX_BUILD_CMD")) {
		if ((rc = ap_fmt(cmd, sizeof(cmd), "%s",
				 cfg_str(cfg, "AUTOPATCH_SANDBOX_BUILD_CMD"))))
			return ap_error_set(rc,
					    "AUTOPATCH_SANDBOX_BUILD_CMD is too long (at most "
					    "%zu bytes)",
					    sizeof(cmd) - 1);
	} else if (!default_build_cmd(cmd, sizeof(cmd)))
		return refuse_build(c, "deploy/sandbox-image/build.sh is not next to the autopatch "
				       "binary to build it on first use (set "
				       "AUTOPATCH_SANDBOX_BUILD_CMD to it)");
	bc.cmd = cmd;
	snprintf(msg, sizeof(msg),
		 "building the sandbox image %s for the %s flavour (first use; this takes a few "
		 "minutes, one build at a time on this host)",
		 c->image, c->flavor);
	ap_info("%s", msg);
	if (note_fn)
		note_fn(ud, msg);
	rc = build_locked(e, &bc, &built);
	if (rc != 0)
		return rc;
	read_toolchain(e, c);
	if (built)
		snprintf(msg, sizeof(msg), "built the sandbox image %s in %lld s%s%s%s%s", c->image,
			 (long long)((ap_mono_ms() - bc.start) / 1000), c->toolchain[0] ? ": " : "",
			 c->toolchain, bc.log[0] ? "; log: " : "", bc.log);
	else
		snprintf(msg, sizeof(msg), "the sandbox image %s was built by another job",
			 c->image);
	ap_info("%s", msg);
	if (note_fn)
		note_fn(ud, msg);
	return 0;
}

/* ---- commands in the box ---- */

/* Run a short sh script in the box; the exit code in *code. */
static int box_sh(sbx_box *b, const char *script, int timeout_s, int *code, sbx_result *keep)
{
	const char *argv[] = {"sh", "-c", script, NULL};
	sbx_cmd cmd = SBX_CMD_INIT;
	sbx_result r = SBX_RESULT_INIT;
	int rc;

	cmd.argv = argv;
	cmd.timeout_s = timeout_s;
	cmd.output_cap = LIST_CAP;
	rc = sbx_exec(b, &cmd, &r);
	if (rc == 0)
		*code = r.exit_code;
	if (keep && rc == 0)
		*keep = r;
	else
		sbx_result_release(&r);
	return rc;
}

const char *env_flavor_of_command(const char *command)
{
	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++)
		if (strcmp(command, tools[i].cmd) == 0)
			return tools[i].flavor;
	return NULL;
}

/* The first word of a shell command when it is a plain command name worth probing. */
static bool first_word(const char *cmdline, char *out, size_t n)
{
	static const char *const skip[] = {
	    "if", "for", "while", "case",  "until", "exec", "set", "export",  "cd",   "{",
	    "(",  "!",	 "true",  "false", ":",	    ".",    "env", "command", "sudo", NULL};
	size_t len;

	while (*cmdline == ' ' || *cmdline == '\t' || *cmdline == '\n')
		cmdline++;
	len = strcspn(cmdline, " \t\n;&|<>()$`\"'\\");
	if (len == 0 || len >= n)
		return false;
	snprintf(out, n, "%.*s", (int)len, cmdline);
	if (strchr(out, '=') || strchr(out, '/'))
		return false;
	for (size_t i = 0; skip[i]; i++)
		if (strcmp(out, skip[i]) == 0)
			return false;
	for (const char *p = out; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.' || *p == '+'))
			return false;
	return true;
}

static int missing_tool(const env_choice *c, const char *what, const char *cmdline,
			const char *word)
{
	const char *fl = env_flavor_of_command(word);
	char where[400];

	env_describe_choice(c, where, sizeof(where));
	if (fl && (!c->flavor[0] || strcmp(fl, c->flavor) != 0))
		return ap_error_set(
		    AP_ENOTFOUND,
		    "the %s `%.200s` needs `%s`, which the %s does not have; the %s "
		    "flavour has it: add `image: %s` to %s",
		    what, cmdline, word, where, fl, fl, REPO_CONFIG_PATH);
	return ap_error_set(AP_ENOTFOUND,
			    "the %s `%.200s` needs `%s`, which the %s does not have, and no "
			    "flavour provides it: name an image that has it in `image:` in %s, or "
			    "install it in `setup:`",
			    what, cmdline, word, where, REPO_CONFIG_PATH);
}

int env_check_tools(sbx_box *b, const env_choice *c, const char *const *setup_steps,
		    const char *test_cmd)
{
	char word[64], script[128];
	int code = 0, rc;
	size_t n = 0;

	while (setup_steps && setup_steps[n])
		n++;
	for (size_t i = 0; i <= n; i++) {
		const char *line = i < n ? setup_steps[i] : test_cmd;

		if (!line || !first_word(line, word, sizeof(word)))
			continue;
		/* Fits: word is at most 63 bytes of [A-Za-z0-9._+-] (first_word). */
		snprintf(script, sizeof(script), "command -v '%s' >/dev/null 2>&1", word);
		rc = box_sh(b, script, 30, &code, NULL);
		if (rc)
			return rc;
		if (code != 0)
			return missing_tool(c, i < n ? "setup step" : "test command", line, word);
	}
	return 0;
}

/* ---- streaming archives ---- */

struct sink {
	int fd;
	int64_t bytes, cap;
	bool failed;
};

static void sink_write(void *ud, int stream, const char *p, size_t n)
{
	struct sink *s = ud;

	(void)stream;
	if (s->failed)
		return;
	if (s->bytes + (int64_t)n > s->cap) {
		s->failed = true;
		return;
	}
	while (n) {
		ssize_t w = write(s->fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			s->failed = true;
			return;
		}
		p += w;
		n -= (size_t)w;
		s->bytes += w;
	}
}

static long source_read(void *ud, char *buf, size_t n)
{
	int fd = *(int *)ud;
	ssize_t r;

	do
		r = read(fd, buf, n);
	while (r < 0 && errno == EINTR);
	return (long)r;
}

/* Lines that save and restore the archive. The list of kept paths travels as the archive's
 * first member, so a restore knows what it restored. */
#define ENV_LIST_MEMBER ".autopatch-env-keep"
static const char SCRIPT_SAVE[] =
    "cp " ENV_KEEP_LIST " " ENV_DIR "/" ENV_LIST_MEMBER " && "
    "tar -cf - -C " ENV_DIR " " ENV_LIST_MEMBER " -C /tmp/workspace -T " ENV_KEEP_LIST;
static const char SCRIPT_RESTORE[] =
    "mkdir -p " ENV_DIR " /tmp/workspace/.git/info && tar -xf - -C /tmp/workspace && "
    "mv /tmp/workspace/" ENV_LIST_MEMBER " " ENV_KEEP_LIST " && cp " ENV_KEEP_LIST
    " " ENV_FILES_LIST " && cat " ENV_FILES_LIST
    " | sed 's|^|/|' >> /tmp/workspace/.git/info/exclude && "
    /* the tool download caches in HOME are not archived, but a later run recreates them
     * (npm writes ~/.npm/_logs): they stay out of every diff too */
    "printf '/.npm/\\n/.cache/\\n' >> /tmp/workspace/.git/info/exclude";

/* Snapshot the untracked files (all of them, ignored ones too) before setup. */
static const char SCRIPT_BEFORE[] =
    "mkdir -p " ENV_DIR " && cd /tmp/workspace && "
    "git -c safe.directory='*' ls-files -o --directory > " ENV_DIR "/before 2>/dev/null || "
    ": > " ENV_DIR "/before";

/* After setup: what is new is the environment; keep it out of every diff, and list what the
 * cache keeps (tool download caches left out). */
static const char SCRIPT_AFTER[] =
    "cd /tmp/workspace && git -c safe.directory='*' ls-files -o --directory > " ENV_DIR
    "/after && grep -vxFf " ENV_DIR "/before " ENV_DIR "/after > " ENV_FILES_LIST "; "
    "mkdir -p .git/info && sed 's|^|/|' " ENV_FILES_LIST " >> .git/info/exclude && "
    "grep -vE '^(\\.cache|\\.npm)/' " ENV_FILES_LIST " > " ENV_KEEP_LIST "; "
    "wc -l < " ENV_KEEP_LIST;

/* One archive command (save or restore) in box with its deadline and a small output cap; a
 * non-zero exit is AP_EIO naming what and quoting its stderr. */
static int archive_exec_in(sbx_box *box, const volatile sig_atomic_t *cancel, sbx_cmd *cmd,
			   const char *what)
{
	sbx_result r = SBX_RESULT_INIT;
	int rc;

	cmd->timeout_s = 600;
	cmd->output_cap = 8192;
	cmd->cancel = cancel;
	rc = sbx_exec(box, cmd, &r);
	if (rc == 0 && r.exit_code != 0)
		rc = ap_error_set(AP_EIO, "%s exited with %d: %.300s", what, r.exit_code,
				  r.err ? r.err : "");
	sbx_result_release(&r);
	return rc;
}

static int archive_exec(const env_setup_opts *o, sbx_cmd *cmd, const char *what)
{
	return archive_exec_in(o->box, o->cancel, cmd, what);
}

static int cache_restore(const env_setup_opts *o, const char *tar, env_setup_result *res)
{
	const char *argv[] = {"sh", "-c", SCRIPT_RESTORE, NULL};
	sbx_cmd cmd = SBX_CMD_INIT;
	int64_t start = ap_mono_ms();
	struct stat st;
	int fd, rc;

	fd = open(tar, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return AP_ENOTFOUND;
	if (fstat(fd, &st) != 0) {
		close(fd);
		return AP_ENOTFOUND;
	}
	cmd.argv = argv;
	cmd.stdin_fn = source_read;
	cmd.stdin_ud = &fd;
	rc = archive_exec(o, &cmd, "restoring the cached environment");
	close(fd);
	if (rc)
		return rc;
	/* Used now: a restore moves the entry to the front of the LRU order. */
	if (env_cache_touch(o->cfg, o->repo_id, res->key) != 0)
		ap_error_clear();
	res->restored = true;
	ap_stat_add(AP_STAT_ENV_CACHE_HITS, 1);
	res->have_products = true;
	res->archive_bytes = st.st_size;
	res->setup_ms = ap_mono_ms() - start;
	return 0;
}

/* The archive of the kept setup products, streamed from the box into the cache's file. */
struct saver {
	const env_setup_opts *o;
	struct sink s;
};

static int save_archive(void *ud, int fd)
{
	struct saver *sv = ud;
	const char *argv[] = {"sh", "-c", SCRIPT_SAVE, NULL};
	sbx_cmd cmd = SBX_CMD_INIT;
	int rc;

	sv->s.fd = fd;
	cmd.argv = argv;
	cmd.raw_stdout = sink_write;
	cmd.raw_stdout_ud = &sv->s;
	rc = archive_exec(sv->o, &cmd, "archiving the environment");
	if (rc == 0 && sv->s.failed)
		rc = ap_error_set(
		    AP_ETOOBIG, "the environment is larger than AUTOPATCH_ENV_CACHE_SIZE or could "
				"not be written; it was not cached");
	return rc;
}

static int cache_save(const env_setup_opts *o, env_setup_result *res)
{
	struct saver sv = {o, {-1, 0, 0, false}};
	env_cache_entry e;
	int rc;

	if ((rc = cfg_bytes(o->cfg, "AUTOPATCH_ENV_CACHE_SIZE", 0, INT64_MAX, &sv.s.cap)))
		return rc;
	memset(&e, 0, sizeof(e));
	/* A cut repository id or image would be another entry's metadata. */
	if ((rc = ap_fmt(e.repo, sizeof(e.repo), "%s", o->repo_id)) ||
	    (rc = ap_fmt(e.key, sizeof(e.key), "%s", res->key)) ||
	    (rc = ap_fmt(e.image, sizeof(e.image), "%s", o->image->image)))
		return ap_error_set(rc, "the cache entry's name is too long: %s", ap_error_last());
	e.setup_ms = res->setup_ms;
	if ((rc = env_cache_put(o->cfg, &e, save_archive, &sv)))
		return rc;
	res->archive_bytes = sv.s.bytes;
	return 0;
}

/* ---- the setup phase ---- */

struct live {
	const env_setup_opts *o;
	const char *step;
	int index, count;
	int64_t start, last;
	char line[LIVE_LINE_MAX + 1]; /* the last complete non-empty line */
	char cur[LIVE_LINE_MAX + 1];  /* the line being received */
	size_t cur_len;
	char tail[TAIL_CAP + 1];
	size_t tail_len;
};

static void live_show(struct live *l, bool force)
{
	char msg[600];
	int64_t t = ap_mono_ms();

	if (!l->o->live || (!force && t - l->last < LIVE_INTERVAL_MS))
		return;
	l->last = t;
	snprintf(msg, sizeof(msg), "setup %d/%d `%.120s` running (%lld s)%s%s", l->index + 1,
		 l->count, l->step, (long long)((t - l->start) / 1000), l->line[0] ? ": " : "",
		 l->line);
	l->o->live(l->o->ud, msg);
}

static void live_output(void *ud, int stream, const char *p, size_t n)
{
	struct live *l = ud;

	(void)stream;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];

		if (l->tail_len == TAIL_CAP) {
			memmove(l->tail, l->tail + TAIL_CAP / 2, TAIL_CAP / 2);
			l->tail_len = TAIL_CAP / 2;
		}
		l->tail[l->tail_len++] = c;
		if (c == '\n' || c == '\r') {
			if (l->cur_len) {
				l->cur[l->cur_len] = '\0';
				memcpy(l->line, l->cur, l->cur_len + 1);
			}
			l->cur_len = 0;
		} else if (l->cur_len < LIVE_LINE_MAX && (unsigned char)c >= 0x20) {
			l->cur[l->cur_len++] = c;
		}
	}
	l->tail[l->tail_len] = '\0';
	live_show(l, false);
}

/* The last lines of the tail (at most 12 and 700 bytes: the whole error message is capped at
 * 1 KiB, and the last lines say most). */
static const char *tail_lines(const char *t)
{
	size_t len = strlen(t);
	const char *p = t + len;
	int lines = 0;

	while (len && (t[len - 1] == '\n' || t[len - 1] == '\r'))
		len--;
	p = t + len;
	while (p > t && lines < 12 && (size_t)(t + len - p) < 700) {
		p--;
		if (*p == '\n')
			lines++;
	}
	return *p == '\n' ? p + 1 : p;
}

/* ---- AUTOPATCH_SETUP_CA_FILE: the operator's CAs, for the setup phase only ---- */

#define CA_DIR	  "/tmp/.ap-ca"
#define CA_EXTRA  CA_DIR "/extra.pem"  /* the operator's certificates */
#define CA_BUNDLE CA_DIR "/bundle.pem" /* the image's public CAs + the operator's */
#define CA_JAVA	  CA_DIR "/java.p12"   /* the JDK's trust store + the operator's (PKCS12) */

/* Reads the operator's certificates from stdin. The bundle keeps the image's own CAs first,
 * because PIP_CERT, REQUESTS_CA_BUNDLE, CARGO_HTTP_CAINFO, npm's cafile... replace the
 * public ones rather than add to them. Where the image has keytool (the java flavour), the
 * JDK's cacerts are copied into a PKCS12 store and each operator certificate imported (one
 * keytool run each, ~0.5 s); "java" on stdout says the store is there. */
static const char SCRIPT_CA_INSTALL[] =
    "umask 022; rm -rf " CA_DIR " && mkdir -p " CA_DIR " && cat > " CA_EXTRA " || exit 1\n"
    "sys=; for f in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt "
    "/etc/ssl/cert.pem; do if [ -r \"$f\" ]; then sys=$f; break; fi; done\n"
    "{ if [ -n \"$sys\" ]; then cat \"$sys\"; echo; fi; cat " CA_EXTRA "; } > " CA_BUNDLE
    " || exit 1\n"
    "command -v keytool >/dev/null 2>&1 || exit 0\n"
    "kt=$(readlink -f \"$(command -v keytool)\"); jh=${kt%/bin/keytool}\n"
    "for f in /etc/ssl/certs/java/cacerts \"$jh/lib/security/cacerts\"; do\n"
    "  [ -r \"$f\" ] || continue\n"
    "  keytool -importkeystore -noprompt -srckeystore \"$f\" -srcstorepass changeit "
    "-destkeystore " CA_JAVA " -deststoretype PKCS12 -deststorepass changeit >/dev/null 2>&1 "
    "&& break\n"
    "  rm -f " CA_JAVA "\n"
    "done\n"
    "(cd " CA_DIR " && csplit -s -z -f op -b '%03d.pem' extra.pem "
    "'/-----BEGIN CERTIFICATE-----/' '{*}') || exit 0\n"
    "for c in " CA_DIR "/op*.pem; do\n"
    "  grep -q 'BEGIN CERTIFICATE' \"$c\" || continue\n"
    "  out=$(keytool -importcert -noprompt -alias \"autopatch-setup-ca-${c##*/op}\" -file "
    "\"$c\" -keystore " CA_JAVA " -storetype PKCS12 -storepass changeit 2>&1) || "
    "{ echo \"java-failed: $out\"; rm -f " CA_JAVA "; exit 0; }\n"
    "done\n"
    "echo java\n";

/* The environment of every setup step when the CA bundle is installed: where each toolchain
 * looks for its trusted CAs. JAVA_TOOL_OPTIONS only when the Java store was made. */
static const char *const ca_env[] = {
    "SSL_CERT_FILE=" CA_BUNDLE,	     /* OpenSSL: python, curl, wget, go (on Linux), ... */
    "NODE_EXTRA_CA_CERTS=" CA_EXTRA, /* node adds these to its own */
    "npm_config_cafile=" CA_BUNDLE,
    "PIP_CERT=" CA_BUNDLE,
    "REQUESTS_CA_BUNDLE=" CA_BUNDLE,
    "GIT_SSL_CAINFO=" CA_BUNDLE,
    "CARGO_HTTP_CAINFO=" CA_BUNDLE,
    "CURL_CA_BUNDLE=" CA_BUNDLE,
    NULL};
static const char ca_java_env[] =
    "JAVA_TOOL_OPTIONS=-Djavax.net.ssl.trustStore=" CA_JAVA
    " -Djavax.net.ssl.trustStoreType=PKCS12 -Djavax.net.ssl.trustStorePassword=changeit";

struct setup_ca {
	int certs; /* 0: AUTOPATCH_SETUP_CA_FILE unset */
	bool java; /* CA_JAVA was made */
};

/* Put the operator's CA bundle in the box for setup (nothing when AUTOPATCH_SETUP_CA_FILE is
 * unset). A bundle that cannot be read any more, or a box that cannot take it, ends setup. */
static int ca_install(const env_setup_opts *o, struct setup_ca *ca)
{
	ap_buf pem = AP_BUF_INIT(8u << 20);
	const char *argv[] = {"sh", "-c", SCRIPT_CA_INSTALL, NULL};
	sbx_cmd cmd = SBX_CMD_INIT;
	sbx_result r = SBX_RESULT_INIT;
	int rc;

	memset(ca, 0, sizeof(*ca));
	rc = sbx_setup_ca_read(o->cfg, &pem, &ca->certs);
	if (rc || ca->certs == 0)
		goto out;
	cmd.argv = argv;
	cmd.stdin_data = pem.data;
	cmd.stdin_len = pem.len;
	cmd.timeout_s = 120;
	cmd.output_cap = 8192;
	cmd.cancel = o->cancel;
	rc = sbx_exec(o->box, &cmd, &r);
	if (rc == 0 && r.exit_code != 0)
		rc =
		    ap_error_set(AP_EIO,
				 "the CA bundle of AUTOPATCH_SETUP_CA_FILE could not be put in the "
				 "box (exit %d): %.300s",
				 r.exit_code, r.err ? r.err : "");
	if (rc)
		goto out;
	ca->java = r.out && strstr(r.out, "java") == r.out;
	note(o,
	     "setup trusts the %d certificate%s of AUTOPATCH_SETUP_CA_FILE besides the public "
	     "CAs%s",
	     ca->certs, ca->certs == 1 ? "" : "s", ca->java ? " (also in a Java trust store)" : "");
	if (r.out && strstr(r.out, "java-failed"))
		note(o,
		     "the Java trust store could not be made, Java tools will not trust them: "
		     "%.300s",
		     strstr(r.out, "java-failed"));
out:
	sbx_result_release(&r);
	ap_buf_release(&pem);
	return rc;
}

/* The hint for a step whose output shows a certificate it could not verify. */
static void tls_hint(const struct setup_ca *ca, const char *tail, char *out, size_t n)
{
	static const char *const marks[] = {"SELF_SIGNED_CERT_IN_CHAIN",
					    "self-signed certificate in certificate chain",
					    "self signed certificate in certificate chain",
					    "CERTIFICATE_VERIFY_FAILED",
					    "unable to get local issuer certificate",
					    "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
					    "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
					    "PKIX path building failed",
					    "server certificate verification failed",
					    "certificate verify failed",
					    "invalid peer certificate: UnknownIssuer",
					    "x509: certificate signed by unknown authority",
					    NULL};
	bool hit = false;

	for (const char *const *m = marks; *m && !hit; m++)
		hit = strstr(tail, *m) != NULL;
	if (!hit)
		return;
	if (ca->certs)
		snprintf(out, n,
			 " (a TLS certificate could not be verified although setup trusts the %d "
			 "certificate%s of AUTOPATCH_SETUP_CA_FILE: add the CA that signed this "
			 "chain to that bundle)",
			 ca->certs, ca->certs == 1 ? "" : "s");
	else
		snprintf(out, n,
			 " (a TLS certificate could not be verified: if this network intercepts "
			 "TLS, give the operator's CA bundle to setup with AUTOPATCH_SETUP_CA_FILE "
			 "on the autopatch host; docs/environments.md, \"CA bundle\")");
}

/* The time limit of all setup steps together into *timeout_s, and the setting it comes from
 * into *what. */
static int setup_limit(const env_setup_opts *o, int64_t *timeout_s, const char **what)
{
	*timeout_s = 900;
	*what = "AUTOPATCH_SETUP_TIMEOUT_S";
	if (o->timeout_s > 0) {
		*timeout_s = o->timeout_s;
		*what = "`setup_timeout` in " REPO_CONFIG_PATH;
		return 0;
	}
	return cfg_int(o->cfg, "AUTOPATCH_SETUP_TIMEOUT_S", 1, 86400, timeout_s);
}

/* The argv (room for 16) of setup step `step`: run through env with the setup CAs when
 * there are any. */
static void step_argv(const struct setup_ca *ca, const char *step, const char **argv)
{
	const char *sh[] = {"sh", "-c", step, NULL};
	size_t k = 0;

	if (ca->certs) {
		argv[k++] = "env";
		for (const char *const *e = ca_env; *e; e++)
			argv[k++] = *e;
		if (ca->java)
			argv[k++] = ca_java_env;
	}
	for (const char *const *a = sh; *a; a++)
		argv[k++] = *a;
	argv[k] = NULL;
}

/* The error of setup step l->step that exited non-zero or timed out (r): a sentence, a hint
 * when one fits, and the end of its output. what and timeout_s: the phase's time limit. */
static int step_failed(const env_setup_opts *o, const struct setup_ca *ca, const struct live *l,
		       const sbx_result *r, const char *what, int64_t timeout_s)
{
	char word[64], head[1024];
	const char *fl = NULL, *tl = tail_lines(l->tail);
	char hint[700] = "";
	size_t room;

	tls_hint(ca, l->tail, hint, sizeof(hint));
	if (r->exit_code == 127 && first_word(l->step, word, sizeof(word)) &&
	    (fl = env_flavor_of_command(word)) &&
	    (!o->image->flavor[0] || strcmp(fl, o->image->flavor) != 0))
		snprintf(hint, sizeof(hint),
			 " (`%s` is not in the sandbox image %s; the %s flavour has "
			 "it: add `image: %s` to %s)",
			 word, o->image->image, fl, fl, REPO_CONFIG_PATH);
	if (r->timed_out)
		snprintf(head, sizeof(head),
			 "setup failed: `%.200s` did not finish within %s (%lld s "
			 "for all setup steps); its output ended with:\n",
			 l->step, what, (long long)timeout_s);
	else
		snprintf(head, sizeof(head),
			 "setup failed: `%.200s` exited with %d after %lld s%s; its "
			 "output ended with:\n",
			 l->step, r->exit_code, (long long)((ap_mono_ms() - l->start) / 1000),
			 hint);
	/* The error message holds ~1 KiB: keep the end of the tail (where the
	 * error is), not its start. */
	room = SETUP_ERR_MAX > strlen(head) ? SETUP_ERR_MAX - strlen(head) : 0;
	if (strlen(tl) > room)
		tl += strlen(tl) - room;
	return ap_error_set(r->timed_out ? AP_ETIMEOUT : AP_EINVAL, "%s%s", head, tl);
}

/* Run setup step i of count in the box, its output shown live, within what is left of
 * timeout_s since start (what: the setting of that limit). */
static int run_step(const env_setup_opts *o, const struct setup_ca *ca, size_t i, size_t count,
		    int64_t start, int64_t timeout_s, const char *what)
{
	const char *argv[16];
	sbx_cmd cmd = SBX_CMD_INIT;
	sbx_result r = SBX_RESULT_INIT;
	struct live *l = calloc(1, sizeof(*l));
	int64_t left = timeout_s - (ap_mono_ms() - start) / 1000;
	int rc;

	if (!l)
		return ap_error_set(AP_ENOMEM, "out of memory");
	l->o = o;
	l->step = o->setup_steps[i];
	l->index = (int)i;
	l->count = (int)count;
	l->start = ap_mono_ms();
	live_show(l, true);
	step_argv(ca, o->setup_steps[i], argv);
	cmd.argv = argv;
	cmd.timeout_s = left > 0 ? (int)left : 1;
	cmd.on_output = live_output;
	cmd.on_output_ud = l;
	cmd.cancel = o->cancel;
	rc = sbx_exec(o->box, &cmd, &r);
	if (rc == 0 && (r.exit_code != 0 || r.timed_out))
		rc = step_failed(o, ca, l, &r, what, timeout_s);
	if (o->live && rc == 0) {
		char msg[400];

		snprintf(msg, sizeof(msg), "setup %zu/%zu `%.200s` done (%lld s)", i + 1, count,
			 o->setup_steps[i], (long long)((ap_mono_ms() - l->start) / 1000));
		o->live(o->ud, msg);
	}
	sbx_result_release(&r);
	free(l);
	return rc;
}

static int run_steps(const env_setup_opts *o, env_setup_result *res, const struct setup_ca *ca)
{
	int64_t timeout_s, start = ap_mono_ms();
	const char *what;
	size_t count = 0;
	int rc;

	if ((rc = setup_limit(o, &timeout_s, &what)))
		return rc;
	while (o->setup_steps[count])
		count++;
	for (size_t i = 0; i < count; i++)
		if ((rc = run_step(o, ca, i, count, start, timeout_s, what)))
			return rc;
	res->ran = true;
	if (res->key[0])
		ap_stat_add(AP_STAT_ENV_CACHE_MISSES, 1); /* a cacheable setup ran afresh */
	res->setup_ms = ap_mono_ms() - start;
	return 0;
}

/* End the setup phase: network off (unless the repository opted in), phase "agent". */
static int end_setup(const env_setup_opts *o)
{
	int rc = 0;

	if (o->had_network && !o->agent_network) {
		rc = sbx_box_set_network(o->box, SBX_NET_NONE);
		if (rc == 0)
			note(o, "network off: the egress allow-list ended with setup");
	} else if (o->had_network) {
		note(o, "network stays on for the agent phase (`agent_network: true`)");
	}
	sbx_box_set_phase(o->box, "agent");
	return rc;
}

/* Restore the environment from the host cache when it holds one for this set-up (*restored);
 * a restore that fails otherwise than by cancelling is noted and setup runs. */
static int restore_cached(const env_setup_opts *o, env_setup_result *res, bool *restored)
{
	char dir[4200], tar[4200], meta[4200];
	int rc;

	rc = env_cache_key(res->key, o->image->image_id, o->setup_script, o->repo_id, o->repo_dir,
			   o->cache_key_globs);
	if (rc)
		return rc;
	/* A path that does not fit is noted below, like any failed restore. */
	rc = env_cache_paths(o->cfg, o->repo_id, res->key, dir, tar, meta, sizeof(dir));
	if (rc == 0)
		rc = cache_restore(o, tar, res);
	if (rc == 0) {
		snprintf(res->summary, sizeof(res->summary),
			 "environment restored from cache (key %.12s, %.1f MB, %.1f s)", res->key,
			 (double)res->archive_bytes / 1e6, (double)res->setup_ms / 1000);
		note(o, "%s", res->summary);
		*restored = true;
		return 0;
	}
	if (rc != AP_ENOTFOUND) {
		if (rc == AP_ECANCELLED)
			return rc;
		note(o,
		     "the cached environment could not be restored (%.300s); running "
		     "setup",
		     ap_error_last());
		ap_error_clear();
	}
	return 0;
}

/* Save the setup products to the host cache and evict old entries; only a cancel is an
 * error, any other failure is noted. */
static int save_cached(const env_setup_opts *o, env_setup_result *res)
{
	int erc = cache_save(o, res);

	if (erc == 0) {
		size_t gone = 0;

		note(o, "environment cached (key %.12s, %.1f MB)", res->key,
		     (double)res->archive_bytes / 1e6);
		if (env_cache_evict(o->cfg, o->repo_id, res->key, o->note, o->ud, &gone))
			ap_error_clear();
	} else if (erc == AP_ECANCELLED) {
		return erc;
	} else {
		note(o, "the environment was not cached: %.300s", ap_error_last());
		ap_error_clear();
	}
	return 0;
}

int env_setup(const env_setup_opts *o, env_setup_result *res)
{
	char why[1024];
	struct setup_ca ca = {0, false};
	bool use_cache = true;
	int code = 0, rc, erc;
	sbx_result r = SBX_RESULT_INIT;

	memset(res, 0, sizeof(*res));
	sbx_box_set_phase(o->box, "setup");
	if (!o->setup_steps || !o->setup_steps[0]) {
		rc = 0;
		goto out_end;
	}
	if ((rc = cfg_bool(o->cfg, "AUTOPATCH_ENV_CACHE", &use_cache)))
		goto out_end;
	if (use_cache) {
		bool restored = false;

		if ((rc = restore_cached(o, res, &restored)) || restored)
			goto out_end;
	}
	if ((rc = box_sh(o->box, SCRIPT_BEFORE, 60, &code, NULL)))
		goto out_end;
	if ((rc = ca_install(o, &ca)))
		goto out_end;
	rc = run_steps(o, res, &ca);
	/* The CAs are for setup only: no later command finds them. */
	if (ca.certs && box_sh(o->box, "rm -rf " CA_DIR, 60, &code, NULL) && rc == 0)
		rc = AP_EIO;
	if (rc)
		goto out_end;
	if ((rc = box_sh(o->box, SCRIPT_AFTER, 120, &code, &r)))
		goto out_end;
	res->have_products = r.out && strtol(r.out, NULL, 10) > 0;
	sbx_result_release(&r);
	snprintf(res->summary, sizeof(res->summary), "setup ran (%lld s)",
		 (long long)((res->setup_ms + 500) / 1000));
	note(o, "%s", res->summary);
	if (use_cache && res->have_products)
		rc = save_cached(o, res);
out_end:
	if (rc) {
		/* Keep the phase's error; the network still goes off. */
		snprintf(why, sizeof(why), "%s", ap_error_last());
		erc = end_setup(o);
		ap_error_set(rc, "%s", why);
		(void)erc;
		return rc;
	}
	return end_setup(o);
}

/* ---- the host-held snapshot of the setup products ---- */

struct env_snapshot {
	int fd; /* the archive (SCRIPT_SAVE's format), read with pread; -1: no products */
	int64_t bytes;
};

/* Stream the kept products out of the box into an unlinked file of AUTOPATCH_DATA_DIR. */
static int snapshot_stream(const env_setup_opts *o, env_snapshot *s)
{
	const char *data = cfg_str(o->cfg, "AUTOPATCH_DATA_DIR");
	struct saver sv = {o, {-1, 0, 0, false}};
	int rc;

	if ((rc = cfg_bytes(o->cfg, "AUTOPATCH_ENV_CACHE_SIZE", 0, INT64_MAX, &sv.s.cap)))
		return rc;
	if (fs_mkdir_p(data, 0700) != 0)
		return ap_error_set(AP_EIO, "cannot create AUTOPATCH_DATA_DIR %s: %s", data,
				    strerror(errno));
	s->fd = open(data, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (s->fd < 0)
		return ap_error_set(AP_EIO,
				    "cannot make a temporary file in %s for the setup "
				    "snapshot: %s",
				    data, strerror(errno));
	if ((rc = save_archive(&sv, s->fd)))
		return rc;
	s->bytes = sv.s.bytes;
	return 0;
}

int env_snapshot_take(const env_setup_opts *o, const env_setup_result *res, env_snapshot **out)
{
	char dir[4200], tar[4200], meta[4200];
	env_snapshot *s;
	struct stat st;
	int rc = 0;

	*out = NULL;
	if (!(s = calloc(1, sizeof(*s))))
		return AP_ENOMEM;
	s->fd = -1;
	if (!res->have_products)
		goto done;
	/* The cache's archive of this key, when setup just filled it or it was just restored:
	 * the open descriptor keeps these bytes even if the entry is evicted or replaced (by
	 * rename) later. */
	if (res->key[0] &&
	    env_cache_paths(o->cfg, o->repo_id, res->key, dir, tar, meta, sizeof(dir)) != 0) {
		ap_error_clear(); /* no cached archive to read: stream the products instead */
	} else if (res->key[0]) {
		s->fd = open(tar, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (s->fd >= 0 && fstat(s->fd, &st) == 0 && S_ISREG(st.st_mode)) {
			s->bytes = st.st_size;
			goto done;
		}
		if (s->fd >= 0)
			close(s->fd);
		s->fd = -1;
	}
	if ((rc = snapshot_stream(o, s))) {
		env_snapshot_free(s);
		return rc;
	}
done:
	*out = s;
	return 0;
}

struct snap_reader {
	int fd;
	off_t off;
};

static long snap_read(void *ud, char *buf, size_t n)
{
	struct snap_reader *sr = ud;
	ssize_t r;

	do
		r = pread(sr->fd, buf, n, sr->off);
	while (r < 0 && errno == EINTR);
	if (r > 0)
		sr->off += r;
	return (long)r;
}

int env_snapshot_restore(const env_snapshot *s, sbx_box *box, const volatile sig_atomic_t *cancel)
{
	const char *argv[] = {"sh", "-c", SCRIPT_RESTORE, NULL};
	struct snap_reader sr = {s ? s->fd : -1, 0};
	sbx_cmd cmd = SBX_CMD_INIT;

	if (!s || s->fd < 0)
		return 0;
	cmd.argv = argv;
	cmd.stdin_fn = snap_read;
	cmd.stdin_ud = &sr;
	return archive_exec_in(box, cancel, &cmd, "restoring the setup snapshot");
}

void env_snapshot_free(env_snapshot *s)
{
	if (!s)
		return;
	if (s->fd >= 0)
		close(s->fd);
	free(s);
}

/* ---- blocked egress ---- */

/* The address a refusal's reason names ("... address (10.1.2.3)"), as a one-address CIDR
 * for AUTOPATCH_EGRESS_ALLOW_NETS; "" when there is none. */
static void reason_cidr(const char *reason, char *out, size_t n)
{
	const char *open = strrchr(reason, '('), *close = open ? strchr(open, ')') : NULL;
	size_t len = close ? (size_t)(close - open - 1) : 0;

	out[0] = '\0';
	if (!close || len == 0 || len > 45 || strspn(open + 1, "0123456789abcdefABCDEF.:") != len)
		return;
	snprintf(out, n, "%.*s/%s", (int)len, open + 1, memchr(open, ':', len) ? "128" : "32");
}

/* The advice for one group of refusals (after "what, N times, during P by `C`: "). */
static void denial_advice(ap_buf *buf, const sbx_denial *d, const char *hp)
{
	bool agent = strcmp(d->phase, "agent") == 0;
	char cidr[64];

	switch (d->kind) {
	case SBX_DENY_LIMIT:
		ap_buf_addf(buf,
			    "refused at the egress proxy's connection limit (%s): raise "
			    "AUTOPATCH_EGRESS_MAX_CONNS (connections served at once per box) or "
			    "AUTOPATCH_EGRESS_QUEUE_S (how long one waits for a free slot) on the "
			    "autopatch host, or have the tool open fewer connections at once "
			    "(npm: --maxsockets)",
			    d->reason);
		return;
	case SBX_DENY_DNS: {
		/* the proxy says "cannot resolve NAME: WHY" */
		const char *why = strstr(d->reason, ": ") ? strstr(d->reason, ": ") + 2 : d->reason;

		ap_buf_addf(buf,
			    "the name %s could not be resolved: the autopatch host's resolver, "
			    "which the egress proxy uses (on AUTOPATCH_EGRESS_NETWORK), failed "
			    "(%s); check the name in `network:`, or the host's DNS",
			    d->host, why);
		return;
	}
	case SBX_DENY_RESERVED:
		reason_cidr(d->reason, cidr, sizeof(cidr));
		ap_buf_addf(buf,
			    "`%s` is allowed, but %s, and the egress proxy reaches private and "
			    "reserved addresses only inside AUTOPATCH_EGRESS_ALLOW_NETS: for a "
			    "mirror on your network, add %s%s%s to AUTOPATCH_EGRESS_ALLOW_NETS on "
			    "the autopatch host",
			    hp, d->reason, cidr[0] ? "`" : "its network", cidr[0] ? cidr : "",
			    cidr[0] ? "` (or its network)" : "");
		return;
	case SBX_DENY_NEVER:
		ap_buf_addf(buf,
			    "%s, which no box may reach (not even with "
			    "AUTOPATCH_EGRESS_ALLOW_NETS): make the name resolve to the server's "
			    "network address for the autopatch host",
			    d->reason);
		return;
	case SBX_DENY_CONNECT:
		ap_buf_addf(buf,
			    "no address of %s answered (%s) from the autopatch host's network "
			    "(AUTOPATCH_EGRESS_NETWORK): check that the server is up and reachable "
			    "from there",
			    d->host, d->reason);
		return;
	case SBX_DENY_OTHER:
		ap_buf_addf(buf, "refused: %s", d->reason[0] ? d->reason : "(no reason logged)");
		return;
	case SBX_DENY_NOT_LISTED:
	case SBX_DENY_LOCKED:
		break;
	}
	if (agent)
		ap_buf_addf(buf,
			    "the agent phase is offline; fetch it in `setup:` (with `%s` "
			    "in `network:`), or add `agent_network: true` and `%s` to "
			    "`network:` in %s",
			    hp, hp, REPO_CONFIG_PATH);
	else
		ap_buf_addf(buf, "add `%s` to `network:` in %s", hp, REPO_CONFIG_PATH);
}

int env_denials_text(const sbx_denial *d, size_t n, char **out)
{
	ap_buf buf = AP_BUF_INIT(16384);

	*out = NULL;
	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char hp[300];
		const char *phase = strcmp(d[i].phase, "agent") == 0 ? "the agent phase"
				    : d[i].phase[0]		     ? d[i].phase
								     : "a command";

		if (d[i].kind == SBX_DENY_LIMIT || !d[i].host[0])
			snprintf(hp, sizeof(hp), "connections");
		else if (d[i].port)
			snprintf(hp, sizeof(hp), "%s:%d", d[i].host, d[i].port);
		else
			snprintf(hp, sizeof(hp), "%s", d[i].host);
		if (d[i].kind == SBX_DENY_LIMIT)
			ap_buf_addf(&buf, "%s%d connection%s, during %s by `%s`: ", i ? "\n" : "",
				    d[i].count, d[i].count == 1 ? "" : "s", phase, d[i].command);
		else
			ap_buf_addf(&buf, "%s%s, %d time%s, during %s by `%s`: ", i ? "\n" : "", hp,
				    d[i].count, d[i].count == 1 ? "" : "s", phase, d[i].command);
		denial_advice(&buf, &d[i], hp);
	}
	*out = strdup(ap_buf_str(&buf));
	ap_buf_release(&buf);
	return *out ? 0 : ap_error_set(AP_ENOMEM, "out of memory");
}

int env_blocked_report(sbx_box *b, char **out)
{
	sbx_denial d[SBX_DENIAL_REPORT_MAX];
	size_t n = 0;
	int rc;

	*out = NULL;
	rc = sbx_box_denials(b, d, SBX_DENIAL_REPORT_MAX, &n);
	if (rc)
		return rc;
	return env_denials_text(d, n, out);
}

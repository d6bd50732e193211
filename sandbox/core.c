/* SPDX-License-Identifier: MIT */
/* sandbox/core.c - the backend-neutral core of sandbox.h: settings, owner id, repo dirs,
 * the warm pool, a command's output plumbing and what follows a command (deadline, sweep, a
 * box that died); every call dispatches through the engine's backend ops (backend.h).
 */
#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/redact.h"
#include "common/stats.h"
#include "sandbox/backend.h"
#include "sandbox/internal.h"
#include "sandbox/sandbox.h"
#include "sandbox/stream.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* --- settings --------------------------------------------------------------------------- */

bool sbx__label_safe(const char *s, size_t max)
{
	size_t n = 0;

	for (; s[n]; n++)
		if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') ||
		      (s[n] >= '0' && s[n] <= '9') || s[n] == '-' || s[n] == '_' || s[n] == '.'))
			return false;
	return n > 0 && n <= max;
}

int sbx__default_owner(const char *db_path, char *out, size_t outlen)
{
	char host[256] = "", cwd[PATH_MAX], path[PATH_MAX * 2];
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	int rc;

	if (outlen < 17)
		return ap_error_set(AP_EINVAL, "owner id buffer too small");
	gethostname(host, sizeof(host) - 1);
	/* A cut path would give two databases the same owner id: too long is an error. */
	if (db_path[0] == '/') {
		rc = ap_fmt(path, sizeof(path), "%s\n%s", host, db_path);
	} else {
		if (!getcwd(cwd, sizeof(cwd)))
			return ap_error_set(AP_EIO, "getcwd: %s", strerror(errno));
		rc = ap_fmt(path, sizeof(path), "%s\n%s/%s", host, cwd, db_path);
	}
	if (rc)
		return ap_error_set(AP_ETOOBIG,
				    "AUTOPATCH_DB=\"%.60s...\" is too long to derive the owner id "
				    "from: set AUTOPATCH_OWNER_ID or use a shorter path",
				    db_path);
	if (!EVP_Digest(path, strlen(path), md, &mdlen, EVP_sha256(), NULL))
		return ap_error_set(AP_ENOMEM, "sha256 failed");
	for (int i = 0; i < 8; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
	return 0;
}

static int parse_cpus(const ap_config *cfg, int64_t *out)
{
	const char *v = cfg_str(cfg, "AUTOPATCH_SANDBOX_CPUS");
	char *end;
	double d;

	errno = 0;
	d = strtod(v, &end);
	if (errno || end == v || *end || !(d >= 0.01 && d <= 1024))
		return ap_error_set(
		    AP_EINVAL,
		    "AUTOPATCH_SANDBOX_CPUS=\"%s\" is not a CPU count: use e.g. 2 or 0.5", v);
	*out = (int64_t)(d * 1e9);
	return 0;
}

/* "256m", "1.5g": a size as the settings write it. */
static void size_text(int64_t v, char out[32])
{
	if (v >= (1LL << 30) && v % (1LL << 30) == 0)
		snprintf(out, 32, "%lldg", (long long)(v >> 30));
	else if (v >= (1LL << 30))
		snprintf(out, 32, "%.2fg", (double)v / (1LL << 30));
	else if (v % (1 << 20) == 0)
		snprintf(out, 32, "%lldm", (long long)(v >> 20));
	else
		snprintf(out, 32, "%.1fm", (double)v / (1 << 20));
}

int64_t sbx__files_max(int64_t memory)
{
	return memory - memory / SBX_PROC_SHARE;
}

int sbx__sizes_check(const sbx_spec *s, size_t n_volumes)
{
	int64_t files = s->tmp_bytes + s->workspace_bytes + s->trees_bytes +
			(int64_t)n_volumes * s->volume_bytes;
	char f[32], m[32], t[32], w[32], r[32], v[32];

	if (files <= sbx__files_max(s->memory_bytes))
		return 0;
	size_text(files, f);
	size_text(s->memory_bytes, m);
	size_text(s->tmp_bytes, t);
	size_text(s->workspace_bytes, w);
	size_text(s->trees_bytes, r);
	size_text(s->volume_bytes, v);
	return ap_error_set(
	    AP_EINVAL,
	    "a box's tmpfs mounts would hold up to %s (AUTOPATCH_SANDBOX_TMP_SIZE %s + "
	    "_WORKSPACE_SIZE %s + _TREES_SIZE %s + %zu image VOLUME(s) of _VOLUME_SIZE %s), more "
	    "than %d/%d of AUTOPATCH_SANDBOX_MEMORY=%s: files in a tmpfs count against the memory "
	    "limit, so a box that filled them would be killed for memory first. Lower the sizes or "
	    "raise AUTOPATCH_SANDBOX_MEMORY (docs/sandbox.md, \"What a box holds\")",
	    f, t, w, r, n_volumes, v, SBX_PROC_SHARE - 1, SBX_PROC_SHARE, m);
}

/* An unset tmpfs size is at most its share of the memory: /tmp an eighth, the workspace a
 * quarter, the trees a half (the rest is the processes' and the image VOLUMEs'). */
static void fit_sizes(const ap_config *cfg, sbx_spec *d)
{
	const struct {
		const char *name;
		int64_t *v;
		int shift;
	} t[] = {
	    {"AUTOPATCH_SANDBOX_TMP_SIZE", &d->tmp_bytes, 3},
	    {"AUTOPATCH_SANDBOX_WORKSPACE_SIZE", &d->workspace_bytes, 2},
	    {"AUTOPATCH_SANDBOX_TREES_SIZE", &d->trees_bytes, 1},
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		int64_t share = (d->memory_bytes >> t[i].shift) & ~((1LL << 20) - 1);

		if (!cfg_is_set(cfg, t[i].name) && *t[i].v > share)
			*t[i].v = share > (1 << 20) ? share : (1 << 20);
	}
}

int sbx_engine_capacity(const sbx_engine *e, char *out, size_t n)
{
	const sbx_spec *d = &e->defaults;
	int64_t files = d->tmp_bytes + d->workspace_bytes + d->trees_bytes;
	char m[32], f[32], t[32], w[32], r[32], v[32], p[32], pv[32];

	size_text(d->memory_bytes, m);
	size_text(files, f);
	size_text(d->tmp_bytes, t);
	size_text(d->workspace_bytes, w);
	size_text(d->trees_bytes, r);
	size_text(d->volume_bytes, v);
	size_text(d->memory_bytes - files, p);
	size_text(d->memory_bytes - sbx__files_max(d->memory_bytes), pv);
	return ap_fmt(out, n,
		      "memory %s per box holds files up to %s (/tmp %s, workspace %s, trees "
		      "%s) and processes the rest (%s when the files are full); each image "
		      "VOLUME takes %s of that rest, and at least %s stays the processes'",
		      m, f, t, w, r, p, v, pv);
}

/* The backend, runtime, image and owner id: names the backends accept. The owner id goes to
 * e->owner (a default one made from the database path when unset). */
static int read_names(sbx_engine *e, const ap_config *cfg)
{
	const char *image = cfg_str(cfg, "AUTOPATCH_SANDBOX_IMAGE");
	const char *runtime = cfg_str(cfg, "AUTOPATCH_SANDBOX_RUNTIME");
	const char *owner = cfg_str(cfg, "AUTOPATCH_OWNER_ID");
	const char *backend = cfg_str(cfg, "AUTOPATCH_SANDBOX_BACKEND");
	int rc;

	if (strcmp(backend, "docker") == 0)
		e->ops = &sbx_docker_ops;
	else if (strcmp(backend, "kubernetes") == 0)
		e->ops = &sbx_k8s_ops;
	else
		return ap_error_set(AP_EINVAL,
				    "AUTOPATCH_SANDBOX_BACKEND=\"%.60s\" is not a sandbox backend: "
				    "use docker or kubernetes",
				    backend);
	if (!sbx__label_safe(runtime, 64))
		return ap_error_set(
		    AP_EINVAL,
		    "AUTOPATCH_SANDBOX_RUNTIME=\"%s\" is not a runtime name: use runc "
		    "or runsc",
		    runtime);
	if (strlen(image) > 255 || strchr(image, ' '))
		return ap_error_set(AP_EINVAL,
				    "AUTOPATCH_SANDBOX_IMAGE=\"%s\" is not an image name", image);
	if (owner && !sbx__label_safe(owner, 40))
		return ap_error_set(
		    AP_EINVAL,
		    "AUTOPATCH_OWNER_ID=\"%s\" must be 1-40 letters, digits, '-', '_' "
		    "or '.'",
		    owner);
	if (owner) /* label-safe and at most 40 bytes (checked above): fits e->owner */
		snprintf(e->owner, sizeof(e->owner), "%s", owner);
	else if ((rc =
		      sbx__default_owner(cfg_str(cfg, "AUTOPATCH_DB"), e->owner, sizeof(e->owner))))
		return rc;
	e->image = strdup(image);
	e->runtime = strdup(runtime);
	if (!e->image || !e->runtime)
		return ap_error_set(AP_ENOMEM, "out of memory");
	return 0;
}

/* The default limits of a box (memory, CPUs, processes, sizes, time) into e->defaults, and
 * the engine's output cap and pool size. */
static int read_limits(sbx_engine *e, const ap_config *cfg)
{
	sbx_spec *d = &e->defaults;
	int64_t v;
	int rc;

	if ((rc = cfg_bytes(cfg, "AUTOPATCH_SANDBOX_MEMORY", 16LL << 20, 1LL << 40,
			    &d->memory_bytes)) ||
	    (rc = parse_cpus(cfg, &d->nano_cpus)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_SANDBOX_PIDS", 16, 1 << 22, &d->pids)) ||
	    (rc =
		 cfg_bytes(cfg, "AUTOPATCH_SANDBOX_TMP_SIZE", 1 << 20, 1LL << 40, &d->tmp_bytes)) ||
	    (rc = cfg_bytes(cfg, "AUTOPATCH_SANDBOX_WORKSPACE_SIZE", 1 << 20, 1LL << 40,
			    &d->workspace_bytes)) ||
	    (rc = cfg_bytes(cfg, "AUTOPATCH_SANDBOX_TREES_SIZE", 1 << 20, 1LL << 40,
			    &d->trees_bytes)) ||
	    (rc = cfg_bytes(cfg, "AUTOPATCH_SANDBOX_VOLUME_SIZE", 1 << 20, 1LL << 40,
			    &d->volume_bytes)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_SANDBOX_NOFILE", 64, 1 << 20, &d->nofile)) ||
	    (rc = cfg_bytes(cfg, "AUTOPATCH_SANDBOX_FSIZE", 1 << 20, 1LL << 40, &d->fsize_bytes)))
		return rc;
	fit_sizes(cfg, d);
	if ((rc = sbx__sizes_check(d, 0)))
		return rc;
	if ((rc = cfg_int(cfg, "AUTOPATCH_SANDBOX_WALL_SECONDS", 5, 7 * 24 * 3600, &v)))
		return rc;
	d->wall_seconds = (int)v;
	if ((rc = cfg_bytes(cfg, "AUTOPATCH_SANDBOX_OUTPUT_CAP", 1024, 256LL << 20, &v)))
		return rc;
	e->output_cap = (size_t)v;
	if ((rc = cfg_int(cfg, "AUTOPATCH_SANDBOX_POOL", 0, SBX_POOL_MAX, &v)))
		return rc;
	e->pool_size = (int)v;
	return 0;
}

/* e->data_dir: AUTOPATCH_DATA_DIR/sandbox, made absolute. */
static int read_data_dir(sbx_engine *e, const ap_config *cfg)
{
	const char *data = cfg_str(cfg, "AUTOPATCH_DATA_DIR");
	char path[PATH_MAX], real[PATH_MAX];

	/* Made absolute now (binds need it) but created only when a box needs a repo dir, so
	 * `doctor` and `sandbox run --repo` leave no directory behind. */
	if (data[0] != '/' && !getcwd(real, sizeof(real)))
		return ap_error_set(AP_EIO, "getcwd: %s", strerror(errno));
	if (snprintf(path, sizeof(path), "%s%s%s/sandbox", data[0] == '/' ? "" : real,
		     data[0] == '/' ? "" : "/", data) >= (int)sizeof(path))
		return ap_error_set(AP_EINVAL, "AUTOPATCH_DATA_DIR is too long");
	e->data_dir = strdup(path);
	if (!e->data_dir)
		return ap_error_set(AP_ENOMEM, "out of memory");
	return 0;
}

static int read_settings(sbx_engine *e, const ap_config *cfg)
{
	sbx_spec *d = &e->defaults;
	int rc;

	if ((rc = read_names(e, cfg)))
		return rc;
	d->version = SBX_SPEC_VERSION;
	d->image = e->image;
	d->runtime = e->runtime;
	if ((rc = read_limits(e, cfg)))
		return rc;
	d->network = SBX_NET_NONE;
	return read_data_dir(e, cfg);
}

void sbx__resolve_spec(const sbx_engine *e, const sbx_spec *in, sbx_spec *out)
{
	const sbx_spec *d = &e->defaults;

	*out = *in;
	out->version = SBX_SPEC_VERSION;
#define DEF(f)                                                                                     \
	do {                                                                                       \
		if (!out->f)                                                                       \
			out->f = d->f;                                                             \
	} while (0)
	DEF(image);
	DEF(runtime);
	DEF(memory_bytes);
	DEF(nano_cpus);
	DEF(pids);
	DEF(tmp_bytes);
	DEF(workspace_bytes);
	DEF(volume_bytes);
	DEF(trees_bytes);
	DEF(nofile);
	DEF(fsize_bytes);
	DEF(wall_seconds);
#undef DEF
}

const char *sbx_owner_id(const sbx_engine *e)
{
	return e->owner;
}

const char *sbx_engine_image(const sbx_engine *e)
{
	return e->image;
}

int sbx_image_present(sbx_engine *e, const char *image)
{
	return e->ops->image_present(e, image ? image : e->image);
}

int sbx_image_id(sbx_engine *e, const char *image, char *out, size_t n)
{
	if (n < 80)
		return ap_error_set(AP_EINVAL, "sbx_image_id: the buffer must hold 80 bytes");
	return e->ops->image_id(e, image ? image : e->image, out, n);
}

int sbx_image_label(sbx_engine *e, const char *image, const char *key, char *out, size_t n)
{
	if (n == 0)
		return ap_error_set(AP_EINVAL, "sbx_image_label: an empty buffer");
	out[0] = '\0';
	if (!e->ops->image_label)
		return ap_error_set(AP_ENOTFOUND, "this sandbox backend cannot read image labels");
	return e->ops->image_label(e, image ? image : e->image, key, out, n);
}

/* --- boxes ---------------------------------------------------------------------------- */

/* The per-box host dir: <data>/sandbox/<name>; the repo is its "repo" subdir. */
static int make_repo_dir(sbx_box *b)
{
	char path[PATH_MAX];

	if (snprintf(path, sizeof(path), "%s/%s/repo", b->e->data_dir, b->name) >=
	    (int)sizeof(path))
		return ap_error_set(AP_EINVAL, "data dir path too long");
	if (fs_mkdir_p(path, 0755))
		return AP_EIO;
	chmod(path, 0755);
	b->repo_dir = strdup(path);
	if (!b->repo_dir)
		return ap_error_set(AP_ENOMEM, "out of memory");
	b->own_repo_dir = true;
	return 0;
}

/* Also called on error paths: a failure is logged and the caller's message kept. */
void sbx__remove_box_dir(const sbx_engine *e, const char *name)
{
	char path[PATH_MAX], kept[AP_ERROR_MSG_MAX];

	if (!sbx__label_safe(name, 90))
		return;
	if (snprintf(path, sizeof(path), "%s/%s", e->data_dir, name) >= (int)sizeof(path))
		return;
	snprintf(kept, sizeof(kept), "%s", ap_error_last());
	if (fs_rm_rf(path) != 0) {
		ap_warn("sandbox: %s", ap_error_last());
		ap_error_set(0, "%s", kept);
	}
}

/* The job label is the box's label and annotation: a cut one would name another job, so a
 * label that does not fit sbx_box.job is refused before any box is made or taken. */
static int job_label_check(const char *job_label)
{
	size_t max = sizeof(((sbx_box *)0)->job) - 1;

	if (job_label && strlen(job_label) > max)
		return ap_error_set(AP_ETOOBIG, "the job label \"%.60s...\" is over %zu bytes",
				    job_label, max);
	return 0;
}

static void box_free(sbx_box *b)
{
	if (!b)
		return;
	free(b->repo_dir);
	free(b);
}

/* Create and start a box from a resolved spec. make_repo: the box gets a repo dir of its own
 * (sbx_acquire); pool boxes live until destroyed, others wall_seconds. */
static int box_create(sbx_engine *e, const sbx_spec *spec, bool make_repo, bool pool, sbx_box **out)
{
	sbx_box *b;
	unsigned char rnd[6];
	int rc;

	*out = NULL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return ap_error_set(AP_ENOMEM, "out of memory");
	b->e = e;
	rc = job_label_check(spec->job_label);
	if (rc)
		goto err_free_box;
	snprintf(b->job, sizeof(b->job), "%s", spec->job_label ? spec->job_label : "");
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		rc = ap_error_set(AP_EIO, "getrandom: %s", strerror(errno));
		goto err_free_box;
	}
	/* 10 + owner (at most 40, or 16 hex digits by default) + 13 bytes: fits the 96. */
	snprintf(b->name, sizeof(b->name), "autopatch-%s-%02x%02x%02x%02x%02x%02x", e->owner,
		 rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
	if (make_repo) {
		rc = make_repo_dir(b);
		if (rc)
			goto err_free_box;
	} else if (spec->repo_dir) {
		b->repo_dir = strdup(spec->repo_dir);
		if (!b->repo_dir) {
			rc = ap_error_set(AP_ENOMEM, "out of memory");
			goto err_free_box;
		}
	}
	b->has_repo = b->repo_dir != NULL;
	rc = e->ops->create(e, spec, b, pool);
	if (rc)
		goto err_remove_dir;
	b->deadline_ms = ap_mono_ms() + (long long)spec->wall_seconds * 1000;
	ap_stat_add(AP_STAT_BOXES_CREATED, 1);
	ap_stat_add(AP_STAT_BOXES_ACTIVE, 1);
	*out = b;
	return 0;
err_remove_dir:
	if (b->own_repo_dir)
		sbx__remove_box_dir(e, b->name);
err_free_box:
	box_free(b);
	return rc;
}

int sbx_create(sbx_engine *e, const sbx_spec *spec, sbx_box **out)
{
	sbx_spec s;

	sbx__resolve_spec(e, spec, &s);
	if (sbx__sizes_check(&s, 0))
		return AP_EINVAL;
	return box_create(e, &s, false, false, out);
}

const char *sbx_box_repo_dir(const sbx_box *b)
{
	return b->repo_dir;
}

const char *sbx_box_id(const sbx_box *b)
{
	return b->id;
}

void sbx_box_set_phase(sbx_box *b, const char *phase)
{
	/* Phases are the program's own short words ("setup", "agent", "test"), never outside
	 * text: a longer one is a programmer's error. */
	assert(!phase || strlen(phase) < sizeof(b->phase));
	snprintf(b->phase, sizeof(b->phase), "%s", phase ? phase : "");
}

int sbx_box_set_network(sbx_box *b, enum sbx_network net)
{
	if (net != SBX_NET_NONE)
		return ap_error_set(AP_EINVAL, "a box's network can only be switched off");
	return b->e->ops->network_off(b);
}

int sbx_box_denials(sbx_box *b, sbx_denial *out, size_t max, size_t *n)
{
	*n = 0;
	return b->e->ops->denials(b, out, max, n);
}

int sbx_destroy(sbx_box *b)
{
	int rc;

	if (!b)
		return 0;
	rc = b->e->ops->remove(b);
	if (b->own_repo_dir)
		sbx__remove_box_dir(b->e, b->name);
	ap_stat_add(AP_STAT_BOXES_REMOVED, 1);
	ap_stat_add(AP_STAT_BOXES_ACTIVE, -1);
	box_free(b);
	return rc;
}

int sbx_reap_orphans(sbx_engine *e)
{
	return e->ops->reap(e, false);
}

int sbx_reap_all(sbx_engine *e)
{
	return e->ops->reap(e, true);
}

bool sbx_box_running(sbx_box *b)
{
	return b->e->ops->running(b);
}

int sbx_owned_count(sbx_engine *e)
{
	return e->ops->count(e);
}

/* --- process identity ------------------------------------------------------------------ */

/* Field 22 of /proc/PID/stat: start time in clock ticks since boot; 0 when unreadable. */
static unsigned long long start_time(long pid)
{
	ap_buf text = AP_BUF_INIT(4096);
	char path[64];
	const char *p;
	unsigned long long t = 0;
	int field;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	if (fs_read_file(&text, path, 0) != 0) {
		ap_error_clear();
		goto out_release;
	}
	p = strrchr(ap_buf_str(&text), ')'); /* the command name may hold spaces and parentheses */
	if (!p)
		goto out_release;
	for (field = 2; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	sscanf(p, "%llu", &t);
out_release:
	ap_buf_release(&text);
	return t;
}

static pthread_once_t creator_once = PTHREAD_ONCE_INIT;
static char creator_self[48];

static void creator_init(void)
{
	snprintf(creator_self, sizeof(creator_self), "%ld:%llu", (long)getpid(),
		 start_time((long)getpid()));
}

const char *sbx_creator_self(void)
{
	pthread_once(&creator_once, creator_init);
	return creator_self;
}

int sbx_creator_alive(const char *creator)
{
	long pid;
	unsigned long long t;

	if (!creator || sscanf(creator, "%ld:%llu", &pid, &t) != 2 || pid <= 0)
		return 0;
	return t != 0 && start_time(pid) == t;
}

/* Bytes a redactor gathers beyond its hold-back before rescanning: bounds the rescans of
 * many small frames to about (hold-back + batch) / batch times the output. */
#define SBX_REDACT_BATCH 4096

/* Redacted bytes of one stream: into the capped capture and the caller's callback. */
static void on_redacted(void *ud, const char *p, size_t n)
{
	struct sbx_exec_stream *es = ud;

	sbx_capture_add(&es->cap, p, n);
	if (es->io->fn)
		es->io->fn(es->io->ud, es->stream, p, n);
}

void sbx__io_payload(void *ud, int stream, const char *p, size_t n)
{
	sbx_exec_io *io = ud;
	int rc;

	if (io->rc)
		return; /* an earlier write failed: drop, never pass unredacted bytes */
	if (io->raw && stream != SBX_STREAM_STDERR) {
		io->raw(io->raw_ud, SBX_STREAM_STDOUT, p, n);
		return;
	}
	rc = redact_stream_write(stream == SBX_STREAM_STDERR ? io->err.rs : io->out.rs, p, n);
	if (rc)
		io->rc = rc;
	io->pending = true;
}

/* Emit what the redactors hold back (end of the exec, however it ended). */
static int exec_io_flush(sbx_exec_io *io)
{
	int rc = io->rc;

	if (!rc)
		rc = redact_stream_flush(io->out.rs);
	if (!rc)
		rc = redact_stream_flush(io->err.rs);
	if (rc && !io->rc)
		io->rc = rc;
	return rc;
}

/* No output for a while: let the redactors emit all they safely can, so a slow command's
 * output still streams (the default batch would hold up to 4 KiB more back). */
void sbx__io_nudge(sbx_exec_io *io)
{
	struct sbx_exec_stream *s[] = {&io->out, &io->err};

	if (!io->pending)
		return;
	io->pending = false;
	for (size_t i = 0; i < 2 && !io->rc; i++) {
		redact_stream_set_batch(s[i]->rs, 0);
		io->rc = redact_stream_write(s[i]->rs, "", 0);
		redact_stream_set_batch(s[i]->rs, SBX_REDACT_BATCH);
	}
}

/* Whether the box stopped under a command that exited with code (>= 126). runsc reports 128
 * for an exec whose sandbox died, and the container's state may still say running for a
 * moment: for 128 look again for up to 2 s. Other codes (127: not found) are looked at once. */
static bool box_died(sbx_box *b, int code)
{
	for (int i = 0; i < 20; i++) {
		if (!b->e->ops->running(b))
			return true;
		if (code != 128)
			return false;
		usleep(100000);
	}
	return false;
}

/* After a command's inside deadline: kill (in up to 10 passes, for processes that fork while
 * being killed) every process of the box except PID 1 (docker-init)
 * and the life `sleep`. `timeout -s KILL` only kills its own process group, so a child that
 * called setsid() (and holds stdout or not) would otherwise outlive its command's deadline;
 * the daemon closes the exec stream 2 s after the exec's main process exits, before the host
 * deadline would catch it. Every exec runs in a session of its own, while init and the life
 * sleep are session 1, which nothing started by an exec can join: so "session != 1" is exactly
 * what the box's commands started. The workspace (tmpfs) is kept. When the sweep cannot run,
 * the whole box is killed instead. */
static void sweep(sbx_box *b)
{
	/* A process just killed is gone only once init has reaped it: a pass that killed
	 * something waits 50 ms before the next looks again (up to 10 passes). */
	static const char script[] = "for pass in 1 2 3 4 5 6 7 8 9 10; do n=0; "
				     "for f in /proc/[0-9]*/stat; do "
				     "p=${f#/proc/}; p=${p%/stat}; "
				     "[ \"$p\" = $$ ] || [ \"$p\" = $PPID ] && continue; "
				     "read -r l < \"$f\" 2>/dev/null || continue; "
				     "set -- ${l##*) }; "
				     "case \"$1\" in Z|X) continue;; esac; "
				     "[ \"$4\" = 1 ] || { kill -KILL \"$p\" 2>/dev/null; n=1; }; "
				     "done; [ $n = 0 ] && exit 0; sleep 0.05; done; exit 1";
	const char *const argv[] = {"sh", "-c", script, NULL};
	sbx_cmd cmd = SBX_CMD_INIT;
	sbx_result res = SBX_RESULT_INIT;
	int rc;

	cmd.argv = argv;
	cmd.timeout_s = 10;
	cmd.workdir = "/";
	cmd.output_cap = 4096;
	b->sweeping = true;
	rc = sbx_exec(b, &cmd, &res);
	b->sweeping = false;
	if (rc || res.exit_code != 0 || res.timed_out) {
		ap_warn("sandbox: could not clear container %s after a timeout (%s); killing it",
			b->name, rc ? ap_error_last() : "the sweep failed");
		b->e->ops->kill(b);
		b->killed = true;
	}
	sbx_result_release(&res);
}

int sbx_box_sweep(sbx_box *b)
{
	if (b->killed)
		return ap_error_set(AP_EIO, "the sandbox %s was killed", b->name);
	sweep(b);
	return b->killed ? ap_error_set(AP_EIO,
					"the processes left in sandbox %s could not be "
					"cleared; it was killed",
					b->name)
			 : 0;
}

/* The output streams of cmd in *io (filled in place: it points into itself), each captured
 * up to cap bytes through a redactor. The caller releases the streams and captures. */
static int exec_io_init(sbx_exec_io *io, const sbx_cmd *cmd, size_t cap)
{
	int rc;

	*io = (sbx_exec_io){.fn = cmd->on_output,
			    .ud = cmd->on_output_ud,
			    .raw = cmd->raw_stdout,
			    .raw_ud = cmd->raw_stdout_ud};
	io->out = (struct sbx_exec_stream){io, SBX_STREAM_STDOUT, SBX_CAPTURE_INIT(cap), NULL};
	io->err = (struct sbx_exec_stream){io, SBX_STREAM_STDERR, SBX_CAPTURE_INIT(cap), NULL};
	if ((rc = redact_stream_new(&io->out.rs, on_redacted, &io->out)) ||
	    (rc = redact_stream_new(&io->err.rs, on_redacted, &io->err)))
		return rc;
	redact_stream_set_batch(io->out.rs, SBX_REDACT_BATCH);
	redact_stream_set_batch(io->err.rs, SBX_REDACT_BATCH);
	return 0;
}

/* The seconds cmd may run, started at start: its timeout (60 s by default), within the box's
 * remaining life (at least 1 s). */
static int exec_seconds(const sbx_box *b, const sbx_cmd *cmd, long long start)
{
	int seconds = cmd->timeout_s > 0 ? cmd->timeout_s : 60;
	long long life_left = (b->deadline_ms - start) / 1000;

	if (life_left < 1)
		life_left = 1;
	if (seconds > life_left)
		seconds = (int)life_left;
	return seconds;
}

/* What the backend's run of a command (started at start, given seconds) returned as rc and
 * *code means: a box that died or timed out is killed, a timeout is exit 124, a box that
 * died under the command is exit 137. Returns the rc sbx_exec goes on with. */
static int exec_outcome(sbx_box *b, sbx_result *res, int rc, int *code, long long start,
			int seconds)
{
	if (rc == SBX_BOX_DIED) {
		/* Out of memory or killed from outside: the command died with its box. */
		ap_warn("sandbox: container %s stopped during a command", b->name);
		b->killed = true;
		*code = 128 + 9;
		rc = 0;
	} else if (rc == AP_ETIMEOUT || rc == AP_ECANCELLED) {
		/* No endpoint kills one exec: the whole box goes. */
		char why[AP_ERROR_MSG_MAX];

		snprintf(why, sizeof(why), "%s", ap_error_last());
		b->e->ops->kill(b);
		b->killed = true;
		ap_error_set(rc, "%s", why);
		if (rc == AP_ETIMEOUT) {
			res->timed_out = true;
			*code = 124;
			rc = 0;
		}
	} else if (rc == 0) {
		/* timeout -s KILL takes itself down with its process group: 128+9. */
		if (!rc && *code == 137 && ap_mono_ms() - start >= (long long)seconds * 1000 - 50) {
			res->timed_out = true;
			*code = 124;
			if (!b->sweeping)
				sweep(b);
		} else if (!rc && *code >= 126 && box_died(b, *code)) {
			/* The box died under the command (gVisor's Sentry OOM-killed; runsc then
			 * reports its own 128): say "killed", and refuse further commands. */
			ap_warn("sandbox: container %s stopped during a command", b->name);
			b->killed = true;
			*code = 128 + 9;
		}
	}
	return rc;
}

int sbx_exec(sbx_box *b, const sbx_cmd *cmd, sbx_result *res)
{
	sbx_exec_io io;
	size_t cap;
	long long start = ap_mono_ms(), deadline;
	int seconds, rc, code = -1;

	*res = (sbx_result)SBX_RESULT_INIT;
	if (!cmd->argv || !cmd->argv[0])
		return ap_error_set(AP_EINVAL, "sbx_exec: empty argv");
	if (b->killed)
		return ap_error_set(AP_EIO, "the sandbox was killed (deadline or cancel); create "
					    "a new one");
	cap = cmd->output_cap ? cmd->output_cap : b->e->output_cap;
	if (cap < 2)
		cap = 2;
	if ((rc = exec_io_init(&io, cmd, cap)))
		goto out_release;
	seconds = exec_seconds(b, cmd, start);
	deadline = start + (long long)seconds * 1000 + SBX_KILL_GRACE;

	rc = b->e->ops->run(b, cmd, seconds, deadline, &io, &code);
	/* However the command ended, what the redactors held back belongs to its output. */
	exec_io_flush(&io);
	rc = exec_outcome(b, res, rc, &code, start, seconds);
	if (rc && rc != AP_ECANCELLED)
		goto out_release;
	if (io.rc) {
		rc = io.rc; /* part of the output could not be redacted: none is returned */
		goto out_release;
	}
	res->exit_code = code;
	res->truncated = sbx_capture_truncated(&io.out.cap) || sbx_capture_truncated(&io.err.cap);
	res->out = sbx_capture_take(&io.out.cap, &res->out_len);
	res->err = sbx_capture_take(&io.err.cap, &res->err_len);
	res->millis = ap_mono_ms() - start;
	if (!res->out || !res->err) {
		sbx_result_release(res);
		rc = ap_error_set(AP_ENOMEM, "out of memory collecting output");
	}
out_release:
	/* Already flushed when the command ran; freeing flushes only on early failures. */
	redact_stream_free(io.out.rs);
	redact_stream_free(io.err.rs);
	sbx_capture_release(&io.out.cap);
	sbx_capture_release(&io.err.cap);
	return rc;
}

void sbx_result_release(sbx_result *res)
{
	if (!res)
		return;
	free(res->out);
	free(res->err);
	*res = (sbx_result)SBX_RESULT_INIT;
}

int sbx__copy_repo(sbx_box *b, const char *const *argv_in)
{
	/* HOME first (the mount starts empty), then the copy. */
	static const char *const dflt[] = {
	    "sh", "-c",
	    "mkdir -p " SBX_HOME " && cp -R --preserve=mode,timestamps,links --no-dereference "
	    "/repo/. /tmp/workspace/",
	    NULL};
	sbx_cmd cmd = SBX_CMD_INIT;
	sbx_result res = SBX_RESULT_INIT;
	int rc;

	if (!b->has_repo)
		return 0;
	cmd.argv = argv_in ? argv_in : dflt;
	cmd.timeout_s = 600;
	cmd.output_cap = 8192;
	rc = sbx_exec(b, &cmd, &res);
	if (!rc && res.exit_code != 0)
		rc = ap_error_set(AP_EIO,
				  "copying /repo into the workspace failed (exit %d): %.300s",
				  res.exit_code, res.err ? res.err : "");
	sbx_result_release(&res);
	return rc;
}

int sbx_prepare(sbx_box *b)
{
	if (!b->has_repo)
		return 0;
	return b->e->ops->prepare(b);
}

/* --- warm pool -------------------------------------------------------------------------- */

static void *pool_main(void *arg)
{
	sbx_engine *e = arg;
	sbx_spec s = e->defaults;
	sbx_box *b;
	struct timespec ts;
	int rc, failures = 0;

	s.job_label = "pool";
	pthread_mutex_lock(&e->lock);
	while (!e->stopping) {
		if (e->pool_n + e->creating >= e->pool_size) {
			pthread_cond_wait(&e->cond, &e->lock);
			continue;
		}
		e->creating++;
		pthread_mutex_unlock(&e->lock);
		rc = box_create(e, &s, true, true, &b);
		pthread_mutex_lock(&e->lock);
		e->creating--;
		if (rc) {
			ap_warn("sandbox pool: %s", ap_error_last());
			/* Back off (up to 30 s) instead of hammering a failing daemon. */
			failures = failures < 5 ? failures + 1 : 5;
			ap_deadline_in(&ts, CLOCK_REALTIME, (int64_t)1000 << failures);
			if (!e->stopping)
				pthread_cond_timedwait(&e->cond, &e->lock, &ts);
			continue;
		}
		failures = 0;
		if (e->stopping || e->pool_n >= e->pool_size) {
			pthread_mutex_unlock(&e->lock);
			sbx_destroy(b);
			pthread_mutex_lock(&e->lock);
			continue;
		}
		e->pool[e->pool_n++] = b;
		pthread_cond_broadcast(&e->cond);
	}
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

int sbx_pool_start(sbx_engine *e)
{
	int rc = 0;

	pthread_mutex_lock(&e->lock);
	if (!e->pool_started && e->pool_size > 0) {
		if (pthread_create(&e->pool_thread, NULL, pool_main, e))
			rc = ap_error_set(AP_ENOMEM, "cannot start the sandbox pool thread");
		else
			e->pool_started = true;
	}
	pthread_mutex_unlock(&e->lock);
	return rc;
}

int sbx_pool_ready(sbx_engine *e)
{
	int n;

	pthread_mutex_lock(&e->lock);
	n = e->pool_n;
	pthread_mutex_unlock(&e->lock);
	return n;
}

int sbx_acquire(sbx_engine *e, const char *job_label, sbx_box **out)
{
	sbx_spec s = e->defaults;
	sbx_box *b = NULL;
	int rc;

	*out = NULL;
	if ((rc = job_label_check(job_label)) || (rc = sbx_pool_start(e)))
		return rc;
	pthread_mutex_lock(&e->lock);
	if (e->pool_n > 0) {
		/* Oldest first: it has waited longest. */
		b = e->pool[0];
		memmove(e->pool, e->pool + 1, (size_t)(e->pool_n - 1) * sizeof(e->pool[0]));
		e->pool_n--;
		pthread_cond_broadcast(&e->cond);
	}
	pthread_mutex_unlock(&e->lock);
	if (b) {
		snprintf(b->job, sizeof(b->job), "%s", job_label ? job_label : ""); /* checked */
		b->deadline_ms = ap_mono_ms() + (long long)e->defaults.wall_seconds * 1000;
		ap_debug("sandbox: job %s got warm box %s", b->job, b->name);
		*out = b;
		return 0;
	}
	s.job_label = job_label;
	return box_create(e, &s, true, false, out);
}

/* --- engine ----------------------------------------------------------------------------- */

int sbx_engine_new(sbx_engine **out, const ap_config *cfg)
{
	sbx_engine *e;
	int rc;

	*out = NULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return ap_error_set(AP_ENOMEM, "out of memory");
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->cond, NULL);
	rc = read_settings(e, cfg);
	if (rc)
		goto err_free_engine;
	rc = e->ops->open(e, cfg);
	if (rc)
		goto err_free_engine;
	*out = e;
	return 0;
err_free_engine:
	sbx_engine_free(e);
	return rc;
}

void sbx_engine_free(sbx_engine *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->lock);
	e->stopping = true;
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
	if (e->pool_started)
		pthread_join(e->pool_thread, NULL);
	for (int i = 0; i < e->pool_n; i++)
		sbx_destroy(e->pool[i]);
	if (e->be)
		e->ops->close(e);
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->cond);
	free(e->image);
	free(e->runtime);
	free(e->data_dir);
	free(e);
}

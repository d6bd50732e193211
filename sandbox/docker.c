/* SPDX-License-Identifier: MIT */
/* sandbox/docker.c - the Docker Engine backend of sandbox.h: hardened create, exec over the
 * hijacked connection with in- and outside deadlines and capped output, destroy, orphan
 * reaping and the warm pool.
 *
 * A box is a container whose PID 1 (docker-init) runs `sleep`; every command is an exec as uid
 * 10001 wrapped in `timeout -s KILL N`, and the host kills the whole container when the
 * deadline passes anyway, because the Engine API cannot kill a single exec.
 */
#include "sandbox/docker_api.h"
#include "sandbox/egress.h"
#include "common/stats.h"
#include "common/err.h"
#include "common/fs.h"
#include "sandbox/internal.h"
#include "common/log.h"
#include "common/redact.h"
#include "sandbox/sandbox.h"
#include "sandbox/stream.h"

#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SBX_POOL_MAX	 16
#define SBX_API_TIMEOUT	 60000L /* ms for ordinary daemon calls */
#define SBX_PODMAN_NPROC 32768
#define SBX_KILL_GRACE	 3000 /* ms the host waits past a deadline before killing the box */

struct sbx_engine {
	dk_client *dk;
	char owner[65];		/* owner id, label-safe */
	char *image;		/* AUTOPATCH_SANDBOX_IMAGE */
	char *runtime;		/* AUTOPATCH_SANDBOX_RUNTIME */
	char *data_dir;		/* absolute $AUTOPATCH_DATA_DIR/sandbox */
	sbx_spec defaults;	/* every numeric field resolved; strings point at the above */
	size_t output_cap;	/* default per-stream cap */
	sbx_egress_opts egress; /* AUTOPATCH_EGRESS_* (allow-list boxes only) */
	int pool_size;		/* AUTOPATCH_SANDBOX_POOL */
	pthread_mutex_t lock;	/* guards everything below */
	pthread_cond_t cond;	/* pool changed or stopping */
	sbx_box *pool[SBX_POOL_MAX];
	int pool_n;   /* ready boxes */
	int creating; /* boxes being created for the pool */
	bool pool_started, stopping;
	pthread_t pool_thread;
};

struct sbx_box {
	sbx_engine *e;
	char id[80];	       /* container id */
	char name[96];	       /* container name */
	char *repo_dir;	       /* host dir at /repo, or NULL */
	bool own_repo_dir;     /* repo_dir was made for this box: remove it on destroy */
	char job[64];	       /* job label (pool boxes are labelled "pool") */
	long long deadline_ms; /* end of the box's life (monotonic) */
	bool killed;	       /* the host killed it (deadline, cancel): execs are refused */
	bool has_repo;	       /* /repo is bound */
	bool sweeping;	       /* sweep() is running its own exec: no sweep of the sweep */
	sbx_egress *eg;	       /* the allow-list network + proxy, or NULL */
	char phase[16];	       /* sbx_box_set_phase() */
};

/* --- settings --------------------------------------------------------------------------- */

static bool label_safe(const char *s, size_t max)
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

	if (outlen < 17)
		return ap_error_set(AP_EINVAL, "owner id buffer too small");
	gethostname(host, sizeof(host) - 1);
	if (db_path[0] == '/') {
		snprintf(path, sizeof(path), "%s\n%s", host, db_path);
	} else {
		if (!getcwd(cwd, sizeof(cwd)))
			return ap_error_set(AP_EIO, "getcwd: %s", strerror(errno));
		snprintf(path, sizeof(path), "%s\n%s/%s", host, cwd, db_path);
	}
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

static int read_settings(sbx_engine *e, const ap_config *cfg)
{
	sbx_spec *d = &e->defaults;
	const char *image = cfg_str(cfg, "AUTOPATCH_SANDBOX_IMAGE");
	const char *runtime = cfg_str(cfg, "AUTOPATCH_SANDBOX_RUNTIME");
	const char *owner = cfg_str(cfg, "AUTOPATCH_OWNER_ID");
	const char *data = cfg_str(cfg, "AUTOPATCH_DATA_DIR");
	char path[PATH_MAX], real[PATH_MAX];
	int64_t v;
	int rc;

	if (!label_safe(runtime, 64))
		return ap_error_set(
		    AP_EINVAL,
		    "AUTOPATCH_SANDBOX_RUNTIME=\"%s\" is not a runtime name: use runc "
		    "or runsc",
		    runtime);
	if (strlen(image) > 255 || strchr(image, ' '))
		return ap_error_set(AP_EINVAL,
				    "AUTOPATCH_SANDBOX_IMAGE=\"%s\" is not an image name", image);
	if (owner && !label_safe(owner, 40))
		return ap_error_set(
		    AP_EINVAL,
		    "AUTOPATCH_OWNER_ID=\"%s\" must be 1-40 letters, digits, '-', '_' "
		    "or '.'",
		    owner);
	if (owner)
		snprintf(e->owner, sizeof(e->owner), "%s", owner);
	else if ((rc =
		      sbx__default_owner(cfg_str(cfg, "AUTOPATCH_DB"), e->owner, sizeof(e->owner))))
		return rc;
	e->image = strdup(image);
	e->runtime = strdup(runtime);
	if (!e->image || !e->runtime)
		return ap_error_set(AP_ENOMEM, "out of memory");
	d->version = SBX_SPEC_VERSION;
	d->image = e->image;
	d->runtime = e->runtime;
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
	if ((rc = cfg_int(cfg, "AUTOPATCH_SANDBOX_WALL_SECONDS", 5, 7 * 24 * 3600, &v)))
		return rc;
	d->wall_seconds = (int)v;
	if ((rc = cfg_bytes(cfg, "AUTOPATCH_SANDBOX_OUTPUT_CAP", 1024, 256LL << 20, &v)))
		return rc;
	e->output_cap = (size_t)v;
	if ((rc = cfg_int(cfg, "AUTOPATCH_SANDBOX_POOL", 0, SBX_POOL_MAX, &v)))
		return rc;
	e->pool_size = (int)v;
	d->network = SBX_NET_NONE;
	e->egress = (sbx_egress_opts)SBX_EGRESS_OPTS_INIT;
	if ((rc = sbx_egress_opts_load(&e->egress, cfg)))
		return rc;
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

const char *sbx__owner(const sbx_engine *e)
{
	return e->owner;
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
	cJSON *info = NULL;
	int rc = dk_image_inspect(e->dk, image ? image : e->image, SBX_PROBE_TIMEOUT_MS, &info);

	cJSON_Delete(info);
	return rc;
}

int sbx_image_id(sbx_engine *e, const char *image, char *out, size_t n)
{
	cJSON *info = NULL, *iid;
	int rc = dk_image_inspect(e->dk, image ? image : e->image, SBX_PROBE_TIMEOUT_MS, &info);

	if (rc == 0) {
		iid = cJSON_GetObjectItemCaseSensitive(info, "Id");
		if (cJSON_IsString(iid) && strlen(iid->valuestring) < n)
			snprintf(out, n, "%s", iid->valuestring);
		else
			rc = ap_error_set(AP_EIO, "docker image inspect %.200s: no image id",
					  image ? image : e->image);
	}
	cJSON_Delete(info);
	return rc;
}

/* --- create ----------------------------------------------------------------------------- */

static cJSON *ulimit(const char *name, int64_t v)
{
	cJSON *u = cJSON_CreateObject();

	if (u && (!cJSON_AddStringToObject(u, "Name", name) ||
		  !cJSON_AddNumberToObject(u, "Soft", (double)v) ||
		  !cJSON_AddNumberToObject(u, "Hard", (double)v))) {
		cJSON_Delete(u);
		return NULL;
	}
	return u;
}

int sbx__create_body(const sbx_spec *s, const char *owner, int cmd_seconds,
		     const char *network_mode, const char *const *extra_env,
		     const char *const *volumes, bool podman, cJSON **out)
{
	cJSON *b = cJSON_CreateObject(), *hc, *arr, *obj, *item;
	char tmp[PATH_MAX + 16];
	int rc = AP_ENOMEM;

	*out = NULL;
	if (!b)
		goto err_nomem;
	if (!cJSON_AddStringToObject(b, "Image", s->image) ||
	    !cJSON_AddStringToObject(b, "User", SBX_USER) ||
	    !cJSON_AddStringToObject(b, "WorkingDir", "/tmp/workspace") ||
	    !cJSON_AddFalseToObject(b, "Tty") || !cJSON_AddFalseToObject(b, "OpenStdin") ||
	    !cJSON_AddFalseToObject(b, "AttachStdin") ||
	    !cJSON_AddFalseToObject(b, "AttachStdout") ||
	    !cJSON_AddFalseToObject(b, "AttachStderr") ||
	    !cJSON_AddNumberToObject(b, "StopTimeout", 1))
		goto err_nomem;
	if (strcmp(network_mode, "none") == 0 && !cJSON_AddTrueToObject(b, "NetworkDisabled"))
		goto err_nomem;
	/* PID 1 outlives the host by at most the box's life, so a crashed autopatch cannot leave
	 * a running box behind for long even before the reaper runs. */
	snprintf(tmp, sizeof(tmp), "%d", cmd_seconds);
	arr = cJSON_AddArrayToObject(b, "Cmd");
	if (!arr || !(item = cJSON_CreateString("sleep")))
		goto err_nomem;
	cJSON_AddItemToArray(arr, item);
	if (!(item = cJSON_CreateString(cmd_seconds > 0 ? tmp : "infinity")))
		goto err_nomem;
	cJSON_AddItemToArray(arr, item);
	/* Nothing from the host's environment: only fixed values (the image adds PATH, LANG). */
	arr = cJSON_AddArrayToObject(b, "Env");
	if (!arr)
		goto err_nomem;
	/* PIP_BREAK_SYSTEM_PACKAGES: Debian's pip refuses any install outside a venv (PEP 668);
	 * with it, `pip install -e .` as the box user falls back to a user install in HOME,
	 * which is what a setup step means (docs/environments.md). */
	static const char *const env[] = {
	    "HOME=/tmp/workspace",	   "CI=1", "TMPDIR=/tmp", "LANG=C.UTF-8",
	    "PIP_BREAK_SYSTEM_PACKAGES=1", NULL};
	for (const char *const *p = env; *p; p++) {
		if (!(item = cJSON_CreateString(*p)))
			goto err_nomem;
		cJSON_AddItemToArray(arr, item);
	}
	for (const char *const *p = extra_env; p && *p; p++) {
		if (!(item = cJSON_CreateString(*p)))
			goto err_nomem;
		cJSON_AddItemToArray(arr, item);
	}
	obj = cJSON_AddObjectToObject(b, "Labels");
	if (!obj || (rc = dk_labels_add(obj, owner, s->job_label ? s->job_label : "")))
		goto err_rc;
	rc = AP_ENOMEM;

	hc = cJSON_AddObjectToObject(b, "HostConfig");
	if (!hc || !cJSON_AddStringToObject(hc, "NetworkMode", network_mode) ||
	    !cJSON_AddTrueToObject(hc, "ReadonlyRootfs") ||
	    !cJSON_AddFalseToObject(hc, "Privileged") ||
	    !cJSON_AddNumberToObject(hc, "Memory", (double)s->memory_bytes) ||
	    !cJSON_AddNumberToObject(hc, "MemorySwap", (double)s->memory_bytes) ||
	    !cJSON_AddNumberToObject(hc, "NanoCpus", (double)s->nano_cpus) ||
	    !cJSON_AddNumberToObject(hc, "PidsLimit", (double)s->pids) ||
	    !cJSON_AddTrueToObject(hc, "Init") || !cJSON_AddFalseToObject(hc, "AutoRemove") ||
	    !cJSON_AddStringToObject(hc, "IpcMode", "private") ||
	    !cJSON_AddStringToObject(hc, "CgroupnsMode", "private") ||
	    !cJSON_AddStringToObject(hc, "Runtime", s->runtime))
		goto err_nomem;
	arr = cJSON_AddArrayToObject(hc, "CapDrop");
	if (!arr || !(item = cJSON_CreateString("ALL")))
		goto err_nomem;
	cJSON_AddItemToArray(arr, item);
	arr = cJSON_AddArrayToObject(hc, "SecurityOpt");
	if (!arr || !(item = cJSON_CreateString("no-new-privileges:true")))
		goto err_nomem;
	cJSON_AddItemToArray(arr, item);
	arr = cJSON_AddArrayToObject(hc, "Ulimits");
	if (!arr || !(item = ulimit("nofile", s->nofile)))
		goto err_nomem;
	cJSON_AddItemToArray(arr, item);
	if (!(item = ulimit("core", 0)))
		goto err_nomem;
	cJSON_AddItemToArray(arr, item);
	if (!(item = ulimit("fsize", s->fsize_bytes)))
		goto err_nomem;
	cJSON_AddItemToArray(arr, item);
	/* Podman (rootful) otherwise asks for RLIMIT_NPROC 1048576, which fails where its
	 * service cannot raise its own limit. Docker leaves nproc alone; PidsLimit is the limit
	 * that counts (nproc is per host uid, shared by every box). */
	if (podman) {
		if (!(item = ulimit("nproc", SBX_PODMAN_NPROC)))
			goto err_nomem;
		cJSON_AddItemToArray(arr, item);
	}
	obj = cJSON_AddObjectToObject(hc, "Tmpfs");
	if (!obj)
		goto err_nomem;
	snprintf(tmp, sizeof(tmp), "rw,nosuid,nodev,noexec,size=%lld,mode=1777",
		 (long long)s->tmp_bytes);
	if (!cJSON_AddStringToObject(obj, "/tmp", tmp))
		goto err_nomem;
	/* Owned by the sandbox user, or git refuses the workspace as "dubious ownership". */
	snprintf(tmp, sizeof(tmp),
		 podman ? "rw,nosuid,nodev,exec,size=%lld,mode=0755,U"
			: "rw,nosuid,nodev,exec,size=%lld,mode=0755,uid=10001,gid=10001",
		 (long long)s->workspace_bytes);
	if (!cJSON_AddStringToObject(obj, "/tmp/workspace", tmp))
		goto err_nomem;
	/* The image's VOLUMEs: a tmpfs at the same path makes the daemon skip the anonymous
	 * volume it would otherwise create on host disk, uncapped. */
	snprintf(tmp, sizeof(tmp),
		 podman ? "rw,nosuid,nodev,noexec,size=%lld,mode=0755,U"
			: "rw,nosuid,nodev,noexec,size=%lld,mode=0755,uid=10001,gid=10001",
		 (long long)s->volume_bytes);
	for (const char *const *v = volumes; v && *v; v++)
		if (!cJSON_AddStringToObject(obj, *v, tmp))
			goto err_nomem;
	/* HOME and the Tester's trees: built test binaries must run there (see docs/sandbox.md,
	 * "where noexec is dropped"). */
	snprintf(tmp, sizeof(tmp),
		 podman ? "rw,nosuid,nodev,exec,size=%lld,mode=0755,U"
			: "rw,nosuid,nodev,exec,size=%lld,mode=0755,uid=10001,gid=10001",
		 (long long)(s->trees_bytes > 0 ? s->trees_bytes : 2LL << 30));
	if (!cJSON_AddStringToObject(obj, "/tmp/trees", tmp))
		goto err_nomem;
	obj = cJSON_AddObjectToObject(hc, "LogConfig");
	if (!obj || !cJSON_AddStringToObject(obj, "Type", "none"))
		goto err_nomem;
	arr = cJSON_AddArrayToObject(hc, "Binds");
	if (!arr)
		goto err_nomem;
	if (s->repo_dir) {
		if (s->repo_dir[0] != '/' || strchr(s->repo_dir, ':')) {
			rc = ap_error_set(
			    AP_EINVAL,
			    "the repository dir must be an absolute path without ':' (%s)",
			    s->repo_dir);
			goto err_rc;
		}
		if (snprintf(tmp, sizeof(tmp), "%s:/repo:ro", s->repo_dir) >= (int)sizeof(tmp)) {
			rc = ap_error_set(AP_EINVAL, "repository path too long");
			goto err_rc;
		}
		if (!(item = cJSON_CreateString(tmp)))
			goto err_nomem;
		cJSON_AddItemToArray(arr, item);
	}
	*out = b;
	return 0;
err_nomem:
	rc = ap_error_set(AP_ENOMEM, "out of memory building a container spec");
err_rc:
	cJSON_Delete(b);
	return rc;
}

/* --- image volumes --------------------------------------------------------------------- */

/* Is p the directory dir or below it? */
static bool path_within(const char *p, const char *dir)
{
	size_t n = strlen(dir);

	return strncmp(p, dir, n) == 0 && (p[n] == '\0' || p[n] == '/' || n == 1);
}

/* Clean an image VOLUME path the way the daemon does (no empty components, no trailing
 * slash), refusing what autopatch does not mount. *why is a static reason on failure. */
static int clean_volume(const char *in, char out[PATH_MAX], const char **why)
{
	size_t o = 0;

	if (in[0] != '/') {
		*why = "it is not an absolute path";
		return AP_EDENIED;
	}
	for (const char *p = in; *p;) {
		size_t n;

		while (*p == '/')
			p++;
		n = strcspn(p, "/");
		if (n == 0)
			break;
		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
			*why = "it has a \".\" or \"..\" component";
			return AP_EDENIED;
		}
		for (size_t i = 0; i < n; i++) {
			if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
				    "._-@+=",
				    p[i])) {
				*why = "it has characters other than letters, digits and ._-@+=";
				return AP_EDENIED;
			}
		}
		if (o + 1 + n >= PATH_MAX) {
			*why = "it is too long";
			return AP_EDENIED;
		}
		out[o++] = '/';
		memcpy(out + o, p, n);
		o += n;
		p += n;
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	return 0;
}

/* A path from the image or the daemon, for a sentence: at most 200 bytes, every byte outside
 * letters, digits and "/._-+=" shown as '?'. */
static const char *shown_path(char out[208], const char *p)
{
	size_t i = 0;

	for (; p[i] && i < 200; i++)
		out[i] = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
				"/._-+=",
				p[i])
			     ? p[i]
			     : '?';
	out[i] = '\0';
	return out;
}

/* Why a box cannot have a tmpfs at the cleaned path p, or NULL if it can. */
static const char *volume_conflict(const char *p)
{
	static const char *const kernel[] = {"/proc", "/sys", "/dev"};

	if (strcmp(p, "/") == 0)
		return "a tmpfs at / would replace the box's whole read-only root filesystem";
	for (size_t i = 0; i < sizeof(kernel) / sizeof(kernel[0]); i++)
		if (path_within(p, kernel[i]))
			return "it is inside a kernel or device filesystem of the box";
	if (path_within(p, "/repo") || path_within("/repo", p))
		return "it would cover or hide the read-only repository at /repo";
	if (path_within(p, "/tmp/workspace") || path_within("/tmp/workspace", p))
		return "it would cover or hide the workspace at /tmp/workspace";
	return NULL;
}

void sbx__volumes_free(char **volumes)
{
	for (char **v = volumes; v && *v; v++)
		free(*v);
	free(volumes);
}

int sbx__image_volumes(const cJSON *image, const char *name, char ***out)
{
	const cJSON *vols = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(image, "Config"), "Volumes");
	const cJSON *v;
	char path[PATH_MAX], shown[208];
	const char *why = NULL;
	char **list = NULL;
	size_t n = 0;
	int rc;

	*out = NULL;
	if (!vols || cJSON_IsNull(vols))
		return 0;
	if (!cJSON_IsObject(vols))
		return ap_error_set(AP_EDENIED,
				    "the sandbox image %.200s has a Config.Volumes that is not an "
				    "object; autopatch refuses it",
				    name);
	list = calloc(SBX_MAX_VOLUMES + 1, sizeof(*list));
	if (!list)
		return ap_error_set(AP_ENOMEM, "out of memory");
	cJSON_ArrayForEach(v, vols)
	{
		bool dup = false;

		rc = clean_volume(v->string, path, &why);
		if (!rc && strcmp(path, "/tmp") == 0)
			continue; /* the box's /tmp is a capped tmpfs already */
		if (!rc)
			why = volume_conflict(path);
		if (rc || why) {
			rc =
			    ap_error_set(AP_EDENIED,
					 "the sandbox image %.200s declares VOLUME %.200s, which a "
					 "box cannot have: %s (rebuild the image without it)",
					 name, shown_path(shown, v->string), why);
			goto err_free;
		}
		for (size_t i = 0; i < n && !dup; i++)
			dup = strcmp(list[i], path) == 0;
		if (dup)
			continue;
		if (n == SBX_MAX_VOLUMES) {
			rc = ap_error_set(AP_EDENIED,
					  "the sandbox image %.200s declares more than %d VOLUMEs; "
					  "autopatch covers at most %d",
					  name, SBX_MAX_VOLUMES, SBX_MAX_VOLUMES);
			goto err_free;
		}
		list[n] = strdup(path);
		if (!list[n]) {
			rc = ap_error_set(AP_ENOMEM, "out of memory");
			goto err_free;
		}
		n++;
	}
	if (n == 0) {
		free(list);
		return 0;
	}
	*out = list;
	return 0;
err_free:
	sbx__volumes_free(list);
	return rc;
}

int sbx__check_mounts(const cJSON *container, const char *name)
{
	const cJSON *m;
	char shown_t[208], shown_d[208];

	cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(container, "Mounts"))
	{
		const cJSON *type = cJSON_GetObjectItemCaseSensitive(m, "Type");
		const cJSON *dest = cJSON_GetObjectItemCaseSensitive(m, "Destination");
		const char *t = cJSON_IsString(type) ? type->valuestring : "?";
		const char *d = cJSON_IsString(dest) ? dest->valuestring : "?";

		if (strcmp(t, "tmpfs") == 0 || (strcmp(t, "bind") == 0 && strcmp(d, "/repo") == 0))
			continue;
		return ap_error_set(
		    AP_EDENIED,
		    "the Docker daemon mounted a %.40s at %s into a box of the "
		    "image %.200s; only /repo and tmpfs mounts are allowed in a box",
		    shown_path(shown_t, t), shown_path(shown_d, d), name);
	}
	return 0;
}

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
static void remove_box_dir(const sbx_engine *e, const char *name)
{
	char path[PATH_MAX], kept[1024];

	if (!label_safe(name, 90))
		return;
	if (snprintf(path, sizeof(path), "%s/%s", e->data_dir, name) >= (int)sizeof(path))
		return;
	snprintf(kept, sizeof(kept), "%s", ap_error_last());
	if (fs_rm_rf(path) != 0) {
		ap_warn("sandbox: %s", ap_error_last());
		ap_error_set(0, "%s", kept);
	}
}

static void box_free(sbx_box *b)
{
	if (!b)
		return;
	free(b->repo_dir);
	free(b);
}

/* Remove the container (force kills it); 404 and "already in progress" count as done. */
static int remove_container(sbx_engine *e, const char *id)
{
	char path[160];
	long status = 0;
	int rc;

	snprintf(path, sizeof(path), "/containers/%s?force=true&v=true", id);
	rc = dk_request(e->dk, "DELETE", path, NULL, SBX_API_TIMEOUT, &status, NULL);
	if (rc == AP_ENOTFOUND ||
	    (rc == AP_EHTTP && status == 409 && strstr(ap_error_last(), "in progress")))
		rc = 0;
	return rc;
}

static int kill_container(sbx_engine *e, const char *id)
{
	char path[160];
	long status = 0;
	int rc;

	snprintf(path, sizeof(path), "/containers/%s/kill?signal=SIGKILL", id);
	rc = dk_request(e->dk, "POST", path, NULL, SBX_API_TIMEOUT, &status, NULL);
	if (rc == AP_ENOTFOUND || (rc == AP_EHTTP && status == 409))
		rc = 0; /* already gone or not running */
	return rc;
}

/* The daemon reports ignored limits as warnings: log each. */
static void log_warnings(const char *name, const cJSON *resp)
{
	const cJSON *w;

	cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(resp, "Warnings"))
	{
		if (cJSON_IsString(w))
			ap_warn("docker create %s: %s", name, w->valuestring);
	}
}

/* What a box of image name needs: the image's id (the box is created from exactly the image
 * inspected, even if the name is re-tagged meanwhile) and the VOLUME paths to cover. */
static int image_plan(sbx_engine *e, const char *name, char id[80], char ***volumes)
{
	cJSON *img = NULL, *iid;
	int rc;

	*volumes = NULL;
	rc = dk_image_inspect(e->dk, name, SBX_API_TIMEOUT, &img);
	if (rc)
		return rc;
	iid = cJSON_GetObjectItemCaseSensitive(img, "Id");
	if (!cJSON_IsString(iid) || strlen(iid->valuestring) >= 80 ||
	    strspn(iid->valuestring, "0123456789abcdef:sha256") != strlen(iid->valuestring) ||
	    !iid->valuestring[0]) {
		rc = ap_error_set(AP_EIO, "docker image inspect %.200s: no image id in the answer",
				  name);
		goto out;
	}
	snprintf(id, 80, "%s", iid->valuestring);
	rc = sbx__image_volumes(img, name, volumes);
out:
	cJSON_Delete(img);
	return rc;
}

/* The created container has nothing mounted but /repo and tmpfs (no anonymous volume). */
static int verify_mounts(sbx_engine *e, const sbx_box *b, const char *image)
{
	char path[160];
	cJSON *info = NULL;
	int rc;

	snprintf(path, sizeof(path), "/containers/%s/json", b->id);
	rc = dk_request(e->dk, "GET", path, NULL, SBX_API_TIMEOUT, NULL, &info);
	if (!rc)
		rc = sbx__check_mounts(info, image);
	cJSON_Delete(info);
	return rc;
}

/* Create and start a box from a resolved spec. job names the label; pool boxes sleep forever
 * (the pool destroys them), others live wall_seconds. */
static int box_create(sbx_engine *e, const sbx_spec *spec, bool make_repo, bool pool, sbx_box **out)
{
	sbx_box *b;
	sbx_spec s = *spec;
	cJSON *body = NULL, *resp = NULL, *id;
	char path[256], why[1024], image_id[80];
	char **volumes = NULL;
	unsigned char rnd[6];
	int rc;

	*out = NULL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return ap_error_set(AP_ENOMEM, "out of memory");
	b->e = e;
	rc = image_plan(e, spec->image, image_id, &volumes);
	if (rc)
		goto err_free_box;
	s.image = image_id;
	snprintf(b->job, sizeof(b->job), "%s", s.job_label ? s.job_label : "");
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		rc = ap_error_set(AP_EIO, "getrandom: %s", strerror(errno));
		goto err_free_box;
	}
	snprintf(b->name, sizeof(b->name), "autopatch-%s-%02x%02x%02x%02x%02x%02x", e->owner,
		 rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
	if (make_repo) {
		rc = make_repo_dir(b);
		if (rc)
			goto err_free_box;
		s.repo_dir = b->repo_dir;
	} else if (s.repo_dir) {
		b->repo_dir = strdup(s.repo_dir);
		if (!b->repo_dir) {
			rc = ap_error_set(AP_ENOMEM, "out of memory");
			goto err_free_box;
		}
	}
	b->has_repo = s.repo_dir != NULL;
	if (s.network == SBX_NET_ALLOWLIST) {
		rc = sbx_egress_check(s.allow);
		if (!rc)
			rc = sbx_egress_up(e->dk, &e->egress, e->owner, b->job, s.runtime, s.allow,
					   &b->eg);
		if (rc)
			goto err_remove_dir;
	}
	rc = sbx__create_body(&s, e->owner, pool ? 0 : s.wall_seconds,
			      b->eg ? sbx_egress_network(b->eg) : "none",
			      b->eg ? sbx_egress_env(b->eg) : NULL, (const char *const *)volumes,
			      dk_is_podman(e->dk), &body);
	if (rc)
		goto err_egress_down;
	snprintf(path, sizeof(path), "/containers/create?name=%s", b->name);
	rc = dk_request(e->dk, "POST", path, body, SBX_API_TIMEOUT, NULL, &resp);
	if (rc)
		goto err_remove_container; /* a timed-out create may still have happened */
	id = cJSON_GetObjectItemCaseSensitive(resp, "Id");
	if (!cJSON_IsString(id) || !label_safe(id->valuestring, sizeof(b->id) - 1)) {
		rc = ap_error_set(AP_EIO, "docker create: no container id in the answer");
		goto err_remove_container;
	}
	snprintf(b->id, sizeof(b->id), "%s", id->valuestring);
	log_warnings(b->name, resp);
	rc = verify_mounts(e, b, spec->image);
	if (rc)
		goto err_remove_container;
	snprintf(path, sizeof(path), "/containers/%s/start", b->id);
	rc = dk_request(e->dk, "POST", path, NULL, SBX_API_TIMEOUT, NULL, NULL);
	if (rc)
		goto err_remove_container;
	b->deadline_ms = dk_now_ms() + (long long)s.wall_seconds * 1000;
	ap_stat_add(AP_STAT_BOXES_CREATED, 1);
	ap_stat_add(AP_STAT_BOXES_ACTIVE, 1);
	cJSON_Delete(body);
	cJSON_Delete(resp);
	sbx__volumes_free(volumes);
	*out = b;
	return 0;
err_remove_container:
	snprintf(why, sizeof(why), "%s", ap_error_last());
	remove_container(e, b->name);
	ap_error_set(rc, "%s", why);
err_egress_down:
	if (b->eg) {
		snprintf(why, sizeof(why), "%s", ap_error_last());
		sbx_egress_down(b->eg);
		ap_error_set(rc, "%s", why);
	}
err_remove_dir:
	if (b->own_repo_dir)
		remove_box_dir(e, b->name);
err_free_box:
	cJSON_Delete(body);
	cJSON_Delete(resp);
	sbx__volumes_free(volumes);
	box_free(b);
	return rc;
}

int sbx_create(sbx_engine *e, const sbx_spec *spec, sbx_box **out)
{
	sbx_spec s;

	sbx__resolve_spec(e, spec, &s);
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
	snprintf(b->phase, sizeof(b->phase), "%s", phase ? phase : "");
}

/* The fallback of sbx_box_set_network: take the box off its Internal network. */
static int disconnect_box(sbx_box *b)
{
	cJSON *body = cJSON_CreateObject();
	char path[256];
	int rc;

	if (!body || !cJSON_AddStringToObject(body, "Container", b->id) ||
	    !cJSON_AddTrueToObject(body, "Force")) {
		cJSON_Delete(body);
		return ap_error_set(AP_ENOMEM, "out of memory");
	}
	snprintf(path, sizeof(path), "/networks/%s/disconnect", sbx_egress_network(b->eg));
	rc = dk_request(b->e->dk, "POST", path, body, SBX_API_TIMEOUT, NULL, NULL);
	cJSON_Delete(body);
	return rc;
}

int sbx_box_set_network(sbx_box *b, enum sbx_network net)
{
	char why[512];
	int rc;

	if (net != SBX_NET_NONE)
		return ap_error_set(AP_EINVAL, "a box's network can only be switched off");
	if (!b->eg)
		return 0;
	rc = sbx_egress_lock(b->eg);
	if (rc == 0)
		return 0;
	snprintf(why, sizeof(why), "%s", ap_error_last());
	ap_warn("sandbox: %s; disconnecting container %s from its network instead", why, b->name);
	rc = disconnect_box(b);
	if (rc == 0)
		return 0;
	snprintf(why, sizeof(why), "%s", ap_error_last());
	kill_container(b->e, b->id);
	b->killed = true;
	return ap_error_set(rc,
			    "the sandbox could not be taken offline after setup (%s); it was "
			    "killed",
			    why);
}

int sbx_box_denials(sbx_box *b, sbx_denial *out, size_t max, size_t *n)
{
	const sbx_denial *d;
	size_t have;

	*n = 0;
	if (!b->eg)
		return 0;
	if (sbx_egress_drain_log(b->eg) < 0)
		return AP_EIO;
	d = sbx_egress_denials(b->eg, &have);
	for (size_t i = 0; i < have && *n < max; i++)
		out[(*n)++] = d[i];
	return 0;
}

int sbx_destroy(sbx_box *b)
{
	char why[1024];
	int rc;

	if (!b)
		return 0;
	rc = remove_container(b->e, b->id);
	if (rc) {
		/* Try the long way once: kill, then remove. */
		snprintf(why, sizeof(why), "%s", ap_error_last());
		kill_container(b->e, b->id);
		rc = remove_container(b->e, b->id);
		if (rc)
			ap_err("sandbox: could not remove container %s (%s); the reaper will retry",
			       b->name, why);
	}
	if (b->eg) {
		/* The network can only go once the container is gone. */
		int erc = sbx_egress_down(b->eg);

		if (!rc)
			rc = erc;
	}
	if (b->own_repo_dir)
		remove_box_dir(b->e, b->name);
	ap_stat_add(AP_STAT_BOXES_REMOVED, 1);
	ap_stat_add(AP_STAT_BOXES_ACTIVE, -1);
	box_free(b);
	return rc;
}

/* --- exec ------------------------------------------------------------------------------- */

/* One output stream of an exec: the redactor in front of its capture. Redacting before the
 * head+tail cap (not after it) is what keeps a secret that straddles the cut from surviving
 * in part, and the streaming callback only ever sees the same redacted bytes. */
struct exec_stream {
	struct exec_io *io;
	int stream; /* SBX_STREAM_STDOUT or SBX_STREAM_STDERR */
	sbx_capture cap;
	redact_stream *rs;
};

struct exec_io {
	struct exec_stream out, err;
	sbx_output_fn fn;
	void *ud;
	int rc;	      /* first redaction failure: the exec fails rather than pass a raw byte on */
	bool pending; /* bytes went in since the last nudge */
	sbx_output_fn raw; /* sbx_cmd.raw_stdout: stdout bypasses redaction and capture */
	void *raw_ud;
};

/* Bytes a redactor gathers beyond its hold-back before rescanning: bounds the rescans of
 * many small frames to about (hold-back + batch) / batch times the output. */
#define SBX_REDACT_BATCH 4096

/* Redacted bytes of one stream: into the capped capture and the caller's callback. */
static void on_redacted(void *ud, const char *p, size_t n)
{
	struct exec_stream *es = ud;

	sbx_capture_add(&es->cap, p, n);
	if (es->io->fn)
		es->io->fn(es->io->ud, es->stream, p, n);
}

static void on_payload(void *ud, int stream, const char *p, size_t n)
{
	struct exec_io *io = ud;
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
static int exec_io_flush(struct exec_io *io)
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
static void exec_io_nudge(struct exec_io *io)
{
	struct exec_stream *s[] = {&io->out, &io->err};

	if (!io->pending)
		return;
	io->pending = false;
	for (size_t i = 0; i < 2 && !io->rc; i++) {
		redact_stream_set_batch(s[i]->rs, 0);
		io->rc = redact_stream_write(s[i]->rs, "", 0);
		redact_stream_set_batch(s[i]->rs, SBX_REDACT_BATCH);
	}
}

static int exec_create(sbx_box *b, const sbx_cmd *cmd, int seconds, char *exec_id, size_t len)
{
	cJSON *body = cJSON_CreateObject(), *arr, *resp = NULL, *id;
	char path[160], secs[24];
	int rc = AP_ENOMEM;

	if (!body)
		goto out_nomem;
	if (!cJSON_AddBoolToObject(body, "AttachStdin", cmd->stdin_data || cmd->stdin_fn) ||
	    !cJSON_AddTrueToObject(body, "AttachStdout") ||
	    !cJSON_AddTrueToObject(body, "AttachStderr") || !cJSON_AddFalseToObject(body, "Tty") ||
	    !cJSON_AddFalseToObject(body, "Privileged") ||
	    !cJSON_AddStringToObject(body, "User", SBX_USER) ||
	    !cJSON_AddStringToObject(body, "WorkingDir",
				     cmd->workdir ? cmd->workdir : "/tmp/workspace") ||
	    !(arr = cJSON_AddArrayToObject(body, "Cmd")))
		goto out_nomem;
	snprintf(secs, sizeof(secs), "%d", seconds);
	const char *wrap[] = {"timeout", "-s", "KILL", secs};
	for (size_t i = 0; i < sizeof(wrap) / sizeof(wrap[0]); i++) {
		cJSON *s = cJSON_CreateString(wrap[i]);

		if (!s)
			goto out_nomem;
		cJSON_AddItemToArray(arr, s);
	}
	for (const char *const *a = cmd->argv; *a; a++) {
		cJSON *s = cJSON_CreateString(*a);

		if (!s)
			goto out_nomem;
		cJSON_AddItemToArray(arr, s);
	}
	snprintf(path, sizeof(path), "/containers/%s/exec", b->id);
	rc = dk_request(b->e->dk, "POST", path, body, SBX_API_TIMEOUT, NULL, &resp);
	if (rc)
		goto out_free;
	id = cJSON_GetObjectItemCaseSensitive(resp, "Id");
	if (!cJSON_IsString(id) || !label_safe(id->valuestring, len - 1)) {
		rc = ap_error_set(AP_EIO, "docker exec create: no exec id in the answer");
		goto out_free;
	}
	snprintf(exec_id, len, "%s", id->valuestring);
	rc = 0;
	goto out_free;
out_nomem:
	rc = ap_error_set(AP_ENOMEM, "out of memory building an exec request");
out_free:
	cJSON_Delete(body);
	cJSON_Delete(resp);
	return rc;
}

/* Exit code of a finished exec; polls briefly while the daemon still reports it running. */
static int exec_exit_code(sbx_box *b, const char *exec_id, int *code)
{
	char path[160];
	cJSON *resp = NULL, *running, *ec;
	long long until = dk_now_ms() + 5000;
	useconds_t nap = 1000;
	int rc;

	snprintf(path, sizeof(path), "/exec/%s/json", exec_id);
	for (;;) {
		rc = dk_request(b->e->dk, "GET", path, NULL, SBX_API_TIMEOUT, NULL, &resp);
		if (rc)
			return rc;
		running = cJSON_GetObjectItemCaseSensitive(resp, "Running");
		ec = cJSON_GetObjectItemCaseSensitive(resp, "ExitCode");
		if (!cJSON_IsTrue(running) && cJSON_IsNumber(ec)) {
			*code = ec->valueint;
			cJSON_Delete(resp);
			return 0;
		}
		cJSON_Delete(resp);
		resp = NULL;
		if (dk_now_ms() > until)
			return ap_error_set(AP_EIO, "exec %s still running after its output closed",
					    exec_id);
		/* The daemon marks the exec finished a moment after the stream closes. */
		usleep(nap);
		if (nap < 32000)
			nap *= 2;
	}
}

/* Drive the hijacked connection: write stdin then half-close, demultiplex what comes back,
 * until the daemon closes it, the host deadline passes or the caller cancels. Returns 0 at
 * end of stream, AP_ETIMEOUT, AP_ECANCELLED or an I/O error. */
/* Whether the box's container is still running (a box whose runtime died, e.g. gVisor's
 * Sentry OOM-killed, may leave the exec stream open forever). Errors count as running. */
static bool box_running(sbx_box *b)
{
	char path[160];
	cJSON *resp = NULL, *state, *running;
	bool alive = true;

	snprintf(path, sizeof(path), "/containers/%s/json", b->id);
	if (dk_request(b->e->dk, "GET", path, NULL, 10000, NULL, &resp) == AP_ENOTFOUND)
		return false;
	state = cJSON_GetObjectItemCaseSensitive(resp, "State");
	running = cJSON_GetObjectItemCaseSensitive(state, "Running");
	if (cJSON_IsBool(running))
		alive = cJSON_IsTrue(running);
	cJSON_Delete(resp);
	return alive;
}

/* Whether the box stopped under a command that exited with code (>= 126). runsc reports 128
 * for an exec whose sandbox died, and the container's state may still say running for a
 * moment: for 128 look again for up to 2 s. Other codes (127: not found) are looked at once. */
static bool box_died(sbx_box *b, int code)
{
	for (int i = 0; i < 20; i++) {
		if (!box_running(b))
			return true;
		if (code != 128)
			return false;
		usleep(100000);
	}
	return false;
}

#define SBX_BOX_DIED 1 /* pump(): the container stopped under the command */

static int pump(sbx_box *b, int fd, const sbx_cmd *cmd, const ap_buf *first, long long deadline_ms,
		struct exec_io *io)
{
	long long next_check = dk_now_ms() + 2000;
	sbx_demux dm = SBX_DEMUX_INIT;
	const char *in = cmd->stdin_data;
	size_t in_left = cmd->stdin_data ? cmd->stdin_len : 0;
	bool in_open = cmd->stdin_data || cmd->stdin_fn;
	bool in_fn = !cmd->stdin_data && cmd->stdin_fn;
	char buf[65536], inbuf[65536];
	struct pollfd p;
	long long left;
	ssize_t n;
	int rc;

	if (first->len && (rc = sbx_demux_feed(&dm, first->data, first->len, on_payload, io)))
		return rc;
	if (io->rc)
		return io->rc;
	if (in_open && !in_left && !in_fn) {
		shutdown(fd, SHUT_WR);
		in_open = false;
	}
	for (;;) {
		if (in_open && in_fn && !in_left) {
			long got = cmd->stdin_fn(cmd->stdin_ud, inbuf, sizeof(inbuf));

			if (got <= 0) {
				shutdown(fd, SHUT_WR);
				in_open = false;
			} else {
				in = inbuf;
				in_left = (size_t)got;
			}
		}
		if (cmd->cancel && *cmd->cancel)
			return ap_error_set(AP_ECANCELLED, "the command was cancelled");
		left = deadline_ms - dk_now_ms();
		if (left <= 0)
			return ap_error_set(AP_ETIMEOUT, "the command passed its deadline");
		if (dk_now_ms() >= next_check) {
			if (!box_running(b))
				return SBX_BOX_DIED;
			next_check = dk_now_ms() + 2000;
		}
		p.fd = fd;
		p.events = POLLIN | (in_open ? POLLOUT : 0);
		p.revents = 0;
		n = poll(&p, 1, left > 100 ? 100 : (int)left);
		if (n < 0 && errno != EINTR)
			return ap_error_set(AP_EIO, "poll: %s", strerror(errno));
		if (n == 0)
			exec_io_nudge(io);
		if (io->rc)
			return io->rc;
		if (n <= 0)
			continue;
		if (in_open && (p.revents & POLLOUT)) {
			n = send(fd, in, in_left > sizeof(buf) ? sizeof(buf) : in_left,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n < 0 && errno != EAGAIN && errno != EINTR) {
				in_open = false; /* the command stopped reading: fine */
			} else if (n > 0) {
				in += n;
				in_left -= (size_t)n;
			}
			if ((!in_left && !in_fn) || !in_open) {
				shutdown(fd, SHUT_WR);
				in_open = false;
			}
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (n < 0)
				return ap_error_set(AP_EIO, "reading command output: %s",
						    strerror(errno));
			if (n == 0)
				return 0;
			rc = sbx_demux_feed(&dm, buf, (size_t)n, on_payload, io);
			if (rc)
				return rc;
			if (io->rc)
				return io->rc;
		}
	}
}

/* After a command's inside deadline: kill (in up to 5 passes, for processes that fork while
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
	static const char script[] = "for pass in 1 2 3 4 5; do n=0; "
				     "for f in /proc/[0-9]*/stat; do "
				     "p=${f#/proc/}; p=${p%/stat}; "
				     "[ \"$p\" = $$ ] || [ \"$p\" = $PPID ] && continue; "
				     "read -r l < \"$f\" 2>/dev/null || continue; "
				     "set -- ${l##*) }; "
				     "[ \"$1\" = Z ] && continue; "
				     "[ \"$4\" = 1 ] || { kill -KILL \"$p\" 2>/dev/null; n=1; }; "
				     "done; [ $n = 0 ] && exit 0; done; exit 1";
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
		kill_container(b->e, b->id);
		b->killed = true;
	}
	sbx_result_release(&res);
}

/* Tell the egress log reader which phase and command later denials belong to: a `sh -c`
 * script by its text, anything else by its argv joined with spaces. */
static void egress_context(sbx_box *b, const sbx_cmd *cmd)
{
	char text[SBX_DENIAL_CMD_MAX];
	const char *const *a = cmd->argv;
	size_t pos = 0;

	text[0] = '\0';
	if (a[0] && a[1] && a[2] && strcmp(a[0], "sh") == 0 && strcmp(a[1], "-c") == 0)
		a += 2;
	for (; *a && pos + 1 < sizeof(text); a++)
		pos += (size_t)snprintf(text + pos, sizeof(text) - pos, "%s%s", pos ? " " : "", *a);
	for (char *c = text; *c; c++)
		if (*c == '\n' || *c == '\r' || *c == '\t')
			*c = ' ';
	sbx_egress_set_context(b->eg, b->phase, text);
}

int sbx_exec(sbx_box *b, const sbx_cmd *cmd, sbx_result *res)
{
	struct exec_io io;
	size_t cap;
	char exec_id[96], path[160];
	ap_buf first = AP_BUF_INIT(1 << 16);
	long long start = dk_now_ms(), deadline, life_left;
	int seconds, fd = -1, rc, code = -1;

	*res = (sbx_result)SBX_RESULT_INIT;
	if (!cmd->argv || !cmd->argv[0])
		return ap_error_set(AP_EINVAL, "sbx_exec: empty argv");
	if (b->killed)
		return ap_error_set(AP_EIO, "the sandbox was killed (deadline or cancel); create "
					    "a new one");
	cap = cmd->output_cap ? cmd->output_cap : b->e->output_cap;
	if (cap < 2)
		cap = 2;
	io = (struct exec_io){.fn = cmd->on_output,
			      .ud = cmd->on_output_ud,
			      .raw = cmd->raw_stdout,
			      .raw_ud = cmd->raw_stdout_ud};
	if (b->eg && !b->sweeping)
		egress_context(b, cmd);
	io.out = (struct exec_stream){&io, SBX_STREAM_STDOUT, SBX_CAPTURE_INIT(cap), NULL};
	io.err = (struct exec_stream){&io, SBX_STREAM_STDERR, SBX_CAPTURE_INIT(cap), NULL};
	if ((rc = redact_stream_new(&io.out.rs, on_redacted, &io.out)) ||
	    (rc = redact_stream_new(&io.err.rs, on_redacted, &io.err)))
		goto out_release;
	redact_stream_set_batch(io.out.rs, SBX_REDACT_BATCH);
	redact_stream_set_batch(io.err.rs, SBX_REDACT_BATCH);
	seconds = cmd->timeout_s > 0 ? cmd->timeout_s : 60;
	life_left = (b->deadline_ms - start) / 1000;
	if (life_left < 1)
		life_left = 1;
	if (seconds > life_left)
		seconds = (int)life_left;
	deadline = start + (long long)seconds * 1000 + SBX_KILL_GRACE;

	rc = exec_create(b, cmd, seconds, exec_id, sizeof(exec_id));
	if (rc)
		goto out_release;
	snprintf(path, sizeof(path), "/exec/%s/start", exec_id);
	{
		cJSON *body = cJSON_CreateObject();

		if (!body || !cJSON_AddFalseToObject(body, "Detach") ||
		    !cJSON_AddFalseToObject(body, "Tty")) {
			cJSON_Delete(body);
			rc = ap_error_set(AP_ENOMEM, "out of memory");
			goto out_release;
		}
		rc = dk_hijack(b->e->dk, path, body, deadline, &fd, &first);
		cJSON_Delete(body);
	}
	if (rc)
		goto out_release;
	rc = pump(b, fd, cmd, &first, deadline, &io);
	close(fd);
	fd = -1;
	/* However the command ended, what the redactors held back belongs to its output. */
	exec_io_flush(&io);
	if (b->eg && sbx_egress_drain_log(b->eg) < 0)
		ap_warn("sandbox: egress log: %s", ap_error_last());
	if (rc == SBX_BOX_DIED) {
		/* Out of memory or killed from outside: the command died with its box. */
		ap_warn("sandbox: container %s stopped during a command", b->name);
		b->killed = true;
		code = 128 + 9;
		rc = 0;
	} else if (rc == AP_ETIMEOUT || rc == AP_ECANCELLED) {
		/* No endpoint kills one exec: the whole box goes. */
		char why[256];

		snprintf(why, sizeof(why), "%s", ap_error_last());
		kill_container(b->e, b->id);
		b->killed = true;
		ap_error_set(rc, "%s", why);
		if (rc == AP_ETIMEOUT) {
			res->timed_out = true;
			code = 124;
			rc = 0;
		}
	} else if (rc == 0) {
		rc = exec_exit_code(b, exec_id, &code);
		/* timeout -s KILL takes itself down with its process group: 128+9. */
		if (!rc && code == 137 && dk_now_ms() - start >= (long long)seconds * 1000 - 50) {
			res->timed_out = true;
			code = 124;
			if (!b->sweeping)
				sweep(b);
		} else if (!rc && code >= 126 && box_died(b, code)) {
			/* The box died under the command (gVisor's Sentry OOM-killed; runsc then
			 * reports its own 128): say "killed", and refuse further commands. */
			ap_warn("sandbox: container %s stopped during a command", b->name);
			b->killed = true;
			code = 128 + 9;
		}
	}
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
	res->millis = dk_now_ms() - start;
	if (!res->out || !res->err) {
		sbx_result_release(res);
		rc = ap_error_set(AP_ENOMEM, "out of memory collecting output");
	}
out_release:
	if (fd >= 0)
		close(fd);
	ap_buf_release(&first);
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

int sbx_prepare(sbx_box *b)
{
	/* HOME first (the mount starts empty), then the copy. */
	static const char *const argv[] = {
	    "sh", "-c",
	    "mkdir -p " SBX_HOME " && cp -R --preserve=mode,timestamps,links --no-dereference "
	    "/repo/. /tmp/workspace/",
	    NULL};
	sbx_cmd cmd = SBX_CMD_INIT;
	sbx_result res = SBX_RESULT_INIT;
	int rc;

	if (!b->has_repo)
		return 0;
	cmd.argv = argv;
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

/* --- reaping ---------------------------------------------------------------------------- */

/* The Id of a listed container or network that reap() may remove, or NULL: one with a safe Id
 * whose creator is gone (any such one, when all). */
static const char *reapable_id(const cJSON *it, bool all)
{
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(it, "Labels");
	const cJSON *creator = cJSON_GetObjectItemCaseSensitive(labels, DK_LABEL_CREATOR);
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "Id");

	if (!cJSON_IsString(id) || !label_safe(id->valuestring, 80))
		return NULL;
	if (!all && cJSON_IsString(creator) && dk_creator_alive(creator->valuestring))
		return NULL;
	return id->valuestring;
}

static int reap(sbx_engine *e, bool all)
{
	char *filters = NULL, path[512];
	cJSON *list = NULL, *it, *names;
	const char *id;
	char raw[160];
	int removed = 0, rc;

	snprintf(raw, sizeof(raw), "{\"label\":[\"%s=%s\"]}", DK_LABEL_OWNER, e->owner);
	filters = dk_escape(raw);
	if (!filters)
		return ap_error_set(AP_ENOMEM, "out of memory");
	snprintf(path, sizeof(path), "/containers/json?all=1&filters=%s", filters);
	rc = dk_request(e->dk, "GET", path, NULL, SBX_API_TIMEOUT, NULL, &list);
	if (rc)
		goto out_free;
	cJSON_ArrayForEach(it, list)
	{
		id = reapable_id(it, all);
		if (!id)
			continue;
		names = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(it, "Names"), 0);
		if (remove_container(e, id)) {
			ap_warn("sandbox reap: %s", ap_error_last());
			continue;
		}
		removed++;
		if (cJSON_IsString(names) && names->valuestring[0] == '/')
			remove_box_dir(e, names->valuestring + 1);
	}
	cJSON_Delete(list);
	list = NULL;
	snprintf(path, sizeof(path), "/networks?filters=%s", filters);
	rc = dk_request(e->dk, "GET", path, NULL, SBX_API_TIMEOUT, NULL, &list);
	if (rc)
		goto out_free;
	cJSON_ArrayForEach(it, list)
	{
		id = reapable_id(it, all);
		if (!id)
			continue;
		snprintf(path, sizeof(path), "/networks/%s", id);
		rc = dk_request(e->dk, "DELETE", path, NULL, SBX_API_TIMEOUT, NULL, NULL);
		if (rc && rc != AP_ENOTFOUND) {
			ap_warn("sandbox reap: %s", ap_error_last());
			continue;
		}
		removed++;
	}
	rc = removed;
out_free:
	cJSON_Delete(list);
	free(filters);
	return rc;
}

int sbx_reap_orphans(sbx_engine *e)
{
	return reap(e, false);
}

int sbx_reap_all(sbx_engine *e)
{
	return reap(e, true);
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
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += 1 << failures;
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
	rc = sbx_pool_start(e);
	if (rc)
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
		snprintf(b->job, sizeof(b->job), "%s", job_label ? job_label : "");
		b->deadline_ms = dk_now_ms() + (long long)e->defaults.wall_seconds * 1000;
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
	rc = dk_client_new(&e->dk, cfg_str(cfg, "DOCKER_HOST"));
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
	dk_client_free(e->dk);
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->cond);
	free(e->image);
	free(e->runtime);
	free(e->data_dir);
	free(e);
}

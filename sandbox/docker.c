/* SPDX-License-Identifier: MIT */
/* sandbox/docker.c - the Docker Engine backend of sandbox.h: hardened create, exec over the
 * hijacked connection with in- and outside deadlines and capped output, destroy, orphan
 * reaping and the warm pool.
 *
 * A box is a container whose PID 1 (docker-init) runs `sleep`; every command is an exec as uid
 * 10001 wrapped in `timeout -s KILL N`, and the host kills the whole container when the
 * deadline passes anyway, because the Engine API cannot kill a single exec. The settings, the
 * pool and the output handling are backend-neutral (core.c); this file talks to the daemon.
 */
#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/redact.h"
#include "sandbox/backend.h"
#include "sandbox/docker_api.h"
#include "sandbox/egress.h"
#include "sandbox/internal.h"
#include "sandbox/sandbox.h"
#include "sandbox/stream.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SBX_API_TIMEOUT	 60000L /* ms for ordinary daemon calls */
#define SBX_PODMAN_NPROC 32768

/* The backend's state (sbx_engine.be). */
struct dk_backend {
	dk_client *dk;
	sbx_egress_opts egress; /* AUTOPATCH_EGRESS_* (allow-list boxes only) */
};

static dk_client *dk_of(const sbx_engine *e)
{
	return ((struct dk_backend *)e->be)->dk;
}

/* A box's allow-list network + proxy (sbx_box.impl), or NULL. */
static sbx_egress *box_eg(const sbx_box *b)
{
	return b->impl;
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

/* A tmpfs's options when it belongs to the sandbox user (uid 10001, mode 0755): Podman maps
 * it with U, Docker names the ids. Numbers and fixed words: fits out's PATH_MAX bytes. */
static void user_tmpfs(char *out, size_t n, bool podman, bool exec, int64_t bytes)
{
	snprintf(out, n, "rw,nosuid,nodev,%s,size=%lld,mode=0755,%s", exec ? "exec" : "noexec",
		 (long long)bytes, podman ? "U" : "uid=10001,gid=10001");
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
	/* No NetworkDisabled: NetworkMode "none" already leaves the box only its loopback, and
	 * with NetworkDisabled Docker writes no /etc/hosts, so `localhost` does not resolve
	 * (vite and so vitest look it up at start: "getaddrinfo EAI_AGAIN localhost"). */
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
	/* Without a network Docker still copies the host's resolv.conf into the box (its name
	 * servers and search domains): a box without one learns nothing of the host's. */
	if (strcmp(network_mode, "none") == 0 &&
	    (!(arr = cJSON_AddArrayToObject(hc, "Dns")) ||
	     !cJSON_AddItemToArray(arr, cJSON_CreateString("127.0.0.1")) ||
	     !(arr = cJSON_AddArrayToObject(hc, "DnsSearch")) ||
	     !cJSON_AddItemToArray(arr, cJSON_CreateString("."))))
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
	user_tmpfs(tmp, sizeof(tmp), podman, true, s->workspace_bytes);
	if (!cJSON_AddStringToObject(obj, "/tmp/workspace", tmp))
		goto err_nomem;
	/* The image's VOLUMEs: a tmpfs at the same path makes the daemon skip the anonymous
	 * volume it would otherwise create on host disk, uncapped. */
	user_tmpfs(tmp, sizeof(tmp), podman, false, s->volume_bytes);
	for (const char *const *v = volumes; v && *v; v++)
		if (!cJSON_AddStringToObject(obj, *v, tmp))
			goto err_nomem;
	/* HOME and the Tester's trees: built test binaries must run there (see docs/sandbox.md,
	 * "where noexec is dropped"). */
	user_tmpfs(tmp, sizeof(tmp), podman, true, s->trees_bytes > 0 ? s->trees_bytes : 2LL << 30);
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
	cJSON_ArrayForEach (v, vols) {
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

	cJSON_ArrayForEach (m, cJSON_GetObjectItemCaseSensitive(container, "Mounts")) {
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

/* Request paths in this file are built from ids and names checked where they were read (a
 * box's name and id, an exec id: at most 95 label-safe bytes, see sbx__label_safe()), so they
 * fit their 160-byte buffers and stay unchecked snprintf calls. */

/* Remove the container (force kills it); 404 and "already in progress" count as done. */
static int remove_container(sbx_engine *e, const char *id)
{
	char path[160];
	long status = 0;
	int rc;

	snprintf(path, sizeof(path), "/containers/%s?force=true&v=true", id);
	rc = dk_request(dk_of(e), "DELETE", path, NULL, SBX_API_TIMEOUT, &status, NULL);
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
	rc = dk_request(dk_of(e), "POST", path, NULL, SBX_API_TIMEOUT, &status, NULL);
	if (rc == AP_ENOTFOUND || (rc == AP_EHTTP && status == 409))
		rc = 0; /* already gone or not running */
	return rc;
}

/* The daemon reports ignored limits as warnings: log each. */
static void log_warnings(const char *name, const cJSON *resp)
{
	const cJSON *w;

	cJSON_ArrayForEach (w, cJSON_GetObjectItemCaseSensitive(resp, "Warnings")) {
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
	rc = dk_image_inspect(dk_of(e), name, SBX_API_TIMEOUT, &img);
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
	rc = dk_request(dk_of(e), "GET", path, NULL, SBX_API_TIMEOUT, NULL, &info);
	if (!rc)
		rc = sbx__check_mounts(info, image);
	cJSON_Delete(info);
	return rc;
}

/* Create and start a box from a resolved spec. job names the label; pool boxes sleep forever
 * (the pool destroys them), others live wall_seconds. */
/* backend op: create and start the container of b (core.c filled name, job, repo dir). */
static int dk_create(sbx_engine *e, const sbx_spec *spec, sbx_box *b, bool pool)
{
	struct dk_backend *be = e->be;
	sbx_spec s = *spec;
	sbx_egress *eg = NULL;
	cJSON *body = NULL, *resp = NULL, *id;
	char path[256], why[AP_ERROR_MSG_MAX], image_id[80];
	char **volumes = NULL;
	size_t n_vol;
	int rc;

	rc = image_plan(e, spec->image, image_id, &volumes);
	if (rc)
		goto out_free;
	/* The image's VOLUMEs are tmpfs mounts too: they must fit the memory with the rest. */
	for (n_vol = 0; volumes && volumes[n_vol]; n_vol++)
		;
	if ((rc = sbx__sizes_check(spec, n_vol)))
		goto out_free;
	s.image = image_id;
	s.repo_dir = b->repo_dir;
	if (s.network == SBX_NET_ALLOWLIST) {
		rc = sbx_egress_check(s.allow);
		if (!rc)
			rc = sbx_egress_up(be->dk, &be->egress, e->owner, b->job, s.runtime,
					   s.allow, &eg);
		if (rc)
			goto out_free;
	}
	rc = sbx__create_body(&s, e->owner, pool ? 0 : s.wall_seconds,
			      eg ? sbx_egress_network(eg) : "none", eg ? sbx_egress_env(eg) : NULL,
			      (const char *const *)volumes, dk_is_podman(be->dk), &body);
	if (rc)
		goto err_egress_down;
	snprintf(path, sizeof(path), "/containers/create?name=%s", b->name);
	rc = dk_request(be->dk, "POST", path, body, SBX_API_TIMEOUT, NULL, &resp);
	if (rc)
		goto err_remove_container; /* a timed-out create may still have happened */
	id = cJSON_GetObjectItemCaseSensitive(resp, "Id");
	if (!cJSON_IsString(id) || !sbx__label_safe(id->valuestring, sizeof(b->id) - 1)) {
		rc = ap_error_set(AP_EIO, "docker create: no container id in the answer");
		goto err_remove_container;
	}
	snprintf(b->id, sizeof(b->id), "%s", id->valuestring);
	log_warnings(b->name, resp);
	rc = verify_mounts(e, b, spec->image);
	if (rc)
		goto err_remove_container;
	snprintf(path, sizeof(path), "/containers/%s/start", b->id);
	rc = dk_request(be->dk, "POST", path, NULL, SBX_API_TIMEOUT, NULL, NULL);
	if (rc)
		goto err_remove_container;
	b->impl = eg;
	goto out_free;
err_remove_container:
	snprintf(why, sizeof(why), "%s", ap_error_last());
	remove_container(e, b->name);
	ap_error_set(rc, "%s", why);
err_egress_down:
	if (eg) {
		snprintf(why, sizeof(why), "%s", ap_error_last());
		sbx_egress_down(eg);
		ap_error_set(rc, "%s", why);
	}
out_free:
	cJSON_Delete(body);
	cJSON_Delete(resp);
	sbx__volumes_free(volumes);
	return rc;
}

/* backend op: remove the container, then its egress network and proxy. */
static int dk_remove(sbx_box *b)
{
	char why[AP_ERROR_MSG_MAX];
	int rc;

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
	if (box_eg(b)) {
		/* The network can only go once the container is gone. */
		int erc = sbx_egress_down(box_eg(b));

		if (!rc)
			rc = erc;
		b->impl = NULL;
	}
	return rc;
}

static int dk_kill(sbx_box *b)
{
	return kill_container(b->e, b->id);
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
	rc = dk_request(dk_of(b->e), "POST", path, body, SBX_API_TIMEOUT, NULL, &resp);
	if (rc)
		goto out_free;
	id = cJSON_GetObjectItemCaseSensitive(resp, "Id");
	if (!cJSON_IsString(id) || !sbx__label_safe(id->valuestring, len - 1)) {
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
	long long until = ap_mono_ms() + 5000;
	useconds_t nap = 1000;
	int rc;

	snprintf(path, sizeof(path), "/exec/%s/json", exec_id);
	for (;;) {
		rc = dk_request(dk_of(b->e), "GET", path, NULL, SBX_API_TIMEOUT, NULL, &resp);
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
		if (ap_mono_ms() > until)
			return ap_error_set(AP_EIO, "exec %s still running after its output closed",
					    exec_id);
		/* The daemon marks the exec finished a moment after the stream closes. */
		usleep(nap);
		if (nap < 32000)
			nap *= 2;
	}
}

/* Whether the box's container is still running (a box whose runtime died, e.g. gVisor's
 * Sentry OOM-killed, may leave the exec stream open forever). Errors count as running. */
static bool box_running(sbx_box *b)
{
	char path[160];
	cJSON *resp = NULL, *state, *running;
	bool alive = true;

	snprintf(path, sizeof(path), "/containers/%s/json", b->id);
	if (dk_request(dk_of(b->e), "GET", path, NULL, 10000, NULL, &resp) == AP_ENOTFOUND)
		return false;
	state = cJSON_GetObjectItemCaseSensitive(resp, "State");
	running = cJSON_GetObjectItemCaseSensitive(state, "Running");
	if (cJSON_IsBool(running))
		alive = cJSON_IsTrue(running);
	cJSON_Delete(resp);
	return alive;
}

/* What is left to write to a command's stdin: its data, or what its stdin_fn gives. */
struct stdin_feed {
	const sbx_cmd *cmd;
	const char *in; /* the next bytes to send, left of them */
	size_t left;
	bool open; /* not half-closed yet */
	bool fn;   /* read from cmd->stdin_fn */
	char buf[65536];
};

/* When the bytes in hand are all sent, take the next ones from stdin_fn; half-close fd at
 * its end. */
static void stdin_refill(struct stdin_feed *f, int fd)
{
	long got;

	if (!f->open || !f->fn || f->left)
		return;
	got = f->cmd->stdin_fn(f->cmd->stdin_ud, f->buf, sizeof(f->buf));
	if (got <= 0) {
		shutdown(fd, SHUT_WR);
		f->open = false;
	} else {
		f->in = f->buf;
		f->left = (size_t)got;
	}
}

/* Send what fd takes of the bytes in hand (at most max); half-close fd when they are all
 * sent and no more come, or when the command stopped reading. */
static void stdin_send(struct stdin_feed *f, int fd, size_t max)
{
	ssize_t n = send(fd, f->in, f->left > max ? max : f->left, MSG_NOSIGNAL | MSG_DONTWAIT);

	if (n < 0 && errno != EAGAIN && errno != EINTR) {
		f->open = false; /* the command stopped reading: fine */
	} else if (n > 0) {
		f->in += n;
		f->left -= (size_t)n;
	}
	if ((!f->left && !f->fn) || !f->open) {
		shutdown(fd, SHUT_WR);
		f->open = false;
	}
}

/* Drive the hijacked connection: write stdin then half-close, demultiplex what comes back,
 * until the daemon closes it, the host deadline passes or the caller cancels. Returns 0 at
 * end of stream, SBX_BOX_DIED, AP_ETIMEOUT, AP_ECANCELLED or an I/O error. */
static int pump(sbx_box *b, int fd, const sbx_cmd *cmd, const ap_buf *first, long long deadline_ms,
		sbx_exec_io *io)
{
	long long next_check = ap_mono_ms() + 2000;
	sbx_demux dm = SBX_DEMUX_INIT;
	struct stdin_feed f = {.cmd = cmd,
			       .in = cmd->stdin_data,
			       .left = cmd->stdin_data ? cmd->stdin_len : 0,
			       .open = cmd->stdin_data || cmd->stdin_fn,
			       .fn = !cmd->stdin_data && cmd->stdin_fn};
	char buf[65536];
	struct pollfd p;
	long long left;
	ssize_t n;
	int rc;

	if (first->len && (rc = sbx_demux_feed(&dm, first->data, first->len, sbx__io_payload, io)))
		return rc;
	if (io->rc)
		return io->rc;
	if (f.open && !f.left && !f.fn) {
		shutdown(fd, SHUT_WR);
		f.open = false;
	}
	for (;;) {
		stdin_refill(&f, fd);
		if (cmd->cancel && *cmd->cancel)
			return ap_error_set(AP_ECANCELLED, "the command was cancelled");
		left = deadline_ms - ap_mono_ms();
		if (left <= 0)
			return ap_error_set(AP_ETIMEOUT, "the command passed its deadline");
		if (ap_mono_ms() >= next_check) {
			if (!box_running(b))
				return SBX_BOX_DIED;
			next_check = ap_mono_ms() + 2000;
		}
		p.fd = fd;
		p.events = POLLIN | (f.open ? POLLOUT : 0);
		p.revents = 0;
		n = poll(&p, 1, left > 100 ? 100 : (int)left);
		if (n < 0 && errno != EINTR)
			return ap_error_set(AP_EIO, "poll: %s", strerror(errno));
		if (n == 0)
			sbx__io_nudge(io);
		if (io->rc)
			return io->rc;
		if (n <= 0)
			continue;
		if (f.open && (p.revents & POLLOUT))
			stdin_send(&f, fd, sizeof(buf));
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (n < 0)
				return ap_error_set(AP_EIO, "reading command output: %s",
						    strerror(errno));
			if (n == 0)
				return 0;
			rc = sbx_demux_feed(&dm, buf, (size_t)n, sbx__io_payload, io);
			if (rc)
				return rc;
			if (io->rc)
				return io->rc;
		}
	}
}

/* backend op: one exec: create, start on a hijacked connection, pump, exit code. */
static int dk_run(sbx_box *b, const sbx_cmd *cmd, int seconds, long long deadline, sbx_exec_io *io,
		  int *code)
{
	char exec_id[96], path[160];
	ap_buf first = AP_BUF_INIT(1 << 16);
	cJSON *body = NULL;
	int fd = -1, rc;

	if (box_eg(b) && !b->sweeping)
		sbx_egress_set_command(box_eg(b), b->phase, cmd->argv);
	rc = exec_create(b, cmd, seconds, exec_id, sizeof(exec_id));
	if (rc)
		goto out_release;
	snprintf(path, sizeof(path), "/exec/%s/start", exec_id);
	body = cJSON_CreateObject();
	if (!body || !cJSON_AddFalseToObject(body, "Detach") ||
	    !cJSON_AddFalseToObject(body, "Tty")) {
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto out_release;
	}
	rc = dk_hijack(dk_of(b->e), path, body, deadline, &fd, &first);
	if (rc)
		goto out_release;
	rc = pump(b, fd, cmd, &first, deadline, io);
	if (box_eg(b) && sbx_egress_drain_log(box_eg(b)) < 0)
		ap_warn("sandbox: egress log: %s", ap_error_last());
	if (rc == 0)
		rc = exec_exit_code(b, exec_id, code);
out_release:
	if (fd >= 0)
		close(fd);
	cJSON_Delete(body);
	ap_buf_release(&first);
	return rc;
}

static int dk_prepare(sbx_box *b)
{
	return sbx__copy_repo(b, NULL);
}

/* --- reaping ---------------------------------------------------------------------------- */

/* The Id of a listed container or network that reap() may remove, or NULL: one with a safe Id
 * whose creator is gone (any such one, when all). */
static const char *reapable_id(const cJSON *it, bool all)
{
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(it, "Labels");
	const cJSON *creator = cJSON_GetObjectItemCaseSensitive(labels, DK_LABEL_CREATOR);
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "Id");

	if (!cJSON_IsString(id) || !sbx__label_safe(id->valuestring, 80))
		return NULL;
	if (!all && cJSON_IsString(creator) && sbx_creator_alive(creator->valuestring))
		return NULL;
	return id->valuestring;
}

/* The paths below fit: the owner is at most 64 label-safe bytes, so the escaped filter is
 * under 300; ids come from reapable_id() (at most 80 label-safe bytes). */
static int dk_reap(sbx_engine *e, bool all)
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
	rc = dk_request(dk_of(e), "GET", path, NULL, SBX_API_TIMEOUT, NULL, &list);
	if (rc)
		goto out_free;
	cJSON_ArrayForEach (it, list) {
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
			sbx__remove_box_dir(e, names->valuestring + 1);
	}
	cJSON_Delete(list);
	list = NULL;
	snprintf(path, sizeof(path), "/networks?filters=%s", filters);
	rc = dk_request(dk_of(e), "GET", path, NULL, SBX_API_TIMEOUT, NULL, &list);
	if (rc)
		goto out_free;
	cJSON_ArrayForEach (it, list) {
		id = reapable_id(it, all);
		if (!id)
			continue;
		snprintf(path, sizeof(path), "/networks/%s", id);
		rc = dk_request(dk_of(e), "DELETE", path, NULL, SBX_API_TIMEOUT, NULL, NULL);
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
static int dk_count(sbx_engine *e)
{
	char raw[160], path[512], *filters;
	cJSON *list = NULL;
	int rc;

	snprintf(raw, sizeof(raw), "{\"label\":[\"%s=%s\"]}", DK_LABEL_OWNER, e->owner);
	filters = dk_escape(raw);
	if (!filters)
		return ap_error_set(AP_ENOMEM, "out of memory");
	snprintf(path, sizeof(path), "/containers/json?all=1&filters=%s", filters);
	free(filters);
	rc = dk_request(dk_of(e), "GET", path, NULL, SBX_API_TIMEOUT, NULL, &list);
	if (!rc)
		rc = cJSON_GetArraySize(list);
	cJSON_Delete(list);
	return rc;
}

static int dk_image_present(sbx_engine *e, const char *image)
{
	cJSON *info = NULL;
	int rc = dk_image_inspect(dk_of(e), image, SBX_PROBE_TIMEOUT_MS, &info);

	cJSON_Delete(info);
	return rc;
}

static int dk_image_id(sbx_engine *e, const char *image, char *out, size_t n)
{
	cJSON *info = NULL, *iid;
	int rc = dk_image_inspect(dk_of(e), image, SBX_PROBE_TIMEOUT_MS, &info);

	if (rc == 0) {
		iid = cJSON_GetObjectItemCaseSensitive(info, "Id");
		if (cJSON_IsString(iid) && strlen(iid->valuestring) < n)
			snprintf(out, n, "%s", iid->valuestring);
		else
			rc =
			    ap_error_set(AP_EIO, "docker image inspect %.200s: no image id", image);
	}
	cJSON_Delete(info);
	return rc;
}

static int dk_image_label(sbx_engine *e, const char *image, const char *key, char *out, size_t n)
{
	cJSON *info = NULL, *cfg, *labels, *v;
	int rc = dk_image_inspect(dk_of(e), image, SBX_PROBE_TIMEOUT_MS, &info);

	if (rc == 0) {
		cfg = cJSON_GetObjectItemCaseSensitive(info, "Config");
		labels = cJSON_GetObjectItemCaseSensitive(cfg, "Labels");
		v = cJSON_GetObjectItemCaseSensitive(labels, key);
		if (cJSON_IsString(v)) {
			if (ap_fmt(out, n, "%s", v->valuestring))
				rc = ap_error_set(
				    AP_ETOOBIG,
				    "the image %.200s has a label %.100s over %zu bytes", image,
				    key, n - 1);
		} else {
			rc = ap_error_set(AP_ENOTFOUND, "the image %.200s has no label %.100s",
					  image, key);
		}
	}
	cJSON_Delete(info);
	return rc;
}

/* --- phases: the network goes off after setup ------------------------------------------ */

/* The fallback of network_off: take the box off its Internal network. */
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
	snprintf(path, sizeof(path), "/networks/%s/disconnect", sbx_egress_network(box_eg(b)));
	rc = dk_request(dk_of(b->e), "POST", path, body, SBX_API_TIMEOUT, NULL, NULL);
	cJSON_Delete(body);
	return rc;
}

/* backend op: lock the proxy; else disconnect the box; else kill it. */
static int dk_network_off(sbx_box *b)
{
	char why[AP_ERROR_MSG_MAX];
	int rc;

	if (!box_eg(b))
		return 0;
	rc = sbx_egress_lock(box_eg(b));
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

static int dk_denials(sbx_box *b, sbx_denial *out, size_t max, size_t *n)
{
	return sbx_egress_copy_denials(box_eg(b), out, max, n);
}

/* --- engine ----------------------------------------------------------------------------- */

static int dk_open(sbx_engine *e, const ap_config *cfg)
{
	struct dk_backend *be = calloc(1, sizeof(*be));
	int rc;

	if (!be)
		return ap_error_set(AP_ENOMEM, "out of memory");
	be->egress = (sbx_egress_opts)SBX_EGRESS_OPTS_INIT;
	rc = sbx_egress_opts_load(&be->egress, cfg);
	if (!rc)
		rc = dk_client_new(&be->dk, cfg_str(cfg, "DOCKER_HOST"));
	if (rc) {
		free(be);
		return rc;
	}
	e->be = be;
	return 0;
}

static void dk_close(sbx_engine *e)
{
	struct dk_backend *be = e->be;

	dk_client_free(be->dk);
	free(be);
	e->be = NULL;
}

const sbx_backend_ops sbx_docker_ops = {
    .name = "docker",
    .open = dk_open,
    .close = dk_close,
    .create = dk_create,
    .prepare = dk_prepare,
    .run = dk_run,
    .running = box_running,
    .kill = dk_kill,
    .remove = dk_remove,
    .reap = dk_reap,
    .count = dk_count,
    .image_present = dk_image_present,
    .image_id = dk_image_id,
    .image_label = dk_image_label,
    .network_off = dk_network_off,
    .denials = dk_denials,
};

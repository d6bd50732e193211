/* SPDX-License-Identifier: MIT */
/* agents/traj.c - redacted JSONL trajectory (see traj.h). */
#include "agents/traj.h"

#include "common/buf.h"
#include "common/err.h"
#include "common/log.h"
#include "common/redact.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct traj {
	FILE *f;
	pthread_mutex_t lock; /* one line at a time, whole, from any thread */
	struct timespec start;
	bool warned;
};

static int64_t ms_between(const struct timespec *a, const struct timespec *b)
{
	return (int64_t)(b->tv_sec - a->tv_sec) * 1000 + (b->tv_nsec - a->tv_nsec) / 1000000;
}

int traj_open(traj **out, const char *path)
{
	traj *t = calloc(1, sizeof(*t));
	if (!t)
		return AP_ENOMEM;
	t->f = fopen(path, "w");
	if (!t->f) {
		int e = errno;
		free(t);
		return ap_error_set(AP_EIO, "cannot write the trajectory %s: %s", path,
				    strerror(e));
	}
	pthread_mutex_init(&t->lock, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t->start);
	*out = t;
	return 0;
}

void traj_free(traj *t)
{
	if (!t)
		return;
	if (t->f)
		fclose(t->f);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

int64_t traj_millis(const traj *t)
{
	static const struct timespec zero = {0, 0};
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return ms_between(t ? &t->start : &zero, &now);
}

/* A write to the file failed: say so once. */
static void write_failed(traj *t)
{
	if (!t->warned) {
		t->warned = true;
		ap_warn("trajectory write failed: %s", strerror(errno));
	}
}

void traj_event(traj *t, const char *type, cJSON *obj)
{
	if (!t) {
		cJSON_Delete(obj);
		return;
	}
	cJSON *line = cJSON_CreateObject();
	char *text = NULL, *valid = NULL, *clean = NULL;
	size_t len;
	if (!line)
		goto out_obj;
	cJSON_AddNumberToObject(line, "t", (double)traj_millis(t));
	cJSON_AddStringToObject(line, "type", type);
	if (obj) {
		/* Move obj's members into the line so the event is flat. */
		cJSON *it = obj->child;
		while (it) {
			cJSON *next = it->next;
			cJSON *d = cJSON_DetachItemViaPointer(obj, it);
			cJSON_AddItemToObject(line, d->string, d);
			it = next;
		}
	}
	text = cJSON_PrintUnformatted(line);
	if (!text)
		goto out_line;
	len = strlen(text);
	if (!ap_utf8_valid(text, len) && !(valid = ap_utf8_clean_dup(text, len)))
		goto out_text;
	clean = redact_str(valid ? valid : text);
	if (!clean)
		goto out_text;
	pthread_mutex_lock(&t->lock);
	if (fputs(clean, t->f) < 0 || fputc('\n', t->f) == EOF || fflush(t->f) != 0)
		write_failed(t);
	pthread_mutex_unlock(&t->lock);
	free(clean);
out_text:
	free(valid);
	free(text);
out_line:
	cJSON_Delete(line);
out_obj:
	cJSON_Delete(obj);
}

/* ---- an event written while it is made ------------------------------------------------------ */

struct traj_line {
	traj *t;
	redact_stream *rs;
	bool failed; /* a write failed */
	int rc;	     /* the first failure to make the line */
};

static void line_sink(void *ud, const char *p, size_t n)
{
	traj_line *l = ud;

	if (n && !l->failed && fwrite(p, 1, n, l->t->f) != n)
		l->failed = true;
}

/* Add p[0..n) to the line, valid UTF-8. */
static void line_add(traj_line *l, const char *p, size_t n)
{
	char *valid = NULL;

	if (!l || l->rc)
		return;
	if (!ap_utf8_valid(p, n) && !(valid = ap_utf8_clean_dup(p, n))) {
		l->rc = ap_error_set(AP_ENOMEM, "out of memory");
		return;
	}
	l->rc = redact_stream_write(l->rs, valid ? valid : p, valid ? strlen(valid) : n);
	free(valid);
}

traj_line *traj_line_begin(traj *t, const char *type)
{
	traj_line *l;
	char head[48];

	if (!t || !(l = calloc(1, sizeof(*l))))
		return NULL;
	l->t = t;
	if (redact_stream_new(&l->rs, line_sink, l)) {
		free(l);
		return NULL;
	}
	pthread_mutex_lock(&t->lock); /* held until traj_line_end(): the line goes out whole */
	snprintf(head, sizeof(head), "{\"t\":%lld,\"type\":", (long long)traj_millis(t));
	traj_line_raw(l, head);
	traj_line_string(l, type);
	return l;
}

void traj_line_raw(traj_line *l, const char *json)
{
	line_add(l, json, strlen(json));
}

void traj_line_string(traj_line *l, const char *s)
{
	cJSON *v = !l || l->rc ? NULL : cJSON_CreateString(s);
	char *p = v ? cJSON_PrintUnformatted(v) : NULL;

	if (p)
		traj_line_raw(l, p);
	else if (l && !l->rc)
		l->rc = ap_error_set(AP_ENOMEM, "out of memory");
	free(p);
	cJSON_Delete(v);
}

void traj_line_end(traj_line *l)
{
	if (!l)
		return;
	traj_line_raw(l, "}");
	if (!l->rc)
		l->rc = redact_stream_flush(l->rs);
	redact_stream_free(l->rs);
	if (l->rc)
		ap_warn("trajectory: an event was cut short: %s", ap_error_name(l->rc));
	if (fputc('\n', l->t->f) == EOF || l->failed || fflush(l->t->f) != 0)
		write_failed(l->t);
	pthread_mutex_unlock(&l->t->lock);
	free(l);
}

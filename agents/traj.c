/* SPDX-License-Identifier: MIT */
/* agents/traj.c - redacted JSONL trajectory (see traj.h). */
#include "agents/traj.h"
#include "common/err.h"
#include "common/log.h"
#include "common/redact.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct traj {
	FILE *f;
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
	free(t);
}

int64_t traj_millis(const traj *t)
{
	static const struct timespec zero = {0, 0};
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return ms_between(t ? &t->start : &zero, &now);
}

void traj_event(traj *t, const char *type, cJSON *obj)
{
	if (!t) {
		cJSON_Delete(obj);
		return;
	}
	cJSON *line = cJSON_CreateObject();
	char *text = NULL, *clean = NULL;
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
	clean = redact_str(text);
	if (!clean)
		goto out_text;
	if ((fputs(clean, t->f) < 0 || fputc('\n', t->f) == EOF || fflush(t->f) != 0) &&
	    !t->warned) {
		t->warned = true;
		ap_warn("trajectory write failed: %s", strerror(errno));
	}
	free(clean);
out_text:
	free(text);
out_line:
	cJSON_Delete(line);
out_obj:
	cJSON_Delete(obj);
}

/* SPDX-License-Identifier: MIT */
/* tests/agents/test_traj.c - the trajectory writer from several threads at once (the Tester's
 * lanes): every line is whole and valid JSON, none is lost, and a streamed line
 * (traj_line_begin .. traj_line_end) is never cut into by another thread's event. */
#include "agents/traj.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define THREADS 4
#define EVENTS	200
#define PARTS	2000 /* a streamed line of some 30 KiB: written in several pieces */

struct writer {
	traj *t;
	int id;
};

static void *write_events(void *arg)
{
	struct writer *w = arg;

	for (int i = 0; i < EVENTS; i++) {
		if (i % 10 == 0) { /* a streamed line, piece by piece */
			traj_line *l = traj_line_begin(w->t, "streamed");

			traj_line_raw(l, ",\"parts\":[");
			for (int k = 0; k < PARTS; k++) {
				char part[32];

				snprintf(part, sizeof(part), "w%d-%d-%d", w->id, i, k);
				traj_line_raw(l, k ? "," : "");
				traj_line_string(l, part);
			}
			traj_line_raw(l, "]");
			traj_line_end(l);
			continue;
		}
		cJSON *o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "writer", w->id);
		cJSON_AddNumberToObject(o, "i", i);
		cJSON_AddStringToObject(o, "text", "some text that takes a while to write out");
		traj_event(w->t, "plain", o);
	}
	return NULL;
}

static void test_threads_write_whole_lines(void **state)
{
	char path[] = "/tmp/ap-traj-XXXXXX";
	int fd = mkstemp(path);
	traj *t = NULL;
	pthread_t th[THREADS];
	struct writer w[THREADS];
	int seen[THREADS] = {0}, streamed = 0;
	char *line = NULL;
	size_t cap = 0;
	FILE *f;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(traj_open(&t, path), 0);
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct writer){t, i};
		assert_int_equal(pthread_create(&th[i], NULL, write_events, &w[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	traj_free(t);
	assert_non_null(f = fopen(path, "r"));
	while (getline(&line, &cap, f) > 0) {
		cJSON *o = cJSON_Parse(line);
		const cJSON *type = cJSON_GetObjectItem(o, "type");

		if (!o || !cJSON_IsString(type))
			fail_msg("not a whole JSON line: %.200s", line);
		if (strcmp(type->valuestring, "streamed") == 0) {
			const cJSON *parts = cJSON_GetObjectItem(o, "parts");
			assert_int_equal(cJSON_GetArraySize(parts), PARTS);
			streamed++;
		} else {
			int id = cJSON_GetObjectItem(o, "writer")->valueint;
			assert_true(id >= 0 && id < THREADS);
			seen[id]++;
		}
		cJSON_Delete(o);
	}
	free(line);
	fclose(f);
	unlink(path);
	assert_int_equal(streamed, THREADS * EVENTS / 10);
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(seen[i], EVENTS - EVENTS / 10);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_threads_write_whole_lines),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

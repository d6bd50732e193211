/* SPDX-License-Identifier: MIT */
/* cli/jobs.c - `autopatch jobs [--json] [--id N] [--trajectory] [--limit N]`: a view of
 * the queue database (jobs, and with --id one job's events). */
#include "agents/cost.h"
#include "cli/commands.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/fs.h"
#include "common/jsonnum.h"
#include "common/redact.h"
#include "server/queue.h"
#include "server/queue_view.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A trajectory file is printed whole up to this size. */
#define TRAJECTORY_MAX (64 * 1024 * 1024)

static const char usage[] = "usage: autopatch jobs [--json] [--id N [--trajectory]] [--limit N]\n";

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsString(v) ? v->valuestring : "";
}

static long long num(const cJSON *o, const char *k)
{
	return ap_json_int_or(o, k, 0);
}

/* One line of text for a table cell: newlines and tabs become spaces, long text is cut. */
static void cell(const char *s, size_t max)
{
	size_t n = 0;

	for (; *s && n < max; s++, n++)
		putchar(*s == '\n' || *s == '\t' || *s == '\r' ? ' ' : *s);
	if (*s)
		fputs("...", stdout);
}

static void print_table(const cJSON *jobs)
{
	const cJSON *j;

	printf("%-5s %-38s %-28s %-6s %-11s %-9s %-10s %-3s %-24s %-24s %-9s %-10s %s\n", "ID",
	       "DELIVERY", "REPOSITORY", "ISSUE", "TRIGGER", "STATE", "STAGE", "ATT", "CREATED",
	       "UPDATED", "TOKENS", "COST", "RESULT/ERROR");
	cJSON_ArrayForEach (j, jobs) {
		const char *res = *str(j, "result") ? str(j, "result") : str(j, "error");
		const cJSON *usd = cJSON_GetObjectItemCaseSensitive(j, "cost_usd");
		char cost[32] = "-";

		/* The JSON carries dollars; the table shows the ledger's micro-dollars again. */
		if (cJSON_IsNumber(usd))
			cost_format_usd((int64_t)(usd->valuedouble * 1e6 + 0.5), cost,
					sizeof(cost));
		printf(
		    "%-5lld %-38s %-28s %-6lld %-11s %-9s %-10s %-3lld %-24s %-24s %-9lld %-10s ",
		    num(j, "id"), str(j, "delivery"), str(j, "repo"), num(j, "issue"),
		    str(j, "trigger"), str(j, "state"), *str(j, "stage") ? str(j, "stage") : "-",
		    num(j, "attempts"), str(j, "created"), str(j, "updated"),
		    num(j, "tokens_in") + num(j, "tokens_out"), cost);
		cell(res, 100);
		putchar('\n');
	}
}

static void print_job(const cJSON *jobs)
{
	print_table(jobs);
}

static void print_events(const cJSON *job)
{
	const cJSON *e, *events = cJSON_GetObjectItemCaseSensitive(job, "events");

	printf("\nevents:\n");
	cJSON_ArrayForEach (e, events) {
		printf("  %s  %-10s ", str(e, "time"), *str(e, "stage") ? str(e, "stage") : "-");
		cell(str(e, "message"), 300);
		putchar('\n');
	}
}

static int print_trajectory(queue *q, int64_t id)
{
	char *path = NULL, *clean;
	ap_buf b = AP_BUF_INIT(TRAJECTORY_MAX);
	int rc, ret = 1;

	if (q_state_get(q, id, "trajectory", &path)) {
		fprintf(stderr, "autopatch: %s\n", ap_error_last());
		return 1;
	}
	if (!path) {
		fprintf(stderr, "autopatch: job %lld has no trajectory yet\n", (long long)id);
		return 1;
	}
	rc = fs_read_file(&b, path, 0);
	if (rc) {
		if (rc == AP_ETOOBIG)
			fprintf(stderr, "autopatch: trajectory %s is larger than 64 MiB\n", path);
		else
			fprintf(stderr, "autopatch: the trajectory: %s\n", ap_error_last());
		goto out;
	}
	/* The agents code writes it redacted already; redact again, it costs nothing. */
	clean = redact_mem(ap_buf_str(&b), b.len);
	if (!clean)
		goto out;
	fputs(clean, stdout);
	free(clean);
	ret = 0;
out:
	ap_buf_release(&b);
	free(path);
	return ret;
}

struct jobs_opts {
	bool json, trajectory;
	long long id, limit;
};

/* Parse the options: 0, or 2 (usage) with the sentence printed. */
static int jobs_parse(int argc, char **argv, struct jobs_opts *o)
{
	char *end;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			o->json = true;
		} else if (strcmp(argv[i], "--trajectory") == 0) {
			o->trajectory = true;
		} else if ((strcmp(argv[i], "--id") == 0 || strcmp(argv[i], "--limit") == 0) &&
			   i + 1 < argc) {
			long long v = strtoll(argv[i + 1], &end, 10);

			if (*end || v <= 0) {
				fprintf(stderr, "autopatch: %s needs a positive number\n%s",
					argv[i], usage);
				return 2;
			}
			if (strcmp(argv[i], "--id") == 0)
				o->id = v;
			else
				o->limit = v;
			i++;
		} else {
			fprintf(stderr, "autopatch: unknown option \"%s\"\n%s", argv[i], usage);
			return 2;
		}
	}
	if (o->trajectory && !o->id) {
		fprintf(stderr, "autopatch: --trajectory needs --id N\n%s", usage);
		return 2;
	}
	return 0;
}

static int jobs_run(const ap_config *cfg, const struct jobs_opts *o)
{
	const char *db = cfg_str(cfg, "AUTOPATCH_DB");
	cJSON *jobs = NULL;
	queue *q = NULL;
	char *text;
	int ret = 1;

	if (q_open(&q, db, Q_OPEN_EXISTING)) {
		fprintf(stderr, "autopatch: %s\n", ap_error_last());
		return 1;
	}
	if (o->trajectory) {
		ret = print_trajectory(q, o->id);
		goto out;
	}
	if (q_jobs_json(q, o->id, (int)o->limit, &jobs)) {
		fprintf(stderr, "autopatch: %s\n", ap_error_last());
		goto out;
	}
	if (o->id && cJSON_GetArraySize(jobs) == 0) {
		fprintf(stderr, "autopatch: no job %lld\n", o->id);
		goto out;
	}
	if (o->json) {
		text = cJSON_Print(o->id ? cJSON_GetArrayItem(jobs, 0) : jobs);
		if (!text)
			goto out;
		puts(text);
		free(text);
	} else if (o->id) {
		print_job(jobs);
		print_events(cJSON_GetArrayItem(jobs, 0));
	} else {
		print_table(jobs);
	}
	ret = 0;
out:
	cJSON_Delete(jobs);
	q_close(q);
	return ret;
}

int jobs_main(int argc, char **argv, ap_config *cfg)
{
	struct jobs_opts o = {0};
	int rc = jobs_parse(argc, argv, &o);

	return rc ? rc : jobs_run(cfg, &o);
}

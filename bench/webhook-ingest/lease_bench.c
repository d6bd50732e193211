/* SPDX-License-Identifier: MIT */
/* bench/webhook-ingest/lease_bench.c - lease throughput of the queue with several replicas.
 *
 * Usage: lease_bench TARGET PROCESSES THREADS SECONDS
 * Forks PROCESSES processes (the replicas), each with THREADS worker threads on their own
 * connection to TARGET (a SQLite path or a postgresql:// URI); every worker leases the next
 * ready job and finishes it (succeeded) at once, for SECONDS or until the queue is empty.
 * Prints one line: "leases=N seconds=S leases_per_s=R duplicates=D" (D: a job leased twice,
 * which must be 0). A benchmark: it prints figures and exits 0 unless it cannot run.
 */
#include "common/clock.h"
#include "common/err.h"
#include "server/queue.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_IDS (4 * 1024 * 1024)

struct shared {
	int64_t leases;
	int64_t dups;
	unsigned char seen[MAX_IDS];
};

static struct shared *sh;
static const char *target;
static int64_t until_ms;

static void *worker(void *arg)
{
	char owner[64];
	queue *q;
	int64_t n = 0;

	snprintf(owner, sizeof(owner), "bench:%d/w%ld", (int)getpid(), (long)(intptr_t)arg);
	if (q_open(&q, target, Q_OPEN_CREATE)) {
		fprintf(stderr, "lease_bench: %s\n", ap_error_last());
		return NULL;
	}
	while (ap_wall_ms() < until_ms) {
		job_info *job;
		int rc = q_lease(q, owner, 60000, ap_wall_ms(), &job);

		if (rc == AP_ENOTFOUND)
			break;
		if (rc) {
			fprintf(stderr, "lease_bench: %s\n", ap_error_last());
			break;
		}
		if (job->id > 0 && job->id < MAX_IDS &&
		    __atomic_exchange_n(&sh->seen[job->id], 1, __ATOMIC_SEQ_CST))
			__atomic_add_fetch(&sh->dups, 1, __ATOMIC_SEQ_CST);
		q_finish(q, job->id, owner, "succeeded", "bench", ap_wall_ms());
		q_job_free(job);
		n++;
	}
	__atomic_add_fetch(&sh->leases, n, __ATOMIC_SEQ_CST);
	q_close(q);
	return NULL;
}

int main(int argc, char **argv)
{
	int procs, threads;
	int64_t t0;
	double secs;

	if (argc != 5) {
		fprintf(stderr, "usage: lease_bench TARGET PROCESSES THREADS SECONDS\n");
		return 2;
	}
	target = argv[1];
	procs = atoi(argv[2]);
	threads = atoi(argv[3]);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED || procs < 1 || threads < 1 || threads > 64)
		return 2;
	t0 = ap_wall_ms();
	until_ms = t0 + atoll(argv[4]) * 1000;
	for (int p = 0; p < procs; p++) {
		pid_t pid = fork();

		if (pid == 0) {
			pthread_t th[64];

			for (long i = 0; i < threads; i++)
				pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
			for (int i = 0; i < threads; i++)
				pthread_join(th[i], NULL);
			_exit(0);
		}
	}
	while (wait(NULL) > 0)
		;
	secs = (double)(ap_wall_ms() - t0) / 1000.0;
	printf("leases=%lld seconds=%.2f leases_per_s=%.0f duplicates=%lld\n",
	       (long long)sh->leases, secs, secs > 0 ? (double)sh->leases / secs : 0,
	       (long long)sh->dups);
	return 0;
}

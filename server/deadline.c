/* SPDX-License-Identifier: MIT */
/* server/deadline.c - connection deadlines and their watcher thread (see deadline.h). */
#include "server/deadline.h"

#include "common/clock.h"
#include "common/err.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

struct dl_conn {
	dl_conn *prev, *next; /* the tracker's list, under its lock */
	int fd;
	_Atomic int64_t deadline_ns; /* 0: none armed */
	atomic_int phase;
	atomic_bool cut; /* the socket was shut down for its deadline */
};

struct dl_tracker {
	pthread_mutex_t lock;
	pthread_cond_t wake; /* CLOCK_MONOTONIC */
	pthread_t thread;
	dl_conn *head;
	bool stop;
	int tick_ms;
	dl_cut_fn on_cut;
};

int64_t dl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static bool expired(const dl_conn *c, int64_t now)
{
	int64_t d = atomic_load(&c->deadline_ns);

	return d != 0 && d <= now;
}

/* Cut c once, whoever finds it first. */
static void cut(dl_tracker *t, dl_conn *c)
{
	/* Read first: once the socket is down, the event loop may re-arm c for a next request. */
	enum dl_phase phase = (enum dl_phase)atomic_load(&c->phase);

	if (atomic_exchange(&c->cut, true))
		return;
	/* Not close(): the event loop owns the descriptor and sees end-of-file. */
	shutdown(c->fd, SHUT_RDWR);
	if (t->on_cut)
		t->on_cut(phase);
}

/* Shut down every connection past its deadline. Called with the lock held. */
static void sweep(dl_tracker *t, int64_t now)
{
	for (dl_conn *c = t->head; c; c = c->next)
		if (expired(c, now))
			cut(t, c);
}

static void *watch(void *arg)
{
	dl_tracker *t = arg;
	struct timespec until;

	pthread_mutex_lock(&t->lock);
	while (!t->stop) {
		ap_deadline_in(&until, CLOCK_MONOTONIC, t->tick_ms);
		pthread_cond_timedwait(&t->wake, &t->lock, &until);
		if (!t->stop)
			sweep(t, dl_now_ns());
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

int dl_new(dl_tracker **out, int tick_ms, dl_cut_fn on_cut)
{
	pthread_condattr_t ca;
	dl_tracker *t;

	*out = NULL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return ap_error_set(AP_ENOMEM, "out of memory");
	t->tick_ms = tick_ms > 0 ? tick_ms : 100;
	t->on_cut = on_cut;
	pthread_mutex_init(&t->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->wake, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&t->thread, NULL, watch, t) != 0) {
		pthread_cond_destroy(&t->wake);
		pthread_mutex_destroy(&t->lock);
		free(t);
		return ap_error_set(AP_EIO, "cannot start the connection deadline thread");
	}
	*out = t;
	return 0;
}

void dl_free(dl_tracker *t)
{
	dl_conn *next;

	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	t->stop = true;
	pthread_cond_signal(&t->wake);
	pthread_mutex_unlock(&t->lock);
	pthread_join(t->thread, NULL);
	for (dl_conn *c = t->head; c; c = next) {
		next = c->next;
		free(c);
	}
	pthread_cond_destroy(&t->wake);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

dl_conn *dl_track(dl_tracker *t, int fd, enum dl_phase phase, int64_t deadline_ns)
{
	dl_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->fd = fd;
	atomic_store(&c->phase, (int)phase);
	atomic_store(&c->deadline_ns, deadline_ns);
	pthread_mutex_lock(&t->lock);
	c->next = t->head;
	if (t->head)
		t->head->prev = c;
	t->head = c;
	pthread_mutex_unlock(&t->lock);
	return c;
}

void dl_arm(dl_conn *c, enum dl_phase phase, int64_t deadline_ns)
{
	if (!c)
		return;
	atomic_store(&c->phase, (int)phase);
	atomic_store(&c->deadline_ns, deadline_ns);
}

bool dl_enforce(dl_tracker *t, dl_conn *c, int64_t now_ns)
{
	if (!c || !expired(c, now_ns))
		return false;
	cut(t, c);
	return true;
}

void dl_untrack(dl_tracker *t, dl_conn *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&t->lock);
	if (c->prev)
		c->prev->next = c->next;
	else
		t->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	pthread_mutex_unlock(&t->lock);
	free(c);
}

/* SPDX-License-Identifier: MIT */
/* job/tester_box.c - a fresh box for each Tester run, and spares of it made ahead of time in
 * background threads (see tester_box.h). */
#include "job/tester_box.h"

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define SPARE_BACKOFF_MAX_MS  30000 /* between tries after a spare failed to be made */
#define SPARE_WAIT_UNKNOWN_MS 30000 /* waiting for one being made, before any was timed */
#define SPARE_SLICE_MS	      100   /* a waiting taker looks at its cancel flag this often */

enum spare_state { SPARE_EMPTY, SPARE_MAKING, SPARE_READY };

/* One spare, kept by a thread of its own: made, held until taken or too old, made again. */
struct spare {
	tester_spares *sp;
	pthread_t thread;
	bool started;
	enum spare_state state;
	bool claimed;	 /* a taker waits for the one being made */
	sbx_box *box;	 /* SPARE_READY: the box */
	int64_t born_ms; /* SPARE_READY: when it was ready (ap_mono_ms) */
};

struct tester_spares {
	tester_boxes *tb;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* any change of a spare's state, or the stop */
	bool stopping;
	volatile sig_atomic_t cancel; /* set at the stop: a restore under way ends */
	int64_t max_age_ms;	      /* an older spare is destroyed and made anew */
	int64_t last_make_ms;	      /* how long the last box took to make (0: none yet) */
	int failures;		      /* spares that failed to be made in a row */
	int64_t retry_at_ms;	      /* after a failure: no spare is made before this */
	int n;
	struct spare s[TESTER_SPARES_MAX];
};

/* Create, prepare and fill a fresh box from tb's inputs: the one way every Tester box is made,
 * ahead of time or on demand. */
static int box_fresh(tester_boxes *tb, const volatile sig_atomic_t *cancel, sbx_box **out)
{
	sbx_spec spec = SBX_SPEC_INIT;
	sbx_box *b = NULL;
	char why[AP_ERROR_MSG_MAX];
	int rc;

	*out = NULL;
	spec.image = tb->image;
	spec.repo_dir = tb->repo_dir;
	spec.job_label = tb->job_label;
	spec.network = SBX_NET_NONE; /* whatever the job's setup had */
	if ((rc = sbx_create(tb->engine, &spec, &b)))
		return rc;
	sbx_box_set_phase(b, "tester");
	if ((rc = sbx_prepare(b)) || (rc = env_snapshot_restore(tb->snapshot, b, cancel)))
		goto out_destroy;
	*out = b;
	return 0;
out_destroy:
	snprintf(why, sizeof(why), "%s", ap_error_last()); /* the first error is the one to tell */
	(void)sbx_destroy(b);
	return ap_error_set(rc, "%s", why);
}

static void destroy_dropped(tester_boxes *tb, sbx_box *b)
{
	if (sbx_destroy(b))
		ap_warn("tester spares: destroying a spare box failed: %s", ap_error_last());
	__atomic_add_fetch(&tb->dropped, 1, __ATOMIC_RELAXED);
}

/* Make s's box (the lock is held on entry and on return, released while making). */
static void spare_make(tester_spares *sp, struct spare *s)
{
	int64_t t0 = ap_mono_ms();
	sbx_box *b = NULL;
	int rc;

	s->state = SPARE_MAKING;
	pthread_mutex_unlock(&sp->lock);
	rc = box_fresh(sp->tb, &sp->cancel, &b);
	pthread_mutex_lock(&sp->lock);
	if (rc) {
		s->state = SPARE_EMPTY;
		if (!sp->stopping) {
			int64_t wait = (int64_t)1000 << (sp->failures < 5 ? sp->failures : 5);

			ap_warn("tester spares: a spare Tester box could not be made (runs make "
				"theirs on demand): %s",
				ap_error_last());
			sp->failures++;
			sp->retry_at_ms =
			    ap_mono_ms() +
			    (wait < SPARE_BACKOFF_MAX_MS ? wait : SPARE_BACKOFF_MAX_MS);
		}
	} else if (sp->stopping) {
		s->state = SPARE_EMPTY;
		pthread_mutex_unlock(&sp->lock);
		destroy_dropped(sp->tb, b);
		pthread_mutex_lock(&sp->lock);
	} else {
		s->state = SPARE_READY;
		s->box = b;
		s->born_ms = ap_mono_ms();
		sp->last_make_ms = s->born_ms - t0;
		sp->failures = 0;
	}
	pthread_cond_broadcast(&sp->cond);
}

/* Wait on the condition until at_ms (ap_mono_ms) at the latest. */
static void wait_until(tester_spares *sp, int64_t at_ms)
{
	struct timespec ts;
	int64_t left = at_ms - ap_mono_ms();

	ap_deadline_in(&ts, CLOCK_MONOTONIC, left > 0 ? left : 0);
	pthread_cond_timedwait(&sp->cond, &sp->lock, &ts);
}

/* A spare's thread: keep one box ready, replace it when it is taken or too old. */
static void *spare_main(void *arg)
{
	struct spare *s = arg;
	tester_spares *sp = s->sp;
	sbx_box *old;

	pthread_mutex_lock(&sp->lock);
	while (!sp->stopping) {
		int64_t now = ap_mono_ms();

		if (s->state == SPARE_READY && now - s->born_ms >= sp->max_age_ms) {
			old = s->box; /* too old: its life runs out sooner than a fresh box's */
			s->box = NULL;
			s->state = SPARE_EMPTY;
			pthread_mutex_unlock(&sp->lock);
			destroy_dropped(sp->tb, old);
			pthread_mutex_lock(&sp->lock);
		} else if (s->state == SPARE_READY) {
			wait_until(sp, s->born_ms + sp->max_age_ms);
		} else if (now < sp->retry_at_ms) {
			wait_until(sp, sp->retry_at_ms);
		} else {
			spare_make(sp, s);
		}
	}
	old = s->box;
	s->box = NULL;
	s->state = SPARE_EMPTY;
	pthread_mutex_unlock(&sp->lock);
	if (old) /* each thread destroys its own: the spares go at once */
		destroy_dropped(sp->tb, old);
	return NULL;
}

/* AUTOPATCH_TESTER_SPARES in its range: the one reading of it. */
static int spares_setting(const ap_config *cfg, int64_t *n)
{
	return cfg_int(cfg, "AUTOPATCH_TESTER_SPARES", 0, TESTER_SPARES_MAX, n);
}

int tester_boxes_check_settings(const ap_config *cfg)
{
	int64_t n;

	return spares_setting(cfg, &n);
}

/* How many spares the settings ask for (0 on a bad setting, which is logged: the front ends
 * refused one at start-up, tester_boxes_check_settings). */
static int spares_wanted(const ap_config *cfg, int64_t *max_age_ms)
{
	int64_t n = 0, wall = 3600;

	if (!cfg)
		return 0;
	if (spares_setting(cfg, &n)) {
		ap_warn("tester spares: none are made: %s", ap_error_last());
		return 0;
	}
	if (n > 0 && cfg_int(cfg, "AUTOPATCH_SANDBOX_WALL_SECONDS", 1, INT32_MAX, &wall))
		ap_error_clear(); /* sbx_engine_new refused it already: the default */
	*max_age_ms = wall * 1000 / 6;
	return (int)n;
}

void tester_boxes_start(tester_boxes *tb, const ap_config *cfg)
{
	tester_spares *sp;
	pthread_condattr_t ca;
	int64_t max_age_ms = 0;
	int n = spares_wanted(cfg, &max_age_ms);

	if (n <= 0 || tb->sp)
		return;
	sp = calloc(1, sizeof(*sp));
	if (!sp) {
		ap_warn("tester spares: none are made: out of memory");
		return;
	}
	sp->tb = tb;
	sp->max_age_ms = max_age_ms;
	pthread_mutex_init(&sp->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* wait_until's deadlines */
	pthread_cond_init(&sp->cond, &ca);
	pthread_condattr_destroy(&ca);
	tb->sp = sp;
	for (int i = 0; i < n; i++) {
		struct spare *s = &sp->s[i];

		s->sp = sp;
		if (pthread_create(&s->thread, NULL, spare_main, s)) {
			ap_warn("tester spares: %d of %d made ahead: cannot start a thread", i, n);
			break;
		}
		s->started = true;
		sp->n++;
	}
}

/* The oldest ready spare nobody claimed that is young enough, or NULL (lock held). */
static struct spare *ready_spare(tester_spares *sp)
{
	struct spare *best = NULL;
	int64_t now = ap_mono_ms();

	for (int i = 0; i < sp->n; i++) {
		struct spare *s = &sp->s[i];

		if (s->state == SPARE_READY && !s->claimed && now - s->born_ms < sp->max_age_ms &&
		    (!best || s->born_ms < best->born_ms))
			best = s;
	}
	return best;
}

/* A ready spare, or the one being made when it is ready before a box made now would be
 * (waited for at most as long as the last box took to make); NULL: make one now. */
static sbx_box *take_spare(tester_boxes *tb, tester_spares *sp)
{
	struct spare *s;
	sbx_box *b = NULL;

	pthread_mutex_lock(&sp->lock);
	s = ready_spare(sp);
	for (int i = 0; !s && !sp->stopping && i < sp->n; i++) {
		struct spare *m = &sp->s[i];
		int64_t until;

		if (m->state != SPARE_MAKING || m->claimed)
			continue;
		/* It began before this run asked: it is done sooner than a box made now. */
		until =
		    ap_mono_ms() + (sp->last_make_ms ? sp->last_make_ms : SPARE_WAIT_UNKNOWN_MS);
		m->claimed = true;
		while (m->state == SPARE_MAKING && !sp->stopping && ap_mono_ms() < until &&
		       !(tb->cancel && *tb->cancel)) {
			int64_t slice = ap_mono_ms() + SPARE_SLICE_MS;

			wait_until(sp, slice < until ? slice : until);
		}
		m->claimed = false;
		s = m->state == SPARE_READY ? m : NULL;
		break;
	}
	if (s) {
		b = s->box;
		s->box = NULL;
		s->state = SPARE_EMPTY;
		pthread_cond_broadcast(&sp->cond); /* its thread makes the next one */
	}
	pthread_mutex_unlock(&sp->lock);
	return b;
}

int tester_box_make(void *ud, sbx_box **out)
{
	tester_boxes *tb = ud;
	int64_t t0;
	int rc;

	*out = NULL;
	if (tb->sp && (*out = take_spare(tb, tb->sp))) {
		__atomic_add_fetch(&tb->warm, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&tb->made, 1, __ATOMIC_RELAXED);
		return 0;
	}
	t0 = ap_mono_ms();
	if ((rc = box_fresh(tb, tb->cancel, out)))
		return rc;
	if (tb->sp) { /* how long a box takes: the most a taker waits for a spare */
		pthread_mutex_lock(&tb->sp->lock);
		tb->sp->last_make_ms = ap_mono_ms() - t0;
		pthread_mutex_unlock(&tb->sp->lock);
	}
	__atomic_add_fetch(&tb->made, 1, __ATOMIC_RELAXED); /* two lanes make boxes at once */
	return 0;
}

void tester_boxes_stop(tester_boxes *tb)
{
	tester_spares *sp = tb ? tb->sp : NULL;

	if (!sp)
		return;
	pthread_mutex_lock(&sp->lock);
	sp->stopping = true;
	sp->cancel = 1;
	pthread_cond_broadcast(&sp->cond);
	pthread_mutex_unlock(&sp->lock);
	for (int i = 0; i < sp->n; i++)
		if (sp->s[i].started)
			pthread_join(sp->s[i].thread, NULL);
	pthread_mutex_destroy(&sp->lock);
	pthread_cond_destroy(&sp->cond);
	free(sp);
	tb->sp = NULL;
}

void tester_boxes_describe(const tester_boxes *tb, char *out, size_t n)
{
	int made = __atomic_load_n(&tb->made, __ATOMIC_RELAXED);
	int warm = __atomic_load_n(&tb->warm, __ATOMIC_RELAXED);
	int dropped = __atomic_load_n(&tb->dropped, __ATOMIC_RELAXED);

	snprintf(out, n,
		 "Tester boxes: %d fresh box%s for %d run%s, %d of them made ahead of time; "
		 "%d spare%s destroyed unused",
		 made, made == 1 ? "" : "es", made, made == 1 ? "" : "s", warm, dropped,
		 dropped == 1 ? "" : "s");
}

/* SPDX-License-Identifier: MIT */
/* server/deadline.h - total deadlines for connections, enforced by one watcher thread.
 *
 * libmicrohttpd's connection timeout is an idle timeout: a client that sends one byte every
 * few seconds keeps its connection forever, and the server calls nothing of ours until the
 * headers are complete. So the HTTP front end registers each connection here when it is
 * accepted (with its socket) and arms a deadline for the phase it is in (headers, body);
 * the watcher shuts down the socket of every connection whose armed deadline passed. The
 * event loop then sees end-of-file and closes the connection itself: the descriptor is never
 * closed here, and it stays valid because a connection is untracked before its socket is
 * closed (libmicrohttpd's close notification comes first).
 *
 * Thread-safety: dl_track and dl_untrack take the tracker's lock; dl_arm and dl_enforce are
 * lock-free and may be called by the connection's own thread at any time while tracked.
 */
#ifndef AP_DEADLINE_H
#define AP_DEADLINE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct dl_tracker dl_tracker;
typedef struct dl_conn dl_conn;

enum dl_phase {
	DL_HEADERS, /* the request line and headers are awaited */
	DL_BODY,    /* the request body is awaited */
};

/* Called once for each connection cut (by the watcher, with the tracker's lock held, or by
 * dl_enforce on the connection's own thread). Must not call back into the tracker. */
typedef void (*dl_cut_fn)(enum dl_phase phase);

/* Start a tracker whose watcher checks every tick_ms (e.g. 100). on_cut may be NULL. */
int dl_new(dl_tracker **out, int tick_ms, dl_cut_fn on_cut);

/* Stop the watcher and free the tracker and every connection still tracked. Accepts NULL. */
void dl_free(dl_tracker *t);

/* Track the connection on socket fd with a deadline for phase (CLOCK_MONOTONIC ns; 0 = none
 * armed). Returns the handle, or NULL when out of memory. */
dl_conn *dl_track(dl_tracker *t, int fd, enum dl_phase phase, int64_t deadline_ns);

/* Arm a new deadline (0 disarms: the connection is no longer the client's to finish). */
void dl_arm(dl_conn *c, enum dl_phase phase, int64_t deadline_ns);

/* True when c has an armed deadline that is not after now_ns; then c is cut (its socket shut
 * down, on_cut called) unless the watcher did that already. For the connection's own thread,
 * which then closes the connection. c may be NULL (false). */
bool dl_enforce(dl_tracker *t, dl_conn *c, int64_t now_ns);

/* Forget and free c, before its socket is closed. Accepts NULL. */
void dl_untrack(dl_tracker *t, dl_conn *c);

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t dl_now_ns(void);

#endif

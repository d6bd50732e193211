/* SPDX-License-Identifier: MIT */
/* common/slots.h - the shape of the server's small in-memory tables (one-time values, console
 * sessions): an object whose first member is an ap_slots, a fixed number of zeroed entries of
 * one size, and one mutex for all of them. One constructor and one destructor for every such
 * table, so each wipes its entries the same way. Invariants (asserted in debug builds): cap >= 1
 * entries of size > 0 bytes, entries not NULL, cap * size does not overflow. */
#ifndef AP_COMMON_SLOTS_H
#define AP_COMMON_SLOTS_H

#include <assert.h>
#include <pthread.h>
#include <stddef.h>

typedef struct ap_slots {
	pthread_mutex_t lock;
	int cap;       /* number of entries */
	size_t size;   /* bytes per entry */
	void *entries; /* cap * size bytes, zeroed at first */
} ap_slots;

/* *out = a new zeroed object of obj_size bytes (>= sizeof(ap_slots)) whose first member is
 * the ap_slots, with cap zeroed entries of entry_size bytes and its mutex initialised. cap < 1
 * fails with AP_EINVAL and the message what (it names the table: "a session table needs room
 * for one"). Free it with ap_slots_free. */
int ap_slots_new(void **out, size_t obj_size, int cap, size_t entry_size, const char *what);

/* Wipes every entry (explicit_bzero: they may hold secrets), destroys the mutex and frees the
 * entries and the object t is the first member of. Entries' own allocations are the caller's
 * to release first. Accepts NULL. */
void ap_slots_free(ap_slots *t);

/* Entry i (0 <= i < cap; debug builds assert it). */
static inline void *ap_slots_at(const ap_slots *t, int i)
{
	assert(i >= 0 && i < t->cap);
	return (char *)t->entries + (size_t)i * t->size;
}

#endif

/* SPDX-License-Identifier: MIT */
/* common/slots.c - fixed tables of entries behind one mutex (see slots.h). */
#include "common/slots.h"

#include "common/err.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* slots.h's invariants, asserted after ap_slots_new and before ap_slots_free (debug builds):
 * at least one entry, entries of a non-zero size, an entries block whose size did not
 * overflow. */
static void check_invariants(const ap_slots *t)
{
	(void)t;
	assert(t->cap >= 1 && t->size > 0 && t->entries);
	assert((size_t)t->cap <= SIZE_MAX / t->size);
}

int ap_slots_new(void **out, size_t obj_size, int cap, size_t entry_size, const char *what)
{
	ap_slots *t;

	assert(obj_size >= sizeof(ap_slots) && entry_size > 0);
	*out = NULL;
	if (cap < 1)
		return ap_error_set(AP_EINVAL, "%s", what);
	t = calloc(1, obj_size);
	if (t)
		t->entries = calloc((size_t)cap, entry_size);
	if (!t || !t->entries) {
		free(t);
		return ap_error_set(AP_ENOMEM, "out of memory");
	}
	pthread_mutex_init(&t->lock, NULL);
	t->cap = cap;
	t->size = entry_size;
	check_invariants(t);
	*out = t;
	return 0;
}

void ap_slots_free(ap_slots *t)
{
	if (!t)
		return;
	check_invariants(t);
	explicit_bzero(t->entries, (size_t)t->cap * t->size);
	pthread_mutex_destroy(&t->lock);
	free(t->entries);
	free(t);
}

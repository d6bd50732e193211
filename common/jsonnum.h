/* SPDX-License-Identifier: MIT */
/* common/jsonnum.h - whole numbers out of cJSON without undefined behaviour.
 *
 * cJSON stores numbers as doubles; casting a double outside the target type's range (1e300 from
 * a model, a forged GitHub answer) is undefined behaviour in C. Every integer read from outside
 * JSON goes through here.
 */
#ifndef AP_JSONNUM_H
#define AP_JSONNUM_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

/* True, with *out set, when v is a finite whole number in [-2^53, 2^53] (the range a double
 * holds exactly); false otherwise, *out untouched. v may be NULL. */
bool ap_json_int(const cJSON *v, int64_t *out);

/* ap_json_int() of obj[key], or def when it is missing or not such a number. */
int64_t ap_json_int_or(const cJSON *obj, const char *key, int64_t def);

/* Add v to obj as key, written as the exact integer (cJSON's own numbers go through a double
 * and "%1.15g"). Returns false when out of memory. */
bool ap_json_add_int(cJSON *obj, const char *key, int64_t v);

#endif

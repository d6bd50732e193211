/* SPDX-License-Identifier: MIT */
/* common/jsonnum.h - fields out of cJSON: whole numbers without undefined behaviour, and
 * strings and numbers with a default instead of a NULL check at every use.
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

/* obj[key] when it is a string, else "" (never NULL; owned by obj). */
const char *ap_json_str(const cJSON *obj, const char *key);

/* obj[key] when it is a number (as cJSON holds it), else 0. */
double ap_json_num(const cJSON *obj, const char *key);

/* Add v to obj as key, written as the exact integer (cJSON's own numbers go through a double
 * and "%1.15g"). Returns false when out of memory. */
bool ap_json_add_int(cJSON *obj, const char *key, int64_t v);

#endif

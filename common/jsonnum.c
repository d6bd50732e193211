/* SPDX-License-Identifier: MIT */
/* common/jsonnum.c - range-checked integers from cJSON (see jsonnum.h). */
#include "common/jsonnum.h"

#include <math.h>
#include <stdio.h>

#define EXACT_LIMIT 9007199254740992.0 /* 2^53 */

bool ap_json_int(const cJSON *v, int64_t *out)
{
	double d;

	if (!cJSON_IsNumber(v))
		return false;
	d = v->valuedouble;
	if (!isfinite(d) || d < -EXACT_LIMIT || d > EXACT_LIMIT || d != floor(d))
		return false;
	*out = (int64_t)d;
	return true;
}

int64_t ap_json_int_or(const cJSON *obj, const char *key, int64_t def)
{
	int64_t n = def;

	ap_json_int(cJSON_GetObjectItemCaseSensitive(obj, key), &n);
	return n;
}

const char *ap_json_str(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsString(v) && v->valuestring ? v->valuestring : "";
}

double ap_json_num(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

bool ap_json_add_int(cJSON *obj, const char *key, int64_t v)
{
	char num[24];

	snprintf(num, sizeof(num), "%lld", (long long)v);
	return cJSON_AddRawToObject(obj, key, num) != NULL;
}

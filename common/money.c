/* SPDX-License-Identifier: MIT */
/* common/money.c - micro-dollar amounts as text (see money.h). */
#include "common/money.h"

#include "common/err.h"

#include <ctype.h>
#include <stdio.h>

int ap_money_parse(const char *s, size_t n, int64_t max, int64_t *out)
{
	const char *end = s + n;
	int64_t whole = 0, frac = 0;
	int digits = 0, decimals = -1;

	if (s == end)
		return AP_EINVAL;
	for (const char *p = s; p < end; p++) {
		if (*p == '.') {
			if (decimals >= 0 || digits == 0)
				return AP_EINVAL;
			decimals = 0;
			continue;
		}
		if (!isdigit((unsigned char)*p))
			return AP_EINVAL;
		if (decimals >= 0) {
			if (++decimals > 6)
				return AP_EINVAL;
			frac = frac * 10 + (*p - '0');
		} else {
			if (whole > max)
				return AP_EINVAL;
			whole = whole * 10 + (*p - '0');
			digits++;
		}
	}
	if (decimals == 0 || whole > max)
		return AP_EINVAL;
	for (int i = decimals < 0 ? 0 : decimals; i < 6; i++)
		frac *= 10;
	if (whole == max && frac)
		return AP_EINVAL;
	*out = whole * 1000000 + frac;
	return 0;
}

char *ap_money_format(int64_t micro, char *buf, size_t n)
{
	char frac[8];
	int len;

	if (micro < 0)
		micro = 0;
	snprintf(frac, sizeof(frac), "%06lld", (long long)(micro % 1000000));
	len = 6;
	while (len > 2 && frac[len - 1] == '0')
		len--;
	frac[len] = '\0';
	if (micro % 1000000 == 0 && micro >= 1000000000)
		snprintf(buf, n, "$%lld", (long long)(micro / 1000000));
	else
		snprintf(buf, n, "$%lld.%s", (long long)(micro / 1000000), frac);
	return buf;
}

/* SPDX-License-Identifier: MIT */
/* common/money.h - amounts of money as whole micro-dollars (1e-6 USD): parsed from and
 * written as decimal text, so sums stay exact and databases store integers. */
#ifndef AP_MONEY_H
#define AP_MONEY_H

#include <stddef.h>
#include <stdint.h>

/* The n bytes at s ("12", "0.15", "2.500000") as micro-units: at most 6 decimal places,
 * digits before the point, no sign, exponent or white space, at most max_whole whole units.
 * 0 or AP_EINVAL (no message: the caller names what it parsed). */
int ap_money_parse(const char *s, size_t n, int64_t max_whole, int64_t *micro);

/* Bytes that hold any amount ap_money_format() writes, its NUL included
 * ("$9223372036854.775807"). */
#define AP_MONEY_TEXT_MAX 24

/* "$0.0123", "$1.50", "$12.00", "$5000": at least two decimals below $1000 unless whole,
 * trailing zeros dropped; a negative amount is written as $0.00. Writes at most n bytes
 * (always terminated; n >= AP_MONEY_TEXT_MAX is never cut); returns buf. */
char *ap_money_format(int64_t micro, char *buf, size_t n);

#endif

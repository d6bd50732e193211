/* SPDX-License-Identifier: MIT */
/* common/err.c - thread-local error messages (see err.h). */
#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_msg[AP_ERROR_MSG_MAX];

int ap_error_set(int code, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(last_msg, sizeof(last_msg), fmt, ap);
	va_end(ap);
	/* A message is only shown: a long one is cut, visibly and between UTF-8 characters. */
	if (n >= (int)sizeof(last_msg)) {
		size_t keep = sizeof(last_msg) - 4;

		while (keep > 0 && ((unsigned char)last_msg[keep] & 0xC0) == 0x80)
			keep--; /* not inside a character */
		memcpy(last_msg + keep, "...", 4);
	}
	return code;
}

const char *ap_error_last(void)
{
	return last_msg;
}

void ap_error_clear(void)
{
	last_msg[0] = '\0';
}

const char *ap_error_name(int code)
{
	switch (code) {
	case AP_OK:
		return "OK";
	case AP_ENOMEM:
		return "ENOMEM";
	case AP_EINVAL:
		return "EINVAL";
	case AP_EIO:
		return "EIO";
	case AP_EHTTP:
		return "EHTTP";
	case AP_ERATELIMIT:
		return "ERATELIMIT";
	case AP_ENOTFOUND:
		return "ENOTFOUND";
	case AP_EDUPLICATE:
		return "EDUPLICATE";
	case AP_ETIMEOUT:
		return "ETIMEOUT";
	case AP_ETOOBIG:
		return "ETOOBIG";
	case AP_EDENIED:
		return "EDENIED";
	case AP_ECANCELLED:
		return "ECANCELLED";
	case AP_EBUDGET:
		return "EBUDGET";
	case AP_EUNAVAIL:
		return "EUNAVAIL";
	case AP_ESTALE:
		return "ESTALE";
	}
	return "EUNKNOWN";
}

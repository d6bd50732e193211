/* SPDX-License-Identifier: MIT */
/* common/err.h - the one error contract: negative codes plus a thread-local message.
 *
 * Every fallible function returns 0 or a negative AP_E* code. The layer that detects a
 * failure records a sentence with ap_error_set(); the layer that decides what to do reads it
 * with ap_error_last() and logs it once.
 */
#ifndef AP_ERR_H
#define AP_ERR_H

enum {
	AP_OK = 0,
	AP_ENOMEM = -1,	     /* allocation failed */
	AP_EINVAL = -2,	     /* bad argument or bad input from outside */
	AP_EIO = -3,	     /* file, socket or process failure */
	AP_EHTTP = -4,	     /* remote answered with an error status */
	AP_ERATELIMIT = -5,  /* remote rate limit that retries did not outlast */
	AP_ENOTFOUND = -6,   /* the thing asked for does not exist */
	AP_EDUPLICATE = -7,  /* already there (webhook delivery, job) */
	AP_ETIMEOUT = -8,    /* a deadline passed */
	AP_ETOOBIG = -9,     /* a size cap was hit */
	AP_EDENIED = -10,    /* refused by policy (paths, auth, permissions) */
	AP_ECANCELLED = -11, /* the job was cancelled */
	AP_EBUDGET = -12,    /* an agent budget ran out */
	AP_EUNAVAIL = -13,   /* a required service (daemon, server) is unreachable */
	AP_ESTALE = -14,     /* a job's lease is no longer current (fencing): publish nothing */
};

/* Bytes of a message, its NUL included: a copy of ap_error_last() into a buffer this size is
 * never cut. */
#define AP_ERROR_MSG_MAX 1024

/* Record the message for the current thread and return code, so callers can write
 * `return ap_error_set(AP_EINVAL, "bad port %s", s);`. A message longer than
 * AP_ERROR_MSG_MAX - 1 bytes is cut and ends in "..." (messages are only shown). */
int ap_error_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The current thread's last message ("" if none). Valid until the next ap_error_set() on the
 * same thread; copy it if you need it longer. */
const char *ap_error_last(void);

/* Forget the current thread's message (after a failure was handled and swallowed). */
void ap_error_clear(void);

/* A short name for a code ("ENOMEM"), for logs and tests. */
const char *ap_error_name(int code);

#endif

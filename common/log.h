/* SPDX-License-Identifier: MIT */
/* common/log.h - structured logging: one JSON object per line on stderr.
 *
 * Fields: time (RFC 3339, UTC, ms), level, msg, and when given delivery and job. Every line
 * goes through the redaction layer (redact.h) before it is written, so a secret never reaches
 * the log even when a caller formats one by mistake. Thread-safe: lines never interleave.
 */
#ifndef AP_LOG_H
#define AP_LOG_H

#include <stdint.h>

enum ap_log_level { AP_LOG_DEBUG, AP_LOG_INFO, AP_LOG_WARN, AP_LOG_ERROR };

/* Lines below min are dropped. Default AP_LOG_INFO; AUTOPATCH_LOG_LEVEL=debug lowers it. */
void ap_log_set_level(enum ap_log_level min);

/* Send lines to fd instead of 2 (tests). */
void ap_log_set_fd(int fd);

/* Write one line. delivery may be NULL, job 0 when there is none. */
void ap_log(enum ap_log_level level, const char *delivery, int64_t job, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define ap_debug(...) ap_log(AP_LOG_DEBUG, NULL, 0, __VA_ARGS__)
#define ap_info(...)  ap_log(AP_LOG_INFO, NULL, 0, __VA_ARGS__)
#define ap_warn(...)  ap_log(AP_LOG_WARN, NULL, 0, __VA_ARGS__)
#define ap_err(...)   ap_log(AP_LOG_ERROR, NULL, 0, __VA_ARGS__)

#endif

/* SPDX-License-Identifier: MIT */
/* common/log.c - JSON-lines logger behind the redaction layer (see log.h). */
#include "common/log.h"

#include "common/buf.h"
#include "common/jsonnum.h"
#include "common/redact.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define LOG_LINE_CAP (64 * 1024)

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static enum ap_log_level log_min = AP_LOG_INFO;
static int log_fd = 2;

static const char *level_names[] = {"debug", "info", "warn", "error"};

void ap_log_set_level(enum ap_log_level min)
{
	log_min = min;
}

void ap_log_set_fd(int fd)
{
	log_fd = fd;
}

static void format_time(char *out, size_t n)
{
	struct timeval tv;
	struct tm tm;
	char base[64];

	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, n, "%.20s.%03dZ", base, (int)(tv.tv_usec / 1000) % 1000);
}

static void write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/* line and its newline in one write(2) where the descriptor takes it whole. */
static void write_line(int fd, const char *line, size_t n)
{
	struct iovec iov[2] = {{(void *)line, n}, {"\n", 1}};
	ssize_t w = writev(fd, iov, 2);

	if (w < 0)
		return;
	if ((size_t)w < n) {
		write_all(fd, line + w, n - (size_t)w);
		w = (ssize_t)n;
	}
	if ((size_t)w == n)
		write_all(fd, "\n", 1);
}

void ap_log(enum ap_log_level level, const char *delivery, int64_t job, const char *fmt, ...)
{
	ap_buf msg = AP_BUF_INIT(LOG_LINE_CAP);
	ap_buf clean = AP_BUF_INIT(LOG_LINE_CAP);
	char *safe_delivery = NULL;
	char when[48];
	cJSON *o;
	char *line;
	va_list ap;

	if (level < log_min)
		return;
	va_start(ap, fmt);
	if (ap_buf_vaddf(&msg, fmt, ap))
		ap_buf_adds(&msg, "(log message too long)");
	va_end(ap);
	/* Redact the raw text, before JSON escaping: a private-key block without an END line is
	 * masked to the end of the message, not to the end of the serialised line. Encoded and
	 * JSON-escaped secrets inside the message are registered variants, so they match too.
	 * If redaction fails the message is dropped, never written unredacted. */
	if (redact_append(&clean, msg.data ? msg.data : "", msg.len)) {
		ap_buf_reset(&clean);
		ap_buf_adds(&clean, "(log message dropped: redaction failed)");
	}
	if (delivery) {
		safe_delivery = redact_str(delivery);
		if (!safe_delivery)
			goto out_msg;
	}
	format_time(when, sizeof(when));

	o = cJSON_CreateObject();
	if (!o)
		goto out_msg;
	cJSON_AddStringToObject(o, "time", when);
	cJSON_AddStringToObject(o, "level", level_names[level]);
	cJSON_AddStringToObject(o, "msg", ap_buf_str(&clean));
	if (safe_delivery)
		cJSON_AddStringToObject(o, "delivery", safe_delivery);
	if (job)
		ap_json_add_int(o, "job", job);
	line = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (!line)
		goto out_msg;
	pthread_mutex_lock(&log_lock);
	write_line(log_fd, line, strlen(line));
	pthread_mutex_unlock(&log_lock);
	free(line);
out_msg:
	free(safe_delivery);
	ap_buf_release(&clean);
	ap_buf_release(&msg);
}

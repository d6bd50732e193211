/* SPDX-License-Identifier: MIT */
/* server/flow.c - a console flow's answer: a redirect with cookies, or a problem (flow.h). */
#include "server/flow.h"

#include "common/buf.h"
#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void flow_problem(flow_answer *a, int status, const char *title, const char *what, const char *todo)
{
	a->status = status;
	a->title = title;
	a->todo = todo;
	ap_excerpt(a->what, sizeof(a->what), what ? what : ""); /* only shown */
}

int flow_redirect(flow_answer *a, const char *location)
{
	int n = snprintf(a->location, sizeof(a->location), "%s", location);

	if (n < 0 || (size_t)n >= sizeof(a->location)) {
		a->location[0] = '\0';
		flow_problem(a, 500, "Cannot send you on", "The address to go to is too long.",
			     "check the server's URLs (GITHUB_URL, AUTOPATCH_CONSOLE_URL)");
		return ap_error_set(AP_EINVAL, "redirect location over %d bytes", FLOW_URL_MAX - 1);
	}
	a->status = 303;
	return 0;
}

int flow_cookie(flow_answer *a, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (a->ncookies >= FLOW_COOKIES)
		return ap_error_set(AP_EINVAL, "more than %d cookies in one answer", FLOW_COOKIES);
	va_start(ap, fmt);
	n = vsnprintf(a->cookies[a->ncookies], sizeof(a->cookies[0]), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(a->cookies[0])) {
		a->cookies[a->ncookies][0] = '\0';
		return ap_error_set(AP_EINVAL, "a cookie over %d bytes", FLOW_COOKIE_MAX - 1);
	}
	a->ncookies++;
	return 0;
}

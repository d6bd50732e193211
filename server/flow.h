/* SPDX-License-Identifier: MIT */
/* server/flow.h - what a console flow (the App registration, the sign-in) answers with.
 *
 * The flows (server/registration.c, server/signin.c) decide; the console (server/console.c)
 * draws. A flow fills a flow_answer with either a redirect (status 303, location and the
 * cookies to set) or a problem (an error status with a title, what went wrong and what to
 * do), and the console turns it into a page. Keeping HTML out of the flows keeps their
 * security checks short enough to read in one sitting.
 */
#ifndef AP_FLOW_H
#define AP_FLOW_H

#define FLOW_URL_MAX	2048
#define FLOW_COOKIE_MAX 512
#define FLOW_COOKIES	2
#define FLOW_WHAT_MAX	512

typedef struct flow_answer {
	int status; /* 303: go to location; 0: the flow drew nothing yet; else a problem */
	char location[FLOW_URL_MAX];
	char cookies[FLOW_COOKIES][FLOW_COOKIE_MAX]; /* Set-Cookie values */
	int ncookies;
	const char *title; /* of the problem (static text) */
	char what[FLOW_WHAT_MAX];
	const char *todo; /* static text */
} flow_answer;

/* A problem answer: status, title and todo are kept as given (static text), what is copied
 * (only shown: cut with a visible "..." past FLOW_WHAT_MAX - 1 bytes). */
void flow_problem(flow_answer *a, int status, const char *title, const char *what,
		  const char *todo);

/* A 303 to location. AP_EINVAL (and a 500 problem) when location does not fit. */
int flow_redirect(flow_answer *a, const char *location);

/* Add one Set-Cookie value. AP_EINVAL when there is no room or it does not fit (nothing is
 * added then). */
int flow_cookie(flow_answer *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif

/* SPDX-License-Identifier: MIT */
/* server/payload.h - a strict, single-pass JSON validator that extracts the few payload fields
 * routing needs.
 *
 * A general parser (cJSON) builds a tree of every value of a 12 KB delivery, a few hundred
 * allocations, to read a dozen fields: it was most of the CPU time per delivery. This scanner
 * checks the whole body against RFC 8259 (depth-limited) and copies out only the wanted values,
 * decoded. The first occurrence of a duplicate key wins (as with cJSON_GetObjectItem). The
 * fuzzer cross-checks it against cJSON.
 */
#ifndef AP_PAYLOAD_H
#define AP_PAYLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Nesting deeper than this is refused (GitHub payloads stay below 10). */
#define PL_DEPTH_MAX 64

enum pl_field {
	PL_ACTION,		/* action */
	PL_SENDER_TYPE,		/* sender.type */
	PL_INSTALLATION_ID,	/* installation.id */
	PL_LABEL_NAME,		/* label.name */
	PL_ISSUE_NUMBER,	/* issue.number */
	PL_ISSUE_PULL_REQUEST,	/* issue.pull_request (an object: the issue is a PR) */
	PL_COMMENT_BODY,	/* comment.body */
	PL_COMMENT_ASSOCIATION, /* comment.author_association */
	PL_COMMENT_ID,		/* comment.id */
	PL_REPO_FULL_NAME,	/* repository.full_name */
	PL_REPO_ID,		/* repository.id */
	PL_PR_NUMBER,		/* pull_request.number */
	PL_PR_HEAD_REF,		/* pull_request.head.ref */
	PL_ISSUE_TITLE,		/* issue.title */
	PL_PR_TITLE,		/* pull_request.title */
	PL_NFIELDS
};

typedef struct pl_fields {
	char *str[PL_NFIELDS];	 /* decoded, malloc'd; NULL when absent, not a string, or
				  * containing U+0000 */
	int64_t id[PL_NFIELDS];	 /* positive integers up to 2^53 exactly; 0 otherwise */
	bool object[PL_NFIELDS]; /* the value is an object */
} pl_fields;

/* Validate body[0..len) as one JSON object (surrounding whitespace allowed) and fill *out.
 * Returns 0, AP_EINVAL when it is not valid JSON or not an object (nothing to free), or
 * AP_ENOMEM. On success release *out with pl_fields_release(). */
int pl_scan(const char *body, size_t len, pl_fields *out);

void pl_fields_release(pl_fields *f);

/* For tests only (and the fuzzer). The dotted path of a field ("comment.body"). */
const char *pl__field_path(enum pl_field f);

#endif

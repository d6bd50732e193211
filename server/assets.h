/* SPDX-License-Identifier: MIT */
/* server/assets.h - files compiled into the binary for the admin listener (scripts/embed.py
 * at build time, from server/assets/ and deploy/app.yml): nothing is read at run time and a
 * user runs no build step of their own. NUL-terminated text. */
#ifndef AP_ASSETS_H
#define AP_ASSETS_H

extern const char asset_console[];	/* server/assets/console.css */
extern const char asset_console_live[]; /* server/assets/console-live.js */
extern const char asset_app[];		/* deploy/app.yml as JSON: the App manifest */

#endif

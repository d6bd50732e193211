/* SPDX-License-Identifier: MIT */
/* common/config.h - settings from `.env` plus the environment (the environment wins).
 *
 * Names are the ones in ARCHITECTURE.md (Probot's where Probot has one). The store is generic:
 * each module reads and validates the names it owns, and a failed read returns AP_EINVAL with
 * one sentence that says what to fix (which `main` prints before exiting with code 2).
 */
#ifndef AP_CONFIG_H
#define AP_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

typedef struct ap_config ap_config;

/* Read env_file (NULL means "./.env"; a missing file is fine, an unreadable or malformed one is
 * an error), then overlay every environment variable. *out is freed with cfg_free(). */
int cfg_load(ap_config **out, const char *env_file);

/* An empty config with no file and no environment (tests), filled with cfg_set(). */
int cfg_new_empty(ap_config **out);

/* Set or replace a value (copied). */
int cfg_set(ap_config *c, const char *name, const char *value);

/* The value, or NULL when unset or empty. Valid until the config is freed or the name set. */
const char *cfg_get(const ap_config *c, const char *name);

/* The value, or def when unset or empty. */
const char *cfg_get_or(const ap_config *c, const char *name, const char *def);

/* Integer in [min, max], def when unset. AP_EINVAL with a sentence when not a number or out of
 * range. */
int cfg_get_int(const ap_config *c, const char *name, int64_t def, int64_t min, int64_t max,
		int64_t *out);

/* Byte size with an optional k/m/g suffix (powers of 1024), def when unset. */
int cfg_get_bytes(const ap_config *c, const char *name, int64_t def, int64_t min, int64_t max,
		  int64_t *out);

/* Boolean: 1/0, true/false, yes/no, on/off; def when unset. */
int cfg_get_bool(const ap_config *c, const char *name, bool def, bool *out);

/* Register every credential the config holds (webhook secrets, private key and the key file's
 * contents, LLM API keys, GitHub tokens) with the redaction layer. */
int cfg_register_secrets(const ap_config *c);

/* Accepts NULL. */
void cfg_free(ap_config *c);

#endif

/* SPDX-License-Identifier: MIT */
/* common/config.h - settings from `.env` plus the environment (the environment wins), and the
 * table of every setting autopatch reads.
 *
 * Names follow Probot's where Probot has one. The table in config.c is the single source of
 * each setting's kind, default and one-line description:
 * the accessors below take the default from it, `autopatch settings --json` prints it, and
 * tests/e2e/test_settings_documented.py checks .env.example against it. Reading or setting a
 * name that is not in the table is a programmer error: the process prints the name and
 * aborts (add the setting to the table). Each module still validates the values it owns; a
 * failed read returns AP_EINVAL with one sentence that says what to fix (which `main` prints
 * before exiting with code 2).
 */
#ifndef AP_CONFIG_H
#define AP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ap_config ap_config;

/* How a setting's value is read (which accessor applies). */
enum cfg_kind {
	CFG_STR,   /* text, read with cfg_str() */
	CFG_INT,   /* whole number, cfg_int() */
	CFG_BYTES, /* byte size with an optional k/m/g suffix, cfg_bytes() */
	CFG_BOOL,  /* 1/0, true/false, yes/no, on/off, cfg_bool() */
};

/* Flags of a setting. */
#define CFG_SECRET	0x1u /* the value is a credential: registered with the redaction layer */
#define CFG_SECRET_FILE 0x2u /* the value names a file whose contents are a credential */
#define CFG_ENV_ONLY	0x4u /* read from the environment before .env is loaded (cfg_env) */
#define CFG_SECRET_URI	0x8u /* a URI whose password (scheme://user:PASSWORD@host) is one */

/* One row of the table. All strings are static. */
typedef struct cfg_setting {
	const char *name;   /* "AUTOPATCH_WORKERS" */
	enum cfg_kind kind; /* which accessor reads it */
	const char *def;    /* the default as written in .env ("2", "16m", "false"); NULL when
			     * there is none or it is computed (doc says how) */
	unsigned flags;	    /* CFG_SECRET, CFG_SECRET_FILE, CFG_ENV_ONLY, CFG_SECRET_URI */
	const char *doc;    /* one line: what it does, and the computed default if any */
} cfg_setting;

/* The table, in .env.example order; *n gets its length. Static storage, never NULL. */
const cfg_setting *cfg_settings(size_t *n);

/* The row of name, or NULL when name is not a setting. */
const cfg_setting *cfg_setting_find(const char *name);

/* Read env_file (NULL means "./.env"; a missing file is fine, an unreadable or malformed one is
 * an error), then the credentials file (AUTOPATCH_CREDENTIALS_FILE from the environment or
 * env_file, else its default; written by the registration page; missing is fine), then
 * overlay every environment variable. *out is freed with cfg_free(). */
int cfg_load(ap_config **out, const char *env_file);

/* An empty config with no file and no environment (tests), filled with cfg_set(). */
int cfg_new_empty(ap_config **out);

/* Set or replace the value of a setting in the table (copied). 0 or AP_ENOMEM. */
int cfg_set(ap_config *c, const char *name, const char *value);

/* Whether name has a non-empty value (from .env, the environment or cfg_set). */
bool cfg_is_set(const ap_config *c, const char *name);

/* The value, or the table's default when unset or empty (NULL when the table has none).
 * Borrowed: valid until the config is freed or the name set again. Any kind may be read as
 * text. */
const char *cfg_str(const ap_config *c, const char *name);

/* A CFG_INT setting in [min, max], the table's default when unset. AP_EINVAL with a sentence
 * when not a whole number or out of range; *out is the default then. */
int cfg_int(const ap_config *c, const char *name, int64_t min, int64_t max, int64_t *out);

/* A CFG_BYTES setting (powers of 1024 for k/m/g) in [min, max] bytes, the table's default
 * when unset. AP_EINVAL with a sentence otherwise. */
int cfg_bytes(const ap_config *c, const char *name, int64_t min, int64_t max, int64_t *out);

/* A CFG_BOOL setting, the table's default when unset. AP_EINVAL with a sentence otherwise. */
int cfg_bool(const ap_config *c, const char *name, bool *out);

/* A CFG_ENV_ONLY setting from the process environment (for what is read before cfg_load):
 * the variable as set (even empty), else the table's default. Borrowed from the environment. */
const char *cfg_env(const char *name);

/* Register every credential the config holds (the CFG_SECRET values and the contents of the
 * CFG_SECRET_FILE files) with the redaction layer. */
int cfg_register_secrets(const ap_config *c);

/* Accepts NULL. */
void cfg_free(ap_config *c);

#endif

/* SPDX-License-Identifier: MIT */
/* agents/cost.h - what model calls cost: per-model prices, the arithmetic, money as text, and
 * the most one job can cost.
 *
 * Money is an integer count of micro-dollars (1e-6 USD) everywhere, so sums are exact and the
 * database stores integers. Prices are kept in pico-dollars per token (1e-12 USD), which is
 * the same number as micro-dollars per million tokens: "2.5" USD per million tokens is
 * 2500000. Costs are rounded up to the next micro-dollar, never down.
 *
 * Settings: AUTOPATCH_PRICES ("MODEL=IN/OUT,..." in USD per million input / output tokens;
 * the model "*" prices every model not named), AUTOPATCH_DAILY_BUDGET_USD and
 * AUTOPATCH_REPO_DAILY_BUDGET_USD (read by cost_budgets_from_cfg; "0" means no limit).
 */
#ifndef AP_COST_H
#define AP_COST_H

#include "common/config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Limits of AUTOPATCH_PRICES: the whole text, the entries, one model name, one price. */
#define COST_SPEC_MAX	   (64 * 1024)
#define COST_ENTRIES_MAX   256
#define COST_MODEL_MAX	   200
#define COST_PRICE_MAX_USD 100000     /* per million tokens */
#define COST_USD_MAX	   1000000000 /* a budget */

/* One model's price: pico-dollars per token (= micro-dollars per million tokens). */
typedef struct cost_price {
	int64_t in, out;
} cost_price;

typedef struct cost_table cost_table;

/* Parse spec ("gpt-4o=2.5/10, claude-sonnet-4-20250514=3/15, *=1/4"; NULL or blank = no
 * prices). Model names are any characters but '=', ',' and white space; a price is a decimal
 * with at most 6 decimal places, at most COST_PRICE_MAX_USD. A repeated model is an error.
 * 0, or AP_EINVAL with a sentence naming the bad entry (AP_ETOOBIG over the limits above).
 * *out is freed with cost_table_free(). */
int cost_table_parse(cost_table **out, const char *spec);
void cost_table_free(cost_table *t);

/* The price of model: its own entry, else the "*" entry. false when neither exists. */
bool cost_price_of(const cost_table *t, const char *model, cost_price *out);

/* ceil((tokens_in * p.in + tokens_out * p.out) / 1e6) micro-dollars; negative token counts
 * count as 0, and the result saturates at INT64_MAX. */
int64_t cost_micro(const cost_price *p, int64_t tokens_in, int64_t tokens_out);

/* "12.5" -> 12500000 micro-dollars. At most 6 decimal places, no sign, no exponent, at most
 * COST_USD_MAX. 0 or AP_EINVAL (no message: the caller names the setting). */
int cost_parse_usd(const char *s, int64_t *micro);

/* "$0.0123", "$1.50", "$12": at least two decimals below $1000 unless whole, trailing zeros
 * dropped. Writes at most n bytes (always terminated); returns buf. */
char *cost_format_usd(int64_t micro, char *buf, size_t n);

/* What one job may cost and against which daily budgets (all in micro-dollars). */
typedef struct cost_plan {
	char model[COST_MODEL_MAX + 1]; /* AUTOPATCH_LLM_MODEL or the provider's default */
	bool priced;			/* AUTOPATCH_PRICES names the model (or has "*") */
	cost_price price;
	int64_t max_tokens; /* AUTOPATCH_MAX_TOKENS */
	int64_t max_micro;  /* the most a job can cost: max_tokens at the dearer price */
	int64_t global_cap; /* AUTOPATCH_DAILY_BUDGET_USD, 0 = none */
	int64_t repo_cap;   /* AUTOPATCH_REPO_DAILY_BUDGET_USD, 0 = none */
} cost_plan;

/* Read the settings above and AUTOPATCH_MAX_TOKENS into *out. AP_EINVAL with a sentence for a
 * bad value, and when a budget is set but the model has no price (a budget must never treat
 * spending as free). */
int cost_plan_from_cfg(const ap_config *cfg, cost_plan *out);

#endif

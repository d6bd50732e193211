/* SPDX-License-Identifier: MIT */
/* agents/cost.c - prices, cost arithmetic and the per-job cost plan (see cost.h). */
#include "agents/cost.h"

#include "agents/llm.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/money.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__extension__ typedef unsigned __int128 cost_u128;

struct cost_table {
	size_t n;
	struct {
		char *model;
		cost_price price;
	} e[COST_ENTRIES_MAX];
};

void cost_table_free(cost_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++)
		free(t->e[i].model);
	free(t);
}

int cost_parse_usd(const char *s, int64_t *micro)
{
	*micro = 0;
	if (!s)
		return AP_EINVAL;
	return ap_money_parse(s, strlen(s), COST_USD_MAX, micro);
}

static const char *skip_space(const char *p, const char *end)
{
	while (p < end && isspace((unsigned char)*p))
		p++;
	return p;
}

static const char *trim_end(const char *s, const char *p)
{
	while (p > s && isspace((unsigned char)p[-1]))
		p--;
	return p;
}

/* One "MODEL=IN/OUT" entry of [s, end), already split at the commas. */
static int parse_entry(cost_table *t, const char *s, const char *end)
{
	const char *eq, *slash, *m_end;
	cost_price p;

	s = skip_space(s, end);
	end = trim_end(s, end);
	eq = memchr(s, '=', (size_t)(end - s));
	if (!eq)
		return ap_error_set(AP_EINVAL,
				    "AUTOPATCH_PRICES: \"%.*s\" is not MODEL=IN/OUT (USD per "
				    "million input / output tokens)",
				    (int)(end - s > 80 ? 80 : end - s), s);
	m_end = trim_end(s, eq);
	if (m_end == s)
		return ap_error_set(AP_EINVAL, "AUTOPATCH_PRICES: an entry has no model name");
	if (m_end - s > COST_MODEL_MAX)
		return ap_error_set(AP_ETOOBIG, "AUTOPATCH_PRICES: a model name is longer than %d",
				    COST_MODEL_MAX);
	for (const char *c = s; c < m_end; c++)
		if (isspace((unsigned char)*c) || (unsigned char)*c < 0x20 || *c == '/')
			return ap_error_set(AP_EINVAL,
					    "AUTOPATCH_PRICES: model \"%.*s\" contains a space, "
					    "a slash or a control character",
					    (int)(m_end - s), s);
	eq = skip_space(eq + 1, end);
	slash = memchr(eq, '/', (size_t)(end - eq));
	if (!slash ||
	    ap_money_parse(eq, (size_t)(trim_end(eq, slash) - eq), COST_PRICE_MAX_USD, &p.in) ||
	    ap_money_parse(skip_space(slash + 1, end), (size_t)(end - skip_space(slash + 1, end)),
			   COST_PRICE_MAX_USD, &p.out))
		return ap_error_set(AP_EINVAL,
				    "AUTOPATCH_PRICES: the price of %.*s must be IN/OUT, two "
				    "decimals in USD per million tokens such as 2.5/10 (at most "
				    "%d, 6 decimal places)",
				    (int)(m_end - s), s, COST_PRICE_MAX_USD);
	for (size_t i = 0; i < t->n; i++)
		if (strlen(t->e[i].model) == (size_t)(m_end - s) &&
		    memcmp(t->e[i].model, s, (size_t)(m_end - s)) == 0)
			return ap_error_set(AP_EINVAL, "AUTOPATCH_PRICES: %.*s is priced twice",
					    (int)(m_end - s), s);
	if (t->n == COST_ENTRIES_MAX)
		return ap_error_set(AP_ETOOBIG, "AUTOPATCH_PRICES: more than %d models",
				    COST_ENTRIES_MAX);
	t->e[t->n].model = strndup(s, (size_t)(m_end - s));
	if (!t->e[t->n].model)
		return ap_error_set(AP_ENOMEM, "out of memory");
	t->e[t->n].price = p;
	t->n++;
	return 0;
}

int cost_table_parse(cost_table **out, const char *spec)
{
	cost_table *t;
	const char *p, *end;
	size_t len;
	int rc = 0;

	*out = NULL;
	len = spec ? strlen(spec) : 0;
	if (len > COST_SPEC_MAX)
		return ap_error_set(AP_ETOOBIG, "AUTOPATCH_PRICES is longer than %d bytes",
				    COST_SPEC_MAX);
	t = calloc(1, sizeof(*t));
	if (!t)
		return ap_error_set(AP_ENOMEM, "out of memory");
	p = spec;
	end = spec ? spec + len : NULL;
	while (p && p < end) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		const char *stop = comma ? comma : end;

		/* Blank entries (a trailing comma, an empty setting) are allowed. */
		if (skip_space(p, stop) != stop && (rc = parse_entry(t, p, stop)))
			goto out_free;
		p = comma ? comma + 1 : end;
	}
	*out = t;
	return 0;
out_free:
	cost_table_free(t);
	return rc;
}

bool cost_price_of(const cost_table *t, const char *model, cost_price *out)
{
	const cost_price *any = NULL;

	for (size_t i = 0; t && i < t->n; i++) {
		if (model && strcmp(t->e[i].model, model) == 0) {
			*out = t->e[i].price;
			return true;
		}
		if (strcmp(t->e[i].model, "*") == 0)
			any = &t->e[i].price;
	}
	if (!any)
		return false;
	*out = *any;
	return true;
}

int64_t cost_micro(const cost_price *p, int64_t tokens_in, int64_t tokens_out)
{
	cost_u128 pico = 0, micro;

	if (tokens_in > 0 && p->in > 0)
		pico += (cost_u128)tokens_in * (cost_u128)p->in;
	if (tokens_out > 0 && p->out > 0)
		pico += (cost_u128)tokens_out * (cost_u128)p->out;
	micro = (pico + 999999) / 1000000;
	return micro > (cost_u128)INT64_MAX ? INT64_MAX : (int64_t)micro;
}

char *cost_format_usd(int64_t micro, char *buf, size_t n)
{
	return ap_money_format(micro, buf, n);
}

static int budget_setting(const ap_config *cfg, const char *name, int64_t *out)
{
	const char *v = cfg_str(cfg, name);

	if (cost_parse_usd(v ? v : "0", out))
		return ap_error_set(AP_EINVAL,
				    "%s must be an amount in USD such as 20 or 2.50 (0 = no "
				    "limit), not \"%.40s\"",
				    name, v);
	return 0;
}

int cost_plan_from_cfg(const ap_config *cfg, cost_plan *out)
{
	cost_table *t = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	/* A cut name would be priced as another model. */
	if (ap_fmt(out->model, sizeof(out->model), "%s", llm_model_of(cfg)))
		return ap_error_set(AP_EINVAL, "AUTOPATCH_LLM_MODEL is longer than %d bytes",
				    COST_MODEL_MAX);
	if ((rc = cfg_int(cfg, "AUTOPATCH_MAX_TOKENS", 1000, INT64_C(1) << 40, &out->max_tokens)) ||
	    (rc = budget_setting(cfg, "AUTOPATCH_DAILY_BUDGET_USD", &out->global_cap)) ||
	    (rc = budget_setting(cfg, "AUTOPATCH_REPO_DAILY_BUDGET_USD", &out->repo_cap)) ||
	    (rc = cost_table_parse(&t, cfg_str(cfg, "AUTOPATCH_PRICES"))))
		return rc;
	out->priced = cost_price_of(t, out->model, &out->price);
	cost_table_free(t);
	if (out->priced) {
		int64_t all_in = cost_micro(&out->price, out->max_tokens, 0);
		int64_t all_out = cost_micro(&out->price, 0, out->max_tokens);

		out->max_micro = all_in > all_out ? all_in : all_out;
	}
	if ((out->global_cap || out->repo_cap) && !out->priced)
		return ap_error_set(AP_EINVAL,
				    "a daily budget is set but AUTOPATCH_PRICES has no price for "
				    "model %s (add %s=IN/OUT or *=IN/OUT, USD per million tokens)",
				    out->model, out->model);
	return 0;
}

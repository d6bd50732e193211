/* SPDX-License-Identifier: MIT */
/* tests/agents/test_cost.c - the price parser (AUTOPATCH_PRICES), money parsing and
 * formatting, the cost arithmetic (rounded up, exact in micro-dollars) and the cost plan. */
#include "agents/cost.h"
#include "common/config.h"
#include "common/err.h"
#include "common/money.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static cost_price price_of(const char *spec, const char *model)
{
	cost_table *t = NULL;
	cost_price p = {-1, -1};

	assert_int_equal(cost_table_parse(&t, spec), 0);
	assert_true(cost_price_of(t, model, &p));
	cost_table_free(t);
	return p;
}

static void test_cost_prices_parse(void **state)
{
	cost_price p;
	cost_table *t = NULL;

	(void)state;
	p = price_of("gpt-4o=2.5/10,claude-sonnet-4-20250514=3/15", "gpt-4o");
	assert_int_equal(p.in, 2500000);
	assert_int_equal(p.out, 10000000);
	p = price_of("gpt-4o=2.5/10,claude-sonnet-4-20250514=3/15", "claude-sonnet-4-20250514");
	assert_int_equal(p.in, 3000000);
	assert_int_equal(p.out, 15000000);
	/* white space around everything, a trailing comma, six decimals */
	p = price_of("  a = 0.000001 / 0.15 , ", "a");
	assert_int_equal(p.in, 1);
	assert_int_equal(p.out, 150000);
	/* "*" prices every other model; a named model wins over it */
	p = price_of("*=1/2,m=5/6", "other");
	assert_int_equal(p.in, 1000000);
	assert_int_equal(p.out, 2000000);
	p = price_of("*=1/2,m=5/6", "m");
	assert_int_equal(p.in, 5000000);
	/* names with dots, colons and brackets (Ollama tags, Bedrock ids) */
	p = price_of("qwen2.5-coder:32b=0/0", "qwen2.5-coder:32b");
	assert_int_equal(p.in, 0);
	p = price_of("m=100000/0", "m");
	assert_int_equal(p.in, INT64_C(100000000000));

	/* no prices at all: nothing is priced */
	assert_int_equal(cost_table_parse(&t, NULL), 0);
	assert_false(cost_price_of(t, "gpt-4o", &p));
	cost_table_free(t);
	assert_int_equal(cost_table_parse(&t, " , ,"), 0);
	assert_false(cost_price_of(t, "gpt-4o", &p));
	cost_table_free(t);
	assert_int_equal(cost_table_parse(&t, "a=1/1"), 0);
	assert_false(cost_price_of(t, "b", &p));
	assert_false(cost_price_of(t, NULL, &p));
	cost_table_free(t);
}

static void test_cost_prices_refused(void **state)
{
	static const char *const bad[] = {
	    "gpt-4o",			/* no = */
	    "=1/2",			/* no model */
	    "m=1",			/* no output price */
	    "m=/2",			/* empty input price */
	    "m=1/",			/* empty output price */
	    "m=-1/2",			/* negative */
	    "m=1e3/2",			/* exponent */
	    "m=1.2.3/2",		/* two points */
	    "m=.5/2",			/* no leading digit */
	    "m=5./2",			/* no decimals after the point */
	    "m=0.0000001/2",		/* seven decimals */
	    "m=100000.01/1",		/* over the maximum */
	    "m=99999999999999999999/1", /* overflow */
	    "m=1/2,m=3/4",		/* priced twice */
	    "my model=1/2",		/* space in the name */
	    "openai/gpt=1/2",		/* slash in the name */
	    "m=1/2/3",			/* three prices */
	    "m=0x10/1",			/* hex */
	    "m=1 2/3",			/* a space inside a number */
	};
	cost_table *t = (cost_table *)&t;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = cost_table_parse(&t, bad[i]);

		if (rc == 0)
			fail_msg("accepted \"%s\"", bad[i]);
		assert_true(rc == AP_EINVAL || rc == AP_ETOOBIG);
		assert_null(t);
		assert_non_null(strstr(ap_error_last(), "AUTOPATCH_PRICES"));
	}
}

static void test_cost_prices_limits(void **state)
{
	char *spec = malloc(COST_SPEC_MAX + 2), name[COST_MODEL_MAX + 8];
	cost_table *t = NULL;
	size_t n = 0;

	(void)state;
	/* too long as a whole */
	memset(spec, ',', COST_SPEC_MAX + 1);
	spec[COST_SPEC_MAX + 1] = '\0';
	assert_int_equal(cost_table_parse(&t, spec), AP_ETOOBIG);
	/* too many models */
	for (int i = 0; i <= COST_ENTRIES_MAX; i++)
		n += (size_t)sprintf(spec + n, "m%d=1/1,", i);
	assert_int_equal(cost_table_parse(&t, spec), AP_ETOOBIG);
	/* exactly the maximum of models */
	n = 0;
	for (int i = 0; i < COST_ENTRIES_MAX; i++)
		n += (size_t)sprintf(spec + n, "m%d=1/1,", i);
	assert_int_equal(cost_table_parse(&t, spec), 0);
	cost_table_free(t);
	/* a model name over the cap */
	memset(name, 'x', COST_MODEL_MAX + 1);
	snprintf(name + COST_MODEL_MAX + 1, 7, "=1/1");
	assert_int_equal(cost_table_parse(&t, name), AP_ETOOBIG);
	free(spec);
}

static void test_cost_arithmetic(void **state)
{
	cost_price p = {2500000, 10000000}; /* $2.50 / $10 per million */
	cost_price tiny = {1, 0};	    /* $0.000001 per million input tokens */
	cost_price huge = {INT64_C(100000000000), INT64_C(100000000000)};

	(void)state;
	/* 1M in + 1M out = $12.50 */
	assert_int_equal(cost_micro(&p, 1000000, 1000000), 12500000);
	/* 1000 in = $0.0025, 200 out = $0.002 */
	assert_int_equal(cost_micro(&p, 1000, 200), 4500);
	/* never rounded down: one input token costs 2.5 micro-dollars -> 3 */
	assert_int_equal(cost_micro(&p, 1, 0), 3);
	assert_int_equal(cost_micro(&tiny, 1, 0), 1);
	assert_int_equal(cost_micro(&tiny, 1000000, 0), 1);
	assert_int_equal(cost_micro(&tiny, 1000001, 0), 2);
	/* nothing costs nothing; negative counts count as nothing */
	assert_int_equal(cost_micro(&p, 0, 0), 0);
	assert_int_equal(cost_micro(&p, -5, -5), 0);
	/* no overflow with the largest budgets and prices */
	assert_int_equal(cost_micro(&huge, INT64_C(1) << 40, INT64_C(1) << 40),
			 INT64_C(219902325555200000));
	assert_int_equal(cost_micro(&huge, INT64_MAX, INT64_MAX), INT64_MAX);
	/* the sum of two calls priced at once equals pricing the totals */
	assert_int_equal(cost_micro(&p, 3000, 700),
			 cost_micro(&p, 1000, 200) + cost_micro(&p, 2000, 500));
}

static void test_cost_usd(void **state)
{
	char buf[32];
	int64_t v = -1;
	static const char *const bad[] = {"",	"-1",	     "1e3",	   "$5",  "1.",
					  ".5", "1.0000001", "1000000001", "12 ", "abc"};

	(void)state;
	assert_int_equal(cost_parse_usd("0", &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(cost_parse_usd("20", &v), 0);
	assert_int_equal(v, 20000000);
	assert_int_equal(cost_parse_usd("0.05", &v), 0);
	assert_int_equal(v, 50000);
	assert_int_equal(cost_parse_usd("1000000000", &v), 0);
	assert_int_equal(v, INT64_C(1000000000000000));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (cost_parse_usd(bad[i], &v) == 0)
			fail_msg("accepted \"%s\"", bad[i]);
	assert_int_not_equal(cost_parse_usd(NULL, &v), 0);

	assert_string_equal(cost_format_usd(0, buf, sizeof(buf)), "$0.00");
	assert_string_equal(cost_format_usd(1, buf, sizeof(buf)), "$0.000001");
	assert_string_equal(cost_format_usd(12345, buf, sizeof(buf)), "$0.012345");
	assert_string_equal(cost_format_usd(1500000, buf, sizeof(buf)), "$1.50");
	assert_string_equal(cost_format_usd(12000000, buf, sizeof(buf)), "$12.00");
	assert_string_equal(cost_format_usd(INT64_C(5000000000), buf, sizeof(buf)), "$5000");
	assert_string_equal(cost_format_usd(-3, buf, sizeof(buf)), "$0.00");
	/* The largest amount fits AP_MONEY_TEXT_MAX whole. */
	{
		char most[AP_MONEY_TEXT_MAX];

		assert_string_equal(cost_format_usd(INT64_MAX, most, sizeof(most)),
				    "$9223372036854.775807");
	}
	/* capped output stays terminated */
	assert_string_equal(cost_format_usd(1500000, buf, 4), "$1.");
}

static void test_cost_plan(void **state)
{
	ap_config *cfg = NULL;
	cost_plan pl;

	(void)state;
	assert_int_equal(cfg_new_empty(&cfg), 0);
	/* nothing set: unpriced, no budgets, fine */
	assert_int_equal(cost_plan_from_cfg(cfg, &pl), 0);
	assert_false(pl.priced);
	assert_string_equal(pl.model, "gpt-4o");
	assert_int_equal(pl.global_cap, 0);
	{
		/* a model name too long for the plan is refused, not cut (and priced as another) */
		char model[COST_MODEL_MAX + 2];
		ap_config *c2 = NULL;

		assert_int_equal(cfg_new_empty(&c2), 0);
		memset(model, 'm', sizeof(model) - 1);
		model[sizeof(model) - 1] = '\0';
		cfg_set(c2, "AUTOPATCH_LLM_MODEL", model);
		assert_int_equal(cost_plan_from_cfg(c2, &pl), AP_EINVAL);
		assert_non_null(strstr(ap_error_last(), "AUTOPATCH_LLM_MODEL is longer than"));
		model[COST_MODEL_MAX] = '\0';
		cfg_set(c2, "AUTOPATCH_LLM_MODEL", model);
		assert_int_equal(cost_plan_from_cfg(c2, &pl), 0);
		assert_int_equal(strlen(pl.model), COST_MODEL_MAX);
		cfg_free(c2);
	}
	/* a budget without a price for the model is refused (never free) */
	cfg_set(cfg, "AUTOPATCH_DAILY_BUDGET_USD", "5");
	assert_int_equal(cost_plan_from_cfg(cfg, &pl), AP_EINVAL);
	assert_non_null(strstr(ap_error_last(), "gpt-4o"));
	cfg_set(cfg, "AUTOPATCH_PRICES", "other=1/1");
	assert_int_equal(cost_plan_from_cfg(cfg, &pl), AP_EINVAL);
	/* the maximum of a job: AUTOPATCH_MAX_TOKENS at the dearer price */
	cfg_set(cfg, "AUTOPATCH_PRICES", "gpt-4o=2.5/10");
	cfg_set(cfg, "AUTOPATCH_MAX_TOKENS", "200000");
	cfg_set(cfg, "AUTOPATCH_REPO_DAILY_BUDGET_USD", "0.5");
	assert_int_equal(cost_plan_from_cfg(cfg, &pl), 0);
	assert_true(pl.priced);
	assert_int_equal(pl.max_micro, 2000000);
	assert_int_equal(pl.global_cap, 5000000);
	assert_int_equal(pl.repo_cap, 500000);
	/* the provider's default model is the one priced */
	cfg_set(cfg, "AUTOPATCH_LLM_PROVIDER", "anthropic");
	cfg_set(cfg, "AUTOPATCH_PRICES", "claude-sonnet-4-20250514=3/15");
	assert_int_equal(cost_plan_from_cfg(cfg, &pl), 0);
	assert_int_equal(pl.max_micro, 3000000);
	/* bad budget values name the setting */
	cfg_set(cfg, "AUTOPATCH_DAILY_BUDGET_USD", "-1");
	assert_int_equal(cost_plan_from_cfg(cfg, &pl), AP_EINVAL);
	assert_non_null(strstr(ap_error_last(), "AUTOPATCH_DAILY_BUDGET_USD"));
	cfg_free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cost_prices_parse),  cmocka_unit_test(test_cost_prices_refused),
	    cmocka_unit_test(test_cost_prices_limits), cmocka_unit_test(test_cost_arithmetic),
	    cmocka_unit_test(test_cost_usd),	       cmocka_unit_test(test_cost_plan),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

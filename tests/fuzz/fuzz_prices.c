/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz_prices.c - the AUTOPATCH_PRICES parser and the money parser on arbitrary
 * text: no crash, no leak; an accepted table prices every model it names with prices within
 * the cap, and the cost arithmetic on them never goes negative or decreases with more tokens. */
#include "agents/cost.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	cost_table *t = NULL;
	cost_price p;
	int64_t usd;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	if (cost_table_parse(&t, s) == 0) {
		const char *name = s, *eq = strchr(s, '=');
		char model[COST_MODEL_MAX + 1] = "";

		if (eq && (size_t)(eq - name) <= COST_MODEL_MAX) {
			memcpy(model, name, (size_t)(eq - name));
			model[eq - name] = '\0';
		}
		if (cost_price_of(t, model, &p) || cost_price_of(t, "*", &p)) {
			int64_t a = cost_micro(&p, 1000, 1000), b = cost_micro(&p, 2000, 2000);

			if (p.in < 0 || p.out < 0 || p.in > (int64_t)COST_PRICE_MAX_USD * 1000000 ||
			    p.out > (int64_t)COST_PRICE_MAX_USD * 1000000 || a < 0 || b < a)
				abort();
		}
		cost_table_free(t);
	} else if (t) {
		abort(); /* a failed parse leaves *out NULL */
	}
	if (cost_parse_usd(s, &usd) == 0 && (usd < 0 || usd > (int64_t)COST_USD_MAX * 1000000))
		abort();
	free(s);
	return 0;
}

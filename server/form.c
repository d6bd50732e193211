/* SPDX-License-Identifier: MIT */
/* server/form.c - form, query string and Cookie parsing (see form.h). */
#include "server/form.h"

#include "common/err.h"

#include <stdbool.h>
#include <string.h>

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Decode in[0..len) into out[0..cap) (NUL-terminated). */
static int decode(const char *in, size_t len, char *out, size_t cap)
{
	size_t j = 0;

	for (size_t i = 0; i < len; i++) {
		char c = in[i];

		if (c == '+') {
			c = ' ';
		} else if (c == '%') {
			int hi, lo;

			if (i + 2 >= len)
				return AP_EINVAL;
			hi = hexval(in[i + 1]);
			lo = hexval(in[i + 2]);
			if (hi < 0 || lo < 0)
				return AP_EINVAL;
			c = (char)(hi * 16 + lo);
			i += 2;
		}
		if (c == '\0')
			return AP_EINVAL;
		if (j + 1 >= cap)
			return AP_ETOOBIG;
		out[j++] = c;
	}
	if (cap == 0)
		return AP_ETOOBIG;
	out[j] = '\0';
	return 0;
}

int form_get(const char *in, size_t len, const char *name, char *out, size_t cap)
{
	size_t nlen = strlen(name), i = 0;

	if (cap)
		out[0] = '\0';
	while (in && i < len) {
		const char *pair = in + i, *amp = memchr(pair, '&', len - i);
		size_t plen = amp ? (size_t)(amp - pair) : len - i;
		const char *eq = memchr(pair, '=', plen);
		size_t klen = eq ? (size_t)(eq - pair) : plen;

		if (klen == nlen && memcmp(pair, name, nlen) == 0) {
			if (!eq)
				return decode("", 0, out, cap);
			return decode(eq + 1, plen - klen - 1, out, cap);
		}
		i += plen + 1;
	}
	return AP_ENOTFOUND;
}

static bool cookie_char(unsigned char c)
{
	return c > 0x20 && c < 0x7f && c != '"' && c != ',' && c != ';' && c != '\\';
}

int form_cookie(const char *header, const char *name, char *out, size_t cap)
{
	size_t nlen = strlen(name);
	const char *p = header;

	if (cap)
		out[0] = '\0';
	while (p && *p) {
		const char *end, *v;
		size_t vlen;

		while (*p == ' ' || *p == '\t' || *p == ';')
			p++;
		end = strchr(p, ';');
		if (!end)
			end = p + strlen(p);
		if ((size_t)(end - p) > nlen && strncmp(p, name, nlen) == 0 && p[nlen] == '=') {
			v = p + nlen + 1;
			vlen = (size_t)(end - v);
			while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
				vlen--;
			if (vlen >= 2 && v[0] == '"' && v[vlen - 1] == '"') {
				v++;
				vlen -= 2;
			}
			for (size_t i = 0; i < vlen; i++)
				if (!cookie_char((unsigned char)v[i]))
					return AP_EINVAL;
			if (vlen + 1 > cap)
				return AP_ETOOBIG;
			memcpy(out, v, vlen);
			out[vlen] = '\0';
			return 0;
		}
		p = end;
	}
	return AP_ENOTFOUND;
}

int form_escape(ap_buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	int rc = 0;

	for (; !rc && s && *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_' || ch == '~')
			rc = ap_buf_add(b, s, 1);
		else
			rc = ap_buf_addf(b, "%%%c%c", hex[ch >> 4], hex[ch & 15]);
	}
	return rc;
}

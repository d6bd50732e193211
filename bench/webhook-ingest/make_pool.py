#!/usr/bin/python3
"""bench/webhook-ingest/make_pool.py - write a pool of pre-signed issues.labeled deliveries.

The body is the real `issues.labeled` example from @octokit/webhooks-examples with an
`installation` object added (GitHub sends one to Apps) and a distinct issue number per body, so
the server's one-active-job-per-issue rule does not turn every delivery after the first into a
no-op. Each body is signed once here (HMAC-SHA256 of the exact bytes, as GitHub does): the
signature covers only the body, so wrk can reuse it while the X-GitHub-Delivery id varies.

Output: a Lua file for ingest.lua returning { pool = { {body, "sha256=..."}, ... }, prefix = ...,
suffix = ... } where prefix .. issue_number .. suffix is the same body with another issue number
(BENCH_UNIQUE mode signs those in wrk itself), and on stdout the label name and the body size.
In that template the issue object is the payload's last member and its number the issue's last
one (the same members and bytes, in another order, which JSON leaves free), so the suffix is
"}}" and wrk resumes each HMAC from the state after the constant prefix instead of hashing
12 KB a request.
The secret comes from the BENCH_SECRET environment variable.
"""
import argparse
import copy
import hashlib
import hmac
import json
import os
import sys


def lua_string(b: bytes) -> str:
    out = ['"']
    for c in b:
        if c in (0x22, 0x5C):  # " and backslash
            out.append("\\" + chr(c))
        elif 0x20 <= c < 0x7F:
            out.append(chr(c))
        else:
            out.append("\\%03d" % c)
    out.append('"')
    return "".join(out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--examples", required=True, help="webhooks-examples api.github.com/index.json")
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    secret = os.environ["BENCH_SECRET"].encode()

    with open(args.examples, encoding="utf-8") as f:
        events = json.load(f)
    labeled = [ex for ev in events if ev["name"] == "issues"
               for ex in ev["examples"] if ex.get("action") == "labeled"]
    if not labeled:
        print("no issues.labeled example in " + args.examples, file=sys.stderr)
        return 1
    base = labeled[0]
    base.setdefault("installation", {"id": 4242424, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uNDI0MjQyNA=="})
    sizes = []
    sentinel = 987654321
    t = copy.deepcopy(base)
    issue = t.pop("issue")
    issue.pop("number")
    issue["number"] = sentinel
    t["issue"] = issue
    tbody = json.dumps(t, separators=(",", ":"), ensure_ascii=False).encode()
    key = b'"number":%d' % sentinel
    if tbody.count(key) != 1:
        print("issue number is not unique in the example body", file=sys.stderr)
        return 1
    prefix, suffix = tbody.split(key)
    if suffix != b"}}":
        print("the issue number is not at the end of the template body", file=sys.stderr)
        return 1
    with open(args.out, "w", encoding="ascii") as out:
        out.write("return {\nprefix = %s,\nsuffix = %s,\npool = {\n"
                  % (lua_string(prefix + b'"number":'), lua_string(suffix)))
        for i in range(args.count):
            p = copy.deepcopy(base)
            p["issue"]["number"] = 100000 + i
            p["issue"]["id"] = 900000000 + i
            body = json.dumps(p, separators=(",", ":"), ensure_ascii=False).encode()
            sig = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
            out.write("{%s,%s},\n" % (lua_string(body), lua_string(sig.encode())))
            sizes.append(len(body))
        out.write("}}\n")
    print("label=%s bytes=%d" % (base["label"]["name"], sum(sizes) // len(sizes)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

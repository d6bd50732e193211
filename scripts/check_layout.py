#!/usr/bin/env python3
"""scripts/check_layout.py - the folder layering rule, checked on every build.

Each source folder may include headers only of the folders listed for it below (the folders
beneath it; docs/internals/layout.md draws them). Within the tree there is no include cycle,
neither between folders nor between modules (a module is a .c/.h pair). Exits 1 with one line
per violation; with --stamp, writes the stamp file on success (meson's custom_target).
"""
import argparse
import os
import re
import sys

# folder -> folders it may include (besides itself). Bottom to top.
ALLOWED = {
    "common": set(),
    "sandbox": {"common"},
    "github": {"common"},
    "agents": {"sandbox", "common"},
    "job": {"agents", "github", "sandbox", "common"},
    "server": {"job", "common"},
    "cli": {"server", "job", "agents", "github", "sandbox", "common"},
}
# test and bench code may include anything of the product, never the other way round
CONSUMERS = ("tests", "bench")

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources(root, folder):
    out = []
    for dirpath, dirs, files in os.walk(os.path.join(root, folder)):
        dirs[:] = [d for d in dirs if d != "node_modules"]
        out += [os.path.join(dirpath, f) for f in files if f.endswith((".c", ".h"))]
    return sorted(out)


def module(path):
    return os.path.splitext(path)[0]


def check(root):
    errors = []
    graph = {}  # module -> set of modules it includes
    for folder in list(ALLOWED) + list(CONSUMERS):
        for path in sources(root, folder):
            rel = os.path.relpath(path, root)
            text = open(path, encoding="utf-8", errors="replace").read()
            for inc in INCLUDE.findall(text):
                if inc == "ap_config.h":
                    continue
                top = inc.split("/")[0]
                if "/" not in inc:
                    if folder in ALLOWED:
                        errors.append(f'{rel}: include "{inc}" without its folder '
                                      f'(write "folder/{inc}")')
                    continue
                if top in CONSUMERS and folder not in CONSUMERS:
                    errors.append(f'{rel}: includes "{inc}": product code never includes tests/')
                    continue
                if folder in CONSUMERS or top not in ALLOWED:
                    continue
                if top != folder and top not in ALLOWED[folder]:
                    errors.append(f'{rel}: includes "{inc}": {folder}/ may include only '
                                  f'{", ".join(sorted(ALLOWED[folder] | {folder}))}')
                if not os.path.exists(os.path.join(root, inc)):
                    errors.append(f'{rel}: includes "{inc}", which does not exist')
                    continue
                a, b = module(rel), module(inc)
                if a != b:
                    graph.setdefault(a, set()).add(b)
    # module-level cycles (a .c of one module including the other's header and back)
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                cyc = stack[stack.index(m):] + [m]
                errors.append("include cycle: " + " -> ".join(cyc))
            elif m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)
    return errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--stamp")
    a = ap.parse_args()
    errors = check(os.path.abspath(a.root))
    for e in errors:
        print("layout: " + e, file=sys.stderr)
    if errors:
        print(f"layout: {len(errors)} violation(s); see docs/internals/layout.md",
              file=sys.stderr)
        return 1
    if a.stamp:
        open(a.stamp, "w").write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

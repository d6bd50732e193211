#!/usr/bin/env python3
"""scripts/check_layout.py - the folder layering rule, checked on every build.

Each source folder may include headers only of the folders listed for it below (the folders
beneath it; docs/internals/layout.md draws them). Within the tree there is no include cycle,
neither between folders nor between modules (a module is a .c/.h pair). A function named
prefix__what (a test hook or a folder-internal call, declared in a product header) is called by no
product code outside its own folder. Exits 1 with one line
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
HOOK = re.compile(r"\b([a-z][a-z0-9_]*[a-z0-9]__[a-z0-9_]+)\s*\(")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


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
    return errors + check_hooks(root)


def check_hooks(root):
    """prefix__what functions (docs/internals/layout.md "Test hooks") stay in their folder."""
    texts = {}
    for folder in ALLOWED:
        for path in sources(root, folder):
            rel = os.path.relpath(path, root)
            texts[rel] = COMMENT.sub("", open(path, encoding="utf-8", errors="replace").read())
    owner = {}  # hook name -> header that declares it
    for rel, text in texts.items():
        if rel.endswith(".h"):
            for name in HOOK.findall(text):
                owner.setdefault(name, rel)
    errors = []
    for rel, text in sorted(texts.items()):
        for name in sorted(set(HOOK.findall(text))):
            if name in owner and owner[name].split("/")[0] != rel.split("/")[0]:
                errors.append(f"{rel}: calls {name}() of {owner[name]}, which is for its "
                              "folder and the tests only")
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

"""The settings table of common/config.c (dumped by `autopatch settings --json`) is the one
list of settings: the C code reads only names that are in it, and .env.example documents
exactly its rows, each once, with the table's default."""
import json
import re
import subprocess

import pytest

# Folders whose C code reads settings (the product, and test drivers that load a config).
C_FOLDERS = ("common", "sandbox", "github", "agents", "job", "server", "cli", "tests")
PRODUCT = C_FOLDERS[:-1]
ACCESSOR = re.compile(
    r'\bcfg_(?:str|int|bytes|bool|is_set|set)\(\s*[\w>.()-]+,\s*"([A-Za-z][A-Za-z0-9_]*)"'
    r'|\bcfg_env\(\s*"([A-Za-z][A-Za-z0-9_]*)"')
SETTING_LITERAL = re.compile(r'"((?:AUTOPATCH|GITHUB|WEBHOOK|PRIVATE)_[A-Z0-9_]+)"')
ENTRY = re.compile(r"^(# ?)?([A-Z][A-Z0-9_]+)=(.*)$")


@pytest.fixture(scope="module")
def table(autopatch_bin, tmp_path_factory):
    out = subprocess.run([autopatch_bin, "settings", "--json"], capture_output=True, text=True,
                         cwd=tmp_path_factory.mktemp("settings"),
                         env={"AUTOPATCH_ENV_FILE": "/dev/null", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert len(rows) > 40, "the table is suspiciously short"
    return {r["name"]: r for r in rows}


def c_sources(repo_root, folders):
    for folder in folders:
        for path in sorted((repo_root / folder).rglob("*.[ch]")):
            if "node_modules" in path.parts or "fakes" in path.parts:
                continue
            yield path, path.read_text(errors="replace")


def env_example(repo_root):
    """(name, value, commented out, the comment lines right above it) per NAME=value line."""
    entries, comments = [], []
    for line in (repo_root / ".env.example").read_text().splitlines():
        m = ENTRY.match(line)
        if m:
            entries.append((m[2], m[3], bool(m[1]), " ".join(comments)))
            comments = []
        elif line.startswith("#"):
            comments.append(line)
        else:
            comments = []
    return entries


def test_the_code_reads_only_names_in_the_table(repo_root, table):
    used = {}
    for path, text in c_sources(repo_root, C_FOLDERS):
        for m in ACCESSOR.finditer(text):
            used.setdefault(m[1] or m[2], path.relative_to(repo_root))
    assert len(used) > 30, "the scan found too few settings: has the config API changed?"
    unknown = {n: str(p) for n, p in used.items() if n not in table}
    assert not unknown, f"read or set through common/config.h but not in its table: {unknown}"
    # Names spelled as whole literals elsewhere (ternaries, tables) must be settings too.
    literals = {m for _, text in c_sources(repo_root, PRODUCT)
                for m in SETTING_LITERAL.findall(text)}
    assert not sorted(literals - set(table)), "setting-like names not in the table"


def test_no_setting_is_read_around_the_table(repo_root):
    for path, text in c_sources(repo_root, PRODUCT):
        if path != repo_root / "common" / "config.c":  # cfg_env() itself
            assert not re.search(r"\bgetenv\(", text), f"{path}: read settings with cfg_env()"
        assert not re.search(r"\bcfg_get\w*\(", text), f"{path}: cfg_get* is gone"


def test_env_example_documents_every_row_once(repo_root, table):
    names = [e[0] for e in env_example(repo_root)]
    missing = sorted(set(table) - set(names))
    assert not missing, f"in the settings table but not in .env.example: {missing}"
    unknown = sorted(set(names) - set(table))
    assert not unknown, f"in .env.example but not in the settings table: {unknown}"
    dupes = sorted({n for n in names if names.count(n) > 1})
    assert not dupes, f"settings listed twice in .env.example: {dupes}"


def test_env_example_shows_the_tables_defaults(repo_root, table):
    wrong = []
    for name, value, _commented, comment in env_example(repo_root):
        row = table.get(name)
        if row is None:
            continue  # test_env_example_documents_every_row_once names it
        if row["secret"] and value:
            wrong.append(f"{name}: a secret must be shown empty, not {value!r}")
        if row["default"] is None:
            continue  # no default, or one computed by its module: the value is an example
        said = re.search(r"\(default: ([^)]*)\)", comment)
        if value != row["default"] and not (said and said[1] == row["default"]):
            wrong.append(f"{name}={value} but the default is {row['default']} (show it, or say "
                         f"\"(default: {row['default']})\" in the comment above)")
        if said and said[1] != row["default"]:
            wrong.append(f"{name}: the comment says default {said[1]}, the table {row['default']}")
    assert not wrong, "\n".join(wrong)


def test_settings_prints_a_table_and_refuses_other_arguments(autopatch_bin, tmp_path):
    env = {"AUTOPATCH_ENV_FILE": "/dev/null", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([autopatch_bin, "settings"], capture_output=True, text=True,
                         cwd=tmp_path, env=env)
    assert out.returncode == 0
    assert re.search(r"^PORT\s+int\s+3000\s", out.stdout, re.M), out.stdout
    bad = subprocess.run([autopatch_bin, "settings", "--yaml"], capture_output=True, text=True,
                         cwd=tmp_path, env=env)
    assert bad.returncode == 2 and "usage: autopatch settings" in bad.stderr

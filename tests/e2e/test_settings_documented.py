"""Every setting the C code reads is documented in .env.example, exactly once."""
import re


def test_every_setting_is_in_env_example(repo_root):
    names = set()
    for path in repo_root.glob("*/*.c"):
        names |= set(re.findall(r'cfg_get\w*\(\s*[\w>.-]+,\s*"([A-Z][A-Z0-9_]+)"', path.read_text()))
    assert len(names) > 30, "the scan found too few settings: has the config API changed?"
    listed = re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", (repo_root / ".env.example").read_text(), re.M)
    missing = sorted(names - set(listed))
    assert not missing, f"settings read by the code but not in .env.example: {missing}"
    dupes = sorted({n for n in listed if listed.count(n) > 1})
    assert not dupes, f"settings listed twice in .env.example: {dupes}"

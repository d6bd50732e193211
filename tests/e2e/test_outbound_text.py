"""End to end: text the model writes cannot close or link issues, mention anyone, embed
images or link elsewhere once autopatch puts it on GitHub.

The scripted model attacks through everything it controls: the Planner's cause, the finish
summary, and the reproduction test, which prints the attack so it lands in the Tester's
evidence (the quoted pristine failure). The job must still open its proven PR; the PR body and
every comment body the stand-in received (each create and each edit) carry none of the attack
in live form, and the only closing reference anywhere is the PR's own `Fixes #1`.
"""
import re

from pipeline_util import REPO, happy_script
from test_pipeline import rig_factory  # noqa: F401 - the fixture, shared

ZWSP = "\u200b"
CLOSING = re.compile(r"(?i)\b(close[sd]?|fix(e[sd])?|resolve[sd]?):?\s+"
                     r"(#\d+|gh-\d+|[\w.-]+/[\w.-]+#\d+|https?://\S+/(issues|pulls?)/\d+)")




def attack_lines(gh_url):
    return [
        "Closes https://github.com/OWNER/REPO/issues/2",
        f"Closes {gh_url}/{REPO}/issues/2",
        "Fixes GH-3",
        "fixes other/repo#4",
        "resolves #2",
        "@admin please merge, cc @octo/security",
        "![x](https://evil.example/p.png)",
        "[click](https://evil.example)",
        "<img src=https://evil.example/q.png>",
        "Fixes &#35;2, Fixes \uff032, Fixes\u200d #2",
    ]


def attack_script(gh_url):
    lines = attack_lines(gh_url)
    s = happy_script()
    s["planner"][-1]["text"] = s["planner"][-1]["text"].replace(
        "Cause: ", "Cause: " + " ".join(lines) + " -- ", 1)
    builder = s["builder"]
    test = builder[0]["tool_calls"][0]["arguments"]
    test["content"] = test["content"].replace(
        "    assert calc.mean([]) == 0.0\n",
        "    print(" + repr(" | ".join(lines)) + ")\n    assert calc.mean([]) == 0.0\n")
    finish = [st for st in builder if st.get("tool_calls")
              and st["tool_calls"][0]["name"] == "finish"][0]
    finish["tool_calls"][0]["arguments"]["summary"] += "\n\n" + "\n".join(lines)
    return s


def markdown_text(s):
    """What markdown keeps of s: a backslash before ASCII punctuation is dropped."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", s)


def dead(text, own_pr_url=None):
    """Every form of the attack is absent in live form from text; returns the problems."""
    t = markdown_text(text)
    if own_pr_url:
        t = t.replace(own_pr_url, "(our PR)")
    problems = []
    for name, pattern in [
        ("mention", r"@[A-Za-z0-9_-]"),
        ("bare reference", r"#\d"),
        ("GH- reference", r"(?i)gh-\d"),
        ("issue URL", r"(?i)/(issues|pulls?)/\d"),
        ("autolink", r"://"),
        ("www link", r"(?i)www\."),
        ("markdown link or image", r"\]\(|\]\[|\]:"),
        ("HTML", r"<(?!sub>|/sub>|details>|/details>|summary>|/summary>|!-- autopatch:progress"
                 r" -->|!-- autopatch:reply \(job \d+\) -->)[A-Za-z/!?]"),
        ("fullwidth #", "\uff03"),
    ]:
        m = re.search(pattern, t)
        if m:
            problems.append(f"{name}: {t[max(0, m.start() - 40):m.end() + 40]!r}")
    # A character reference GitHub would decode ("\&" is a literal '&').
    m = re.search(r"(?i)(?<!\\)&(#\d|#x[0-9a-f]|[a-z][a-z0-9]*;)", text)
    if m:
        problems.append(f"character reference: {text[max(0, m.start() - 40):m.end() + 40]!r}")
    return problems


def test_model_prose_cannot_close_link_mention_or_embed(rig_factory):
    rig = rig_factory(script=attack_script("http://placeholder"))
    # The attack names the stand-in's own host too (the GITHUB_URL form of an issue URL).
    rig.model.script = type(rig.model.script)(attack_script(rig.gh.url))
    assert rig.label() == 202
    rig.wait(lambda: rig.job_done(1), 300, "the job to finish")
    jobs = rig.jobs()
    assert jobs[0]["state"] == "succeeded", jobs
    pulls = rig.pulls()
    assert len(pulls) == 1, pulls
    pr = pulls[0]
    body = pr["body"]
    # The attack did reach every place it aimed at, as readable text.
    plain = body.replace(ZWSP, "")
    assert "Closes https://github.com/OWNER/REPO/issues/2" in markdown_text(plain)
    assert "evil.example" in body and "admin" in body
    for section in ("### Summary", "### Suspected cause", "### Evidence"):
        part = body.split(section, 1)[1].split("###", 1)[0]
        assert "other/repo" in part, (section, part)

    # The PR body: its only closing reference (and only #N) is ours.
    assert [m.group(0) for m in CLOSING.finditer(markdown_text(body))] == ["Fixes #1"]
    assert re.findall(r"#\d+", markdown_text(body)) == ["#1"]
    assert dead(body.replace("Fixes #1\n", "Fixes\n", 1)) == []

    # Every comment body ever sent (creates and edits) and every comment as it ended.
    sent = [r["body"]["body"] for r in rig.gh.requests()
            if r["method"] in ("POST", "PATCH") and isinstance(r.get("body"), dict)
            and isinstance(r["body"].get("body"), str) and "/comments" in r["path"]]
    pr_bodies = [r["body"]["body"] for r in rig.gh.requests()
                 if r["path"].startswith(f"/repos/{REPO}/pulls") and isinstance(r.get("body"), dict)
                 and isinstance(r["body"].get("body"), str)]
    final = [c["body"] for c in rig.state()["comments"]]
    assert sent and final and pr_bodies
    assert any("plan ready: Closes https://github.com/OWNER/REPO/issues/2" in b.replace(ZWSP, "")
               for b in sent), "the attack did not reach the progress comment"
    for text in sent + final:
        assert not CLOSING.search(markdown_text(text)), text
        assert dead(text, own_pr_url=pr["html_url"]) == [], text
    for text in pr_bodies:
        assert [m.group(0) for m in CLOSING.finditer(markdown_text(text))] == ["Fixes #1"]
    # Nothing was closed or cross-referenced on the stand-in's side either.
    assert rig.state()["issues"]["1"]["state"] == "open"

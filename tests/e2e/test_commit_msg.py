"""scripts/hooks/commit-msg, which scripts/bootstrap.sh installs (core.hooksPath): a commit
whose message is not `area: what changed` (<= 72 characters), a blank line and a body is
refused before it is made, with a sentence that says what to change."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOOKS = os.path.join(ROOT, "scripts", "hooks")


def git(repo, *args, check=True):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid")
    return subprocess.run(["git", "-C", str(repo), *args], env=env, text=True,
                          capture_output=True, check=check)


def repo_with_hook(tmp_path):
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", str(repo))
    git(repo, "config", "core.hooksPath", HOOKS)
    (repo / "f").write_text("x\n")
    git(repo, "add", "f")
    return repo


def commit(repo, message):
    return git(repo, "commit", "-q", "-m", message, check=False)


def commits(repo):
    r = git(repo, "rev-list", "--count", "HEAD", check=False)
    return int(r.stdout.strip()) if r.returncode == 0 else 0


def test_a_message_in_form_is_committed(tmp_path):
    repo = repo_with_hook(tmp_path)
    r = commit(repo, "tester: run the whole suite\n\ncargo stopped at the first failing "
                     "target;\nnow it runs them all (177 tests, was 17).")
    assert r.returncode == 0, r.stderr
    assert commits(repo) == 1


def test_long_subject_without_area_or_body_is_refused(tmp_path):
    repo = repo_with_hook(tmp_path)
    r = commit(repo, "Made the tester run every test target and also changed the docs and "
                     "fixed a few other things along the way")
    assert r.returncode != 0
    assert "keep it to 72 or fewer" in r.stderr
    assert "`area: what changed`" in r.stderr
    assert "add a body" in r.stderr
    assert commits(repo) == 0


def test_body_must_follow_a_blank_line_and_wrap(tmp_path):
    repo = repo_with_hook(tmp_path)
    r = commit(repo, "docs: index\nno blank line before this body")
    assert r.returncode != 0 and "second line must be blank" in r.stderr
    r = commit(repo, "docs: index\n\n" + "word " * 20)
    assert r.returncode != 0 and "wrap the body at 72 columns" in r.stderr
    assert commits(repo) == 0


def test_bootstrap_installed_the_hook():
    """The test command runs scripts/bootstrap.sh first: this checkout uses the hook."""
    r = subprocess.run(["git", "-C", ROOT, "config", "core.hooksPath"], text=True,
                       capture_output=True)
    assert r.stdout.strip() == "scripts/hooks", "run scripts/bootstrap.sh (it sets core.hooksPath)"
    assert os.access(os.path.join(HOOKS, "commit-msg"), os.X_OK)

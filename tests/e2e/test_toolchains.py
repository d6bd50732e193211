"""Current toolchains (issue 28): flavour images from Debian 13 built on first use, `python` in
the python flavour, and Java resolved offline from Debian's packaged Maven repository.

- A Go project that needs Go >= 1.21 (`min`, `slices`) and a Node project whose lockfile needs
  Node 20 (`engines` + `engine-strict`, `toSorted`) are both proven by `autopatch fix` on a host
  where neither image exists under the flavour repository the test uses: the first job of each
  runs the real deploy/sandbox-image/build.sh (found next to the binary) and waits for it. The
  test's repository is its own; build.sh reuses an image with the same content hash
  (autopatch-sandbox:FLAVOR-HASH) instead of running mmdebstrap again, so the first CI run on a
  machine builds what scripts/test.sh has not, and later runs only tag.
- `make test` whose Makefile calls `python` runs in the python flavour (python-is-python3).
- A Maven project that needs a plugin version Debian does not package ends before any model
  call, naming the plugin. One whose plugins Debian packages runs with no network: that proof
  is the Maven fixture's job in test_runners.py (one Maven job for both).
"""
import json
import os
import pathlib
import re
import subprocess
import uuid

import pytest

from agents_util import CALC, call, happy, make_calc_repo, step
from test_environments import commit_all, docker, git, have_image, run_fix

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD_SH = ROOT / "deploy" / "sandbox-image" / "build.sh"


def version_tuple(text):
    return tuple(int(p) for p in text.split("."))


def toolchain_line(out):
    m = re.search(r"^\[preparing\] toolchain: (.*)$", out, re.M)
    assert m, out
    return m.group(1)


# ---- Go >= 1.21 ----

GO_MOD = "module example.com/stats\n\ngo 1.21\n"

GO_STATS = """package stats

import "slices"

// Median is the middle value of values (the mean of the two middle ones for an even count).
func Median(values []float64) float64 {
	s := slices.Clone(values)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Clamp limits v to [lo, hi] (the min and max builtins are Go 1.21's).
func Clamp(v, lo, hi int) int {
	return max(lo, min(v, hi))
}
"""

GO_TEST = """package stats

import "testing"

func TestMedianOdd(t *testing.T) {
	if got := Median([]float64{3, 1, 2}); got != 2 {
		t.Fatalf("Median = %v, want 2", got)
	}
}

func TestMedianEven(t *testing.T) {
	if got := Median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Fatalf("Median = %v, want 2.5", got)
	}
}

func TestClamp(t *testing.T) {
	if Clamp(12, 0, 10) != 10 || Clamp(-1, 0, 10) != 0 || Clamp(5, 0, 10) != 5 {
		t.Fatal("Clamp is wrong")
	}
}
"""

GO_REPRO = """package stats

import "testing"

func TestMedianEmpty(t *testing.T) {
	if got := Median(nil); got != 0 {
		t.Fatalf("Median(nil) = %v, want 0", got)
	}
}
"""


def go_repo(tmp_path):
    repo = tmp_path / "gostats"
    (repo / ".github").mkdir(parents=True)
    (repo / "go.mod").write_text(GO_MOD)
    (repo / "stats.go").write_text(GO_STATS)
    (repo / "stats_test.go").write_text(GO_TEST)
    (repo / ".github" / "autopatch.yml").write_text("test: go test ./...\n")
    (repo / "ISSUE.md").write_text("# Median(nil) panics\n\nMedian of no values should be 0, "
                                   "it panics with index out of range.\n")
    git(repo, "init", "-q")
    commit_all(repo, "init")
    return repo


def go_script():
    return {
        "planner": [{"text": "Cause: Median indexes s[n/2] with n == 0. Fix: return 0 for no "
                             "values. Test: stats_empty_test.go."}],
        "builder": [
            step(call("write_file", path="stats_empty_test.go", content=GO_REPRO)),
            step(call("replace_in_file", path="stats.go", old="\tn := len(s)\n",
                      new="\tn := len(s)\n\tif n == 0 {\n\t\treturn 0\n\t}\n")),
            step(call("run", command="go test ./...")),
            step(call("finish", test_path="stats_empty_test.go",
                      test_command="go test stats.go stats_empty_test.go",
                      summary="Median(nil) is 0")),
            {"text": "Done."},
        ],
    }


# ---- Node 20 ----

JS_CALC = """'use strict';
// toSorted is Node 20's.
function median(values) {
  const s = values.toSorted((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}
function mean(values) {
  return values.reduce((a, b) => a + b, 0) / values.length;
}
module.exports = { median, mean };
"""

JS_TEST = """'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { median, mean } = require('../calc');

test('median', () => { assert.strictEqual(median([3, 1, 2]), 2); });
test('mean', () => { assert.strictEqual(mean([1, 2, 3]), 2); });
"""

JS_REPRO = """'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { mean } = require('../calc');

test('mean of nothing is 0', () => { assert.strictEqual(mean([]), 0); });
"""


def node_repo(tmp_path):
    repo = tmp_path / "jscalc"
    (repo / "test").mkdir(parents=True)
    (repo / ".github").mkdir()
    pkg = {"name": "jscalc", "version": "1.0.0", "private": True,
           "engines": {"node": ">=20"}, "scripts": {"test": "node --test"}}
    (repo / "package.json").write_text(json.dumps(pkg, indent=2) + "\n")
    lock = {"name": "jscalc", "version": "1.0.0", "lockfileVersion": 3, "requires": True,
            "packages": {"": {"name": "jscalc", "version": "1.0.0",
                              "engines": {"node": ">=20"}}}}
    (repo / "package-lock.json").write_text(json.dumps(lock, indent=2) + "\n")
    # npm refuses a project whose engines the running Node does not satisfy.
    (repo / ".npmrc").write_text("engine-strict=true\n")
    (repo / "calc.js").write_text(JS_CALC)
    (repo / "test" / "calc.test.js").write_text(JS_TEST)
    (repo / ".github" / "autopatch.yml").write_text(
        "setup: npm ci --no-audit --no-fund --no-update-notifier\n")
    (repo / "ISSUE.md").write_text("# mean([]) returns NaN\n\ncalc.mean([]) should be 0.\n")
    git(repo, "init", "-q")
    commit_all(repo, "init")
    return repo


def node_script():
    return {
        "planner": [{"text": "Cause: mean divides by values.length, 0 for []. Fix: return 0 "
                             "for an empty list. Test: test/mean_empty.test.js."}],
        "builder": [
            step(call("write_file", path="test/mean_empty.test.js", content=JS_REPRO)),
            step(call("replace_in_file", path="calc.js",
                      old="  return values.reduce(",
                      new="  if (values.length === 0) return 0;\n  return values.reduce(")),
            step(call("run", command="npm test")),
            step(call("finish", test_path="test/mean_empty.test.js",
                      test_command="node --test test/mean_empty.test.js",
                      summary="mean([]) is 0")),
            {"text": "Done."},
        ],
    }


@pytest.fixture
def flavor_repo():
    """A flavour repository of this test's own: nothing is built under it yet. Its tags are
    removed afterwards; the content-hash cache (autopatch-sandbox:FLAVOR-HASH) stays."""
    repo = "autopatch-test-firstuse-" + uuid.uuid4().hex[:10]
    yield repo
    tags = docker("images", "--format", "{{.Repository}}:{{.Tag}}", repo).stdout.split()
    for t in tags:
        docker("image", "rm", t, check=False)
    assert not docker("images", "-q", repo).stdout.strip(), "test tags left behind"


def test_go_and_node_flavours_are_built_on_first_use_with_current_toolchains(
        flavor_repo, autopatch_bin, tmp_path):
    env = {"AUTOPATCH_FLAVOR_REPOSITORY": flavor_repo,
           "AUTOPATCH_SANDBOX_BUILD_TIMEOUT_S": "1200"}
    assert not have_image(f"{flavor_repo}:go") and not have_image(f"{flavor_repo}:node")
    data = tmp_path / "data"
    found = {}
    for flavor, make, script, need in (("go", go_repo, go_script, (1, 21)),
                                       ("node", node_repo, node_script, (20, 0))):
        home = tmp_path / flavor
        home.mkdir()
        r = run_fix(autopatch_bin, home, make(home), script(),
                    dict(env, AUTOPATCH_DATA_DIR=str(data)), timeout=1500)
        out = r.stdout
        assert r.returncode == 0, out + r.stderr[-3000:]
        image = f"{flavor_repo}:{flavor}"
        # The job said it was building, waited for the build, and used the image.
        building = out.index(f"[preparing] building the sandbox image {image} for the "
                             f"{flavor} flavour (first use")
        built = re.search(rf"^\[preparing\] built the sandbox image {re.escape(image)} in "
                          rf"\d+ s: (.*); log: (\S+)$", out, re.M)
        assert built, out
        assert building < built.start() < out.index("PROVEN"), out
        tools = toolchain_line(out)
        assert tools == built.group(1) and tools.endswith("(Debian trixie)"), out
        m = re.match(rf"{'go' if flavor == 'go' else 'node'} (\d+\.\d+)", tools)
        assert m and version_tuple(m.group(1)) >= need, tools
        # The build's log is kept in the data dir.
        log = pathlib.Path(built.group(2))
        assert log.parent == data / "sandbox-builds" and log.name.startswith(flavor + "-")
        assert f"[sandbox-image]" in log.read_text()
        assert have_image(image)
        label = docker("image", "inspect", "--format",
                       '{{index .Config.Labels "autopatch.toolchain"}}', image).stdout.strip()
        assert label and tools.startswith(label), (label, tools)
        found[flavor] = tools
    assert (data / "sandbox-build.lock").exists()
    # Present now: the next job builds nothing.
    home = tmp_path / "again"
    home.mkdir()
    r = run_fix(autopatch_bin, home, go_repo(home), go_script(),
                dict(env, AUTOPATCH_DATA_DIR=str(data)))
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "building the sandbox image" not in r.stdout
    assert toolchain_line(r.stdout) == found["go"]


def test_first_use_builds_can_be_turned_off(flavor_repo, autopatch_bin, tmp_path):
    repo = make_calc_repo(tmp_path, {".github/autopatch.yml": "image: go\n"})
    (repo / "ISSUE.md").write_text((CALC / "ISSUE.md").read_text())
    commit_all(repo, "issue")
    r = run_fix(autopatch_bin, tmp_path, repo, happy(),
                {"AUTOPATCH_FLAVOR_REPOSITORY": flavor_repo, "AUTOPATCH_SANDBOX_BUILD": "off"})
    assert r.returncode == 3, r.stdout
    assert (f"ENVIRONMENT FAILURE (no model call was made): the sandbox image {flavor_repo}:go "
            "for the go flavour (`image: go` in .github/autopatch.yml) is not built on this "
            "host, and AUTOPATCH_SANDBOX_BUILD=off keeps this host from building it on first "
            "use: build it with `deploy/sandbox-image/build.sh --flavor go`") in r.stdout
    assert "building the sandbox image" not in r.stdout
    assert r.requests == []
    assert not have_image(f"{flavor_repo}:go")


# ---- `python` in the python flavour ----

def test_make_test_calling_python_runs_in_the_python_flavour(autopatch_bin, tmp_path):
    repo = make_calc_repo(tmp_path, {
        "Makefile": "test:\n\tpython -m pytest -q\n",
        ".github/autopatch.yml": "test: make test\n",
    })
    (repo / "ISSUE.md").write_text((CALC / "ISSUE.md").read_text())
    commit_all(repo, "issue")
    r = run_fix(autopatch_bin, tmp_path, repo, happy())
    assert "python: No such file or directory" not in r.stdout, r.stdout
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "flavour python" in r.stdout and "PROVEN" in r.stdout
    assert re.search(r"toolchain: python 3\.\d+", r.stdout), r.stdout


# ---- Java offline from Debian's packaged Maven repository ----

JAVA_IMAGE = "autopatch-sandbox:java"

POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 http://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>example</groupId>
  <artifactId>jcalc</artifactId>
  <version>1.0</version>
  <properties>
    <maven.compiler.release>17</maven.compiler.release>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencies>
    <dependency>
      <groupId>junit</groupId>
      <artifactId>junit</artifactId>
      <version>4.13.2</version>
      <scope>test</scope>
    </dependency>
  </dependencies>
  <build>
    <plugins>
{plugins}
    </plugins>
  </build>
</project>
"""

# A pinned surefire. Unpinned, Debian's Maven binds the version Debian packages; a project that
# pins a current one (3.2.5) needs a version Debian does not package.
SUREFIRE = """      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-surefire-plugin</artifactId>
        <version>{version}</version>
      </plugin>"""

JAVA_CALC = """package example;

public final class Calc {
    private Calc() {}

    public static double mean(double[] values) {
        double sum = 0;
        for (double v : values) {
            sum += v;
        }
        return sum / values.length;
    }
}
"""

JAVA_TEST = """package example;

import static org.junit.Assert.assertEquals;

import org.junit.Test;

public class CalcTest {
    @Test
    public void meanOfThree() {
        assertEquals(2.0, Calc.mean(new double[] {1, 2, 3}), 0.0);
    }
}
"""

JAVA_REPRO = """package example;

import static org.junit.Assert.assertEquals;

import org.junit.Test;

public class MeanEmptyTest {
    @Test
    public void meanOfNothingIsZero() {
        assertEquals(0.0, Calc.mean(new double[] {}), 0.0);
    }
}
"""


def java_repo(tmp_path, plugins):
    repo = tmp_path / "jcalc"
    src = repo / "src" / "main" / "java" / "example"
    tst = repo / "src" / "test" / "java" / "example"
    src.mkdir(parents=True)
    tst.mkdir(parents=True)
    (repo / ".github").mkdir()
    (repo / "pom.xml").write_text(POM.replace("{plugins}", plugins))
    (src / "Calc.java").write_text(JAVA_CALC)
    (tst / "CalcTest.java").write_text(JAVA_TEST)
    (repo / ".gitignore").write_text("target/\n")
    (repo / ".github" / "autopatch.yml").write_text("test: mvn -B test\n")
    (repo / "ISSUE.md").write_text("# mean of no values is NaN\n\nCalc.mean(new double[0]) "
                                   "should be 0.\n")
    git(repo, "init", "-q")
    commit_all(repo, "init")
    return repo


def java_script():
    return {
        "planner": [{"text": "Cause: mean divides by values.length, 0 for an empty array. "
                             "Fix: return 0 for it. Test: MeanEmptyTest."}],
        "builder": [
            step(call("write_file", path="src/test/java/example/MeanEmptyTest.java",
                      content=JAVA_REPRO)),
            step(call("replace_in_file", path="src/main/java/example/Calc.java",
                      old="        double sum = 0;\n",
                      new="        if (values.length == 0) {\n            return 0;\n"
                          "        }\n        double sum = 0;\n")),
            step(call("run", command="mvn -B -q test")),
            step(call("finish", test_path="src/test/java/example/MeanEmptyTest.java",
                      test_command="mvn -B test -Dtest=example/MeanEmptyTest.java",
                      summary="mean of no values is 0")),
            {"text": "Done."},
        ],
    }


def packaged_surefire():
    """The surefire version Debian packages, read from the java image's repository."""
    out = docker("run", "--rm", "--network", "none", "--entrypoint", "ls", JAVA_IMAGE,
                 "/usr/share/maven-repo/org/apache/maven/plugins/maven-surefire-plugin").stdout
    versions = [v for v in out.split() if re.fullmatch(r"\d+(\.\d+)+", v)]
    assert versions, out
    return versions[0]


@pytest.fixture
def java_image():
    if not have_image(JAVA_IMAGE):
        pytest.fail(f"{JAVA_IMAGE} is missing: deploy/sandbox-image/build.sh --flavor java "
                    "(scripts/test.sh builds it)")
    return JAVA_IMAGE


# A Maven project whose plugins Debian packages runs with no network: proven by the Maven
# fixture's job in test_runners.py (test_maven_surefire_behind_a_script_is_read_per_test), which
# asserts what this file's own job did (flavour from pom.xml, the toolchain line, PROVEN, no
# `.m2/` or `target/` in the patch): one Maven job instead of two.


def test_maven_plugin_debian_does_not_package_fails_before_any_model_call(
        java_image, autopatch_bin, tmp_path):
    # A current surefire, which Debian does not package.
    assert packaged_surefire() != "3.2.5"
    repo = java_repo(tmp_path, SUREFIRE.format(version="3.2.5"))
    r = run_fix(autopatch_bin, tmp_path, repo, java_script(), timeout=900)
    assert r.returncode == 3, r.stdout + r.stderr[-3000:]
    failure = r.stdout.split("ENVIRONMENT FAILURE (no model call was made): ", 1)
    assert len(failure) == 2, r.stdout
    assert ("The build could not resolve the Maven plugin "
            "org.apache.maven.plugins:maven-surefire-plugin:3.2.5: it is not in Debian's "
            "packaged Maven repository (/usr/share/maven-repo)") in failure[1], failure[1]
    # What would fetch it: the repository Maven looked for it at, as a `network:` entry.
    assert re.search(r"with `[a-z0-9.-]+\.[a-z]+:443` in `network:`", failure[1]), failure[1]
    assert r.requests == [], "no model call"

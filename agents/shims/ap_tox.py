# autopatch's tox starter, written by the host next to its runner shims for one Tester run:
# `tox ARGS` (or `python -m tox ARGS`) as tox runs it, except that inside each tox environment
# that runs commands the host's shims stay first on PATH (tox puts the environment's bin/
# first, so `python -m unittest` would bypass them), AP_REPORT_DIR reaches them (tox passes
# few variables), and pytest writes its JUnit report per environment into the run's report
# directory (tox does not pass PYTEST_ADDOPTS). A command tox would refuse (not in its
# allowlist_externals) is still refused: a shim is allowed only where the program it stands
# for is. tox 4's own API does not reach a command's environment, so this wraps two of its
# ToxEnv properties; a tox without them runs unchanged (and that run has no per-test results
# beyond what reaches the runners anyway).
import fnmatch
import os
import re
import runpy
import shutil
import sys

_SHIMS = os.environ.pop("AP_TOX_SHIMS", "")
_REAL = os.environ.pop("AP_TOX_REAL", "")  # the tox script, or "" for `python -m tox`
_OUT = os.environ.pop("AP_TOX_OUT", "")  # report file prefix: <report dir>/tox.PID.NS
_REPORTS = os.environ.get("AP_REPORT_DIR", "")
_ADDOPTS = os.environ.get("PYTEST_ADDOPTS", "")


def _without_shims(path):
    return [p for p in path.split(os.pathsep) if p and p != _SHIMS]


def _patch():
    from tox.tox_env.api import ToxEnv
    from tox.tox_env.runner import RunToxEnv

    env_prop = ToxEnv.__dict__.get("environment_variables")
    allow_prop = ToxEnv.__dict__.get("_allow_externals")
    if not isinstance(env_prop, property) or not isinstance(allow_prop, property):
        sys.stderr.write("autopatch: this tox has no ToxEnv.environment_variables: its "
                         "commands run without the runner shims\n")
        return

    def environment_variables(self):
        env = env_prop.fget(self)  # tox's own dict (cached; tox's subclasses change it too)
        if not isinstance(self, RunToxEnv):
            return env
        path = _without_shims(env.get("PATH", ""))
        env["PATH"] = os.pathsep.join([_SHIMS] + path)
        env["AP_REPORT_DIR"] = _REPORTS
        want = getattr(self, "_ap_addopts", None)
        if want is None or env.get("PYTEST_ADDOPTS") != want:
            # the environment's own value (its set_env) first; the host's options after it
            own = env.get("PYTEST_ADDOPTS", "")
            own = "" if own == _ADDOPTS else own
            name = re.sub(r"[^A-Za-z0-9._-]", "_", self.name)[:64]
            want = " ".join(x for x in (own, _ADDOPTS, "--junitxml=%s.%s.xml" % (_OUT, name))
                            if x)
            self._ap_addopts = want
            env["PYTEST_ADDOPTS"] = want
        return env

    def _allow_externals(self):
        allow = allow_prop.fget(self)
        if not isinstance(self, RunToxEnv) or not _SHIMS:
            return allow
        path = os.pathsep.join(_without_shims(self.environment_variables.get("PATH", "")))
        extra = []
        for name in sorted(os.listdir(_SHIMS)):
            real = shutil.which(name, path=path)
            if real and any(fnmatch.fnmatch(name, a) or fnmatch.fnmatch(real, a)
                            for a in allow):
                extra.append(os.path.join(_SHIMS, name))
        return allow + extra

    ToxEnv.environment_variables = property(environment_variables)
    ToxEnv._allow_externals = property(_allow_externals)


if _SHIMS and _REPORTS and _OUT:
    if _REAL:
        sys.path[0] = os.path.dirname(_REAL)  # as when the script runs itself, not the tree
    try:
        _patch()
    except (ImportError, AttributeError) as e:
        sys.stderr.write("autopatch: tox could not be prepared (%s): its commands run "
                         "without the runner shims\n" % e)
if _REAL:
    sys.argv[0] = _REAL
    runpy.run_path(_REAL, run_name="__main__")
else:
    sys.argv[0] = "tox"
    runpy.run_module("tox", run_name="__main__", alter_sys=True)

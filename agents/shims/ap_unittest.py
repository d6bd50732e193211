# autopatch's unittest runner, written by the host next to its runner shims for one Tester run:
# `python -m unittest ARGS` as unittest runs it, the whole suite (failfast off), with every
# test's result also written as JUnit XML to $AP_UNITTEST_XML.
import os
import sys
import unittest
from xml.sax.saxutils import quoteattr

_OUT = os.environ.pop("AP_UNITTEST_XML", "")
_CAP = 4000
_RANK = {"passed": 0, "skipped": 1, "error": 2, "failure": 3}


def _key(test):
    if isinstance(test, unittest.case._SubTest):
        test = test.test_case
    if type(test).__name__ in ("_FailedTest", "ModuleImportFailure"):
        return ("unittest.loader", test.id().rpartition("_FailedTest.")[2]), True
    if not isinstance(test, unittest.TestCase):  # an _ErrorHolder: setUpClass, setUpModule
        return ("unittest", str(test)), False
    cls, _, name = test.id().rpartition(".")
    return (cls, name), False


class _Result(unittest.TextTestResult):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.ap_results = {}

    def _note(self, test, outcome, msg=""):
        key, coll = _key(test)
        cur = self.ap_results.get(key)
        if cur is None or _RANK[outcome] > _RANK[cur[0]]:
            self.ap_results[key] = (outcome, str(msg)[:_CAP], coll)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._note(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._note(test, "failure", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._note(test, "error", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._note(test, "skipped", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._note(test, "passed")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._note(test, "failure", "unexpected success")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            self._note(test, "failure" if failed else "error",
                       self._exc_info_to_string(err, test))


def _write(results):
    out = ['<?xml version="1.0" encoding="utf-8"?>\n<testsuite name="unittest">\n']
    for (cls, name), (outcome, msg, coll) in results.items():
        out.append("<testcase classname=%s name=%s>" % (quoteattr(cls), quoteattr(name)))
        if outcome == "failure":
            out.append("<failure message=%s/>" % quoteattr(msg))
        elif outcome == "error":
            out.append("<error message=%s/>" % quoteattr("collection failure" if coll else msg))
        elif outcome == "skipped":
            out.append("<skipped message=%s/>" % quoteattr(msg))
        out.append("</testcase>\n")
    out.append("</testsuite>\n")
    with open(_OUT, "w", encoding="utf-8", errors="backslashreplace") as f:
        f.write("".join(out))


class _Runner(unittest.TextTestRunner):
    resultclass = _Result

    def __init__(self, *a, **k):
        k["failfast"] = False
        super().__init__(*a, **k)

    def run(self, test):
        result = super().run(test)
        if _OUT:
            _write(result.ap_results)
        return result


sys.argv[0] = "python -m unittest"
unittest.main(module=None, testRunner=_Runner)

#!/usr/bin/env python3
"""Sum every suite's results into one closing line: "N passed, N failed".

Reads checks.json (style and layout), meson's testlog.json files (one JSON object per test
executable), fuzz/fuzz.json (one object per fuzz target) and pytest's JUnit XML (e2e.xml,
browser.xml) from the results folder. A skipped test counts as failed. Before the closing line
it prints the table of phases scripts/test.sh timed (phases.tsv: name, seconds, the result
files of the phase), so the next change sees where the time went. Exit status 1 if anything
failed, including set-up steps counted by the caller.
"""
import json
import pathlib
import sys
import xml.etree.ElementTree as ET

JSON_LINES = ("checks.json", "unit.json", "unit-asan.json", "fuzz/fuzz.json")
JUNIT = ("e2e.xml", "browser.xml")


def count(path, name):
    """(passed, failed) of one result file, printing each failure."""
    passed = failed = 0
    if name.endswith(".xml"):
        for case in ET.parse(path).getroot().iter("testcase"):
            bad = case.find("failure") is not None or case.find("error") is not None
            skipped = case.find("skipped") is not None
            if bad or skipped:
                failed += 1
                print(f"failed: {name}: {case.get('classname')}.{case.get('name')}"
                      + (" (skipped)" if skipped else ""))
            else:
                passed += 1
        return passed, failed
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        if rec.get("result") in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif rec.get("result") == "SKIP":
            failed += 1  # a skipped suite is not a pass
            print(f"skipped counts as failed: {name}: {rec.get('name')}")
        else:
            failed += 1
            print(f"failed: {name}: {rec.get('name')}")
    return passed, failed


def main():
    results = pathlib.Path(sys.argv[1])
    setup_failed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    per_file = {}
    for name in JSON_LINES + JUNIT:
        path = results / name
        if path.exists():
            per_file[name] = count(path, name)
    passed = sum(p for p, _ in per_file.values())
    failed = sum(f for _, f in per_file.values()) + setup_failed

    phases = results / "phases.tsv"
    if phases.exists():
        rows = [line.split("\t") for line in phases.read_text().splitlines() if line]
        print(f"\n{'phase':<30} {'seconds':>8} {'tests':>7} {'failed':>7}")
        total_s = 0
        for name, secs, files in rows:
            got = [per_file.get(f, (0, 0)) for f in files.split()]
            tests = sum(p + f for p, f in got)
            bad = sum(f for _, f in got)
            total_s += int(secs)
            print(f"{name:<30} {secs:>8} {tests if files else '':>7} {bad if files else '':>7}")
        print(f"{'total':<30} {total_s:>8} {passed + failed - setup_failed:>7} "
              f"{failed - setup_failed:>7}")
        if setup_failed:
            print(f"set-up steps that failed: {setup_failed} (each counts as a failed test)")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())

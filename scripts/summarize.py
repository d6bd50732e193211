#!/usr/bin/env python3
"""Sum every suite's results into one closing line: "N passed, N failed".

Reads checks.json (style and layout), meson's testlog.json files (one JSON object per test
executable), fuzz.json (one object per fuzz target) and pytest's JUnit XML (e2e.xml, browser.xml) from the results folder. Exit status 1 if anything
failed, including set-up steps counted by the caller.
"""
import json
import pathlib
import sys
import xml.etree.ElementTree as ET

results = pathlib.Path(sys.argv[1])
passed, failed = 0, int(sys.argv[2]) if len(sys.argv) > 2 else 0

for name in ("checks.json", "unit.json", "unit-asan.json", "fuzz.json"):
    path = results / name
    if not path.exists():
        continue
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        if rec.get("result") in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif rec.get("result") == "SKIP":
            failed += 1  # a skipped suite is not a pass
            print(f"skipped counts as failed: {rec.get('name')}")
        else:
            failed += 1
            print(f"failed: {name}: {rec.get('name')}")

for suite in ("e2e", "browser"):
    xml_path = results / f"{suite}.xml"
    if not xml_path.exists():
        continue
    root = ET.parse(xml_path).getroot()
    for case in root.iter("testcase"):
        bad = case.find("failure") is not None or case.find("error") is not None
        skipped = case.find("skipped") is not None
        if bad or skipped:
            failed += 1
            print(f"failed: {suite}: {case.get('classname')}.{case.get('name')}"
                  + (" (skipped)" if skipped else ""))
        else:
            passed += 1

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed or passed == 0 else 0)

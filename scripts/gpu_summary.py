"""Print pass/fail/skip counts of a GPU test run, per precision, from pytest's JUnit XML."""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict


def main(path: str) -> None:
    counts: dict[str, dict[str, int]] = defaultdict(lambda: {"passed": 0, "failed": 0, "skipped": 0})
    for case in ET.parse(path).iter("testcase"):
        name = case.get("name", "")
        match = re.search(r"\[(?:.*-)?(c?(?:float|bfloat|tfloat|u?int)\w*?-\w+?-\w+?)(?:-|\])", name)
        group = match.group(1) if match else name.split("[")[0]
        state = "passed"
        if case.find("failure") is not None or case.find("error") is not None:
            state = "failed"
        elif case.find("skipped") is not None:
            state = "skipped"
        counts[group][state] += 1
    print(f"{'group':45} {'passed':>7} {'failed':>7} {'skipped':>7}")
    total = {"passed": 0, "failed": 0, "skipped": 0}
    for group in sorted(counts):
        c = counts[group]
        for k in total:
            total[k] += c[k]
        print(f"{group:45} {c['passed']:7d} {c['failed']:7d} {c['skipped']:7d}")
    print(f"{'TOTAL':45} {total['passed']:7d} {total['failed']:7d} {total['skipped']:7d}")


if __name__ == "__main__":
    main(sys.argv[1])

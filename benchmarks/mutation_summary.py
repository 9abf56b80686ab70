"""Print the kill rate and the survivors of the last `mutmut run` in the current directory.

Run by `make mutate` in its scratch copy, after `mutmut export-cicd-stats` and
`mutmut results > mutmut-results.txt`. Timeouts count as killed (the mutant hung the tests);
mutants no selected test calls, and those the time budget left unchecked, are counted apart.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path


def main() -> int:
    stats = json.loads(Path("mutants/mutmut-cicd-stats.json").read_text())
    statuses = Counter()
    survivors = []
    for line in Path("mutmut-results.txt").read_text().splitlines():
        name, _, status = line.strip().rpartition(": ")
        statuses[status] += 1
        if status == "survived":
            survivors.append(name)
    for name in sorted(survivors):
        print(f"survived  {name}")
    caught = stats["killed"] + stats["timeout"]
    run = caught + stats["survived"]
    print(
        f"mutants: {stats['total']}, run {run}: killed {stats['killed']}, "
        f"timeout {stats['timeout']}, survived {stats['survived']}; "
        f"no tests {stats['no_tests']}, not checked {statuses['not checked']}"
    )
    print(f"kill rate: {caught / run:.1%}" if run else "kill rate: no mutant was run")
    return 0


if __name__ == "__main__":
    sys.exit(main())

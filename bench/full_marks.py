"""Whether any wrong program reaches full marks: every exercise's mutants, student programs and
the wrong programs the grader derives from its reference, graded on many seeds, scores only.

    .venv/bin/python bench/full_marks.py [--seeds 50] [SLUG …]

The second look is left out (it changes words, never a score), so a grade costs what its checks
cost. Prints each exercise's programs and every one that reached full marks on some seed, with
those seeds. A derived program at full marks on every seed is equivalent to the reference on the
checks' inputs (`dim=-1` for `dim=1` on matrices): counted apart, not a failure. The mutants of
forged variants are graded; forged variants themselves are the self-check's.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from server.core.catalogue import default_root, load_exercise_info
from worker.cli.self_check import derived_files
from worker.harness import second_look
from worker.harness.grader import Harness


def programs(info, folder: Path) -> dict[str, Path]:
    """name → file: mutants, student programs, derived programs (written to `folder`)."""
    found = {f"mutant {name}": info.path / "mutants" / f"{name}.py" for name in info.mutants}
    found |= {
        f"student program {name}": info.path / "student_programs" / f"{name}.py"
        for name in info.student_programs
    }
    for program, path in derived_files(info, folder):
        found[f"{program.name} ({program.words(None, False)['en'][58:]})"] = path
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("slugs", nargs="*")
    parser.add_argument("--seeds", type=int, default=50)
    args = parser.parse_args()
    second_look.SECONDS = 0.0  # no second look: scores only
    slugs = args.slugs or sorted(p.parent.name for p in default_root().glob("*/reference.py"))
    graded = equivalent = failing = 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch, Harness(scratch) as harness:
        for slug in slugs:
            info = load_exercise_info(default_root() / slug)
            for name, path in programs(info, Path(scratch)).items():
                full = [
                    seed
                    for seed in range(args.seeds)
                    if _full_marks(harness.grade_job(info.job(path, seed=seed)))
                ]
                graded += 1
                if name.startswith("derived:") and len(full) == args.seeds:
                    equivalent += 1
                elif full:
                    failing += 1
                    print(f"FULL MARKS {slug}: {name} on seeds {full}", flush=True)
            print(f"{slug}: done", flush=True)
    print(
        f"\n{graded} wrong programs × {args.seeds} seeds in {time.perf_counter() - started:.0f} s:"
        f" {failing} at full marks on some seed, {equivalent} derived ones at full marks on "
        "every seed (equivalent on the checks' inputs)"
    )
    return 1 if failing else 0


def _full_marks(report) -> bool:
    if not report.graded:
        raise SystemExit(f"grader error: {report.error}")
    return report.score >= report.max_score


if __name__ == "__main__":
    sys.exit(main())

"""How many of the exercises' student programs, and of the wrong programs the grader derives from
each reference, are told their mistake.

    .venv/bin/python bench/named_mistakes.py [--programs DIR] [--seed N …] [SLUG …]

Grades each student program (exercises/<slug>/student_programs/<name>.py, declared in its
exercise.toml with the code it must lose points with and the words that name its mistake) with
the grader and the exercises of the checkout it runs in, and counts those whose report has a
diagnostic of that code saying those words in English and in Spanish, on every seed. `--programs`
takes the programs and their declarations from another checkout's exercises/: run from an older
checkout (PYTHONPATH=. there), it says how many the older diagnostics named.

Then each derived wrong program (worker/harness/derived.py) of the checkout's exercises: those at
full marks on every seed are equivalent to the reference on the checks' inputs; of the rest, how
many lose points on every seed with a wrong program named on every seed (the words come in both
languages by construction), and those that score full marks on some seeds only.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import tomllib
from pathlib import Path

from server.core.catalogue import default_root, load_exercise_info
from worker.cli.self_check import derived_check
from worker.harness.runner import HarnessProcess

LANGUAGES = ("en", "es")


def declared(programs: Path) -> dict[str, dict[str, dict]]:
    """slug -> name -> {"code", "names", "path"}"""
    found = {}
    for toml in sorted(programs.glob("*/exercise.toml")):
        table = tomllib.loads(toml.read_text()).get("student_programs", {})
        found[toml.parent.name] = {
            name: dict(entry, path=toml.parent / "student_programs" / f"{name}.py")
            for name, entry in table.items()
        }
    return found


def named(report: dict, code: str, names: dict) -> bool:
    said = [d for c in report.get("checks", []) for d in c["diagnostics"] if d["code"] == code]
    said += [n for n in report.get("notes", []) if n.get("code") == code]
    return report.get("status") == "graded" and all(
        any(
            names[lang].lower()
            in " ".join(
                d.get("translations", {}).get(lang, {}).get(part, "")
                for part in ("message", "hint")
            ).lower()
            for d in said
        )
        for lang in LANGUAGES
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=Path, default=default_root())
    parser.add_argument("--seed", type=int, action="append", dest="seeds")
    parser.add_argument("slugs", nargs="*", help="these exercises only (all by default)")
    args = parser.parse_args()
    seeds = args.seeds or [0, 1]
    slugs = args.slugs or sorted(declared(default_root()))
    unknown = sorted(set(slugs) - set(declared(default_root())))
    if unknown:
        parser.error(f"no exercise with student programs: {', '.join(unknown)}")
    total = told = lost = 0
    with (
        tempfile.TemporaryDirectory() as scratch,
        HarnessProcess(python=sys.executable, scratch=scratch) as harness,
    ):
        for slug, programs in declared(args.programs).items():
            if slug not in slugs:
                continue
            info = load_exercise_info(default_root() / slug)
            for name, program in programs.items():
                reports = [
                    harness.report_for(info.job(program["path"], seed=seed)).to_dict()
                    for seed in seeds
                ]
                lost += all(
                    r.get("status") == "graded" and r["score"] < r["max_score"] for r in reports
                )
                is_named = all(named(r, program["code"], program["names"]) for r in reports)
                told += is_named
                total += 1
                print(f"{'named    ' if is_named else 'not named'} {slug}/{name}")
        print(
            f"\n{total} student programs, seeds {seeds}: {lost} lose points on every seed, "
            f"{told} are told their mistake in both languages on every seed\n"
        )
        derived = equivalent = named_derived = weak = 0
        for slug in slugs:
            tally = derived_check(harness, load_exercise_info(default_root() / slug), tuple(seeds))
            derived += tally.programs
            equivalent += len(tally.equivalent)
            named_derived += len(tally.told)
            weak += len(tally.problems)
            print(
                f"{slug}: {tally.programs} derived, {len(tally.equivalent)} equivalent, "
                f"{len(tally.told)} named"
            )
    print(
        f"\n{derived} derived wrong programs, seeds {seeds}: {equivalent} at full marks on "
        f"every seed, {derived - equivalent - weak} lose points on every seed, {named_derived} "
        f"of them named on every seed; {weak} at full marks on some seeds only"
    )


if __name__ == "__main__":
    main()

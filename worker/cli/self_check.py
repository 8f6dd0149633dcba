"""`hpcgrade exercise check`: what is wrong with an exercise, found by grading its own programs.

The reference must score full marks; each mutant must lose points with its code; a known wrong
program must be named and lose the same points on every seed; a forged variant must score no
more than the mutant it forges; and each student program (a wrong program written from the
statement alone, as students write them) must lose the same points on every seed, with its code
and a diagnostic that says, in each language, the words that name its mistake. The known wrong
programs' failures of the visible checks must be those visible_mistakes.json holds (`check`
names them from it), which `write_visible_mistakes` writes.
"""

from __future__ import annotations

import functools
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from server.core.catalogue import ExerciseInfo
from worker.harness import visible_mistakes
from worker.harness.codes import LANGUAGES
from worker.harness.derived import Derived, derive
from worker.harness.report import codes
from worker.harness.runner import HarnessProcess

MIN_MUTANTS, MIN_STUDENT_PROGRAMS = 5, 3


def self_check(
    harness: HarnessProcess,
    info: ExerciseInfo,
    seeds: tuple[int | None, ...],
    write_visible_mistakes: bool = False,
    device: str = "auto",
    *,
    second: HarnessProcess,
) -> list[str]:
    """What is wrong with an exercise, graded on each seed (None: a fresh one) on `device` (a
    job's: `auto` is CUDA where torch sees a GPU). `second`, a harness of its own whose students
    draw other random numbers than `harness`'s: a known wrong program must fail the visible
    checks alike in both to be named from them (one for every exercise checked: a harness
    starts in seconds, more than most exercises' programs take to grade)."""
    job = functools.partial(info.job, device=device)
    problems = _visible_mistakes_problems((harness, second), info, write_visible_mistakes, device)
    problems += _reference_problems(harness, info, seeds, device)
    scores: dict[str, set[float]] = {}
    for seed in seeds:
        by_seed = {}
        for name, code in info.mutants.items():
            report = harness.report_for(
                job(info.path / "mutants" / f"{name}.py", seed=seed)
            ).to_dict()
            problems += _mutant_problems(info, name, code, report)
            scores.setdefault(name, set()).add(_untimed_score(info, report))
            by_seed[name] = report
        for name, mutant in info.forged.items():  # on the seed its mutant was graded on
            report = harness.report_for(
                job(info.path / "mutants" / f"{name}.py", seed=by_seed[mutant].get("seed", seed))
            ).to_dict()
            problems += _forged_problems(name, mutant, report, by_seed[mutant])
        for name, expected in info.student_programs.items():
            report = harness.report_for(
                job(info.path / "student_programs" / f"{name}.py", seed=seed)
            ).to_dict()
            problems += _student_program_problems(name, expected, report)
            scores.setdefault(name, set()).add(_untimed_score(info, report))
    problems += [
        f"known wrong program {name} scored {sorted(map(str, scores[name]))} on "
        "different seeds: give its checks fixed cases it cannot pass by chance"
        for name in info.wrong_programs
        if len(scores[name]) > 1
    ]
    problems += [
        f"student program {name} scored {sorted(map(str, scores[name]))} on different "
        "seeds: give the checks fixed cases for each kind of input the statement allows"
        for name in info.student_programs
        if len(scores[name]) > 1
    ]
    return problems


def _reference_problems(
    harness: HarnessProcess, info: ExerciseInfo, seeds: tuple[int | None, ...], device: str
) -> list[str]:
    """The reference must earn every point on every seed, on the hidden checks and the visible
    ones; a timed check's on one run at least: a loaded machine can take it from any run."""
    problems, timed_earned = [], dict.fromkeys(info.timed_checks, False)
    for seed in seeds:
        for visible in (False, True):
            report = harness.report_for(
                info.job(info.path / "reference.py", seed=seed, visible=visible, device=device)
            ).to_dict()
            failing = [
                c["name"] + ": " + c["message"]
                for c in report.get("checks", [])
                if not c["passed"] and c["name"] not in timed_earned
            ]
            for c in report.get("checks", []):
                if c["name"] in timed_earned:
                    timed_earned[c["name"]] |= c["passed"]
            if report.get("status") != "graded" or failing:
                problems.append(
                    f"reference scored {report.get('score')}/{report.get('max_score')}"
                    f"{' on the visible checks' if visible else ''} (seed "
                    f"{report.get('seed')}): {report.get('error') or failing}"
                )
    return problems + [
        f"reference failed its timed check {name} on every seed: too slow for its own limit"
        for name, earned in timed_earned.items()
        if not earned
    ]


def _untimed_score(info: ExerciseInfo, report: dict) -> float | None:
    """The points a report's checks earned, but for its timed checks': what must be the same on
    every seed (a loaded machine can take a speed bonus from any program, the reference too)."""
    if report.get("status") != "graded":
        return None
    return sum(c["points"] for c in report.get("checks", []) if c["name"] not in info.timed_checks)


@dataclass
class DerivedTally:
    """The derived wrong programs (worker/harness/derived.py) graded on every seed: those at full
    marks on every seed (equivalent to the reference on the checks' inputs), those told a wrong
    program's words on every seed, and what is wrong (full marks on some seeds only, a grader
    error)."""

    programs: int = 0
    equivalent: list[str] = field(default_factory=list)
    told: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def derived_files(info: ExerciseInfo, folder: Path) -> list[tuple[Derived, Path]]:
    """The exercise's derived programs, each written to a file of `folder`, to be graded."""
    written = []
    for number, program in enumerate(derive((info.path / "reference.py").read_text())):
        path = folder / f"{info.slug}_derived_{number}.py"
        path.write_text(program.source)
        written.append((program, path))
    return written


def derived_check(
    harness: HarnessProcess,
    info: ExerciseInfo,
    seeds: tuple[int | None, ...],
    device: str = "auto",
) -> DerivedTally:
    tally = DerivedTally()
    with tempfile.TemporaryDirectory(prefix="hpcgrade-derived-") as folder:
        for program, path in derived_files(info, Path(folder)):
            reports = [
                harness.report_for(info.job(path, seed=seed, device=device)).to_dict()
                for seed in seeds
            ]
            tally.programs += 1
            change = program.words(None, False)["en"]
            broken = [r for r in reports if r.get("status") != "graded"]
            if broken:
                tally.problems.append(
                    f"derived program {program.name}: grader error "
                    f"{broken[0].get('error')} (seed {broken[0].get('seed')}): "
                    f"{change}"
                )
                continue
            full = [r["seed"] for r in reports if r["score"] >= r["max_score"]]
            if len(full) == len(reports):
                tally.equivalent.append(program.name)
            elif full:
                tally.problems.append(
                    f"derived program {program.name} scored full marks on seed(s) {full} and "
                    f"lost points on others: give the checks fixed cases it cannot pass by "
                    f"chance. {change}"
                )
            elif all(
                any(
                    d["details"].get("wrong_program") for c in r["checks"] for d in c["diagnostics"]
                )
                for r in reports
            ):
                tally.told.append(program.name)
    return tally


def _visible_mistakes_problems(
    harnesses: tuple[HarnessProcess, HarnessProcess],
    info: ExerciseInfo,
    write: bool,
    device: str,
) -> list[str]:
    """The known wrong programs' marks on the visible checks (their inputs are fixed: the same
    on every run), against visible_mistakes.json; `write`: write the file instead. A program
    that fails them differently in the second harness (dropout left on) cannot be named from
    them."""
    found = {}
    for name, program in info.wrong_programs.items():
        job = info.job(info.path / "mutants" / f"{name}.py", visible=True, device=device)
        marks = [
            visible_mistakes.marks(r) if r.get("status") == "graded" else {}
            for r in (h.report_for(job).to_dict() for h in harnesses)
        ]
        if marks[0] and marks[0] == marks[1]:  # none: it passes every visible check
            found[name] = {**program, "marks": marks[0]}
    path = info.path / visible_mistakes.FILE
    if write:
        if found:
            path.write_text(json.dumps(found, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
        else:
            path.unlink(missing_ok=True)
        return []
    try:
        written = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        written = None
    if written != found:
        return [
            f"{visible_mistakes.FILE} does not hold the known wrong programs' failures of the "
            f"visible checks: run `hpcgrade exercise check {info.slug} "
            "--write-visible-mistakes`"
        ]
    return []


def _forged_problems(name: str, mutant: str, report: dict, mutant_report: dict) -> list[str]:
    """A forged variant (the mutant plus code that rewrites, in its own process, what the harness
    reports) must score no more than the mutant: no point may rest on what the student's process
    says about itself."""
    seed = f"(seed {report.get('seed')})"
    if report.get("status") != "graded":
        return [f"forged variant {name}: grader error {report.get('error')} {seed}"]
    if mutant_report.get("status") == "graded" and report["score"] > mutant_report["score"]:
        gained = sorted(
            {c["name"] for c in report["checks"] if c["passed"]}
            - {c["name"] for c in mutant_report["checks"] if c["passed"]}
        )
        return [
            f"forged variant {name} scored {report['score']}, more than its mutant {mutant} "
            f"({mutant_report['score']}) {seed}: {', '.join(gained)} rest on a claim"
        ]
    return []


def _wrong_program_problem(kind: str, name: str, code: str, report: dict) -> str | None:
    """What a wrong program's report must show: graded, points lost, its code among them."""
    seed = f"(seed {report.get('seed')})"
    if report.get("status") != "graded":
        return f"{kind} {name}: grader error {report.get('error')} {seed}"
    if report["score"] >= report["max_score"]:
        return f"{kind} {name} scored full marks {seed}"
    found = codes(report)
    if code not in found:
        return f"{kind} {name} lost points but with {sorted(found)}, not {code} {seed}"
    return None


def too_few(info: ExerciseInfo) -> list[str]:
    """The minimums docs/writing-an-exercise.md asks, which `exercise check` holds an exercise
    to beside what grading its programs finds: a mistake students make that no program
    stands for passes unnoticed, and the checks' fixed cases are only as good as the wrong
    programs they were chosen against."""
    mutants, students = len(info.mutants), len(info.student_programs)
    return [
        *(
            [f"{mutants} mutants: write at least {MIN_MUTANTS}, the mistakes students make"]
            if mutants < MIN_MUTANTS
            else []
        ),
        *(
            [
                f"{students} student programs: write at least {MIN_STUDENT_PROGRAMS}, from the "
                "statement alone, each a mistake the mutants do not make"
            ]
            if students < MIN_STUDENT_PROGRAMS
            else []
        ),
    ]


def _mutant_problems(info: ExerciseInfo, name: str, code: str, report: dict) -> list[str]:
    problem = _wrong_program_problem("mutant", name, code, report)
    if problem:
        return [problem]
    named = {d["details"].get("wrong_program") for c in report["checks"] for d in c["diagnostics"]}
    if name in info.wrong_programs and name not in named:
        return [
            f"known wrong program {name} was not recognised (seed {report.get('seed')}): "
            f"{sorted(n for n in named if n) or 'no wrong program'} named"
        ]
    return []


def _student_program_problems(name: str, expected: dict, report: dict) -> list[str]:
    code = expected["code"]
    problem = _wrong_program_problem("student program", name, code, report)
    if problem:
        return [problem]
    said = [d for c in report["checks"] for d in c["diagnostics"] if d["code"] == code]
    said += [n for n in report.get("notes", []) if n.get("code") == code]
    return [
        f"student program {name}: no {code} diagnostic says “{expected['names'][lang]}” in "
        f"{lang} (seed {report.get('seed')}); it says: "
        + " / ".join(
            sorted(
                {
                    d["translations"][lang]["message"] + " " + d["translations"][lang]["hint"]
                    for d in said
                    if "translations" in d
                }
            )
        )
        for lang in LANGUAGES
        if not any(_says(d, lang, expected["names"][lang]) for d in said)
    ]


def _says(diagnostic: dict, lang: str, words: str) -> bool:
    text = diagnostic.get("translations", {}).get(lang, {})
    return words.lower() in f"{text.get('message', '')} {text.get('hint', '')}".lower()

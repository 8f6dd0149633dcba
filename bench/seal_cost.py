"""What the seal (worker/harness/seal.py) costs a grade: `autograd-q`'s reference and mutants
graded by a warm in-process harness whose student processes are sealed, against one whose are
not, interleaved in the same run; and what making torch's and the harness's types immutable
costs the zygote, once per warm-up.

    .venv/bin/python bench/seal_cost.py [--grades 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from server.core.catalogue import load_exercise_info  # noqa: E402
from worker.harness import seal  # noqa: E402
from worker.harness.grader import Harness  # noqa: E402

EXERCISE = ROOT / "exercises" / "autograd-q"
SUBMISSIONS = [EXERCISE / "reference.py"] + sorted((EXERCISE / "mutants").glob("*.py"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grades", type=int, default=30, help="grades on each side")
    grades = parser.parse_args().grades
    info = load_exercise_info(EXERCISE)
    jobs = [info.job(SUBMISSIONS[k % len(SUBMISSIONS)], seed=k) for k in range(grades)]
    # the seal left out of the layers a grade requires, so that the unsealed side grades too
    jobs = [
        type(job)(
            **dict(
                job.to_dict(),
                required_layers=[layer for layer in job.required_layers if layer != "seal"],
            )
        )
        for job in jobs
    ]
    times: dict[bool, list[float]] = {True: [], False: []}
    with (
        tempfile.TemporaryDirectory() as scratch,
        Harness(scratch, sealed=True) as sealed,
        Harness(scratch, sealed=False) as unsealed,
    ):
        harnesses = {True: sealed, False: unsealed}
        for side in (True, False):  # a first grade each pays the lazy imports
            harnesses[side].grade_job(jobs[0])
        for job in jobs:
            scores = {}
            for side in (True, False):
                started = time.perf_counter()
                report = harnesses[side].grade_job(job)
                times[side].append(time.perf_counter() - started)
                assert report.graded, report.error
                scores[side] = report.score
            # a seal that broke honest grading would be cheap to measure and wrong
            assert scores[True] == scores[False], (job.submission, scores)
    started = time.perf_counter()
    seal.protect_loaded_types()
    protect = time.perf_counter() - started
    with_seal, without = statistics.median(times[True]), statistics.median(times[False])
    print(f"grades: {grades} each side, autograd-q's reference and mutants")
    print(
        f"sealed median {with_seal * 1e3:.1f} ms, unsealed {without * 1e3:.1f} ms, "
        f"difference {(with_seal - without) * 1e3:+.2f} ms ({with_seal / without:.3f}×)"
    )
    print(f"the zygote making this process's protected types immutable: {protect * 1e3:.2f} ms")


if __name__ == "__main__":
    main()

"""Wall time of a cold single grade against `python -c "import torch"`, in the same run.

A cold grade is everything a one-off `hpcgrade grade` or a Slurm job grading one run pays: start
the harness, grade one `autograd-q` submission in a sandboxed student process, get the report,
and every process exited. Two ways in: `python -m worker.harness serve` (a job on stdin, the
report on stdout) and `python -m worker.harness spool` (a run written into a spool, its report
read back from there). The three are interleaved so that a noisy neighbour hits them alike.
Beside each wall time, the CPU its processes took: the grader's and the zygote's (a student's,
reaped out of sight, not counted), whatever else the machine runs.

    .venv/bin/python bench/cold_start.py [--runs 5] [--python PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from worker.harness import spool  # noqa: E402
from worker.harness.jobs import Job  # noqa: E402

EXERCISE = ROOT / "exercises" / "autograd-q"
REFERENCE = EXERCISE / "reference.py"
ENVIRONMENT = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT)}


class Timing(NamedTuple):
    wall: float
    cpu: float  # of the processes waited for


def job(run_id: str) -> Job:
    return Job(
        exercise="autograd-q",
        exercise_dir=str(EXERCISE),
        submission=str(REFERENCE),
        filename="reference.py",
        id=run_id,
    )


def cpu_of_children() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(command: list[str], **kwargs) -> tuple[Timing, subprocess.CompletedProcess]:
    started, cpu = time.perf_counter(), cpu_of_children()
    done = subprocess.run(
        command, env=ENVIRONMENT, cwd=ROOT, capture_output=True, text=True, **kwargs
    )
    timing = Timing(time.perf_counter() - started, cpu_of_children() - cpu)
    if done.returncode != 0:
        raise SystemExit(f"{command} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return timing, done


def import_torch(python: str) -> Timing:
    return timed([python, "-c", "import torch"])[0]


def serve(python: str, scratch: str) -> Timing:
    line = json.dumps(job("serve").to_dict()) + "\n"
    timing, done = timed(
        [python, "-m", "worker.harness", "serve", "--scratch", scratch], input=line
    )
    ready, report = (json.loads(line) for line in done.stdout.splitlines())
    assert ready == {"ready": True}, ready
    assert report["status"] == "graded" and report["score"] == report["max_score"], report
    return timing


def spool_run(python: str, scratch: str, root: Path, number: int) -> Timing:
    run_id = f"cold-{number}"
    spool.write_run(root, job(run_id), REFERENCE.read_bytes())
    timing, _ = timed(
        [python, "-m", "worker.harness", "spool", "--scratch", scratch, str(root), run_id]
    )
    report = spool.read_report(spool.run_dir(root, run_id))
    assert report and report.status == "graded" and report.score == report.max_score, report
    return timing


def describe(name: str, timings: list[Timing], baseline: Timing) -> str:
    times = [t.wall for t in timings]
    median, cpu = statistics.median(times), statistics.median(t.cpu for t in timings)
    return (
        f"{name:34}: median {median * 1000:6.0f} ms  (min {min(times) * 1000:.0f}, "
        f"max {max(times) * 1000:.0f}, n={len(times)})  ratio {median / baseline.wall:.2f}; "
        f"CPU {cpu * 1000:.0f} ms, ratio {cpu / baseline.cpu:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--python", default=sys.executable, help="the course venv's interpreter")
    args = parser.parse_args()
    times: dict[str, list[Timing]] = {"import": [], "serve": [], "spool": []}
    with tempfile.TemporaryDirectory() as scratch, tempfile.TemporaryDirectory() as root:
        import_torch(args.python)  # the page cache is warm for every side alike
        for number in range(args.runs):
            times["import"].append(import_torch(args.python))
            times["serve"].append(serve(args.python, scratch))
            times["spool"].append(spool_run(args.python, scratch, Path(root), number))
    baseline = Timing(
        statistics.median(t.wall for t in times["import"]),
        statistics.median(t.cpu for t in times["import"]),
    )
    print(describe('python -c "import torch"', times["import"], baseline))
    print(describe("cold grade, worker.harness serve", times["serve"], baseline))
    print(describe("cold grade, worker.harness spool", times["spool"], baseline))
    print("target: ratio ≤ 1.5 for both cold grades")


if __name__ == "__main__":
    main()

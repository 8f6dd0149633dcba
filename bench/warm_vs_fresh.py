"""Wall time per `autograd-q` submission: the warm harness against a fresh Python process.

The baseline is what a grader without a warm path pays per submission: a new `python` that
imports torch, runs the submission and its checks in the same process (no sandbox), and exits.
The warm path is one `python -m worker.harness serve` grading submission after submission, each in
a freshly forked, fully sandboxed student process. Both are measured here, in the same run.
A wrong program's report also takes a second look (second_look.py: its wrong program named, in a
student process of its own), which the fresh process does not: the grade itself leaves it out.

    .venv/bin/python bench/warm_vs_fresh.py [--warm 40] [--fresh 5] [--device cuda]

On a GPU node `--device cuda` grades on the GPU on both sides: each fresh process, and each
forked student process of the warm harness, initialises CUDA for itself.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from server.core.catalogue import load_exercise_info  # noqa: E402
from worker.harness.runner import HarnessProcess  # noqa: E402

EXERCISE = ROOT / "exercises" / "autograd-q"
SUBMISSIONS = [EXERCISE / "reference.py"] + sorted((EXERCISE / "mutants").glob("*.py"))

# The same four checks as exercises/autograd-q/checks.py, in the student's own process.
FRESH_GRADER = """
import importlib.util, sys, torch
device = torch.device(sys.argv[2])
spec = importlib.util.spec_from_file_location("submission", sys.argv[1])
student = importlib.util.module_from_spec(spec)
spec.loader.exec_module(student)
score = 0
for points, shape in ((3, (4,)), (3, (5,)), (2, (3, 4)), (2, (3,))):
    a, b, v = (torch.randn(*shape, device=device) for _ in range(3))
    try:
        ga, gb = student.q_grads(a.clone().requires_grad_(), b.clone().requires_grad_(), v)
        score += points * bool(torch.allclose(ga, 9 * a**2 * v, rtol=1e-4) and torch.allclose(gb, -2 * b * v, rtol=1e-4))
    except Exception:
        pass
print(score)
"""


def fresh(runs: int, device: str) -> list[float]:
    with tempfile.NamedTemporaryFile("w", suffix=".py") as grader:
        grader.write(FRESH_GRADER)
        grader.flush()
        times = []
        for i in range(runs):
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, grader.name, str(SUBMISSIONS[i % len(SUBMISSIONS)]), device],
                check=True,
                capture_output=True,
            )
            times.append(time.perf_counter() - started)
    return times


def warm(runs: int, device: str) -> tuple[list[float], list[float], float, list[str]]:
    """Each submission's wall time, the same less its second look's, the start-up, the layers."""
    info = load_exercise_info(EXERCISE)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch, HarnessProcess(scratch=scratch) as harness:
        start_up = time.perf_counter() - started
        times, graded, layers = [], [], []
        for i in range(runs):
            job = info.job(SUBMISSIONS[i % len(SUBMISSIONS)], device=device)
            t = time.perf_counter()
            report = harness.report_for(job)
            times.append(time.perf_counter() - t)
            graded.append(times[-1] - report.timing["second_look"])
            assert report.status == "graded", report
            if i % len(SUBMISSIONS) == 0:  # the reference: a check that raised would show here
                assert report.score == report.max_score, report.checks
            assert report.environment["device"].startswith(device), report.environment
            layers = report.sandbox["layers"]
    return times, graded, start_up, layers


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--warm", type=int, default=40)
    parser.add_argument("--fresh", type=int, default=5)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = parser.parse_args()
    warm_times, graded_times, start_up, layers = warm(args.warm, args.device)
    fresh_times = fresh(args.fresh, args.device)
    print(f"device                      : {args.device}")
    w, f = statistics.median(warm_times), statistics.median(fresh_times)
    print(f"fresh python per submission : median {f * 1000:7.0f} ms  (n={len(fresh_times)})")
    print(
        f"warm harness per submission : median {w * 1000:7.1f} ms  p90 "
        f"{sorted(warm_times)[int(0.9 * len(warm_times))] * 1000:.1f} ms  (n={len(warm_times)})"
    )
    print(
        f"  the grade itself          : median {statistics.median(graded_times) * 1000:7.1f} ms  "
        "(the second look a wrong program gets left out)"
    )
    print(f"warm harness start-up (once): {start_up * 1000:7.0f} ms")
    g = statistics.median(graded_times)
    print(
        f"ratio warm / fresh          : {w / f:.4f}, the grade itself {g / f:.4f}  "
        "(target ≤ 0.05, goal 0.02; the fresh process takes no second look)"
    )
    print(f"sandbox layers              : {', '.join(layers)}")


if __name__ == "__main__":
    main()

"""Bounds a submission cannot lift (issue 16 §3): grade the three files seen to lift them.

    .venv/bin/python bench/bounds.py [--only NAME] [--sleep S]

- `huge-exception`: a 113-byte file that lifts the student-side message cap in its own
  process and raises a 15 MB exception while loading (autograd-q);
- `sleeps`: the reference of tensors-combine with each function sleeping 9 s first;
- `scratch`: writes 2.5 GiB into its scratch as 16 MB files (each under file_mb), then
  prints how much it managed to write.

For each it prints the report's size (JSON bytes), the score, the wall time of the grade and
the scratch used: the peak of what the grader saw under its scratch root (polled), and the
peak growth of the used space of the filesystem that holds it. Run it on an older tree with
PYTHONPATH pointing at that tree to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

HUGE = (
    "import sys\nsys.modules['worker.harness.student'].MAX_MESSAGE=1<<30\n"
    "raise Exception('x'*15_000_000)\n"
)

SLEEPS = """import time, torch
def stack_rows(a, b):
    time.sleep({s}); return torch.vstack((a, b))
def stack_cols(a, b):
    time.sleep({s}); return torch.hstack((a, b))
def batches(x, size):
    time.sleep({s}); return torch.split(x, size)
def n_chunks(n, k):
    time.sleep({s}); return len(torch.arange(n).chunk(k))
def nonzero_positions(t):
    time.sleep({s}); return torch.argwhere(t)
"""

SCRATCH = """import os, tempfile
written = 0
chunk = b"x" * (1 << 20)
try:
    for i in range(160):
        with open(os.path.join(tempfile.gettempdir(), f"f{i}"), "wb") as f:
            for _ in range(16):
                f.write(chunk)
                written += len(chunk)
except OSError as exc:
    print("scratch write stopped:", type(exc).__name__, exc)
print(f"scratch written: {written / (1 << 20):.0f} MiB")
def q_grads(a, b, v):
    Q = 3 * a ** 3 - b ** 2
    Q.backward(gradient=v)
    return a.grad, b.grad
"""


class ScratchWatch:
    """Peak bytes under a folder (polled) and peak growth of its filesystem's used space."""

    def __init__(self, root: str, every: float = 0.05):
        self.root, self.every = root, every
        self.peak_tree = self.peak_fs = 0
        self.base = self._fs_used()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _fs_used(self) -> int:
        st = os.statvfs(self.root)
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    def _tree(self) -> int:
        total = 0
        for folder, _dirs, files in os.walk(self.root):
            for name in files:
                try:
                    total += os.lstat(os.path.join(folder, name)).st_blocks * 512
                except OSError:
                    pass
        return total

    def _run(self) -> None:
        while not self.stop.is_set():
            self.peak_tree = max(self.peak_tree, self._tree())
            self.peak_fs = max(self.peak_fs, self._fs_used() - self.base)
            self.stop.wait(self.every)

    def __enter__(self) -> "ScratchWatch":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", choices=("huge-exception", "sleeps", "scratch"), action="append")
    parser.add_argument("--sleep", type=float, default=9.0, help="seconds each function sleeps")
    parser.add_argument("--json", action="store_true", help="one JSON line per file as well")
    args = parser.parse_args()

    from server.core.catalogue import default_root, load_exercise_info
    from worker.harness.grader import Harness

    cases = [
        ("huge-exception", "autograd-q", HUGE),
        ("sleeps", "tensors-combine", SLEEPS.format(s=args.sleep)),
        ("scratch", "autograd-q", SCRATCH),
    ]
    cases = [c for c in cases if not args.only or c[0] in args.only]
    import worker.harness.grader as grader_module

    print(f"tree: {Path(grader_module.__file__).resolve().parents[2]}")
    with tempfile.TemporaryDirectory(prefix="hpcgrade-bench-") as work:
        scratch_root = os.path.join(work, "scratch")
        os.mkdir(scratch_root)
        with Harness(scratch_root) as harness:
            for name, slug, source in cases:
                path = Path(work) / f"{name}.py"
                path.write_text(source)
                job = load_exercise_info(default_root() / slug).job(path, seed=7)
                started = time.perf_counter()
                with ScratchWatch(scratch_root) as watch:
                    report = harness.grade_job(job).to_dict()
                seconds = time.perf_counter() - started
                size = len(json.dumps(report).encode())
                said = [
                    line
                    for line in report.get("output", "").splitlines()
                    if line.startswith("scratch")
                ]
                codes = sorted(
                    {d["code"] for c in report.get("checks", []) for d in c["diagnostics"]}
                    | {n.get("code") for n in report.get("notes", []) if n.get("code")}
                )
                print(
                    f"{name:15} {slug:16} report {size / 1024:10.1f} KiB  "
                    f"score {report.get('score')}/{report.get('max_score')}  "
                    f"time {seconds:6.1f} s  scratch peak {watch.peak_tree / 2**20:7.1f} MiB "
                    f"(filesystem +{max(watch.peak_fs, 0) / 2**20:.1f} MiB)  codes {codes}"
                    + (f"  student: {'; '.join(said)}" if said else ""),
                    flush=True,
                )
                if args.json:
                    print(
                        json.dumps(
                            {
                                "case": name,
                                "report_bytes": size,
                                "seconds": seconds,
                                "scratch_peak_bytes": watch.peak_tree,
                                "filesystem_peak_bytes": watch.peak_fs,
                                "score": report.get("score"),
                                "codes": codes,
                            }
                        )
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Each bench that needs no service, run at its smallest size: a change that breaks one (a
signature it calls, a field it reads) fails here rather than the next time someone measures.
The figures they print are not looked at."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SMALLEST = {
    "cold_start.py": ["--runs", "1"],  # it called spool.read_report with a job, not a folder
    "full_marks.py": ["--seeds", "1", "tensors-channels-last"],
    "seal_cost.py": ["--grades", "2"],
    "similarity.py": ["--students", "12", "--copied", "2"],
    "warm_vs_fresh.py": ["--warm", "2", "--fresh", "1"],
}


@pytest.mark.bench
@pytest.mark.parametrize("bench", sorted(SMALLEST))
def test_a_bench_runs_at_its_smallest_size(bench):
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / bench), *SMALLEST[bench]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]

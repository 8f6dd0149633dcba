"""Each bench, run at its smallest size: a change that breaks one (a signature it calls, a field
it reads) fails here rather than the next time someone measures. The figures they print are not
looked at. Those that need the tests' services (scripts/test starts them) are marked so; those
that need Slurm or munged share the machine's (machine_wide, by their slurm mark)."""

import contextlib
import os
import signal
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
    "bounds.py": ["--only", "sleeps", "--sleep", "0.2"],
    "named_mistakes.py": ["--seed", "1", "autograd-q"],
}
ON_SERVICES = {
    "courses.py": ["--courses", "1", "--students", "3", "--seconds", "1"],
    "login.py": ["--rounds", "1", "--each", "1"],
    "regrade.py": ["--students", "2", "--submissions", "1", "--executors", "local"],
    "result_latency.py": ["service", "--submissions", "2"],
    "roster_import.py": ["--rows", "20", "--sample", "2"],
    "service.py": ["--submissions", "2", "--seconds", "1"],
    "soak.py": ["--target", "service", "--seconds", "20", "--students", "2"],
    "token_auth.py": ["--requests", "20", "--rounds", "1"],
    "faults.py": ["--only", "pool", "--flood", "1", "--patience", "120"],
}
ON_SLURM = {
    "munge_submit.py": ["--rounds", "1", "--each", "1"],
    # about a minute: every figure once (its rushes of one student each); it once ended in an
    # AttributeError (--rush 0) and a TypeError (--cold) before printing any
    "slurm.py": ["--latency", "1", "--idle", "1", "--pilot", "1", "--rush", "1", "--cold", "1"],
}
# benches that do not run yet, and why: each is an open defect, not a smoke run left out
NOT_RUNNING: dict[str, str] = {}
BENCHES = [
    *(pytest.param(b, SMALLEST[b], id=b) for b in sorted(SMALLEST)),
    *(
        pytest.param(b, ON_SERVICES[b], id=b, marks=pytest.mark.services)
        for b in sorted(ON_SERVICES)
    ),
    *(pytest.param(b, ON_SLURM[b], id=b, marks=pytest.mark.slurm) for b in sorted(ON_SLURM)),
]


def test_every_bench_has_its_smoke_run():
    smoked = {b.values[0] for b in BENCHES}
    assert {p.name for p in (ROOT / "bench").glob("*.py")} == smoked | set(NOT_RUNNING)


@pytest.mark.bench
@pytest.mark.parametrize(("bench", "smallest"), BENCHES)
def test_a_bench_runs_at_its_smallest_size(bench, smallest):
    """In a session of its own, killed whole at the end: a bench that hangs or dies leaves no
    portal or worker of its own behind to answer the next one's requests."""
    running = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / bench), *smallest],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = running.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        os.killpg(running.pid, signal.SIGKILL)
        out, err = running.communicate()
        pytest.fail(f"{bench} ran past 600 s: {out[-2000:]}{err[-20000:]}")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(running.pid, signal.SIGKILL)
    # much of stderr: a portal's warning ("stays queued") comes long before the traceback
    assert running.returncode == 0, out[-2000:] + err[-20000:]

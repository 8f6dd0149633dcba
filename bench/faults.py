"""Recovery from faults, and fair share under a hogging student, on the whole service as real
processes (tests/stack.py: PostgreSQL and Redis of its own, gunicorn behind nginx, one Celery
worker with 2 slots, Celery beat on its own).

1. For each fault, the time from its end to the last affected submission graded (a batch of
   mixed files sent just before or during it). Baseline, in the same run: the same batch on a
   quiet service, from its last submission to its last grade.
2. Fair share: the p50 wait (submitted → graded) of 10 students' correct files while one student
   floods the queue with 50 files that never finish loading, against the same 10 on an idle queue.

    .venv/bin/python bench/faults.py [--flood 50] [--patience 300] [--only pool ...]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from stack import FILES, Ledger, Stack, now, running_run, settle  # noqa: E402

from server.core.catalogue import default_root, load_exercise_info  # noqa: E402

STUDENTS = [f"s{n:02d}" for n in range(10)]
HOG = "s10"
HOG_EXERCISES = ("autograd-q", "metrics", "tensors-reshape")  # 20 attempts each
OUTAGE_SECONDS = 10.0


def hogging(slug: str, n: int) -> str:
    """A file the portal takes (it defines one of the exercise's functions) that loads for ever."""
    name = load_exercise_info(default_root() / slug).functions[0]
    return f"# {n}\ndef {name}(*args):\n    pass\n\n\nwhile True:\n    pass\n"


def batch(ledger: Ledger, phase: str, slow_files: int = 0, load_seconds: float = 0) -> list[int]:
    """Two of each kind of file, `slow_files` of them slow to load: what a fault hits."""
    kinds = [kind for kind in FILES for _ in range(2)]
    return [
        ledger.submit(phase, kind, load_seconds if n < slow_files else 0).id
        for n, kind in enumerate(kinds)
    ]


def last_graded(stack: Stack, ids: list[int], since, patience: float) -> float | None:
    """Seconds from `since` to the last of these graded, or None when one was not graded."""
    found = settle(stack, ids, patience)
    runs = [next((r for r in s.runs if r.status == "done"), None) for s in found.values()]
    if len(found) < len(ids) or None in runs:
        return None
    return max(r.finished_at for r in runs).timestamp() - since.timestamp()


def redis_restarted(stack: Stack, ledger: Ledger, patience: float) -> float | None:
    stack.redis.stop()
    ids = batch(ledger, "redis")
    stack.redis.start()
    return last_graded(stack, ids, now(), patience)


def database_stopped(stack: Stack, ledger: Ledger, patience: float) -> float | None:
    ids = batch(ledger, "database", slow_files=4, load_seconds=1)
    stack.postgres.stop()
    time.sleep(OUTAGE_SECONDS)
    stack.postgres.start()
    return last_graded(stack, ids, now(), patience)


def pool_process_killed(stack: Stack, ledger: Ledger, patience: float) -> float | None:
    ids = batch(ledger, "pool", slow_files=2, load_seconds=3)
    _, pid = running_run(stack, ids)
    os.kill(pid, signal.SIGKILL)
    return last_graded(stack, ids, now(), patience)


def main_process_killed(stack: Stack, ledger: Ledger, patience: float) -> float | None:
    ids = batch(ledger, "main", slow_files=2, load_seconds=3)
    running_run(stack, ids)
    stack.worker.kill()
    ended = now()
    stack.worker.restart_after_kill()
    return last_graded(stack, ids, ended, patience)


def beat_killed(stack: Stack, ledger: Ledger, patience: float) -> float | None:
    stack.beat.kill()
    stack.redis.stop()  # what is sent now waits for the new beat's reconcile
    ids = batch(ledger, "beat")
    stack.redis.start()
    stack.beat.restart_after_kill()
    return last_graded(stack, ids, now(), patience)


FAULTS = {
    "redis": ("Redis restarted", redis_restarted),
    "database": (f"PostgreSQL stopped {OUTAGE_SECONDS:.0f} s", database_stopped),
    "pool": ("pool process killed", pool_process_killed),
    "main": ("main worker process killed (restarted)", main_process_killed),
    "beat": ("beat killed while Redis was away", beat_killed),
}


def faults(
    stack: Stack, ledger: Ledger, patience: float, only: list[str]
) -> dict[str, float | None]:
    ids = batch(ledger, "baseline", slow_files=2, load_seconds=1)
    figures = {"none (baseline)": last_graded(stack, ids, now(), patience)}
    for key in only:
        name, fault = FAULTS[key]
        figures[name] = fault(stack, ledger, patience)
    return figures


def waits(stack: Stack, apis: dict, patience: float) -> list[float | None]:
    """Each student sends a correct file at once; seconds from its submission to its grade."""
    sent = [apis[name].submit("autograd-q", FILES["q-right"][1].read_text()) for name in STUDENTS]
    ids = [answer.json()["id"] for answer in sent]
    found = settle(stack, ids, patience)
    result = []
    for submission_id in ids:
        submission = found.get(submission_id)
        run = next((r for r in submission.runs if r.status == "done"), None) if submission else None
        result.append((run.finished_at - submission.submitted_at).total_seconds() if run else None)
    return result


def p50(values: list[float | None], patience: float) -> str:
    if None in values:
        return f"> {patience:.0f} s ({values.count(None)} of {len(values)} not graded)"
    return f"{statistics.median(values):.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--flood", type=int, default=50)
    parser.add_argument(
        "--patience",
        type=float,
        default=300,
        help="seconds to wait for a grade before giving up on it",
    )
    parser.add_argument(
        "--only", choices=sorted(FAULTS), action="append", help="these faults alone (repeat)"
    )
    args = parser.parse_args()
    started = time.monotonic()
    with Stack(students=11) as stack:
        ledger = Ledger(stack, STUDENTS)
        settle(stack, batch(ledger, "warm-up"), 60)  # each pool process starts its harness
        recovery = faults(stack, ledger, args.patience, args.only or list(FAULTS))
        apis = {name: stack.api(name) for name in STUDENTS}
        idle = waits(stack, apis, args.patience)
        hog = stack.api(HOG)
        flood = [
            hog.submit(slug, hogging(slug, n))
            for n in range(args.flood)
            for slug in [HOG_EXERCISES[n % len(HOG_EXERCISES)]]
        ]
        accepted = sum(answer.status_code == 202 for answer in flood)
        time.sleep(1)  # the flood is in the queue, its first files in hand
        flooded = waits(stack, apis, args.patience)
    baseline = recovery.pop("none (baseline)")
    print("fault → last affected submission graded, seconds after the fault ended")
    print(
        f"  {'no fault (baseline: last submission → last graded)':52} "
        f"{baseline if baseline is None else f'{baseline:6.1f} s'}"
    )
    for name, seconds in recovery.items():
        shown = (
            f"not graded within {args.patience:.0f} s"
            if seconds is None
            else f"{seconds:6.1f} s"
            + (f"  ({seconds / baseline:.1f}× baseline)" if baseline else "")
        )
        print(f"  {name:52} {shown}")
    print(f"fair share: p50 wait of {len(STUDENTS)} students' correct files")
    print(f"  {'idle queue':52} {p50(idle, args.patience)}")
    flood_label = f"one student flooding {args.flood} never-loading files ({accepted} in)"
    print(f"  {flood_label:52} {p50(flooded, args.patience)}")
    if None not in idle + flooded:
        print(f"  ratio flooded / idle: {statistics.median(flooded) / statistics.median(idle):.1f}")
    print(
        f"({os.cpu_count()} cores, gunicorn 2 sync workers behind nginx, Celery --concurrency 2;"
        f" {time.monotonic() - started:.0f} s in all)"
    )


if __name__ == "__main__":
    main()

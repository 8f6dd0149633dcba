""" "Grade all again" on a course of 200 students with 5 graded `autograd-q` submissions each (real
files: the reference and the exercise's mutants, cycled), through the whole service: gunicorn,
a Celery worker (and beat), PostgreSQL and Redis.

1. The time from the instructor's click (the portal's POST) to the full preview graded: every
   graded submission, 1000 runs, on the local executor (one warm worker process grading one run
   at a time) and on Slurm (jobs of SLURM_BATCH_SIZE 20, the single-node Slurm of
   scripts/slurm). Baseline, in the same run and on the same worker: the preview as it was
   before, one run for each student's latest graded submission (200 runs, made as that `start`
   made them, sent by the page's "Start grading again"); the time a run in each.
2. The preview page with all its rows (1000 runs of 200 students): its load time.

Needs PostgreSQL and Redis, and for Slurm scripts/slurm:

    eval "$(scripts/services)"; eval "$(scripts/slurm --exports)"
    .venv/bin/python bench/regrade.py [--students 200] [--submissions 5] [--executors local slurm]
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import requests
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

from service import client, running, submit_and_wait  # noqa: E402
from slurm import Service  # noqa: E402

from server.core import runs  # noqa: E402
from server.core.models import (  # noqa: E402
    Exercise,
    GradingRun,
    Regrade,
    RunStatus,
    Submission,
    User,
    utcnow,
)
from server.core.users import add_user  # noqa: E402
from server.web.course import by_students  # noqa: E402
from server.web.regrade_preview import FINISHED  # noqa: E402

EXERCISE = ROOT / "exercises" / "autograd-q"
# one student in four sends the right file; the others each a mistake of the exercise's mutants
FILES = [EXERCISE / "reference.py"] * 3 + sorted((EXERCISE / "mutants").glob("*.py"))
CSRF_TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')
PASSWORD = "bench-password"


class Course(Service):
    """bench/slurm.py's service (its students bench0…), with an instructor who logs in over plain
    http, and every student's graded submissions."""

    def configure(self, **settings) -> dict:
        return super().configure(SESSION_COOKIE_SECURE=False, **settings)

    def seed(self, students: int, per_student: int, scores: dict[Path, tuple[float, float]]):
        """`per_student` graded submissions of each student, each with the run that graded it
        (its score as `hpcgrade grade` gave it, a seed of its own for the preview to reuse)."""
        now = utcnow()
        with self.database.sessions.begin() as session:
            add_user(session, "prof", "Prof", "prof@example.org", "instructor", PASSWORD)
            exercise = session.scalar(sa.select(Exercise).where(Exercise.slug == EXERCISE.name))
            for n in range(students):
                user = session.scalar(sa.select(User).where(User.username == f"bench{n}"))
                for k in range(per_student):
                    path = FILES[(n * per_student + k) % len(FILES)]
                    session.add(
                        graded(
                            user,
                            exercise,
                            path,
                            scores[path],
                            now - dt.timedelta(minutes=per_student - k),
                        )
                    )

    def waiting(self, regrade_id: int) -> int:
        with self.database.sessions() as session:
            return session.scalar(
                sa.select(sa.func.count()).where(
                    GradingRun.regrade_id == regrade_id,
                    GradingRun.status == RunStatus.previewing.value,
                )
            )

    def outcomes(self, regrade_id: int) -> Counter:
        with self.database.sessions() as session:
            return Counter(
                session.scalars(
                    sa.select(GradingRun.status).where(GradingRun.regrade_id == regrade_id)
                )
            )

    def latest_only(self, executor: str) -> int:
        """A preview as `start` made one before: a run for each student's latest finished
        submission; left unclaimed, its lease run out, for the page to send it."""
        now = utcnow()
        with self.database.sessions.begin() as session:
            exercise = session.scalar(sa.select(Exercise).where(Exercise.slug == EXERCISE.name))
            prof = session.scalar(sa.select(User).where(User.username == "prof"))
            latest = (
                sa.select(sa.func.max(Submission.id))
                .join(User, Submission.user_id == User.id)
                .where(
                    Submission.exercise_id == exercise.id,
                    Submission.status.in_(FINISHED),
                    by_students(exercise.course_id, exercise.id),
                )
                .group_by(Submission.user_id)
            )
            attempts = session.execute(
                sa.select(GradingRun.submission_id, sa.func.max(GradingRun.attempt))
                .where(GradingRun.submission_id.in_(latest))
                .group_by(GradingRun.submission_id)
            ).all()
            regrade = Regrade(exercise_id=exercise.id, started_by=prof.id, started_at=now)
            session.add(regrade)
            session.flush()
            runs.start_previews(  # stalled at once: the page's "Start grading again" sends it
                session,
                regrade.id,
                {submission_id: attempt + 1 for submission_id, attempt in attempts},
                executor,
                now,
                waits_until=now - dt.timedelta(seconds=1),
            )
            return regrade.id


def graded(
    user: User, exercise: Exercise, path: Path, score: tuple[float, float], at: dt.datetime
) -> Submission:
    code = path.read_bytes()
    submission = Submission(
        user_id=user.id,
        exercise_id=exercise.id,
        filename="work.py",
        code=code,
        sha256=hashlib.sha256(code).hexdigest(),
        status="graded",
        submitted_at=at,
        score=score[0],
        max_score=score[1],
    )
    submission.runs.append(
        GradingRun(
            attempt=1,
            executor="local",
            status="done",
            started_at=at,
            lease_until=at,
            finished_at=at,
            seed=random.getrandbits(48),
            score=score[0],
            max_score=score[1],
        )
    )
    return submission


def scores() -> dict[Path, tuple[float, float]]:
    """Each file's score and maximum, as `hpcgrade grade` gives them (one warm harness for all:
    a harness a file cost the smoke run most of its time)."""
    paths = sorted(set(FILES))
    graded = subprocess.run(
        [
            str(ROOT / ".venv" / "bin" / "hpcgrade"),
            "grade",
            EXERCISE.name,
            *map(str, paths),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    reports = [json.loads(line) for line in graded.splitlines()]
    return {Path(r["file"]): (r["score"], r["max_score"]) for r in reports}


class Instructor:
    """prof in the portal, through its pages as a browser goes."""

    def __init__(self, site: str, course: str):
        self.base, self.http = f"{site}/courses/{course}", requests.Session()
        token = CSRF_TOKEN.search(self.http.get(f"{site}/login").text).group(1)
        answer = self.http.post(
            f"{site}/login",
            allow_redirects=False,
            data={"username": "prof", "password": PASSWORD, "csrf_token": token},
        )
        assert answer.status_code == 302, answer.text
        page = self.http.get(f"{self.base}/staff/exercises/{EXERCISE.name}").text
        self.token = CSRF_TOKEN.search(page).group(1)

    def post(self, path: str) -> str:
        answer = self.http.post(
            f"{self.base}{path}", data={"csrf_token": self.token}, allow_redirects=False
        )
        assert answer.status_code == 303, answer.text
        return answer.headers["Location"]

    def page(self, regrade_id: int) -> tuple[float, int]:
        """Seconds to load the preview's page, and its size in bytes."""
        started = time.perf_counter()
        answer = self.http.get(f"{self.base}/staff/regrades/{regrade_id}")
        assert answer.status_code == 200
        return time.perf_counter() - started, len(answer.content)


@dataclass(frozen=True)
class Timed:
    runs: int
    seconds: float
    outcomes: Counter
    page_seconds: float | None = None
    page_bytes: int | None = None

    def line(self) -> str:
        failed = sum(n for status, n in self.outcomes.items() if status != "preview")
        return (
            f"{self.seconds:7.1f} s, {self.seconds / self.runs * 1000:5.0f} ms a run"
            f" ({self.runs} runs, {failed} not graded)"
        )


def until_graded(course: Course, regrade_id: int, started: float) -> float:
    while course.waiting(regrade_id):
        assert time.perf_counter() - started < 3600, "the preview was not graded in an hour"
        time.sleep(0.2)
    return time.perf_counter() - started


def old_preview(course: Course, prof: Instructor, executor: str) -> Timed:
    regrade_id = course.latest_only(executor)
    started = time.perf_counter()
    prof.post(f"/staff/regrades/{regrade_id}/resume")
    seconds = until_graded(course, regrade_id, started)
    outcomes = course.outcomes(regrade_id)
    prof.post(f"/staff/regrades/{regrade_id}/discard")
    return Timed(sum(outcomes.values()), seconds, outcomes)


def full_preview(course: Course, prof: Instructor) -> Timed:
    started = time.perf_counter()
    regrade_id = int(prof.post(f"/staff/exercises/{EXERCISE.name}/regrade").rsplit("/", 1)[1])
    seconds = until_graded(course, regrade_id, started)
    outcomes = course.outcomes(regrade_id)
    loads = [prof.page(regrade_id) for _ in range(5)]
    prof.post(f"/staff/regrades/{regrade_id}/discard")
    return Timed(
        sum(outcomes.values()),
        seconds,
        outcomes,
        statistics.median(seconds for seconds, _ in loads),
        loads[0][1],
    )


def measure(course: Course, prof: Instructor, executor: str) -> tuple[Timed, Timed]:
    """The old preview, then the new one, on one worker warmed by a first grade."""
    env = course.configure(EXECUTOR=executor, SLURM_BATCH_SIZE=20)
    celery = [sys.executable, "-m", "celery", "--quiet", "-A", "worker.celery_app"]
    # one process: the local executor's warm harness is that process's
    processes = "1" if executor == "local" else "2"
    with (
        running(
            [
                *celery,
                "worker",
                "--concurrency",
                processes,
                "--loglevel",
                "WARNING",
                "--without-gossip",
                "--without-mingle",
            ],
            env,
        ),
        running(
            [
                *celery,
                "beat",
                "--loglevel",
                "WARNING",
                "--schedule",
                str(course.folder / f"beat-{executor}"),
            ],
            env,
        ),
    ):
        submit_and_wait(client(course.base, "prof"), course.base)
        return old_preview(course, prof, executor), full_preview(course, prof)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--students", type=int, default=200)
    parser.add_argument("--submissions", type=int, default=5, help="graded, per student")
    parser.add_argument(
        "--executors", nargs="+", default=["local", "slurm"], choices=["local", "slurm"]
    )
    args = parser.parse_args()
    graded_files = scores()
    figures = {}
    with ExitStack() as stack:
        folder = Path(
            stack.enter_context(
                tempfile.TemporaryDirectory(prefix="hpcgrade-bench-", dir="/var/tmp")
            )
        )
        folder.chmod(0o755)
        course = Course(stack, folder, args.students)
        course.seed(args.students, args.submissions, graded_files)
        prof = Instructor(course.base, course.course)
        for executor in args.executors:
            figures[executor] = measure(course, prof, executor)
        course.database.dispose()

    print(
        f"{args.students} students × {args.submissions} graded {EXERCISE.name} submissions "
        f"(the reference and {len(FILES) - 3} mutants, one file in four right)"
    )
    for executor, (old, new) in figures.items():
        print(f"{executor}:")
        print(f"  before: each student's latest submission  : {old.line()}")
        print(
            f"  now: every graded submission, click → full: {new.line()}"
            f"  → {new.seconds / old.seconds:.1f}× the time for "
            f"{new.runs / old.runs:.1f}× the runs"
        )
        print(
            f"  the preview's page, {new.runs} runs of {args.students} students: "
            f"{new.page_seconds * 1000:.0f} ms median (n=5), {new.page_bytes / 1024:.0f} KiB"
        )
    print(
        f"  ({os.cpu_count()} cores; one gunicorn worker; Slurm jobs of 1 CPU and 2 GB, "
        "batches of 20, collect every 1 s)"
    )


if __name__ == "__main__":
    main()

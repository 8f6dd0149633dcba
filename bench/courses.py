"""One installation serving many courses: does a course's page, or a student's status poll, cost
more when the database holds ten courses of 200 students instead of one?

For each size (1 course, then 10 courses, each of 200 students with three graded submissions of
two exercises): the status endpoint (`GET /api/v1/submissions/<id>`, token auth) under `wrk` with
100 connections, and the course page of an instructor (`/courses/<slug>/staff/`), its median and
p95 over 30 sequential requests. The grades are written straight to the database (no grader runs).
Baseline, in the same run: the single course.

Needs PostgreSQL (`eval "$(scripts/services)"`) and `wrk`:

    .venv/bin/python bench/courses.py [--courses 10] [--students 200] [--seconds 5]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack, contextmanager
from pathlib import Path

import requests
import sqlalchemy as sa
from werkzeug.security import generate_password_hash

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

from helpers import CSRF_TOKEN, free_port, postgres_database  # noqa: E402
from service import percentile, running, wrk  # noqa: E402

from server.core import migrate  # noqa: E402
from server.core.catalogue import load_catalogue  # noqa: E402
from server.core.courses import create_course  # noqa: E402
from server.core.db import Database  # noqa: E402
from server.core.exercises import sync_exercises  # noqa: E402
from server.core.models import Enrolment, Exercise, GradingRun, Submission, User  # noqa: E402
from worker.cli.demo import wait_for_port, write_config  # noqa: E402

PASSWORD = "bench-password"
EXERCISES = ("autograd-q", "metrics")


def populate(database: Database, courses: int, students: int) -> None:
    """`courses` courses of `students` students (and one instructor) each, every student with
    three graded submissions of each of EXERCISES."""
    catalogue = load_catalogue()
    password_hash = generate_password_hash(PASSWORD)
    now = dt.datetime.now(dt.timezone.utc)
    with database.sessions.begin() as session:
        for c in range(courses):
            course = create_course(session, f"c{c}")
            sync_exercises(session, course, catalogue)
            exercises = {
                e.slug: e.id
                for e in session.scalars(sa.select(Exercise).where(Exercise.course_id == course.id))
            }
            people = [
                User(
                    username=f"s{c}-{n}",
                    name="Bench",
                    email="b@example.org",
                    password_hash=password_hash,
                )
                for n in range(students)
            ]
            people.append(
                User(
                    username=f"prof{c}",
                    name="Prof",
                    email="p@example.org",
                    password_hash=password_hash,
                )
            )
            session.add_all(people)
            session.flush()
            session.add_all(
                [
                    Enrolment(
                        user_id=user.id,
                        course_id=course.id,
                        role="instructor" if user.username.startswith("prof") else "student",
                    )
                    for user in people
                ]
            )
            rows = [
                {
                    "user_id": user.id,
                    "exercise_id": exercises[slug],
                    "filename": "w.py",
                    "code": b"x = 1\n",
                    "sha256": "0" * 64,
                    "status": "graded",
                    "score": float(attempt * 3),
                    "max_score": 10.0,
                    "submitted_at": now,
                }
                for user in people[:-1]
                for slug in EXERCISES
                for attempt in range(1, 4)
            ]
            ids = session.scalars(sa.insert(Submission).returning(Submission.id), rows).all()
            session.execute(
                sa.insert(GradingRun),
                [
                    {
                        "submission_id": i,
                        "attempt": 1,
                        "executor": "local",
                        "status": "done",
                        "lease_until": now,
                        "finished_at": now,
                        "score": row["score"],
                        "max_score": 10.0,
                    }
                    for i, row in zip(ids, rows)
                ],
            )


def course_page_seconds(base: str, username: str, slug: str, n: int = 30) -> list[float]:
    browser = requests.Session()
    token = CSRF_TOKEN.search(browser.get(f"{base}/login").text).group(1)
    browser.post(
        f"{base}/login", data={"username": username, "password": PASSWORD, "csrf_token": token}
    )
    times = []
    for _ in range(n):
        started = time.perf_counter()
        page = browser.get(f"{base}/courses/{slug}/staff/")
        times.append(time.perf_counter() - started)
        assert page.status_code == 200 and "autograd-q" in page.text, page.status_code
    return times


def measure(courses: int, students: int, seconds: int) -> dict[str, float | str]:
    with ExitStack() as stack:
        database_url = stack.enter_context(contextmanager(postgres_database)())
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hpcgrade-bench-")))
        config = folder / "hpcgrade.toml"
        write_config(
            config,
            {
                "DATABASE_URL": database_url,
                "SECRET_KEY": uuid.uuid4().hex,
                "BROKER_URL": "redis://127.0.0.1:1/0",
                "SESSION_COOKIE_SECURE": False,
                "LOGIN_LIMITS_STORAGE": "memory://",
            },
        )
        migrate.upgrade(database_url)
        database = Database(database_url)
        populate(database, courses, students)
        database.dispose()
        env = {k: v for k, v in os.environ.items() if not k.startswith("HPCGRADE_")}
        env["HPCGRADE_CONFIG"] = str(config)
        port = free_port()  # never a fixed one: a portal left behind would answer in its place
        portal = stack.enter_context(
            running(
                [
                    sys.executable,
                    "-m",
                    "gunicorn",
                    "--bind",
                    f"127.0.0.1:{port}",
                    "--workers",
                    "2",
                    "--log-level",
                    "warning",
                    "server.web.app:create_app()",
                ],
                env,
            )
        )
        assert wait_for_port("127.0.0.1", port, portal, 30), "the portal did not start"
        base = f"http://127.0.0.1:{port}"
        last = courses - 1  # the course created last: its rows are the newest
        page = course_page_seconds(base, f"prof{last}", f"c{last}")
        token = requests.post(
            f"{base}/api/v1/tokens", json={"username": f"s{last}-0", "password": PASSWORD}
        ).json()["token"]
        with Database(database_url).sessions() as session:
            mine = session.scalar(
                sa.select(sa.func.max(Submission.id))
                .join(User, Submission.user_id == User.id)
                .where(User.username == f"s{last}-0")
            )
        rps, p99 = wrk(f"{base}/api/v1/submissions/{mine}", seconds, token)
    return {
        "page_p50": statistics.median(page),
        "page_p95": percentile(page, 95),
        "status_rps": rps,
        "status_p99": p99,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--courses", type=int, default=10)
    parser.add_argument("--students", type=int, default=200)
    parser.add_argument("--seconds", type=int, default=5)
    args = parser.parse_args()
    one = measure(1, args.students, args.seconds)
    many = measure(args.courses, args.students, args.seconds)
    for label, figures in (
        (f"1 course × {args.students} students", one),
        (f"{args.courses} courses × {args.students} students", many),
    ):
        print(
            f"{label:28}: course page p50 {figures['page_p50'] * 1000:6.1f} ms"
            f"  p95 {figures['page_p95'] * 1000:6.1f} ms · status endpoint"
            f" {figures['status_rps']:6.0f} req/s  p99 {figures['status_p99']}"
        )
    print(
        f"ratio {args.courses} courses / 1: course page p50 "
        f"{many['page_p50'] / one['page_p50']:.2f}, status req/s "
        f"{many['status_rps'] / one['status_rps']:.2f}  ({os.cpu_count()} cores, 2 gunicorn "
        f"workers, wrk on the same machine)"
    )


if __name__ == "__main__":
    main()

"""A soak: the service under a steady stream of students for minutes on end.

Twenty students, each in a thread of their own, submit every SUBMIT_EVERY seconds or so
(randomly spaced), half through the JSON API and half through the exercise page's form as a
browser does (log-in, CSRF token, the file), each file one of: right, wrong, a notebook, or one
the portal refuses (a syntax error, a file that is no Python); between submissions they load
pages (the course, an exercise, their submissions). They arrive over the first half minute and
behave as a browser does: a log-in answered "busy" (429) is tried again after its Retry-After,
and a request on a kept-alive connection the server has just closed is sent again (each
submission carries an idempotency key, so nothing is stored twice). When the stream ends, the bench waits for the queue to drain, then reads the database: every submission
accepted must be graded, once (one run, graded), with the score its file earns.

Targets:
- `demo`: `hpcgrade demo` as the README starts it (SQLite, the broker in a folder, one worker,
  beat, the demo's supervisor), with the students added by `hpcgrade users add`.
- `service`: the deployed shape of tests/stack.py (PostgreSQL, Redis, gunicorn behind nginx, a
  worker of two processes, beat), students imported from a roster.

Figures: submissions accepted and refused, grades, restarts of the service's processes (0
expected: a restart is a process that died), p50/p95 from a submission's arrival to its grade
(the database's times) and of page loads, and the submissions not graded exactly once.

    .venv/bin/python bench/soak.py --target demo [--seconds 600] [--students 20] [--code DIR]
    .venv/bin/python bench/soak.py --target service   # needs the tests' services (scripts/test)
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import requests
import sqlalchemy as sa
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from helpers import descendants, free_port  # noqa: E402

from server.core.db import Database  # noqa: E402
from server.core.models import GradingRun, Submission, User  # noqa: E402

EXERCISES = ROOT / "exercises"
# kind → (exercise, file, whether it earns full marks); refused kinds are turned away, unstored
FILES = {
    "right": ("autograd-q", EXERCISES / "autograd-q" / "reference.py", True),
    "wrong": ("autograd-q", EXERCISES / "autograd-q" / "mutants" / "plus_b_squared.py", False),
    "metrics-right": ("metrics", EXERCISES / "metrics" / "reference.py", True),
    "metrics-wrong": ("metrics", EXERCISES / "metrics" / "mutants" / "mae_without_abs.py", False),
    "notebook": ("autograd-q", ROOT / "examples" / "autograd-q" / "carol_notebook.ipynb", False),
}
REFUSED = {
    "syntax-error": ("work.py", b"def q_grads(a, b, v)\n    return a, b\n"),
    "not-python": ("work.txt", b"the answer is 42\n"),
}
SUBMIT_EVERY = 35.0  # seconds, on average: 20 an hour each, the default rate limit
PAGE_EVERY = 4.0
ARRIVALS = 30.0  # seconds over which the students log in
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))], 3)


@dataclass
class Tally:
    """What the students did and saw, shared by their threads."""

    accepted: list[tuple[int, str]] = field(default_factory=list)  # (submission id, kind)
    refused: Counter = field(default_factory=Counter)
    unexpected: list[str] = field(default_factory=list)  # an answer no student should get
    busy_log_ins: list[str] = field(default_factory=list)  # 429: tried again after Retry-After
    pages: list[float] = field(default_factory=list)  # seconds
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, **what) -> None:
        with self.lock:
            for name, value in what.items():
                target = getattr(self, name)
                if isinstance(target, Counter):
                    target[value] += 1
                else:
                    target.append(value)


def browser_like() -> requests.Session:
    """A client that sends a request again when its kept-alive connection was closed under it."""
    http = requests.Session()
    again = Retry(
        total=3,
        connect=3,
        read=2,
        status=0,
        other=0,
        allowed_methods=None,
        backoff_factor=0.1,
        raise_on_status=False,
    )
    http.mount("http://", HTTPAdapter(max_retries=again))
    return http


class Student(threading.Thread):
    def __init__(
        self,
        base: str,
        course: str,
        username: str,
        password: str,
        through_api: bool,
        until: float,
        tally: Tally,
        seed: int,
    ):
        super().__init__(daemon=True)
        self.base, self.course, self.username = base, course, username
        self.password, self.through_api, self.until, self.tally = (
            password,
            through_api,
            until,
            tally,
        )
        self.random = random.Random(seed)
        self.http = browser_like()

    def run(self) -> None:
        try:
            time.sleep(self.random.uniform(0, ARRIVALS))
            self._log_in()
            next_submit = time.monotonic() + self.random.uniform(0, SUBMIT_EVERY)
            while time.monotonic() < self.until:
                if time.monotonic() >= next_submit:
                    self._submit()
                    next_submit += self.random.expovariate(1 / SUBMIT_EVERY)
                self._page()
                time.sleep(self.random.uniform(0.5, 2 * PAGE_EVERY))
        except Exception as exc:  # a student whose session broke: the soak says so
            self.tally.add(unexpected=f"{self.username}: {type(exc).__name__}: {exc}")

    def _log_in(self) -> None:
        for _ in range(20):
            if self.through_api:
                answer = self.http.post(
                    f"{self.base}/api/v1/tokens",
                    timeout=30,
                    json={"username": self.username, "password": self.password},
                )
            else:
                form = self.http.get(f"{self.base}/login", timeout=30)
                answer = self.http.post(
                    f"{self.base}/login",
                    timeout=30,
                    allow_redirects=False,
                    data={
                        "username": self.username,
                        "password": self.password,
                        "csrf_token": CSRF.search(form.text).group(1),
                    },
                )
            if answer.status_code != 429:
                break
            self.tally.add(busy_log_ins=self.username)  # the password checks were all taken
            time.sleep(float(answer.headers.get("Retry-After", 1)))
        if answer.status_code not in (201, 302):
            raise RuntimeError(f"log-in answered {answer.status_code}")
        if self.through_api:
            self.http.headers["Authorization"] = f"Bearer {answer.json()['token']}"

    def _submit(self) -> None:
        kind = self.random.choice([*FILES, *FILES, *REFUSED])  # a refused file in six
        if kind in REFUSED:
            exercise, (filename, code) = "autograd-q", REFUSED[kind]
        else:
            exercise, path, _right = FILES[kind]
            filename, code = path.name, path.read_bytes()
        key = uuid.uuid4().hex  # sent again, it is stored once
        if self.through_api:
            answer = self.http.post(
                f"{self.base}/api/v1/submissions",
                timeout=60,
                headers={"Idempotency-Key": key},
                data={"exercise": exercise, "course": self.course},
                files={"file": (filename, code)},
            )
            accepted = answer.status_code == 202
            identifier = answer.json().get("id") if accepted else None
        else:
            page = f"{self.base}/courses/{self.course}/exercises/{exercise}"
            token = CSRF.search(self.http.get(page, timeout=30).text).group(1)
            answer = self.http.post(
                f"{page}/submissions",
                timeout=60,
                allow_redirects=False,
                data={"csrf_token": token, "idempotency_key": key},
                files={"file": (filename, code)},
            )
            where = answer.headers.get("Location", "")
            accepted = answer.status_code == 303 and "/submissions/" in where
            identifier = int(where.rsplit("/", 1)[1]) if accepted else None
        if accepted != (kind not in REFUSED):
            self.tally.add(
                unexpected=f"{self.username} {kind}: {answer.status_code} {answer.text[:200]}"
            )
        elif accepted:
            self.tally.add(accepted=(identifier, kind))
        else:
            self.tally.add(refused=kind)

    def _page(self) -> None:
        if self.through_api:
            path = "/api/v1/exercises"
        else:
            path = self.random.choice(
                [
                    f"/courses/{self.course}/",
                    f"/courses/{self.course}/exercises/autograd-q",
                    f"/courses/{self.course}/submissions",
                ]
            )
        started = time.perf_counter()
        answer = self.http.get(self.base + path, timeout=60)
        if answer.status_code != 200:
            self.tally.add(unexpected=f"{self.username} GET {path}: {answer.status_code}")
        else:
            self.tally.add(pages=time.perf_counter() - started)


# --- the targets -----------------------------------------------------------------------------


@dataclass
class Target:
    base: str
    course: str
    passwords: dict[str, str]
    database_url: str
    processes: "callable"  # () -> {name: pid}
    restarts: "callable"  # () -> int, as far as the target can tell
    log: "callable"  # () -> str


@contextlib.contextmanager
def demo_target(students: int, code: Path = ROOT):
    """`code`: the checkout whose demo runs (an older one's, for a baseline), in this venv."""
    folder = Path(tempfile.mkdtemp(prefix="hpcgrade-soak-"))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HPCGRADE_")}
    env["PYTHONPATH"] = str(code)
    hpcgrade = [sys.executable, "-m", "worker.cli"]
    log = (folder / "demo.log").open("w")
    demo = subprocess.Popen(
        [*hpcgrade, "demo", "--port", str(port), "--folder", str(folder / "demo")],
        cwd=code,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while "hpcgrade demo: http://" not in (folder / "demo.log").read_text():
            if time.monotonic() > deadline or demo.poll() is not None:
                raise RuntimeError((folder / "demo.log").read_text())
            time.sleep(0.5)
        config = dict(env, HPCGRADE_CONFIG=str(folder / "demo" / "hpcgrade.toml"))
        passwords = {}
        for number in range(students):
            username = f"soak{number:02d}"
            passwords[username] = f"{username}-password"
            subprocess.run(
                [
                    *hpcgrade,
                    "users",
                    "add",
                    username,
                    "--name",
                    f"Soak {number}",
                    "--email",
                    f"{username}@example.org",
                    "--course",
                    "pytorch-2026",
                    "--password",
                    passwords[username],
                ],
                env=config,
                cwd=code,
                check=True,
                capture_output=True,
            )

        def processes() -> dict[str, int]:
            found = {}
            for pid in descendants(demo.pid, depth=1):
                with contextlib.suppress(OSError):
                    command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                    found[
                        next((n for n in ("worker", "beat") if n.encode() in command), "portal")
                    ] = pid
            return found

        def restarts() -> int:
            return (folder / "demo.log").read_text().count("starts again") + (
                folder / "demo.log"
            ).read_text().count("started again")

        yield Target(
            f"http://127.0.0.1:{port}",
            "pytorch-2026",
            passwords,
            f"sqlite:///{folder / 'demo' / 'hpcgrade.sqlite'}",
            processes,
            restarts,
            lambda: (folder / "demo.log").read_text(),
        )
    finally:
        demo.terminate()
        try:
            demo.wait(timeout=60)
        except subprocess.TimeoutExpired:
            demo.kill()
        log.close()


@contextlib.contextmanager
def service_target(students: int):
    from stack import COURSES, Stack

    with Stack(students=students) as stack:
        services = (stack.web, stack.worker, stack.beat, stack.nginx)
        yield Target(
            stack.base,
            COURSES[0],
            stack.passwords,
            stack.postgres.url,
            lambda: {s.name: s.pid for s in services if s.process.poll() is None},
            lambda: sum(len(s.started) - 1 for s in services),
            stack.logs,
        )


# --- the soak --------------------------------------------------------------------------------


def soak(target: Target, seconds: float, seed: int) -> dict:
    tally = Tally()
    until = time.monotonic() + seconds
    names = sorted(target.passwords)
    students = [
        Student(
            target.base,
            target.course,
            name,
            target.passwords[name],
            through_api=index % 2 == 0,
            until=until,
            tally=tally,
            seed=seed + index,
        )
        for index, name in enumerate(names)
    ]
    first = target.processes()
    for student in students:
        student.start()
    changed = set()
    while any(student.is_alive() for student in students):
        now = target.processes()
        changed |= {name for name, pid in now.items() if first.get(name) not in (None, pid)}
        changed |= set(first) - set(now)
        time.sleep(1.0)
    drained = wait_for_grades(target, [i for i, _ in tally.accepted], 300)
    return report(target, tally, changed, drained, seconds)


def wait_for_grades(target: Target, ids: list[int], seconds: float) -> float:
    """Seconds the queue took to drain after the stream (or the wait's end)."""
    database = Database(target.database_url)
    started = time.monotonic()
    try:
        while time.monotonic() - started < seconds:
            with database.sessions() as session:
                left = session.scalar(
                    sa.select(sa.func.count())
                    .select_from(Submission)
                    .where(Submission.id.in_(ids), Submission.status.in_(("queued", "running")))
                )
            if not left:
                break
            time.sleep(1.0)
    finally:
        database.dispose()
    return time.monotonic() - started


def report(target: Target, tally: Tally, changed: set, drained: float, seconds: float) -> dict:
    database = Database(target.database_url)
    kinds = dict(tally.accepted)
    with database.sessions() as session:
        rows = session.execute(
            sa.select(
                Submission.id,
                Submission.status,
                Submission.score,
                Submission.max_score,
                Submission.submitted_at,
            ).where(Submission.id.in_(list(kinds)))
        ).all()
        runs = session.execute(
            sa.select(GradingRun.submission_id, GradingRun.status, GradingRun.finished_at).where(
                GradingRun.submission_id.in_(list(kinds))
            )
        ).all()
        students = session.scalar(
            sa.select(sa.func.count()).select_from(User).where(User.username.like("soak%"))
        )
    database.dispose()
    by_submission: dict[int, list] = {}
    for submission_id, status, finished in runs:
        by_submission.setdefault(submission_id, []).append((status, finished))
    times, not_once, wrong_scores = [], [], []
    for submission_id, status, score, max_score, submitted in rows:
        its_runs = by_submission.get(submission_id, [])
        done = [finished for run_status, finished in its_runs if run_status == "done"]
        if status != "graded" or len(its_runs) != 1 or len(done) != 1:
            not_once.append((submission_id, status, [s for s, _ in its_runs]))
            continue
        times.append((_aware(done[0]) - _aware(submitted)).total_seconds())
        full = FILES[kinds[submission_id]][2]
        if (score == max_score) != full:
            wrong_scores.append((submission_id, kinds[submission_id], score, max_score))
    return {
        "seconds": seconds,
        "students": students or len(target.passwords),
        "accepted": len(kinds),
        "by kind": dict(Counter(kinds.values())),
        "refused": dict(tally.refused),
        "graded": len(times),
        "not graded exactly once": not_once,
        "scores not as their files earn": wrong_scores,
        "unexpected answers": tally.unexpected,
        "log-ins told busy": len(tally.busy_log_ins),
        "restarts": target.restarts(),
        "processes replaced": sorted(changed),
        "grade p50 s": percentile(times, 50),
        "grade p95 s": percentile(times, 95),
        "grade max s": round(max(times, default=0.0), 3),
        "queue drained in s": round(drained, 1),
        "pages": len(tally.pages),
        "page p50 s": percentile(tally.pages, 50),
        "page p95 s": percentile(tally.pages, 95),
    }


def _aware(moment: dt.datetime) -> dt.datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=["demo", "service"], default="demo")
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--code",
        type=Path,
        default=ROOT,
        help="the demo of this checkout (an older one's, for a baseline)",
    )
    args = parser.parse_args()
    started = time.monotonic()
    with (
        demo_target(args.students, args.code.resolve())
        if args.target == "demo"
        else service_target(args.students)
    ) as target:
        figures = soak(target, args.seconds, args.seed)
        if figures["not graded exactly once"] or figures["unexpected answers"]:
            print(target.log()[-5000:], file=sys.stderr)
    figures["wall s"] = round(time.monotonic() - started, 1)
    print(json.dumps({"target": args.target, **figures}, indent=1, default=str))
    clean = not (
        figures["not graded exactly once"]
        or figures["scores not as their files earn"]
        or figures["unexpected answers"]
        or figures["restarts"]
    )
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())

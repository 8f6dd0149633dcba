"""The service on the local stack: gunicorn, PostgreSQL, Redis and one Celery worker.

1. Latency from the API `POST` of an `autograd-q` submission to its grade being readable through
   the API (p50, p95). Baseline, in the same run: a fresh `python` that imports torch and grades
   the same file, what a grader without a warm worker pays before the grade even exists.
2. The status endpoint (`GET /api/v1/submissions/<id>`, token auth) under `wrk` with 100
   connections, for a graded submission and for one still queued: requests/s and p99. Baseline, in the same run: a static file
   from the same gunicorn, i.e. the web stack with no database, no auth and no JSON.

Needs PostgreSQL and Redis (`eval "$(scripts/services)"`) and `wrk` (Debian's package):

    .venv/bin/python bench/service.py [--submissions 50] [--seconds 10] [--web-workers 2]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack, contextmanager
from pathlib import Path

import redis
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

from helpers import free_port, postgres_database  # noqa: E402  (a new database, dropped afterwards)
from warm_vs_fresh import fresh  # noqa: E402

from server.core import migrate  # noqa: E402
from server.core.courses import course_catalogue, create_course  # noqa: E402
from server.core.db import Database  # noqa: E402
from server.core.exercises import sync_exercises  # noqa: E402
from server.core.users import add_user  # noqa: E402
from worker.cli.demo import wait_for_port, write_config  # noqa: E402

BROKER = "redis://127.0.0.1:6379/13"
ATTEMPTS = 20
REFERENCE = (ROOT / "exercises" / "autograd-q" / "reference.py").read_bytes()


@contextmanager
def running(command: list[str], env: dict):
    process = subprocess.Popen(command, env=env, cwd=ROOT)
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def client(base: str, username: str) -> requests.Session:
    api = requests.Session()
    token = api.post(
        f"{base}/api/v1/tokens", json={"username": username, "password": "bench-password"}
    ).json()["token"]
    api.headers["Authorization"] = f"Bearer {token}"
    return api


GRADE_WITHIN = 300.0  # seconds: a grade that never comes is a failure that says so, not a hang


def submit_and_wait(api: requests.Session, base: str) -> float:
    started = time.perf_counter()
    sent = api.post(
        f"{base}/api/v1/submissions",
        data={"exercise": "autograd-q"},
        files={"file": ("work.py", REFERENCE)},
    )
    assert sent.status_code == 202, sent.text
    url = f"{base}/api/v1/submissions/{sent.json()['id']}"
    deadline = time.monotonic() + GRADE_WITHIN
    while True:
        result = api.get(url).json()
        if result["status"] not in ("queued", "running"):
            break
        assert time.monotonic() < deadline, f"not graded within {GRADE_WITHIN:.0f} s: {result}"
        time.sleep(0.005)
    elapsed = time.perf_counter() - started
    assert result["status"] == "graded" and result["score"] == result["max_score"], result
    return elapsed


def wrk(url: str, seconds: int, token: str | None = None) -> tuple[float, str]:
    command = ["wrk", "-t2", "-c100", f"-d{seconds}s", "--latency", url]
    if token:
        command[1:1] = ["-H", f"Authorization: Bearer {token}"]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    assert errors is None, out
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)), re.search(
        r"99%\s+(\S+)", out
    ).group(1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--submissions", type=int, default=50)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    # autograd-q allows 20 attempts each; the last student keeps one for the queued submission
    students = (args.submissions + 1) // ATTEMPTS + 2
    with ExitStack() as stack:
        database_url = stack.enter_context(contextmanager(postgres_database)())
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hpcgrade-bench-")))
        redis.Redis.from_url(BROKER).flushdb()
        config = folder / "hpcgrade.toml"
        write_config(
            config,
            {
                "DATABASE_URL": database_url,
                "BROKER_URL": BROKER,
                "SECRET_KEY": uuid.uuid4().hex,
                "SUBMISSIONS_PER_WINDOW": 100000,
            },
        )
        migrate.upgrade(database_url)
        database = Database(database_url)
        with database.sessions.begin() as session:
            course = create_course(session, "bench")
            sync_exercises(session, course, course_catalogue(course))
            for n in range(students):
                add_user(
                    session, f"bench{n}", "Bench", "bench@example.org", "student", "bench-password"
                )
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
                    str(args.web_workers),
                    "--threads",
                    str(args.threads),
                    "--log-level",
                    "warning",
                    "server.web.app:create_app()",
                ],
                env,
            )
        )
        worker = stack.enter_context(
            running(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "--quiet",
                    "-A",
                    "worker.celery_app",
                    "worker",
                    "--concurrency",
                    "1",
                    "--loglevel",
                    "WARNING",
                    "--without-gossip",
                    "--without-mingle",
                ],
                env,
            )
        )
        assert wait_for_port("127.0.0.1", port, portal, 30), "the portal did not start"
        base = f"http://127.0.0.1:{port}"
        apis = [client(base, f"bench{n}") for n in range(students)]
        first = submit_and_wait(apis[0], base)  # the worker starts its warm harness here
        latencies = [
            submit_and_wait(apis[(i + 1) // ATTEMPTS], base) for i in range(args.submissions)
        ]
        token = apis[0].headers["Authorization"].split()[1]
        status_url = f"{base}/api/v1/submissions/1"  # bench0's first, graded
        status_rps, status_p99 = wrk(status_url, args.seconds, token)
        worker.terminate()  # what follows stays queued, as in a rush before a deadline
        worker.wait()
        queued = (
            apis[-1]
            .post(
                f"{base}/api/v1/submissions",
                data={"exercise": "autograd-q"},
                files={"file": ("work.py", REFERENCE)},
            )
            .json()["url"]
        )
        queued_rps, queued_p99 = wrk(
            queued, args.seconds, apis[-1].headers["Authorization"].split()[1]
        )
        static_rps, static_p99 = wrk(f"{base}/static/hpcgrade.css", args.seconds)
    fresh_times = fresh(3, "cpu")  # the service's worker grades on the CPU here
    p50, p95, baseline = (
        percentile(latencies, 50),
        percentile(latencies, 95),
        statistics.median(fresh_times),
    )
    print(
        f"POST → grade readable, autograd-q : p50 {p50 * 1000:6.0f} ms  p95 {p95 * 1000:6.0f} ms"
        f"  (n={len(latencies)}; target p50 < 500 ms)"
    )
    print(f"  first submission (harness start): {first * 1000:6.0f} ms")
    print(
        f"  fresh python grading the file   : {baseline * 1000:6.0f} ms median (n=3)"
        f"  → ratio p50 / fresh {p50 / baseline:.3f}"
    )
    print(
        f"status endpoint, 100 connections  : {status_rps:7.0f} req/s  p99 {status_p99}"
        f"  (target ≥ 1000 req/s)"
    )
    print(f"  the same, a queued submission   : {queued_rps:7.0f} req/s  p99 {queued_p99}")
    # a window of a second on a machine busy with other work can end before any request does
    ratio = f"{status_rps / static_rps:.2f}" if static_rps else "none: no request ended in time"
    print(
        f"  static file, same gunicorn      : {static_rps:7.0f} req/s  p99 {static_p99}"
        f"  → ratio status / static {ratio}"
    )
    print(
        f"  ({os.cpu_count()} cores, {args.web_workers} gunicorn workers, wrk on the same machine)"
    )


if __name__ == "__main__":
    main()

"""Grading on the local Slurm cluster (scripts/slurm), each figure against its baseline in the
same run:

1. API `POST` → grade readable, one submission at a time, through `sbatch`, with the shipped
   settings; baseline: a trivial `sbatch` job from submission to COMPLETED (the floor no Slurm
   grader can go under; goal: within 2 s of it).
2. The same through a live pilot (goal: p50 ≤ 0.5 s).
3. A rush before a deadline: 200 students' submissions, one file each, queued, then graded with
   batching, against one job per submission (goal: ≥ 10× faster), each timed from the
   dispatcher's first claim.
4. The Slurm commands the grading processes run, a minute idle with no job, and during each
   rush (per minute); wrappers first on their PATH log each call.
5. A cold single grade (`hpcgrade grade`, and a one-run spool as a job runs it) against
   `python -c "import torch"` (goal: ≤ 1.5×).

The service runs as deployed: gunicorn, a Celery worker as dispatcher (EXECUTOR=slurm) and
Celery beat, on PostgreSQL and Redis. Needs scripts/services and scripts/slurm:

    eval "$(scripts/services)"; eval "$(scripts/slurm --exports)"
    .venv/bin/python bench/slurm.py [--latency 10] [--pilot 20] [--rush 200]
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
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
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

from cold_start import import_torch, spool_run  # noqa: E402
from helpers import free_port, postgres_database  # noqa: E402
from service import REFERENCE, percentile, running, submit_and_wait  # noqa: E402

from server.core import migrate  # noqa: E402
from server.core.config import Settings, load_settings  # noqa: E402
from server.core.courses import course_catalogue, create_course  # noqa: E402
from server.core.db import Database  # noqa: E402
from server.core.exercises import sync_exercises  # noqa: E402
from server.core.models import GradingRun, Submission  # noqa: E402
from server.core.tokens import issue  # noqa: E402
from server.core.users import add_user  # noqa: E402
from worker.cli.demo import wait_for_port, write_config  # noqa: E402

BROKER = "redis://127.0.0.1:6379/14"
ATTEMPTS = 20
SLURM_COMMANDS = ("sbatch", "squeue", "sacct", "scancel", "scontrol", "sinfo")


def trivial_job(folder: Path) -> float:
    """A job that does nothing, from sbatch to COMPLETED, polled as often as squeue allows."""
    started = time.perf_counter()
    job = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--job-name=hpcgrade-floor",
            "--mem=100M",
            f"--output={folder}/floor-%j.out",
            "--wrap",
            "true",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    while (
        subprocess.run(
            ["squeue", "-h", "-t", "all", "-j", job, "-o", "%T"], capture_output=True, text=True
        ).stdout.strip()
        != "COMPLETED"
    ):
        time.sleep(0.02)
    return time.perf_counter() - started


def cold_cli() -> float:
    started = time.perf_counter()
    subprocess.run(
        [
            str(ROOT / ".venv" / "bin" / "hpcgrade"),
            "grade",
            "autograd-q",
            str(ROOT / "exercises" / "autograd-q" / "reference.py"),
            "--json",
        ],
        check=True,
        capture_output=True,
        cwd=ROOT,
    )
    return time.perf_counter() - started


def logged_slurm(folder: Path) -> Path:
    """A folder of wrappers, one per Slurm command, that log each call to folder/calls.log
    (time, command) and run the real one."""
    wrappers = folder / "slurm-wrappers"
    wrappers.mkdir()
    for name in SLURM_COMMANDS:
        wrapper = wrappers / name
        wrapper.write_text(
            f'#!/bin/sh\necho "$(date +%s.%N) {name}" >> {folder}/calls.log\n'
            f'exec {shutil.which(name)} "$@"\n'
        )
        wrapper.chmod(0o755)
    return wrappers


def slurm_calls(folder: Path, since: float, until: float) -> collections.Counter:
    try:
        lines = (folder / "calls.log").read_text().split()
    except FileNotFoundError:
        return collections.Counter()
    return collections.Counter(
        name for when, name in zip(lines[::2], lines[1::2]) if since <= float(when) < until
    )


def per_minute(calls: collections.Counter, seconds: float) -> str:
    return (
        f"{sum(calls.values()) * 60 / seconds:5.1f} a minute ("
        + ", ".join(f"{name} {count}" for name, count in sorted(calls.items()))
        + f" in {seconds:.0f} s)"
    )


class Service:
    """The service on a fresh database and spool; its worker and beat restart with new settings.
    Each student's API token is made in the database (a password login each would cost the
    rush's set-up seconds of hashing)."""

    def __init__(self, stack: ExitStack, folder: Path, students: int):
        self.stack, self.folder = stack, folder
        self.database_url = stack.enter_context(contextmanager(postgres_database)())
        migrate.upgrade(self.database_url)
        self.database = Database(self.database_url)
        self.course = f"bench{uuid.uuid4().hex[:6]}"  # its jobs' names: this run's own
        with self.database.sessions.begin() as session:
            course = create_course(session, self.course)
            sync_exercises(session, course, course_catalogue(course))
            users = [
                add_user(
                    session,
                    f"bench{n}",
                    "Bench",
                    "bench@example.org",
                    "student",
                    None,
                    course=course,
                )
                for n in range(students)
            ]
            session.flush()
            self.tokens = [issue(session, user, "bench", 1)[0] for user in users]
        redis.Redis.from_url(BROKER).flushdb()
        self.wrappers = logged_slurm(folder)
        self.env = self.configure()
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
                    "1",
                    "--log-level",
                    "warning",
                    "server.web.app:create_app()",
                ],
                self.env,
            )
        )
        assert wait_for_port("127.0.0.1", port, portal, 30), "the portal did not start"
        self.base = f"http://127.0.0.1:{port}"
        self.grading: ExitStack | None = None

    def configure(self, **settings) -> dict:
        config = self.folder / f"hpcgrade-{uuid.uuid4().hex[:6]}.toml"
        write_config(config, self.settings(**settings))
        env = {k: v for k, v in os.environ.items() if not k.startswith("HPCGRADE_")}
        return dict(env, HPCGRADE_CONFIG=str(config))

    def settings(self, **settings) -> dict:
        return {
            "DATABASE_URL": self.database_url,
            "BROKER_URL": BROKER,
            "SECRET_KEY": "bench",
            "SUBMISSIONS_PER_WINDOW": 100000,
            "EXECUTOR": "slurm",
            "COURSE": self.course,
            "SPOOL_DIR": str(self.folder / "spool"),
            "COURSE_PYTHON": os.environ.get("HPCGRADE_TEST_COURSE_PYTHON", sys.executable),
            "SLURM_PARTITION": os.environ.get("HPCGRADE_TEST_SLURM_PARTITION", "grading"),
            "SLURM_CPUS": 1,
            "SLURM_MEMORY": "2G",
            **settings,
        }

    @property
    def effective_settings(self) -> Settings:
        """The settings the service runs on, defaults filled in."""
        return load_settings(self.settings())

    def start_grading(self, **settings) -> None:
        """The dispatcher and beat, as their own processes (deploy/systemd)."""
        self.stop_grading()
        self.grading = ExitStack()
        env = self.configure(**settings)
        env["PATH"] = f"{self.wrappers}:{env['PATH']}"
        celery = [sys.executable, "-m", "celery", "--quiet", "-A", "worker.celery_app"]
        self.grading.enter_context(
            running(
                [
                    *celery,
                    "worker",
                    "--concurrency",
                    "2",
                    "--loglevel",
                    "WARNING",
                    "--without-gossip",
                    "--without-mingle",
                ],
                env,
            )
        )
        self.grading.enter_context(
            running(
                [*celery, "beat", "--loglevel", "WARNING", "--schedule", str(self.folder / "beat")],
                env,
            )
        )

    def stop_grading(self) -> None:
        if self.grading is not None:
            self.grading.close()
            self.grading = None

    def graded(self) -> int:
        with self.database.sessions() as session:
            return session.scalar(
                sa.select(sa.func.count())
                .select_from(Submission)
                .where(Submission.status == "graded")
            )

    def last_run(self) -> int:
        with self.database.sessions() as session:
            return session.scalar(sa.select(sa.func.coalesce(sa.func.max(GradingRun.id), 0)))

    def first_claim_since(self, run_id: int) -> float:
        with self.database.sessions() as session:
            return session.scalar(
                sa.select(sa.func.min(GradingRun.started_at)).where(GradingRun.id > run_id)
            ).timestamp()

    def jobs_since(self, run_id: int) -> int:
        """Slurm jobs that graded the runs after this one (squeue forgets jobs after minutes)."""
        with self.database.sessions() as session:
            return session.scalar(
                sa.select(sa.func.count(sa.distinct(GradingRun.external_id))).where(
                    GradingRun.id > run_id
                )
            )


class Students:
    """API clients of students: `next` hands each out for up to the exercise's attempts, `fresh`
    students who have not submitted."""

    def __init__(self, tokens: list[str]):
        self.apis = []
        for token in tokens:
            api = requests.Session()
            api.headers["Authorization"] = f"Bearer {token}"
            self.apis.append(api)
        self.used, self.taken = 0, 0

    def next(self) -> requests.Session:
        self.used += 1
        return self.apis[self.taken + (self.used - 1) // ATTEMPTS]

    def fresh(self, count: int) -> list[requests.Session]:
        start = self.taken + -(-self.used // ATTEMPTS)
        self.taken, self.used = start + count, 0
        return self.apis[start : start + count]


def rush(
    service: Service, students: Students, count: int, **settings
) -> tuple[float, int, collections.Counter]:
    """`count` students submit one file each while no worker runs, then it is graded: seconds
    from the first claim (a dispatcher in service is running already; this one starts), jobs
    used, and the Slurm commands run meanwhile."""
    service.stop_grading()
    before, last_run = service.graded(), service.last_run()
    for api in students.fresh(count):
        sent = api.post(
            f"{service.base}/api/v1/submissions",
            data={"exercise": "autograd-q"},
            files={"file": ("work.py", REFERENCE)},
        )
        assert sent.status_code == 202, sent.text
    started = time.perf_counter()
    service.start_grading(**settings)
    while service.graded() < before + count:
        assert time.perf_counter() - started < 1200, "the rush was not graded in 20 minutes"
        time.sleep(0.2)
    ended = time.time()
    first_claim = service.first_claim_since(last_run)
    return (
        ended - first_claim,
        service.jobs_since(last_run),
        slurm_calls(service.folder, first_claim, ended),
    )


def say(line: str) -> None:
    """A figure, printed as soon as it is measured: the whole run takes many minutes."""
    print(line, flush=True)


def through_a_pilot(service: Service, clients: Students, count: int) -> list[float]:
    """`count` grades through a live pilot, after one that warms it; the pilot is cancelled."""
    started = subprocess.run(
        [
            str(ROOT / ".venv" / "bin" / "hpcgrade"),
            "pilot",
            "start",
            "--course",
            service.course,
            "--hours",
            "1",
        ],
        env=service.configure(),
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout.split()[1]
    try:
        while not (service.folder / "spool" / "pilots" / started / "heartbeat.json").exists():
            time.sleep(0.1)
        submit_and_wait(clients.next(), service.base)  # the pilot's first grade warms it
        return [submit_and_wait(clients.next(), service.base) for _ in range(count)]
    finally:
        subprocess.run(["scancel", started], check=True)
        time.sleep(3)  # the dispatcher sees the pilot's job end


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=int, default=10, help="submissions through sbatch")
    parser.add_argument("--idle", type=int, default=60, help="seconds idle, Slurm calls counted")
    parser.add_argument("--pilot", type=int, default=20, help="submissions through a pilot")
    parser.add_argument("--rush", type=int, default=200, help="students submitting at once")
    parser.add_argument("--cold", type=int, default=5)
    args = parser.parse_args()
    if min(args.latency, args.idle, args.pilot, args.rush, args.cold) < 1:
        parser.error("--latency, --idle, --pilot, --rush and --cold take 1 or more")
    students = (args.latency + args.pilot + 1) // ATTEMPTS + 2 + 2 * args.rush
    with ExitStack() as stack:
        folder = Path(
            stack.enter_context(
                tempfile.TemporaryDirectory(prefix="hpcgrade-bench-", dir="/var/tmp")
            )
        )
        folder.chmod(0o755)
        service = Service(stack, folder, students)
        stack.callback(service.stop_grading)
        clients = Students(service.tokens)
        shipped = service.effective_settings
        say(
            f"({os.cpu_count()} cores; single-node Slurm, jobs of 1 CPU, 2 GB and "
            f"{shipped.slurm_time} minutes)"
        )

        floor = statistics.median(trivial_job(folder) for _ in range(5))
        say(f"trivial sbatch job, submit → COMPLETED (floor) : p50 {floor:6.2f} s (n=5)")
        service.start_grading()
        through_sbatch = [
            submit_and_wait(clients.next(), service.base) for _ in range(args.latency)
        ]
        p50, p95 = percentile(through_sbatch, 50), percentile(through_sbatch, 95)
        say(
            f"POST → grade readable, through sbatch        : p50 {p50:6.2f} s  p95 {p95:6.2f} s"
            f"  (n={args.latency}; p50 − floor {p50 - floor:.2f} s, goal ≤ 2 s; shipped "
            f"settings: batch wait {shipped.slurm_batch_wait:g} s, collect every "
            f"{shipped.collect_seconds:g} s, Slurm polled every {shipped.slurm_poll_seconds:g} s)"
        )
        time.sleep(2 * shipped.slurm_poll_seconds)  # the last job's end is seen
        idle_from = time.time()
        time.sleep(args.idle)
        idle = slurm_calls(folder, idle_from, time.time())
        say(f"Slurm calls, idle with no job                : {per_minute(idle, args.idle)}")

        pilot = through_a_pilot(service, clients, args.pilot)
        say(
            f"POST → grade readable, through a live pilot  : p50 {percentile(pilot, 50):6.2f} s"
            f"  p95 {percentile(pilot, 95):6.2f} s  (n={args.pilot}; goal p50 ≤ 0.5 s)"
        )

        batched, batched_jobs, batched_calls = rush(service, clients, args.rush)
        say(
            f"{args.rush} students at once, batches of {shipped.slurm_batch_size}     : "
            f"{batched:6.1f} s in {batched_jobs} jobs; Slurm calls "
            f"{per_minute(batched_calls, batched)}"
        )
        one_each, one_each_jobs, one_each_calls = rush(
            service, clients, args.rush, SLURM_BATCH_SIZE=1, SLURM_BATCH_WAIT=0
        )
        say(
            f"{args.rush} students at once, one job each       : {one_each:6.1f} s in "
            f"{one_each_jobs} jobs  → batching {one_each / batched:.1f}× faster (goal ≥ 10×); "
            f"Slurm calls {per_minute(one_each_calls, one_each)}"
        )
        service.stop_grading()

        with tempfile.TemporaryDirectory() as scratch, tempfile.TemporaryDirectory() as root:
            torch_times, cli_times, spool_times = [], [], []
            for number in range(args.cold):
                torch_times.append(import_torch(sys.executable).wall)
                cli_times.append(cold_cli())
                spool_times.append(spool_run(sys.executable, scratch, Path(root), number).wall)
        shutil.rmtree(folder / "spool", ignore_errors=True)
    torch_p50 = statistics.median(torch_times)
    say(f"python -c 'import torch'                     : {torch_p50:6.2f} s (n={args.cold})")
    say(
        f"cold `hpcgrade grade` of one file            : {statistics.median(cli_times):6.2f} s"
        f"  → {statistics.median(cli_times) / torch_p50:.2f}× import torch (goal ≤ 1.5×)"
    )
    say(
        f"cold one-run spool, as a job runs it         : {statistics.median(spool_times):6.2f} s"
        f"  → {statistics.median(spool_times) / torch_p50:.2f}× import torch"
    )


if __name__ == "__main__":
    main()

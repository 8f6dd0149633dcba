"""The whole service as real processes, for the fault tests and bench/faults.py.

A PostgreSQL cluster and a Redis of its own (never the shared ones: the tests stop them), the
deploy steps (`hpcgrade db upgrade`, `exercise sync`, `users import`), and then, as
deploy/systemd runs them: gunicorn with 2 workers of 16 threads, one Celery worker, Celery beat on its own,
and nginx in front with the deploy's proxy settings (deploy/nginx/hpcgrade-proxy.conf). Each
student sets a password with the link the import printed, as a student does. Each piece can be
stopped, killed and started again; `Stack.processes()` says what runs.
"""

from __future__ import annotations

import datetime as dt
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import oidc_provider
import requests
import sqlalchemy as sa
from helpers import alive, descendants, free_port
from sqlalchemy.orm import selectinload

from worker.cli.demo import write_config

ROOT = Path(__file__).resolve().parents[1]
EXERCISES = ROOT / "exercises"
FILES = {  # kind → (exercise, file whose score `hpcgrade grade` tells)
    "q-right": ("autograd-q", EXERCISES / "autograd-q" / "reference.py"),
    "q-wrong": ("autograd-q", EXERCISES / "autograd-q" / "mutants" / "plus_b_squared.py"),
    "metrics-right": ("metrics", EXERCISES / "metrics" / "reference.py"),
    "metrics-wrong": ("metrics", EXERCISES / "metrics" / "mutants" / "mae_without_abs.py"),
}
PROXY_SETTINGS = ROOT / "deploy" / "nginx" / "hpcgrade-proxy.conf"
CSRF_TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


def postgres_binaries() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    if not found:
        raise RuntimeError("no PostgreSQL binaries under /usr/lib/postgresql (scripts/services)")
    return found[-1].parent


def nginx_binary() -> str:
    found = os.environ.get("HPCGRADE_TEST_NGINX") or shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(found).exists():
        raise RuntimeError("nginx is missing: run scripts/nginx")
    return found


def _as_database_owner(command: list[str]) -> list[str]:
    """initdb and postgres refuse to run as root: as root, run them as the `postgres` account."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


def _wait(predicate, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not come up within {seconds} s")
        time.sleep(0.05)


def _port_open(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


class Postgres:
    """A cluster in a folder of its own; `stop()` is `pg_ctl stop -m fast`, a real outage."""

    def __init__(self):
        self.folder = Path(tempfile.mkdtemp(prefix="hpcgrade-pg-"))
        self.data = self.folder / "data"
        self.port = free_port()
        self.bin = postgres_binaries()
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.folder, owner.pw_uid, owner.pw_gid)
        subprocess.run(
            _as_database_owner(
                [
                    str(self.bin / "initdb"),
                    "-D",
                    str(self.data),
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "-E",
                    "UTF8",
                    "--no-sync",
                ]
            ),
            check=True,
            stdout=subprocess.DEVNULL,
        )
        self.start()
        subprocess.run(
            [
                str(self.bin / "createdb"),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "hpcgrade",
            ],
            check=True,
        )
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/hpcgrade"

    def _ctl(self, *arguments: str) -> None:
        subprocess.run(
            _as_database_owner([str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", *arguments]),
            check=True,
            stdout=subprocess.DEVNULL,
        )

    def start(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 "
            f"-c unix_socket_directories={self.folder} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        self._ctl("-l", str(self.folder / "postgres.log"), "-o", options, "start")

    def stop(self) -> None:
        self._ctl("-m", "fast", "stop")

    def close(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._ctl("-m", "immediate", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)


class Redis:
    """A Redis that keeps nothing on disk: a restart loses every message it held."""

    def __init__(self, folder: Path):
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.command = [
            shutil.which("redis-server") or "/usr/bin/redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(folder),
        ]
        self.process: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        self.process = subprocess.Popen(self.command, stdout=subprocess.DEVNULL)
        _wait(lambda: _port_open(self.port), 10, "redis-server")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait()

    def close(self) -> None:
        if self.process.poll() is None:
            self.stop()


@dataclass
class Service:
    """A long-running process as systemd would run it: its output to a log file, killed with its
    whole process group when it stops (systemd's control group)."""

    name: str
    command: list[str]
    env: dict
    log: Path
    ready: object = None  # (Service) -> bool, or None
    process: subprocess.Popen | None = None
    started: list[dt.datetime] = field(default_factory=list)
    leftovers: list[int] = field(default_factory=list)  # its processes when its main one died

    def start(self) -> None:
        with self.log.open("a") as log:
            self.process = subprocess.Popen(
                self.command,
                env=self.env,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started.append(dt.datetime.now(dt.timezone.utc))
        if self.ready is not None:
            _wait(lambda: self.ready(self) or self.process.poll() is not None, 60, self.name)
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited at start:\n{self.tail()}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Kill the main process only, as `kill -9 PID` does; its children live on."""
        self.leftovers = descendants(self.pid)
        os.kill(self.pid, sig)
        self.process.wait()

    def restart_after_kill(self) -> None:
        """What systemd does when the main process died: end what is left of the service (the
        process group), then start it again."""
        self.stop_group()
        self.start()

    def stop_group(self) -> None:
        """Every process of the service goes, as systemd ends a unit's control group: its
        process group, and what it started in groups of their own (a harness, a student)."""
        self.leftovers += descendants(self.pid)
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for pid in self.leftovers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.leftovers = []
        self.process.wait()
        _wait(
            lambda: not any(_in_group(pid, self.pid) for pid in _all_pids()),
            10,
            f"the end of {self.name}'s processes",
        )

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            if self.process is not None:
                self.stop_group()
            return
        self.leftovers = descendants(self.pid)
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
        self.stop_group()

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def _all_pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def _in_group(pid: int, group: int) -> bool:
    try:
        return os.getpgid(pid) == group and alive(pid)
    except ProcessLookupError:
        return False


def nginx_config(prefix: Path, listen: int, portal: int) -> str:
    temp = "\n".join(
        f"    {kind}_temp_path {prefix / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    user = "user root root;\n" if os.geteuid() == 0 else ""
    return f"""{user}daemon off;
worker_processes 1;
pid {prefix / "nginx.pid"};
error_log {prefix / "error.log"} warn;
events {{ worker_connections 512; }}
http {{
    access_log off;
{temp}
    upstream hpcgrade_portal {{ server 127.0.0.1:{portal}; }}
    server {{
        listen 127.0.0.1:{listen};
        include {PROXY_SETTINGS};
    }}
}}
"""


COURSES = ("pytorch", "lab")


def roster(usernames: list[str]) -> str:
    return "username,name,email,role\n" + "".join(
        f"{name},Student {name},{name}@uni.example,student\n" for name in usernames
    )


class Stack:
    """The service, started in `__enter__`; `base` is nginx's address, `portal` gunicorn's."""

    def __init__(
        self,
        students: int = 10,
        settings: dict | None = None,
        web_workers: int = 2,
        concurrency: int = 2,
    ):
        self.student_count = students
        self.extra_settings = settings or {}
        self.web_workers, self.concurrency = web_workers, concurrency
        self.passwords: dict[str, str] = {}
        self.links: dict[str, str] = {}  # username → set-password link (a path)

    # --- start and stop ---------------------------------------------------------------------

    def __enter__(self) -> "Stack":
        self._exit = ExitStack()
        try:
            self._start()
        except BaseException:
            self._exit.close()
            raise
        return self

    def __exit__(self, *_exc) -> None:
        self._exit.close()

    def _start(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="hpcgrade-stack-"))
        self._exit.callback(shutil.rmtree, self.folder, ignore_errors=True)
        self.postgres = Postgres()
        self._exit.callback(self.postgres.close)
        self.redis = Redis(self.folder)
        self._exit.callback(self.redis.close)
        settings = {
            "DATABASE_URL": self.postgres.url,
            "BROKER_URL": self.redis.url,
            "SECRET_KEY": uuid.uuid4().hex,
            "SUBMISSIONS_PER_WINDOW": 100000,
            "SPOOL_DIR": str(self.folder / "spool"),
            # nginx in front, as deployed, but speaking http, not https
            "TRUSTED_PROXIES": 1,
            "SESSION_COOKIE_SECURE": False,
            # the log-in through scripts/oidc's provider where it runs: the processes
            # read no HPCGRADE_* variable of the tests, only this file
            **oidc_provider.settings(),
        }
        self.settings = {**settings, **self.extra_settings}
        self.config = self.folder / "hpcgrade.toml"
        write_config(self.config, self.settings)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("HPCGRADE_")}
        self.env.update(HPCGRADE_CONFIG=str(self.config), PYTHONUNBUFFERED="1")
        self._deploy_steps()
        self.portal_port, self.nginx_port = free_port(), free_port()
        self.base = f"http://127.0.0.1:{self.nginx_port}"
        celery = [sys.executable, "-m", "celery", "-A", "worker.celery_app"]
        self.web = self._service(
            "gunicorn",
            [
                sys.executable,
                "-m",
                "gunicorn",
                "--workers",
                str(self.web_workers),
                "--threads",
                "16",
                "--bind",
                f"127.0.0.1:{self.portal_port}",
                "--log-level",
                "warning",
                "server.web.app:create_app()",
            ],
            ready=lambda _: _port_open(self.portal_port),
        )
        self.worker = self._service(
            "worker",
            [
                *celery,
                "worker",
                "--concurrency",
                str(self.concurrency),
                "--hostname",
                "faults@%h",
                "--loglevel",
                "WARNING",
            ],
            ready=self._worker_ready,
        )
        self.beat = self._service(
            "beat",
            [
                *celery,
                "beat",
                "--loglevel",
                "WARNING",
                "--schedule",
                str(self.folder / "celerybeat-schedule"),
            ],
        )
        prefix = self.folder / "nginx"
        prefix.mkdir()
        (prefix / "nginx.conf").write_text(nginx_config(prefix, self.nginx_port, self.portal_port))
        self.nginx = self._service(
            "nginx",
            [nginx_binary(), "-p", str(prefix), "-c", str(prefix / "nginx.conf")],
            ready=lambda _: _port_open(self.nginx_port),
        )
        self._set_passwords()

    def _service(self, name: str, command: list[str], ready=None) -> Service:
        service = Service(name, command, self.env, self.folder / f"{name}.log", ready)
        service.start()
        self._exit.callback(service.stop)
        return service

    def _worker_ready(self, worker: Service) -> bool:
        return len(descendants(worker.pid, depth=1)) >= self.concurrency

    def hpcgrade(self, *arguments: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "worker.cli", *arguments],
            env=self.env,
            cwd=ROOT,
            input=stdin,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"hpcgrade {' '.join(arguments)}: {done.stderr}")
        return done.stdout

    def _deploy_steps(self) -> None:
        """Two courses, as one installation serves them: COURSES[0] with every student, and
        COURSES[1] with its own course venv (a python of its own, which runs the same one) and
        the first ten students, who are in both."""
        self.hpcgrade("db", "upgrade")
        python = self.folder / "lab-python"
        python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
        python.chmod(0o755)
        self.hpcgrade(
            "courses",
            "create",
            COURSES[0],
            "--title-en",
            "Tensors and autograd",
            "--title-es",
            "Tensores y autograd",
        )
        self.hpcgrade(
            "courses",
            "create",
            COURSES[1],
            "--title-en",
            "Autograd lab",
            "--title-es",
            "Laboratorio de autograd",
            "--python",
            str(python),
        )
        self.hpcgrade("exercise", "sync")
        lines = self.hpcgrade(
            "users", "import", "--course", COURSES[0], "-", stdin=roster(self.students())
        ).splitlines()[1:]
        self.links = dict(line.split(",", 1) for line in lines)  # paths: no PUBLIC_URL here
        self.hpcgrade(
            "users", "import", "--course", COURSES[1], "-", stdin=roster(self.students()[:10])
        )

    def _set_passwords(self) -> None:
        """Each student follows their link and sets a password of their own."""
        for username, path in self.links.items():
            browser = requests.Session()
            form = browser.get(self.base + path, timeout=30)
            password = f"{username}-{uuid.uuid4().hex[:12]}"
            done = browser.post(
                self.base + path,
                allow_redirects=False,
                timeout=30,
                data={
                    "new": password,
                    "repeat": password,
                    "csrf_token": CSRF_TOKEN.search(form.text).group(1),
                },
            )
            assert done.status_code == 303, (username, done.status_code, done.text[:500])
            self.passwords[username] = password

    def students(self) -> list[str]:
        return [f"s{n:02d}" for n in range(self.student_count)]

    # --- looking inside ---------------------------------------------------------------------

    def database(self):
        """A Database on the stack's PostgreSQL (dispose it after use)."""
        from server.core.db import Database

        return Database(self.postgres.url)

    def busy(self) -> list[str]:
        """What the service is grading or has yet to grade: submissions queued or running, and
        runs (regrade previews among them) still running."""
        from server.core.models import GradingRun, Submission

        database = self.database()
        try:
            with database.sessions() as session:
                waiting = session.execute(
                    sa.select(Submission.id, Submission.status).where(
                        Submission.status.in_(("queued", "running"))
                    )
                ).all()
                running = session.execute(
                    sa.select(GradingRun.id, GradingRun.status).where(
                        GradingRun.status.in_(("running", "previewing"))
                    )
                ).all()
        finally:
            database.dispose()
        return [f"submission {i} {status}" for i, status in waiting] + [
            f"run {i} {status}" for i, status in running
        ]

    def wait_idle(self, seconds: float = 120) -> None:
        """Until nothing is graded or waits to be: a test that counts on the grading slots
        must not find them held by what an earlier test left (its slow files, a regrade)."""
        deadline = time.monotonic() + seconds
        while self.busy():
            assert time.monotonic() < deadline, f"still busy after {seconds} s: {self.busy()}"
            time.sleep(0.2)

    def pool_processes(self) -> list[int]:
        """The Celery worker's pool processes (the children of its main process)."""
        return [pid for pid in descendants(self.worker.pid, depth=1) if alive(pid)]

    def beats(self) -> list[int]:
        """Every Celery beat process on this stack's schedule file, however it was started."""
        schedule = str(self.folder / "celerybeat-schedule").encode()
        found = []
        for pid in _all_pids():
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"beat" in argv and schedule in argv and alive(pid):
                found.append(pid)
        return found

    def logs(self) -> str:
        return "\n".join(
            f"--- {s.name} ---\n{s.tail()}" for s in (self.web, self.worker, self.beat, self.nginx)
        )

    # --- clients ----------------------------------------------------------------------------

    def api(self, username: str) -> "Api":
        return Api(self.base, username, self.passwords[username])


class Api:
    """A student's client of the JSON API, through nginx, with a token of its own."""

    def __init__(self, base: str, username: str, password: str):
        self.base, self.username = base, username
        self.http = requests.Session()
        answer = self.http.post(
            f"{base}/api/v1/tokens", timeout=30, json={"username": username, "password": password}
        )
        if answer.status_code != 201:
            raise RuntimeError(f"log-in of {username}: {answer.status_code} {answer.text[:300]}")
        self.http.headers["Authorization"] = f"Bearer {answer.json()['token']}"

    def submit(
        self,
        exercise: str,
        code: str,
        key: str | None = None,
        filename: str = "work.py",
        course: str = COURSES[0],
    ) -> requests.Response:
        headers = {"Idempotency-Key": key} if key else {}
        return self.http.post(
            f"{self.base}/api/v1/submissions",
            headers=headers,
            timeout=30,
            data={"exercise": exercise, "course": course},
            files={"file": (filename, code.encode())},
        )

    def status(self, submission_id: int) -> dict:
        return self.http.get(f"{self.base}/api/v1/submissions/{submission_id}", timeout=30).json()


# --- submissions through the API, and what became of them -----------------------------------


def slow(code: str, seconds: float) -> str:
    """The same file, taking `seconds` to load: runs are still in hand when the fault comes."""
    return f"import time\ntime.sleep({seconds})\n{code}"


@dataclass
class Sent:
    key: str
    username: str
    kind: str
    phase: str
    course: str
    id: int | None = None
    answers: list[int] = field(default_factory=list)  # HTTP statuses, retries included


@dataclass
class Fault:
    name: str
    ended: dt.datetime
    goal: float


class Ledger:
    """Every submission sent (with its idempotency key) and every fault, for the final checks."""

    def __init__(self, stack: "Stack", students: list[str]):
        self.stack, self.students = stack, students
        self.apis = {name: stack.api(name) for name in students}
        self.sent: list[Sent] = []
        self.faults: dict[str, Fault] = {}
        self.errors: list[tuple[str, requests.Response]] = []  # (phase, a 5xx), sent again
        self._turn = 0

    def submit(self, phase: str, kind: str, load_seconds: float = 0, retry_for: float = 60) -> Sent:
        """One submission, from the next student in turn, to each course in turn; a client that
        gets an error or no answer sends it again with the same key, as `hpcgrade submit` does."""
        username = self.students[self._turn % len(self.students)]
        course = COURSES[self._turn // len(self.students) % len(COURSES)]
        self._turn += 1
        exercise, path = FILES[kind]
        code = path.read_text()
        sent = Sent(uuid.uuid4().hex, username, kind, phase, course)
        self.sent.append(sent)
        deadline = time.monotonic() + retry_for
        while True:
            try:
                answer = self.apis[username].submit(
                    exercise,
                    slow(code, load_seconds) if load_seconds else code,
                    key=sent.key,
                    course=course,
                )
                sent.answers.append(answer.status_code)
                if answer.status_code == 202:
                    sent.id = answer.json()["id"]
                    return sent
                if answer.status_code < 500:
                    raise AssertionError(f"{kind} refused: {answer.status_code} {answer.text}")
                self.errors.append((phase, answer))
            except requests.ConnectionError:
                sent.answers.append(0)
            if time.monotonic() > deadline:
                raise AssertionError(f"{kind} never accepted: {sent.answers}")
            time.sleep(1)

    def fault(self, name: str, goal: float, ended: dt.datetime | None = None) -> None:
        self.faults[name] = Fault(name, ended or now(), goal)


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def submissions(stack: "Stack", ids: list[int]):
    from server.core.models import Exercise, Submission

    database = stack.database()
    try:
        with database.sessions() as session:
            found = session.scalars(
                sa.select(Submission)
                .where(Submission.id.in_(ids))
                .options(
                    selectinload(Submission.runs),
                    selectinload(Submission.exercise).selectinload(Exercise.course),
                )
            ).all()
            for submission in found:
                for run in submission.runs:
                    run.checks  # loaded before the session closes
            return {s.id: s for s in found}
    finally:
        database.dispose()


def settle(
    stack: "Stack", ids: list[int], seconds: float, past: tuple[str, ...] = ("queued", "running")
) -> dict:
    """Wait until none of these submissions is in a status of `past` (by default: until they
    are done), for at most `seconds`; the submissions as they then are (the assertions say what
    was missed)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            found = submissions(stack, ids)
        except sa.exc.OperationalError:
            found = {}
        if len(found) == len(ids) and all(s.status not in past for s in found.values()):
            return found
        if time.monotonic() > deadline:
            return found
        time.sleep(0.3)


def done_run(submission):
    done = [r for r in submission.runs if r.status == "done"]
    return done[0] if len(done) == 1 else None


def late(found: dict, fault: Fault, slots: int = 0) -> list[str]:
    """The submissions not graded within the fault's goal, as readable lines. With `slots`, the
    grading slots a backlog the fault left waits for, the goal is the time lost to the fault:
    the backlog's own grading time after the fault, as its runs measured it on this machine, is
    allowed beyond it (a fixed allowance failed on a machine slower than the one it was set on)."""
    allowance = backlog_seconds(found, fault.ended) / slots if slots else 0.0
    limit = fault.ended + dt.timedelta(seconds=fault.goal + allowance)
    problems = []
    for submission in found.values():
        run = done_run(submission)
        if run is None or run.finished_at > limit:
            finished = (run.finished_at - fault.ended).total_seconds() if run else None
            problems.append(
                f"submission {submission.id}: {submission.status}, runs "
                f"{[r.status for r in submission.runs]}, graded "
                f"{'never' if finished is None else f'{finished:.1f} s'} after "
                f"the {fault.name} fault ended (goal {fault.goal:.0f} s, and {allowance:.1f} s of "
                "the backlog's grading)"
            )
    return problems


def backlog_seconds(found: dict, since: dt.datetime) -> float:
    """The seconds these submissions' done runs spent grading after `since`."""
    runs = [done_run(submission) for submission in found.values()]
    return sum(
        max((run.finished_at - max(run.started_at, since)).total_seconds(), 0.0)
        for run in runs
        if run is not None
    )


def running_run(stack: "Stack", ids: list[int], seconds: float = 30):
    """A run of one of these submissions that a worker has in hand: (submission id, pid)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for submission in submissions(stack, ids).values():
            for run in submission.runs:
                if run.status == "running" and run.worker:
                    return submission.id, int(run.worker.rpartition(":")[2])
        time.sleep(0.1)
    raise AssertionError(f"none of {ids} started grading within {seconds} s\n{stack.logs()}")

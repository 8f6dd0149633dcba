"""`hpcgrade demo`: the whole service on one machine with nothing else running.

SQLite for the database, a folder for the broker (kombu's filesystem transport, its races mended
in server/core/folder_broker.py), gunicorn for
the portal, one Celery worker grading with the local executor (or dispatching to this machine's
Slurm, `--executor slurm`) and Celery beat for the schedule, as its own process: whatever is
killed, there is never more than one scheduler. The demo supervises them
(worker/cli/supervise.py): one that exits is started again, and so is a worker whose heartbeat
stops. Everything lives in one folder, so a second run finds the accounts and submissions of
the first.

Two courses, this PyTorch course in two editions: pytorch-2026, and pytorch-2025 still open for
its resits. The demo's accounts show what each role sees: a student of both, the instructor of
one, a teaching assistant of the other and an admin.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import click
from sqlalchemy import select

from server.core import migrate
from server.core.config import ROOT, Settings
from server.core.course_admin import sync_course
from server.core.courses import create_course, enrol
from server.core.db import Database
from server.core.models import Course, ScheduleRun, User, WorkerHeartbeat
from server.core.queue import RECONCILE_SECONDS
from server.core.users import add_user
from worker.cli.supervise import Supervisor, Watch

# (slug, edition); the first is the course an older demo's data becomes (migration 0010)
DEMO_COURSES = (("pytorch-2026", "2026"), ("pytorch-2025", "2025 (resits)"))
# the centre's: the demo's deadlines are shown, and taken in the forms, in its time
DEMO_TIMEZONE = "Europe/Madrid"
TITLES = {
    "title_en": "Deep learning with PyTorch: tensors and autograd",
    "title_es": "Aprendizaje profundo con PyTorch: tensores y autograd",
}
# username (its password too), name, and its role in each course, or "admin" (every course)
DEMO_ACCOUNTS = (
    ("student", "Demo Student", {"pytorch-2026": "student", "pytorch-2025": "student"}),
    ("instructor", "Demo Instructor", {"pytorch-2026": "instructor"}),
    ("ta", "Demo Teaching Assistant", {"pytorch-2025": "ta"}),
    ("admin", "Demo Admin", "admin"),
)
ROLE_WORDS = {"student": "student", "ta": "teaching assistant", "instructor": "instructor"}
# the worker's Celery node, whose heartbeat the demo watches; a heartbeat is a message the size
# of a few bytes, so the demo's worker beats often: one that stops taking messages is replaced
# within about a quarter of a minute (three heartbeats missed: longer than SQLite makes a write
# wait, 10 s, so that a database locked that long does not pass for a stuck worker)
WORKER_NODE = f"demo@{socket.gethostname()}"
HEARTBEAT_SECONDS = 4.0
SCHEDULE_STALE_SECONDS = 3 * RECONCILE_SECONDS  # three reconciles missed: beat is stuck
SUPERVISE_SECONDS = 0.5


def demo_settings(folder: Path, executor: str = "local") -> dict:
    broker = folder / "broker"
    secret = folder / "secret_key"
    if not secret.exists():
        secret.write_text(secrets.token_hex(32))
        secret.chmod(0o600)
    settings = {
        "DATABASE_URL": f"sqlite:///{folder / 'hpcgrade.sqlite'}",
        "BROKER_URL": "filesystem://localhost/",
        # the worker lists the folder every polling_interval (kombu's default: 1 s,
        # which a result waited for); a listing of a small local folder is cheap
        "BROKER_TRANSPORT_OPTIONS": {
            "data_folder_in": str(broker / "messages"),
            "data_folder_out": str(broker / "messages"),
            "control_folder": str(broker / "control"),
            "polling_interval": 0.05,
        },
        "SECRET_KEY": secret.read_text().strip(),
        "WORKER_HEARTBEAT_SECONDS": HEARTBEAT_SECONDS,
        "EXECUTOR": executor,
        "SPOOL_DIR": str(folder / "spool"),
        # plain http on this machine: a Secure cookie would never come back; and no
        # Redis to count failed log-ins in, so each portal process counts its own
        "SESSION_COOKIE_SECURE": False,
        "LOGIN_LIMITS_STORAGE": "memory://",
    }
    if executor == "slurm":  # jobs run this interpreter, as the user who runs the demo
        settings.update(COURSE_PYTHON=sys.executable, SLURM_BATCH_WAIT=1.0)
    return settings


def write_config(path: Path, settings: dict) -> None:
    # JSON strings are valid TOML basic strings
    lines = []
    for key, value in settings.items():
        if isinstance(value, dict):
            inline = ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items())
            lines.append(f"{key.lower()} = {{ {inline} }}")
        else:
            lines.append(f"{key.lower()} = {json.dumps(value)}")
    path.write_text("\n".join(lines) + "\n")


def prepare(folder: Path, executor: str = "local") -> Path:
    """Database at the newest migration, the demo's courses with their exercises synced, its
    accounts enrolled; returns the config file."""
    folder.mkdir(parents=True, exist_ok=True)
    settings = demo_settings(folder, executor)
    for key in ("data_folder_in", "control_folder"):
        Path(settings["BROKER_TRANSPORT_OPTIONS"][key]).mkdir(parents=True, exist_ok=True)
    config = folder / "hpcgrade.toml"
    write_config(config, settings)
    migrate.upgrade(settings["DATABASE_URL"], course=DEMO_COURSES[0][0])
    database = Database(settings["DATABASE_URL"])
    with database.sessions.begin() as session:
        courses = {slug: demo_course(session, slug, edition) for slug, edition in DEMO_COURSES}
        for course in courses.values():
            sync_course(session, course)
        for username, name, roles in DEMO_ACCOUNTS:
            demo_account(session, username, name, roles, courses)
    database.dispose()
    return config


def demo_course(session, slug: str, edition: str) -> Course:
    return session.scalar(select(Course).where(Course.slug == slug)) or create_course(
        session, slug, edition=edition, timezone=DEMO_TIMEZONE, **TITLES
    )


def demo_account(
    session, username: str, name: str, roles: dict[str, str] | str, courses: dict[str, Course]
) -> None:
    """The account (its password its username), in the roles the demo gives it."""
    user = session.scalar(select(User).where(User.username == username))
    if user is None:
        first, role = ("", roles) if roles == "admin" else next(iter(roles.items()))
        user = add_user(
            session,
            username,
            name,
            f"{username}@example.org",
            role,
            password=username,
            course=courses.get(first),
            min_password_length=1,
        )
    for slug, role in ({} if roles == "admin" else roles).items():
        enrol(session, user, courses[slug], role)


def accounts_text() -> str:
    """Who to log in as, for the demo's first lines."""

    def what(roles: dict[str, str] | str) -> str:
        if roles == "admin":
            return "admin: every course, and the courses' settings at /admin/courses"
        return "; ".join(f"{ROLE_WORDS[role]} of {slug}" for slug, role in roles.items())

    return "\n".join(f"    {username:11} {what(roles)}" for username, _name, roles in DEMO_ACCOUNTS)


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def wait_for_port(host: str, port: int, process: subprocess.Popen, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.2)
    return False


def signs_database(url: str) -> Database:
    """The database the supervisor reads the signs of life from. Pooled: its connection stays
    open while the demo runs, so that no process's connection is ever SQLite's last, which on
    closing takes the database to itself to fold the WAL back in. A worker stopped (SIGSTOP)
    there would lock the supervisor out of the very signs that would have it replaced (in CI:
    'database is locked', and a stopped worker never replaced; of the ways SQLite documents for
    a reader in WAL mode to be locked out, the one a worker stopped at any heartbeat can cause)."""
    return Database(url)


def _heartbeat_of(node: str):
    def last_sign(session) -> dt.datetime | None:
        return session.scalar(select(WorkerHeartbeat.beat_at).where(WorkerHeartbeat.node == node))

    return last_sign


def _last_reconcile(session) -> dt.datetime | None:
    return session.scalar(select(ScheduleRun.ran_at).where(ScheduleRun.task == "reconcile"))


def _say(line: str) -> None:
    """A line of the demo's own, dated as Celery's around it are."""
    click.echo(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] hpcgrade demo: {line}", err=True)


def _interrupt(_signum, _frame) -> None:
    raise KeyboardInterrupt


@click.command()
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option(
    "--folder",
    type=click.Path(file_okay=False, path_type=Path),
    default=ROOT / "instance" / "demo",
    show_default=True,
    help="Where the database, the broker's messages and the secret key are kept.",
)
@click.option(
    "--executor",
    type=click.Choice(["local", "slurm"]),
    default="local",
    show_default=True,
    help="slurm: each grade runs in a job of this machine's Slurm (scripts/slurm).",
)
def demo(port: int, host: str, folder: Path, executor: str) -> None:
    """Run the portal and a grading worker here, with two courses (pytorch-2026 and
    pytorch-2025) and the accounts student, instructor, ta and admin (each its own password)."""
    if not _port_free(host, port):
        raise click.ClickException(f"port {port} is in use; choose another with --port")
    folder.mkdir(parents=True, exist_ok=True)
    held = _only_demo_of(folder)  # held open until the demo ends
    config = prepare(folder.resolve(), executor)
    # the demo's own settings, not those of a production service configured in this shell
    env = {k: v for k, v in os.environ.items() if not k.startswith("HPCGRADE_")}
    env.update(HPCGRADE_CONFIG=str(config), PYTHONUNBUFFERED="1")
    if "HPCGRADE_EXERCISES" in os.environ:
        env["HPCGRADE_EXERCISES"] = os.environ["HPCGRADE_EXERCISES"]
    database = signs_database(demo_settings(folder.resolve(), executor)["DATABASE_URL"])
    supervisor = Supervisor(env, str(ROOT), _say, database)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGHUP, _interrupt)
    try:
        portal = supervisor.start(
            "portal",
            [
                # threads, as deployed: a waiting page's status request is held in one
                # (server/web/live.py)
                sys.executable,
                "-m",
                "gunicorn",
                "--bind",
                f"{host}:{port}",
                "--workers",
                "2",
                "--threads",
                "16",
                "--log-level",
                "warning",
                "server.web.app:create_app()",
            ],
        )
        celery = [sys.executable, "-m", "celery", "--quiet", "-A", "worker.celery_app"]
        supervisor.start(
            "worker",
            [
                *celery,
                "worker",
                "--concurrency",
                "1",
                "--loglevel",
                "WARNING",
                "--without-gossip",
                "--without-mingle",
                "--hostname",
                WORKER_NODE,
            ],
        )
        supervisor.start(
            "beat",
            [
                *celery,
                "beat",
                "--loglevel",
                "WARNING",
                "--schedule",
                str(folder.resolve() / "celerybeat-schedule"),
            ],
        )
        supervisor.watches += [
            Watch(
                "worker",
                _heartbeat_of(WORKER_NODE),
                Settings(worker_heartbeat_seconds=HEARTBEAT_SECONDS).worker_heartbeat_stale_seconds,
                "sent no heartbeat (it takes nothing from the broker, or cannot write to the "
                "database)",
            ),
            Watch(
                "beat",
                _last_reconcile,
                SCHEDULE_STALE_SECONDS,
                "scheduled no reconcile (it is stuck, or the worker takes nothing)",
            ),
        ]
        if not wait_for_port(host, port, portal, 30):
            raise click.ClickException("the portal did not start; see the messages above")
        click.echo(
            f"\nhpcgrade demo: http://{host}:{port}/\n"
            f"  courses: {', '.join(slug for slug, _edition in DEMO_COURSES)}\n"
            "  log in as (the password is the username):\n"
            f"{accounts_text()}\n"
            f"  data in {folder}; Ctrl-C stops\n"
        )
        while True:
            supervisor.check()
            time.sleep(SUPERVISE_SECONDS)
    except KeyboardInterrupt:
        click.echo("stopping")
    finally:
        for asked in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # a second ask is the first
            signal.signal(asked, signal.SIG_IGN)
        supervisor.stop()
        database.dispose()
        held.close()


def _only_demo_of(folder: Path):
    """A lock on the folder, or a refusal: two demos of one folder would run two schedules and
    two workers of one name, each taking the other's heartbeat for its own."""
    lock = open(folder / "demo.lock", "a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise click.ClickException(
            f"another demo runs on {folder}; stop it, or choose another folder with --folder"
        ) from None
    return lock

"""`hpcgrade demo` (SQLite, a broker in a folder, gunicorn, a worker) driven by `hpcgrade login`
and `hpcgrade submit`, as a student would from a terminal."""

import contextlib
import datetime as dt
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
import slurm_cluster
import sqlalchemy as sa
from helpers import alive, descendants, end_process, free_port

from server.core import migrate
from server.core.db import Database
from server.core.models import Course, Enrolment, Exercise, User, WorkerHeartbeat
from server.core.users import authenticate
from worker.cli.demo import prepare

ROOT = Path(__file__).parents[2]
HPCGRADE = [sys.executable, "-m", "worker.cli"]


# the demo's two courses: who is what in each (an admin is in every course without enrolment)
ROLES = [
    ("instructor", "pytorch-2026", "instructor"),
    ("student", "pytorch-2025", "student"),
    ("student", "pytorch-2026", "student"),
    ("ta", "pytorch-2025", "ta"),
]


def roles(session) -> list[tuple[str, str, str]]:
    return sorted(
        session.execute(
            sa.select(User.username, Course.slug, Enrolment.role).join(Enrolment.user).join(Course)
        )
    )


def test_prepare_twice_keeps_one_set_of_accounts_in_two_courses(tmp_path):
    prepare(tmp_path)
    config = prepare(tmp_path)
    assert 'broker_url = "filesystem://localhost/"' in config.read_text()
    assert (tmp_path / "secret_key").stat().st_mode & 0o777 == 0o600
    database = Database(f"sqlite:///{tmp_path / 'hpcgrade.sqlite'}")
    with database.sessions() as session:
        for username in ("student", "instructor", "ta", "admin"):
            assert authenticate(session, username, username) is not None
        assert session.scalar(sa.select(User.username).where(User.is_admin)) == "admin"
        assert session.query(User).count() == 4
        assert roles(session) == ROLES
        assert sorted(
            session.execute(
                sa.select(Course.slug, Course.archived_at, sa.func.count(Exercise.id))
                .join(Exercise)
                .group_by(Course.slug)
            )
        ) == [("pytorch-2025", None, 16), ("pytorch-2026", None, 16)]
        # the centre's time zone: deadlines shown and taken in Madrid's time, not UTC
        assert set(session.scalars(sa.select(Course.timezone))) == {"Europe/Madrid"}
    database.dispose()


def test_an_older_demos_accounts_and_exercises_land_in_its_first_course(tmp_path):
    """A demo folder from before courses: migration 0010 makes it pytorch-2026, then the
    demo adds the other edition and its roles."""
    url = f"sqlite:///{tmp_path / 'hpcgrade.sqlite'}"
    migrate.upgrade(url, "0009")
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.execute(
            sa.text(
                "INSERT INTO users (username, name, email, role, password_hash, created_at) "
                "VALUES ('student', 'Old Student', 's@example.org', 'student', 'x', "
                "CURRENT_TIMESTAMP)"
            )
        )
    engine.dispose()
    prepare(tmp_path)
    database = Database(url)
    with database.sessions() as session:
        assert (
            session.scalar(sa.select(User.name).where(User.username == "student")) == "Old Student"
        )  # kept, not made again
        assert roles(session) == ROLES
    database.dispose()


@contextlib.contextmanager
def running_demo(folder: Path, *options: str):
    """The demo started as the README does, once it printed its address; what it says of its
    processes (stderr) goes to the folder's demo.log."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HPCGRADE_")}
    folder.mkdir(parents=True, exist_ok=True)
    log = open(folder / "demo.log", "w")
    process = subprocess.Popen(
        HPCGRADE + ["demo", "--port", str(port), "--folder", str(folder), *options],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    log.close()
    for line in process.stdout:
        if line.startswith("hpcgrade demo: http://"):
            break
    else:
        pytest.fail(f"the demo exited with {process.wait()} before printing its URL")
    try:
        yield process, f"http://127.0.0.1:{port}"
    finally:
        end_process(process, grace=60)


@pytest.fixture
def demo(tmp_path):
    with running_demo(tmp_path / "demo") as running:
        yield running


def _csrf(browser, page: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', browser.get(page).text).group(1)


def browsing(url: str, username: str) -> requests.Session:
    """A browser logged in as one of the demo's accounts (its password is its username)."""
    browser = requests.Session()
    browser.post(
        f"{url}/login",
        data={
            "username": username,
            "password": username,
            "csrf_token": _csrf(browser, f"{url}/login"),
        },
    )
    return browser


def client(tmp_path, *args, **env):
    return subprocess.run(
        HPCGRADE + list(args),
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ, HPCGRADE_CLIENT_CONFIG=str(tmp_path / "client.toml"), **env),
    )


def test_a_student_submits_from_the_terminal_and_gets_the_grade(demo, tmp_path):
    process, url = demo
    assert client(tmp_path, "submit", "pytorch-2026/autograd-q", "README.md").returncode == 2
    logged_in = client(
        tmp_path, "login", "--server", url, "--username", "student", "--password", "student"
    )
    assert logged_in.returncode == 0, logged_in.stderr
    assert (tmp_path / "client.toml").stat().st_mode & 0o777 == 0o600

    ambiguous = client(tmp_path, "submit", "autograd-q", "examples/autograd-q/alice_correct.py")
    assert ambiguous.returncode != 0  # in both of the student's courses: they name one
    assert "pytorch-2025" in ambiguous.stderr and "pytorch-2026" in ambiguous.stderr
    correct = client(
        tmp_path,
        "submit",
        "pytorch-2026/autograd-q",
        "examples/autograd-q/alice_correct.py",
        "--json",
    )
    assert correct.returncode == 0, correct.stderr
    graded = json.loads(correct.stdout)
    assert (graded["status"], graded["score"], graded["max_score"]) == ("graded", 10, 10)
    assert "queued" in correct.stderr or "running" in correct.stderr

    wrong = client(
        tmp_path,
        "submit",
        "pytorch-2026/autograd-q",
        "examples/autograd-q/carol_notebook.ipynb",
        "--lang",
        "es",
    )
    assert wrong.returncode == 0 and "3 / 10" in wrong.stdout
    assert "grad-sign-flipped: b.grad tiene el signo contrario" in wrong.stdout

    unknown = client(tmp_path, "submit", "nope", "examples/autograd-q/alice_correct.py")
    assert unknown.returncode == 3  # refused, naming where it looked
    assert "no exercise nope in your courses (pytorch-2026, pytorch-2025)" in unknown.stderr
    refused = client(tmp_path, "submit", "pytorch-2026/autograd-q", "README.md")
    assert refused.returncode == 3 and ".py" in refused.stderr
    forged = client(
        tmp_path,
        "submit",
        "pytorch-2026/autograd-q",
        "examples/autograd-q/alice_correct.py",
        HPCGRADE_TOKEN="forged",
    )
    assert forged.returncode == 2 and "hpcgrade login" in forged.stderr  # not logged in
    wrong_password = client(
        tmp_path, "login", "--server", url, "--username", "instructor", "--password", "student"
    )
    assert wrong_password.returncode == 2 and "wrong username or password" in wrong_password.stderr

    # the instructor, in a browser: the course page, then a regrade followed by the page's polls
    browser = browsing(url, "instructor")
    assert "grad-sign-flipped" in browser.get(f"{url}/courses/pytorch-2026/staff/").text
    assert browser.get(f"{url}/courses/pytorch-2025/staff/").status_code == 404  # not theirs
    submission = f"{url}/courses/pytorch-2026/submissions/{graded['id']}"
    regraded = browser.post(
        f"{url}/courses/pytorch-2026/staff/submissions/{graded['id']}/regrade",
        data={"csrf_token": _csrf(browser, submission)},
    )
    assert "queued for grading again" in regraded.text
    deadline = time.monotonic() + 60
    while (status := browser.get(f"{submission}/status", timeout=5)).json()["status"] != "graded":
        assert time.monotonic() < deadline, status.text
        time.sleep(0.2)
    assert status.json()["score"] == 10 and browser.get(submission).text.count("<td>done</td>") == 2
    # code similarity, asked for on its page: made by the demo's worker, through its folder broker
    similarity = f"{url}/courses/pytorch-2026/staff/exercises/autograd-q/similarity"
    asked = browser.post(similarity, data={"csrf_token": _csrf(browser, similarity)})
    assert "being compared" in asked.text
    deadline = time.monotonic() + 60
    while "1 counted submission compared" not in (compared := browser.get(similarity).text):
        assert time.monotonic() < deadline, compared
        time.sleep(0.5)
    assert "never a grade" in compared and "Compare again" in compared

    ta = browsing(url, "ta")
    assert ta.get(f"{url}/courses/pytorch-2025/staff/").status_code == 200
    assert ta.get(f"{url}/courses/pytorch-2026/staff/").status_code == 404
    assert ta.get(submission).status_code == 404
    home = browsing(url, "student").get(f"{url}/").text  # a student of two courses picks one
    assert "/courses/pytorch-2026/" in home and "/courses/pytorch-2025/" in home
    admin = browsing(url, "admin").get(f"{url}/admin/courses/").text
    assert ">pytorch-2026</a>" in admin and ">pytorch-2025</a>" in admin

    children = descendants(process.pid, depth=1)
    assert len(children) == 3  # gunicorn, the Celery worker and beat
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0
    deadline = time.monotonic() + 10
    while any(map(alive, children)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(map(alive, children))


def demo_processes(demo_pid: int) -> dict[str, int]:
    """The demo's children by what they run: portal, worker, beat."""
    found = {}
    for pid in descendants(demo_pid, depth=1):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:  # it ended since it was listed (a killed worker, reaped)
            continue
        name = next((n for n in ("worker", "beat") if n.encode() in command), "portal")
        found[name] = pid
    return found


def heartbeat_after(folder: Path, moment: dt.datetime):
    """The demo worker's heartbeat, if one was written after `moment`."""
    database = Database(f"sqlite:///{folder / 'hpcgrade.sqlite'}")
    with database.sessions() as session:
        beat = session.scalar(sa.select(WorkerHeartbeat.beat_at))
    database.dispose()
    return beat if beat is not None and beat > moment else None


class PortalWatch(threading.Thread):
    """Asks the portal for a page every 0.1 s until stopped; keeps when each 200 came back, and
    what did not answer 200. A request may wait 60 s: in CI, beside two other pytests on two
    cores, one request went unanswered for over 10 s while a new worker started (on /login,
    which reads no database).
    Whether the portal depends on the worker is told by the answers that came back while the
    worker was stopped, not by how quick one was."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.failures, self.answered = url, [], []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.1):
            sent = time.monotonic()
            try:
                answer = requests.get(f"{self.url}/login", timeout=60)
            except requests.RequestException as exc:
                self.failures.append(str(exc))
                continue
            if answer.status_code == 200:
                self.answered.append((sent, time.monotonic()))
            else:
                self.failures.append(answer.status_code)

    def answered_between(self, start: float, end: float) -> int:
        """Requests sent and answered between these moments."""
        return sum(start <= sent and answered <= end for sent, answered in self.answered)


def test_a_worker_killed_or_stuck_is_replaced_while_the_portal_answers(demo, tmp_path):
    """The demo supervises its processes: a worker killed by hand is started again within 10 s,
    and one that stops taking anything (stopped by a signal) is replaced once its heartbeat is
    missed; the portal answers every request meanwhile, while the worker is stopped too, and
    the log says why."""
    process, url = demo
    folder = tmp_path / "demo"
    watch = PortalWatch(url)
    watch.start()
    for stop, replaced_within in ((signal.SIGKILL, 10), (signal.SIGSTOP, 30)):
        worker = demo_processes(process.pid)["worker"]
        moment = dt.datetime.now(dt.timezone.utc)
        os.kill(worker, stop)
        stopped = time.monotonic()
        deadline = stopped + replaced_within
        while demo_processes(process.pid).get("worker") in (None, worker):
            assert time.monotonic() < deadline, (folder / "demo.log").read_text()
            time.sleep(0.2)
        replaced = time.monotonic()
        # the new worker's start (imports, the broker, its pool) took 9 s and more in CI, beside
        # two other pytests on two cores: its first heartbeat is awaited apart from the supervisor
        deadline = time.monotonic() + 60
        while not heartbeat_after(folder, moment):
            assert time.monotonic() < deadline, (folder / "demo.log").read_text()
            time.sleep(0.2)
        assert not alive(worker)
    # a portal that waited for the stopped worker would answer nothing until it was replaced
    assert watch.answered_between(stopped, replaced) > 0, (stopped, replaced, watch.answered)
    watch.done.set()
    watch.join()
    assert len(watch.answered) > 50 and watch.failures == []
    log = (folder / "demo.log").read_text()
    assert "the worker was killed by signal SIGKILL" in log
    assert (
        "the worker sent no heartbeat (it takes nothing from the broker, or cannot write to "
        "the database) for" in log
    )
    logged_in = client(
        tmp_path, "login", "--server", url, "--username", "student", "--password", "student"
    )
    assert logged_in.returncode == 0, logged_in.stderr
    graded = client(
        tmp_path,
        "submit",
        "pytorch-2026/autograd-q",
        "examples/autograd-q/alice_correct.py",
        "--json",
    )
    assert graded.returncode == 0 and json.loads(graded.stdout)["score"] == 10, graded.stderr


@pytest.mark.parametrize("end", ["asked twice", "killed"])
def test_the_demo_leaves_nothing_running_however_it_ends(tmp_path, end):
    """A second SIGTERM while it stops (`timeout` forwards the one it got) once left its
    processes running; a demo killed with SIGKILL takes them with it too."""
    with running_demo(tmp_path / "demo") as (process, _url):
        children = descendants(process.pid, depth=1)
        assert len(children) == 3
        if end == "killed":
            process.kill()
        else:
            process.send_signal(signal.SIGTERM)
            time.sleep(0.3)
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=60) == 0
        deadline = time.monotonic() + 30
        while any(map(alive, children)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(map(alive, children))


def test_a_second_demo_of_one_folder_is_refused(demo, tmp_path):
    """Two would run two schedules, and two workers of one name taking each other's heartbeat
    for their own."""
    second = subprocess.run(
        HPCGRADE + ["demo", "--port", str(free_port()), "--folder", str(tmp_path / "demo")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode == 1 and "another demo runs on" in second.stderr


def test_a_port_in_use_is_refused_with_a_clear_message(tmp_path):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        taken = subprocess.run(
            HPCGRADE
            + ["demo", "--port", str(listener.getsockname()[1]), "--folder", str(tmp_path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
    assert taken.returncode == 1 and "in use" in taken.stderr
    assert not (tmp_path / "hpcgrade.sqlite").exists()


@pytest.mark.slurm
@pytest.mark.skipif(
    not slurm_cluster.available(), reason="no Slurm cluster of scripts/slurm's here"
)
def test_the_demo_grades_on_slurm_as_the_readme_says(tmp_path):
    """README: `scripts/slurm`, then `scripts/run --executor slurm`; a student submits, and the
    instructor sees the Slurm job that graded it."""
    with running_demo(tmp_path / "demo", "--executor", "slurm") as (process, url):
        assert (
            client(
                tmp_path, "login", "--server", url, "--username", "student", "--password", "student"
            ).returncode
            == 0
        )
        graded = client(
            tmp_path,
            "submit",
            "pytorch-2026/autograd-q",
            "examples/autograd-q/alice_correct.py",
            "--json",
            "--timeout",
            "120",
        )
        assert graded.returncode == 0, graded.stderr
        result = json.loads(graded.stdout)
        assert (result["status"], result["score"]) == ("graded", 10)
        browser = browsing(url, "instructor")
        runs = browser.get(f"{url}/courses/pytorch-2026/submissions/{result['id']}").text
        job = re.search(r"slurm · job (\d+)", runs).group(1)
        # the grade is stored as soon as the job's report is written; the job itself ends after
        deadline = time.monotonic() + 60
        while slurm_cluster.job_state(job) == "RUNNING" and time.monotonic() < deadline:
            time.sleep(0.5)
        assert slurm_cluster.job_state(job) == "COMPLETED"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0


def test_the_documented_sync_publishes_to_the_demo_and_makes_no_database_elsewhere(tmp_path):
    """docs/writing-an-exercise.md's `hpcgrade exercise sync` made an empty database of its own
    ("no such table: courses") rather than publish to the demo the README starts."""
    config = prepare(tmp_path / "demo")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HPCGRADE_")}

    def sync(settings: Path) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*HPCGRADE, "exercise", "sync", "--course", "pytorch-2026"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env=dict(clean, HPCGRADE_CONFIG=str(settings)),
        )

    synced = sync(config)
    assert synced.returncode == 0 and synced.stdout.startswith("pytorch-2026: "), synced.stderr
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text(f'database_url = "sqlite:///{tmp_path / "none.sqlite"}"\n')
    refused = sync(elsewhere)
    assert (
        refused.returncode == 1 and "HPCGRADE_CONFIG=instance/demo/hpcgrade.toml" in refused.stderr
    )
    assert not (tmp_path / "none.sqlite").exists()

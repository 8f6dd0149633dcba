"""Small helpers shared by the tests."""

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

from werkzeug.serving import make_server

from worker.harness.report import (
    Report,
    ReportStatus,
    codes,  # noqa: F401  (re-exported for the tests)
)

# The service's process holds secrets like these; the harness and the students must never see them.
SECRETS = {
    "DATABASE_URL": "postgresql://hpcgrade:S3CRET-DB-PASSWORD@127.0.0.1/hpcgrade",
    "HPCGRADE_SECRET_KEY": "S3CRET-SESSION-KEY",
    "REDIS_URL": "redis://:S3CRET-REDIS@127.0.0.1",
}


def descendants(pid: int, depth: int | None = None) -> list[int]:
    """The processes below pid (its children only with depth=1), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        children.setdefault(parent, []).append(int(entry))
    found, level = [], [pid]
    while level and (depth is None or depth > 0):
        level = [child for parent in level for child in children.get(parent, [])]
        found += level
        depth = None if depth is None else depth - 1
    return found


def end_process(process, grace: float = 30) -> None:
    """A test's process asked to end (SIGTERM: a Celery worker first finishes the task in hand),
    then killed with what it started once `grace` seconds have passed: a teardown asserts
    nothing of how long a process takes to end (a warm shutdown outlasted 30 s in CI on a slow
    machine, and the teardown's timeout failed a test that had passed)."""
    if process.poll() is not None:
        return
    below = descendants(process.pid)
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        for pid in [process.pid, *below]:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        process.wait()


# a harness's processes once it is idle: its zygote, and the keeper and student it holds ready
IDLE_HARNESS = 3


def settled(pid: int, count: int) -> bool:
    """Whether `pid` comes to have no more than `count` descendants within 10 s (a process left
    behind is one more): a keeper ends after its student ended, on its own time; before its
    first run a harness holds no student ready (its zygote alone)."""
    deadline = time.monotonic() + 10
    while len(descendants(pid)) > count and time.monotonic() < deadline:
        time.sleep(0.01)
    return len(descendants(pid)) <= count


def alive(pid: int) -> bool:
    """Running still: neither gone nor a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    except OSError:
        return False


def notebook(*cells: str) -> str:
    return json.dumps(
        {
            "cells": [
                {"cell_type": "code", "source": c, "metadata": {}, "outputs": []} for c in cells
            ],
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )


REFERENCE_Q = (Path(__file__).parents[1] / "exercises" / "autograd-q" / "reference.py").read_text()
# autograd-accumulation done as the statement allows but advises against: one backward() per window
ONE_BACKWARD_PER_WINDOW = """def train_accumulated(model, optimizer, batches, accumulation_steps):
    for start in range(0, len(batches), accumulation_steps):
        total = 0
        for x in batches[start:start + accumulation_steps]:
            total = total + ((model(x) - 2 * x) ** 2).mean() / accumulation_steps
        total.backward()
        optimizer.step()
        optimizer.zero_grad()
    return model.weight
"""


POSTGRES = os.environ.get("HPCGRADE_TEST_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432")


def postgres_database():
    """A new, empty PostgreSQL database, dropped afterwards."""
    import sqlalchemy as sa

    name = f"hpcgrade_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(f"{POSTGRES}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield f"{POSTGRES}/{name}"
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextlib.contextmanager
def served_over_http(app, threaded: bool = False):
    """`app` (a WSGI app) served on a free port of 127.0.0.1 from a thread; yields its URL.
    The thread looks for its stop every 50 ms (werkzeug's default half second was most of a
    client test's time)."""
    server = make_server("127.0.0.1", 0, app, threaded=threaded)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# the tests' course, whose exercises are the course's (exercises/)
COURSE = "pytorch"
IN_COURSE = f"/courses/{COURSE}"


def new_course(session, slug: str = COURSE, **values):
    """A course of the exercises/ folder (of `values`' exercises_dir) with no one in it."""
    from server.core.courses import create_course

    return create_course(
        session,
        slug,
        **{"title_en": "Tensors and autograd", "title_es": "Tensores y autograd", **values},
    )


def the_course(session):
    """The tests' course, made the first time it is asked for."""
    import sqlalchemy as sa

    from server.core.models import Course

    return session.scalar(sa.select(Course).where(Course.slug == COURSE)) or new_course(session)


def change_settings(app, **changes) -> None:
    """Give a running app other settings, by name (MAIL_PORT=...), parsed as at start-up."""
    import dataclasses

    from server.core.config import FIELDS, SETTINGS_KEY

    parsed = {
        FIELDS[name].name: FIELDS[name].metadata["parse"](name, value)
        for name, value in changes.items()
    }
    app.extensions[SETTINGS_KEY] = dataclasses.replace(app.extensions[SETTINGS_KEY], **parsed)


def dispatcher(database, executor, catalogue, **settings):
    """A dispatcher as a worker builds one, on the executor's spool (tests' own settings)."""
    import datetime as dt

    from server.core.config import Resources
    from worker.grading.dispatch import Dispatcher
    from worker.grading.pilots import Pilots

    values = dict(
        spool=executor.spool,
        resources=Resources(),
        worker="t",
        lease=dt.timedelta(minutes=5),
        pilots=None if executor.synchronous else Pilots(executor.spool),
    )
    return Dispatcher(database, executor, catalogue, **{**values, **settings})


def grade_next(database, executor, catalogue) -> tuple[int, str]:
    """Grade the queued submission whose turn it is, as a dispatch task does: (its id, outcome)."""
    (outcome,) = dispatcher(database, executor, catalogue).dispatch().outcomes.items()
    return outcome


def grade(database, executor, catalogue, submission_id: int) -> str:
    """Grade the queued submission whose turn it is, as the dispatch task does; the outcome for
    this one ("skipped" if it was not graded)."""
    done = dispatcher(database, executor, catalogue).dispatch()
    return done.outcomes.get(submission_id, "skipped")


def queue_submission(database, code: str, slug: str = "autograd-q") -> int:
    """A submission of ana's, accepted and committed as queued; its id."""
    import datetime as dt

    import sqlalchemy as sa

    from server.core.models import Exercise, User
    from server.web.submissions import Rules, accept

    with database.sessions.begin() as session:
        submission = accept(
            session,
            session.scalar(sa.select(User).where(User.username == "ana")),
            session.scalar(sa.select(Exercise).where(Exercise.slug == slug)),
            "work.py",
            code.encode(),
            Rules(1024, 100, 60),
            dt.datetime.now(dt.timezone.utc),
        )
        session.flush()
        return submission.id


def graded_through_api(app, username: str, seconds: float = 60, context=lambda: None) -> dict:
    """REFERENCE_Q submitted through the API as `username` (password long-password), polled until
    graded; its result. `context` says more when it never comes."""
    import io
    import time

    client = app.test_client()
    token = client.post(
        "/api/v1/tokens", json={"username": username, "password": "long-password"}
    ).json
    headers = {"Authorization": f"Bearer {token['token']}"}
    created = client.post(
        "/api/v1/submissions",
        headers=headers,
        data={"exercise": "autograd-q", "file": (io.BytesIO(REFERENCE_Q.encode()), "work.py")},
    )
    assert created.status_code == 202, created.json
    deadline = time.monotonic() + seconds
    while (status := client.get(created.json["url"], headers=headers).json)["status"] != "graded":
        assert time.monotonic() < deadline, (status, context())
        time.sleep(0.2)
    return status


CSRF_TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


def log_in(
    client, username: str = "ana", password: str = "long-password", path: str = "/login", **request
):
    """The log-in form sent by a test client, as a browser sends it (the form's CSRF token read
    from the page at `path` first); the reply. `request` goes with the form (environ_base…)."""
    token = CSRF_TOKEN.search(client.get(path).text).group(1)
    return client.post(
        path, data={"username": username, "password": password, "csrf_token": token}, **request
    )


def logged_in(app, username: str = "ana", password: str = "long-password", lang: str | None = None):
    """A test client logged in through the log-in page, and the CSRF token of its new session
    (logging in starts one); `lang` is chosen as the language switch does, for the next requests.
    The token is read from the account page, which every account has and which asks little of
    the database: the course page took a fifth of the web tests' time."""
    client = app.test_client()
    assert log_in(client, username, password).status_code == 302
    page = client.get("/account/", query_string={"lang": lang} if lang else None)
    return client, CSRF_TOKEN.search(page.text).group(1)


# the course's sixteen exercises in course order (../shared/EXERCISES.md, each exercise's `order`)
COURSE_ORDER = [
    "tensors-create",
    "tensors-reshape",
    "tensors-combine",
    "tensors-channels-last",
    "metrics",
    "conv2d-einsum",
    "embeddings",
    "autograd-q",
    "autograd-vjp",
    "autograd-no-track",
    "autograd-graph",
    "autograd-accumulation",
    "autograd-custom-function",
    "autograd-saved-hooks",
    "autograd-finetune",
    "training-step",
]


# a second edition of the tests' course, with one exercise of the first (autograd-q)
SECOND_COURSE = "pytorch-2027"


def second_edition(app, folder: Path) -> None:
    """Course pytorch-2027 beside the tests' course (the `course` fixture), its exercises a copy
    of autograd-q alone, in `folder`: ana is a student of both, bea of pytorch alone; ines is an
    instructor of pytorch, olga of pytorch-2027 (passwords long-password)."""
    import shutil

    import sqlalchemy as sa

    from server.core.catalogue import default_root, load_catalogue
    from server.core.courses import enrol
    from server.core.exercises import sync_exercises
    from server.core.models import User
    from server.core.users import add_user

    shutil.copytree(
        default_root() / "autograd-q",
        folder / "autograd-q",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    with app.app_context(), app.extensions["hpcgrade.db"].sessions() as session:
        second = new_course(session, SECOND_COURSE, edition="2027", exercises_dir=str(folder))
        sync_exercises(session, second, load_catalogue(folder))
        enrol(
            session,
            session.scalar(sa.select(User).where(User.username == "ana")),
            second,
            "student",
        )
        add_user(
            session,
            "ines",
            "Inés",
            "i@uni.es",
            "instructor",
            "long-password",
            course=the_course(session),
        )
        add_user(session, "olga", "Olga", "o@uni.es", "instructor", "long-password", course=second)
        session.commit()


# --- mail: a real SMTP server (aiosmtpd) the tests run; the fixture smtp_server (conftest.py) ---

REFUSED = "refused@uni.es"  # the mail server answers 550 for this address


class Recorder:
    """An SMTP server's handler that keeps what it is sent and refuses REFUSED."""

    def __init__(self):
        self.messages = []

    async def handle_RCPT(self, server, session, envelope, address, options):
        if address == REFUSED:
            return "550 5.1.1 no such mailbox"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        self.messages.append((envelope.rcpt_tos, envelope.content.decode()))
        return "250 Message accepted"


def mail_settings(port: int) -> dict:
    return {"MAIL_SERVER": "127.0.0.1", "MAIL_PORT": port, "MAIL_FROM": "hpcgrade <noreply@uni.es>"}


def received(recorder) -> list[tuple[str, str, str]]:
    """(address, subject, body) of every mail the server got, in order."""
    import email
    import email.policy

    found = []
    for recipients, content in recorder.messages:
        message = email.message_from_string(content, policy=email.policy.default)
        found += [(address, message["Subject"], message.get_content()) for address in recipients]
    return found


def mails(recorder) -> dict[str, tuple[str, str]]:
    """address → (subject, body) of the (last) mail it got."""
    return {address: (subject, body) for address, subject, body in received(recorder)}


def graded_report(score: float, max_score: float = 10.0) -> Report:
    """A grade, as a harness would report it, for tests that need a graded run and no grader."""
    return Report(exercise=None, status=ReportStatus.GRADED, score=score, max_score=max_score)

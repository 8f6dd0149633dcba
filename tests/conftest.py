import functools
import json
import os
import shutil
import socket
import threading
import time

import pytest
from helpers import SECRETS, new_course, postgres_database
from jinja2 import BytecodeCache
from werkzeug.security import generate_password_hash

from server.core.catalogue import default_root, load_catalogue, load_exercise_info
from server.core.config import Settings
from worker.grading.local import LocalExecutor
from worker.harness.runner import HarnessProcess

pytest_plugins = ["course_data"]  # marked_course: grades written straight to the database


@pytest.fixture(scope="session", autouse=True)
def quick_password_hashes():
    """Passwords hashed in this process at a test's cost, scrypt with N = 2**7 (the least
    OpenSSL's memory bound lets werkzeug ask for) rather than werkzeug's 2**15: an account or a
    log-in costs a third of a millisecond, not a quarter of a second.
    What is hashed and checked stays the same; services started as processes keep the real cost."""
    from server.core import users

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            users,
            "generate_password_hash",
            functools.partial(generate_password_hash, method="scrypt:128:8:1"),
        )
        yield


class TemplatesInMemory(BytecodeCache):
    """Jinja's bytecode cache, kept in memory: keyed by each template's source, so a changed
    template is compiled again."""

    def __init__(self):
        self.compiled: dict[str, bytes] = {}

    def load_bytecode(self, bucket):
        if bucket.key in self.compiled:
            bucket.bytecode_from_string(self.compiled[bucket.key])

    def dump_bytecode(self, bucket):
        self.compiled[bucket.key] = bucket.bytecode_to_string()


@pytest.fixture(scope="session", autouse=True)
def templates_compiled_once():
    """Each test builds apps of its own, and each app compiled every template it rendered again:
    a sixth of the fast tier's time. The apps of a test run share one compiled copy."""
    import flask

    cache = TemplatesInMemory()
    create = flask.Flask.create_jinja_environment

    def with_shared_cache(self):
        environment = create(self)
        environment.bytecode_cache = cache
        return environment

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(flask.Flask, "create_jinja_environment", with_shared_cache)
        yield


@pytest.fixture(scope="session", autouse=True)
def url_rules_compiled_once():
    """Each app compiled each of its URL rules' builders again (Python code made from an AST):
    a sixth of a web test's time. A builder depends only on its rule's parts and defaults (it
    reaches the rule's converters through the rule it is bound to), so the apps of a test run
    share one per rule."""
    from werkzeug.routing.rules import Rule

    compile_builder = Rule._compile_builder
    built: dict[tuple, object] = {}

    def once(self, append_unknown=True):
        key = (tuple(self._trace), repr(sorted((self.defaults or {}).items())), append_unknown)
        if key not in built:
            built[key] = compile_builder(self, append_unknown)
        return built[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Rule, "_compile_builder", once)
        yield


@pytest.fixture(scope="session", autouse=True)
def engines_made_once():
    """Each app made an engine of its own, and SQLAlchemy keeps its compiled statements per
    engine: every test compiled every statement of its pages again (a quarter of a web test's
    time: tests/web/test_allowances.py and test_roster.py, 10.1 s against 7.4 s). The apps of a test run on the same database share its engine (the last few URLs'
    engines are kept; a test's own database file gets one of its own)."""
    from server.core import db

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(db, "make_engine", functools.lru_cache(maxsize=4)(db.make_engine))
        yield


@pytest.fixture(scope="session")
def catalogue():
    return load_catalogue()


@pytest.fixture(scope="session")
def harness(tmp_path_factory):
    os.environ.update(SECRETS)
    with HarnessProcess(scratch=str(tmp_path_factory.mktemp("scratch"))) as process:
        yield process


@pytest.fixture(scope="session")
def second_harness(tmp_path_factory):
    """A harness beside `harness`, whose students draw other random numbers: the self-check's
    (worker/cli/self_check.py names a known wrong program from the visible checks only where
    both grade it alike)."""
    with HarnessProcess(scratch=str(tmp_path_factory.mktemp("scratch"))) as process:
        yield process


@pytest.fixture(scope="session")
def unsealed_harness(tmp_path_factory):
    """A harness whose student processes are not sealed (worker/harness/seal.py): for the tests
    of what the grader does when the student's process rewrites its own replies."""
    os.environ.update(SECRETS)
    with HarnessProcess(scratch=str(tmp_path_factory.mktemp("scratch")), sealed=False) as process:
        yield process


@pytest.fixture
def grade_unsealed(unsealed_harness, tmp_path):
    """As `grade`, with the seal taken away (and so not required)."""
    return grader(unsealed_harness, tmp_path, unsealed=True)


@pytest.fixture(scope="session")
def executor(harness, tmp_path_factory):
    """The local executor, as a worker makes it, grading with the session's warm harness (one
    of its own cost each test process 3 s of CPU). Should that one die, the executor starts
    its own, and the tests after that use `harness` find it dead."""
    local = LocalExecutor(
        Settings(spool_dir=str(tmp_path_factory.mktemp("spool")), course_python=None)
    )
    local._harnesses[None] = harness
    yield local
    local.close()


def grader(harness, folder, unsealed: bool = False):
    """grade(exercise, source, filename=…, seed=…, **limits): source text (or bytes) graded as
    a submission by `harness`; the JSON report. `unsealed`: the seal not required."""

    def run(exercise: str, source, filename: str = "submission.py", seed: int = 7, **limits):
        path = folder / filename
        path.write_bytes(source if isinstance(source, bytes) else source.encode())
        info = load_exercise_info(default_root() / exercise)
        job = info.job(path, seed=seed)
        required = [x for x in job.required_layers if not (unsealed and x == "seal")]
        job = type(job)(
            **{**job.to_dict(), "limits": {**info.limits, **limits}, "required_layers": required}
        )
        report = harness.report_for(job).to_dict()
        json.dumps(report)
        return report

    return run


@pytest.fixture
def grade(harness, tmp_path):
    """Grade source text (or bytes) as a submission; returns the JSON report."""
    return grader(harness, tmp_path)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.services)])
def empty_database_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.sqlite'}"
    else:
        yield from postgres_database()


@pytest.fixture(
    scope="session", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.services)]
)
def database_url(request, tmp_path_factory):
    """A database at the newest migration, shared by a session's tests (each rolls back)."""
    from server.core import migrate

    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'test.sqlite'}"
        migrate.upgrade(url)
        yield url
    else:
        for url in postgres_database():
            migrate.upgrade(url)
            yield url


@pytest.fixture
def db_session(database_url):
    """A session whose work is rolled back after the test (SQLAlchemy's savepoint recipe)."""
    from sqlalchemy.orm import Session

    from server.core.db import Database

    database = Database(database_url)
    with database.engine.connect() as connection:
        outer = connection.begin()
        session = Session(bind=connection, join_transaction_mode="create_savepoint")
        yield session
        session.close()
        outer.rollback()
    database.dispose()


@pytest.fixture
def app(database_url):
    """The portal on a database that rolls back after the test; its broker is not there, so
    submissions stay queued (as when Redis is down), and failed log-ins are counted in memory."""
    from server.web.app import create_app

    app = create_app(
        {
            "DATABASE_URL": database_url,
            "SECRET_KEY": "test",
            "TESTING": True,
            "BROKER_URL": "redis://127.0.0.1:1/0",
            "LOGIN_LIMITS_STORAGE": "memory://",
        }
    )
    database = app.extensions["hpcgrade.db"]
    with database.engine.connect() as connection:
        outer = connection.begin()
        database.sessions.configure(bind=connection, join_transaction_mode="create_savepoint")
        # a reads session never writes: no savepoint of its own, which could close around
        # one of a request session opened inside it
        database.reads.configure(bind=connection, join_transaction_mode="rollback_only")
        yield app
        outer.rollback()
    database.dispose()


@pytest.fixture
def course(app, catalogue):
    """The app with the exercises synced and two students, ana and bea (password long-password)."""
    from server.core.exercises import sync_exercises
    from server.core.users import add_user

    with app.app_context():
        session = app.extensions["hpcgrade.db"].sessions()
        sync_exercises(session, new_course(session), catalogue)
        add_user(session, "ana", "Ana García", "a@uni.es", "student", "long-password")
        add_user(session, "bea", "Bea Martín", "b@uni.es", "student", "long-password")
        session.commit()
    return app


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory):
    """A SQLite file at the newest migration, copied for each test that needs one of its own
    (the migrations run once, not once a test)."""
    from server.core import migrate

    path = tmp_path_factory.mktemp("migrated") / "newest.sqlite"
    migrate.upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture
def database(empty_database_url, catalogue, migrated_sqlite):
    """A database at the newest migration with the exercises synced and one student, ana."""
    from server.core import migrate
    from server.core.db import Database
    from server.core.exercises import sync_exercises
    from server.core.models import Enrolment, User

    if empty_database_url.startswith("sqlite:///"):
        shutil.copyfile(migrated_sqlite, empty_database_url.removeprefix("sqlite:///"))
    else:
        migrate.upgrade(empty_database_url)
    database = Database(empty_database_url)
    with database.sessions.begin() as session:
        course = new_course(session)
        sync_exercises(session, course, catalogue)
        session.add(ana := User(username="ana", name="Ana", email="a@uni.es", password_hash="x"))
        session.flush()
        session.add(Enrolment(user_id=ana.id, course_id=course.id, role="student"))
    yield database
    database.dispose()


@pytest.fixture
def redis_server(tmp_path):
    """A Redis of this test's own, so that it can be stopped and started again."""
    from stack import Redis

    server = Redis(tmp_path)
    yield server
    server.close()


@pytest.fixture
def smtp_server():
    """A real SMTP server on loopback (aiosmtpd): (port, helpers.Recorder of what it got)."""
    from aiosmtpd.controller import Controller
    from helpers import Recorder, free_port

    recorder = Recorder()
    controller = Controller(recorder, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield controller.port, recorder
    controller.stop()


@pytest.fixture
def mailing(course, smtp_server, monkeypatch):
    """The course with mail set up, prof its instructor and tina its teaching assistant; the
    tasks the app sends are recorded, not run: (app, the SMTP server's recorder, the tasks
    sent, as (name, args))."""
    from helpers import change_settings, mail_settings

    from server.core.users import add_user

    port, recorder = smtp_server
    change_settings(course, **mail_settings(port), PUBLIC_URL="https://grader.uni.es")
    sent = []
    monkeypatch.setattr(
        course.extensions["celery"],
        "send_task",
        lambda name, args, **options: sent.append((name, args)),
    )
    with course.app_context(), course.extensions["hpcgrade.db"].sessions() as session:
        add_user(session, "prof", "Pilar", "p@uni.es", "instructor", "long-password")
        add_user(session, "tina", "Tina", "t@uni.es", "ta", "long-password")
        session.commit()
    return course, recorder, sent


@pytest.fixture
def listener():
    """A TCP listener on loopback that records what reaches it: (port, received)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    received = []

    def accept():
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                received.append(server.accept()[0].recv(100))
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1], received
    server.close()


# modules whose tests share something of the whole machine (the Slurm node, the unprivileged
# user, timing against a full machine), as the tests marked slurm do: marked machine_wide, they
# never run beside one another (scripts/test runs them one after another, in a pytest of their own)
MACHINE_WIDE = {
    "test_demo",
    "test_sessions",
    "test_unprivileged",
}


# the sandbox and the lives of processes: layers taken away, attacks that kill or taint a
# zygote, deadlines, the seal, the spool and pilots, bounds, the GPU node's simulation, a worker's
# heartbeat, the supervisor's restarts, Ctrl-C in the client (marked sandbox: `scripts/test
# --sandbox`, and the whole suite; not the fast tier: they mostly wait on processes); and, in any
# module, the tests of what the grader does with the seal taken away (`unsealed_harness`)
SANDBOX = {
    "test_heartbeat",
    "test_supervise",
    "test_ctrl_c",
    "test_confinement",
    "test_attacks",
    "test_deadlines",
    "test_seal",
    "test_seal_watch",
    "test_spool_harness",
    "test_pilot_idle",
    "test_zygote",
    "test_gpu_node",
    "test_gpu_memory",
    "test_grader_errors",
    "test_bounds",
}


def pytest_itemcollected(item):
    module = item.module.__name__.rsplit(".", 1)[-1]
    if item.get_closest_marker("slurm") or module in MACHINE_WIDE:
        item.add_marker(pytest.mark.machine_wide)
    if module in SANDBOX or "unsealed_harness" in getattr(item, "fixturenames", ()):
        item.add_marker(pytest.mark.sandbox)


def pytest_collection_modifyitems(config, items):
    """Tests marked postgresql_only run on the PostgreSQL database alone."""
    sqlite = [
        item
        for item in items
        if item.get_closest_marker("postgresql_only")
        and getattr(item, "callspec", None)
        and "sqlite"
        in (
            item.callspec.params.get("database_url"),
            item.callspec.params.get("empty_database_url"),
        )
    ]
    if sqlite:
        config.hook.pytest_deselected(items=sqlite)
        items[:] = [item for item in items if item not in set(sqlite)]

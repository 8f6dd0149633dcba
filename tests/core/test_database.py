"""Accounts, log-in with CSRF, exercises in the database and the migrations, on SQLite and PostgreSQL."""

import datetime as dt
import re

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from helpers import new_course, the_course

from server.core import migrate
from server.core.courses import role_in
from server.core.db import Database
from server.core.models import Course, Enrolment, User
from server.core.roster import import_roster
from server.core.users import UserError, add_or_enrol, add_user, has_password
from worker.cli.main import main


def csrf_token(client, path="/login") -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', client.get(path).text).group(1)


def test_migrations_upgrade_an_empty_database_and_downgrade_cleanly(empty_database_url):
    migrate.upgrade(empty_database_url)
    engine = sa.create_engine(empty_database_url)
    tables = set(sa.inspect(engine).get_table_names())
    assert {
        "users",
        "api_tokens",
        "exercises",
        "submissions",
        "grading_runs",
        "check_results",
        "diagnostics",
    } <= tables
    migrate.downgrade(empty_database_url, "base")
    assert set(sa.inspect(engine).get_table_names()) <= {"alembic_version"}
    migrate.upgrade(empty_database_url)
    engine.dispose()


def test_add_user_validates(db_session):
    course = the_course(db_session)
    add_user(
        db_session, "ana", "Ana García", "ana@uni.es", "student", "long-password", course=course
    )
    db_session.flush()
    for args, message in [
        (("ana", "Ana", "a@b.es", "student", "long-password"), "already exists"),
        (("a b", "Ana", "a@b.es", "student", "long-password"), "username"),
        (("bea", "Bea", "not-an-email", "student", "long-password"), "not an email"),
        (("bea", "Bea", "b@uni.es", "teacher", "long-password"), "role must be"),
        (("bea", "Bea", "b@uni.es", "student", "short"), "at least 8"),
    ]:
        with pytest.raises(UserError, match=message):
            add_user(db_session, *args, course=course)


def test_a_course_role_needs_a_course_where_there_are_several(db_session):
    with pytest.raises(UserError, match="name the course: there is none yet"):
        add_user(db_session, "ana", "Ana", "a@uni.es", "student", None)
    add_user(db_session, "root", "Rosa", "r@uni.es", "admin", None)  # in every course
    the_course(db_session)
    new_course(db_session, "mpi")
    with pytest.raises(UserError, match="name the course: mpi, pytorch"):
        add_user(db_session, "ana", "Ana", "a@uni.es", "student", None)
    assert db_session.scalar(sa.select(User).where(User.username == "root")).is_admin


def test_an_existing_account_is_enrolled_not_added_again(db_session):
    """A student of two courses is one account: adding her to the second enrols her there."""
    pytorch, mpi = the_course(db_session), new_course(db_session, "mpi")
    ana = add_user(db_session, "ana", "Ana", "a@uni.es", "student", "long-password", course=pytorch)
    user, created = add_or_enrol(db_session, "ana", "Another", "x@uni.es", "ta", None, course=mpi)
    assert user is ana and not created and ana.name == "Ana" and has_password(ana)
    assert (role_in(db_session, ana.id, pytorch.id), role_in(db_session, ana.id, mpi.id)) == (
        "student",
        "ta",
    )
    with pytest.raises(UserError, match="user ana is in this course already"):
        add_or_enrol(db_session, "ana", "Ana", "a@uni.es", "instructor", None, course=mpi)
    with pytest.raises(UserError, match="user ana already exists"):
        add_or_enrol(db_session, "ana", "Ana", "a@uni.es", "admin", None, course=mpi)
    assert role_in(db_session, ana.id, mpi.id) == "ta" and not ana.is_admin


def test_roster_import_is_all_or_nothing(db_session):
    pytorch, mpi = the_course(db_session), new_course(db_session, "mpi")
    created, _plan = import_roster(
        db_session,
        "username,name,email,role\nana,Ana,a@uni.es,student\npilar,Pilar,p@uni.es,instructor\n",
        pytorch,
    )
    assert [user.username for user in created] == ["ana", "pilar"]
    db_session.flush()
    with pytest.raises(UserError, match="line 3: user ana: “nope” is not an email address"):
        import_roster(
            db_session,
            "username,name,email,role\nbea,Bea,b@uni.es,student\nana,Ana,nope,student\n",
            mpi,
        )
    assert db_session.scalar(sa.select(User).where(User.username == "bea")) is None
    created, plan = import_roster(
        db_session, "username,name,email,role\nbea,Bea,b@uni.es,student\nana,Ana,a@uni.es,ta\n", mpi
    )
    assert [user.username for user in created] == ["bea"]
    assert [row.username for row in plan.enrol] == ["ana"] and not plan.existing
    ana = db_session.scalar(sa.select(User).where(User.username == "ana"))
    assert role_in(db_session, ana.id, mpi.id) == "ta"
    _created, again = import_roster(
        db_session, "username,name,email,role\nana,Ana,a@uni.es,instructor\n", mpi
    )
    assert not _created and not again.enrol and [row.username for row in again.existing] == ["ana"]
    assert role_in(db_session, ana.id, mpi.id) == "ta"  # members are left as they are
    with pytest.raises(UserError, match="line 2: user pilar exists already and is not an admin"):
        import_roster(db_session, "username,name,email,role\npilar,P,p@uni.es,admin\n", mpi)
    with pytest.raises(UserError, match="no column of the roster holds the email"):
        import_roster(db_session, "user,name\nx,y\n", mpi)
    with pytest.raises(UserError, match="line 2: expected 4 columns"):
        import_roster(db_session, "username,name,email,role\nbea,Bea,b@uni.es,student,extra\n", mpi)


def test_login_logout_and_csrf(app):
    with app.app_context():
        session = app.extensions["hpcgrade.db"].sessions()
        add_user(
            session,
            "ana",
            "Ana García",
            "ana@uni.es",
            "student",
            "long-password",
            course=the_course(session),
        )
        session.commit()
    client = app.test_client()
    assert client.get("/courses/pytorch/").status_code == 302
    no_token = client.post("/login", data={"username": "ana", "password": "long-password"})
    assert no_token.status_code == 400 and "CSRF" in no_token.text
    token = csrf_token(client)
    wrong = client.post("/login", data={"username": "ana", "password": "nope", "csrf_token": token})
    assert wrong.status_code == 401 and "Wrong username or password" in wrong.text
    ok = client.post(
        "/login?next=//evil.example/x",
        data={"username": "ana", "password": "long-password", "csrf_token": token},
    )
    assert ok.status_code == 302 and ok.headers["Location"] == "/"
    assert "Ana García" in client.get("/courses/pytorch/").text
    assert client.post("/logout").status_code == 400  # no CSRF token
    assert (
        client.post(
            "/logout", data={"csrf_token": csrf_token(client, "/courses/pytorch/")}
        ).status_code
        == 302
    )
    assert client.get("/courses/pytorch/").status_code == 302


def roles_in_courses(url: str) -> dict[tuple[str, str], str]:
    """(username, course) → role, as the database holds them; (username, "*") for an admin."""
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        found = {
            (username, slug): role
            for username, slug, role in connection.execute(
                sa.select(User.username, Course.slug, Enrolment.role)
                .join(Enrolment, Enrolment.user_id == User.id)
                .join(Course, Course.id == Enrolment.course_id)
            )
        }
        found |= {
            (username, "*"): "admin"
            for username in connection.scalars(sa.select(User.username).where(User.is_admin))
        }
    engine.dispose()
    return found


def test_cli_users_and_db(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'cli.sqlite'}"
    monkeypatch.setenv("HPCGRADE_DATABASE_URL", url)
    monkeypatch.setenv("HPCGRADE_SECRET_KEY", "test")
    runner = CliRunner()
    assert runner.invoke(main, ["db", "upgrade"]).exit_code == 0
    roster = tmp_path / "roster.csv"
    roster.write_text("username,name,email,role\nana,Ana,a@uni.es,student\n")
    no_course = runner.invoke(main, ["users", "import", str(roster)])
    assert no_course.exit_code == 1
    assert "name the course: there is none yet (with --course)" in no_course.output
    database = Database(url)
    with database.sessions.begin() as session:
        new_course(session, "pytorch")
    database.dispose()
    result = runner.invoke(main, ["users", "import", str(roster)])  # the one course
    assert result.exit_code == 0 and result.stdout.startswith("username,link\nana,")
    again = runner.invoke(main, ["users", "import", str(roster), "--course", "pytorch"])
    assert again.exit_code == 0 and again.stdout == "username,link\n"
    assert "in the course already, left as they are: ana" in again.stderr
    added = runner.invoke(
        main,
        [
            "users",
            "add",
            "pilar",
            "--name",
            "Pilar",
            "--email",
            "p@uni.es",
            "--role",
            "instructor",
            "--password",
            "long-password",
        ],
    )
    assert added.exit_code == 0 and added.output == "added pilar (instructor in pytorch)\n"
    admin = runner.invoke(
        main,
        [
            "users",
            "add",
            "root",
            "--name",
            "Rosa",
            "--email",
            "r@uni.es",
            "--role",
            "admin",
            "--password",
            "long-password",
        ],
    )
    assert admin.exit_code == 0 and admin.output == "added root (admin)\n"
    database = Database(url)
    with database.sessions.begin() as session:
        new_course(session, "mpi")
    database.dispose()
    ambiguous = runner.invoke(
        main,
        [
            "users",
            "add",
            "bea",
            "--name",
            "Bea",
            "--email",
            "b@uni.es",
            "--password",
            "long-password",
        ],
    )
    assert ambiguous.exit_code == 1 and "name the course: mpi, pytorch" in ambiguous.output
    unknown = runner.invoke(
        main,
        [
            "users",
            "add",
            "bea",
            "--name",
            "Bea",
            "--email",
            "b@uni.es",
            "--course",
            "mpy",
            "--password",
            "long-password",
        ],
    )
    assert unknown.exit_code == 1
    assert "no course mpy; the courses are: mpi, pytorch" in unknown.output
    taken = runner.invoke(main, ["users", "add", "ana", "--name", "Ana", "--email", "a@uni.es"])
    assert taken.exit_code == 1 and "name the course with --course" in taken.output
    # an existing account with --course is enrolled, and asked for no password
    enrolled = runner.invoke(
        main,
        [
            "users",
            "add",
            "ana",
            "--name",
            "Ana",
            "--email",
            "a@uni.es",
            "--role",
            "ta",
            "--course",
            "mpi",
        ],
    )
    assert enrolled.exit_code == 0 and enrolled.output == "enrolled ana (ta in mpi)\n"
    more = tmp_path / "more.csv"
    more.write_text(
        "username,name,email,role\nana,Ana,a@uni.es,student\n"
        "pilar,Pilar,p@uni.es,instructor\ncarl,Carl,c@uni.es,student\n"
    )
    imported = runner.invoke(main, ["users", "import", str(more), "--course", "mpi"])
    assert imported.exit_code == 0 and re.fullmatch(r"username,link\ncarl,\S+\n", imported.stdout)
    assert "existing accounts enrolled: pilar" in imported.stderr
    assert "left as they are: ana" in imported.stderr
    changed = runner.invoke(main, ["users", "enrol", "ana", "--course", "pytorch", "--role", "ta"])
    assert changed.exit_code == 0 and changed.output == "ana in pytorch: student -> ta\n"
    new = runner.invoke(main, ["users", "enrol", "root", "--course", "mpi", "--role", "student"])
    assert new.exit_code == 0 and new.output == "enrolled root in mpi as student\n"
    for wrong, message in (
        (["users", "enrol", "nobody", "--course", "mpi", "--role", "ta"], "no user nobody"),
        (
            ["users", "enrol", "ana", "--course", "nope", "--role", "ta"],
            "no course nope; the courses are: mpi, pytorch",
        ),
    ):
        refused = runner.invoke(main, wrong)
        assert refused.exit_code == 1 and message in refused.output
    assert (
        runner.invoke(
            main, ["users", "enrol", "ana", "--course", "mpi", "--role", "admin"]
        ).exit_code
        == 2
    )  # admin is no course role
    assert roles_in_courses(url) == {
        ("ana", "pytorch"): "ta",
        ("ana", "mpi"): "ta",
        ("pilar", "pytorch"): "instructor",
        ("pilar", "mpi"): "instructor",
        ("carl", "mpi"): "student",
        ("root", "*"): "admin",
        ("root", "mpi"): "student",
    }
    monkeypatch.setenv("HPCGRADE_DATABASE_URL", "sqlite:////nonexistent-dir/x.sqlite")
    broken = runner.invoke(
        main,
        ["users", "add", "x1", "--name", "X", "--email", "x@y.es", "--password", "long-password"],
    )
    assert broken.exit_code == 1 and "no database at /nonexistent-dir/x.sqlite" in broken.output
    assert "hpcgrade db upgrade" in broken.output
    monkeypatch.setenv("HPCGRADE_DATABASE_URL", url)
    parted = runner.invoke(
        main,
        [
            *("users", "add", "mj", "--given-name", "María José", "--family-name", "de la Fuente"),
            *("--email", "mj@uni.es", "--password", "long-password", "--course", "mpi"),
        ],
    )
    assert parted.exit_code == 0, parted.output
    nameless = runner.invoke(main, ["users", "add", "nn", "--email", "n@uni.es"])
    assert nameless.exit_code == 2 and "give the name: --given-name and --family-name" in (
        nameless.output
    )
    database = Database(url)
    with database.sessions() as session:
        mj = session.scalar(sa.select(User).where(User.username == "mj"))
        assert (mj.name, mj.given_name, mj.family_name) == (
            "María José de la Fuente",
            "María José",
            "de la Fuente",
        )
        pilar = session.scalar(sa.select(User).where(User.username == "pilar"))
        assert (pilar.given_name, pilar.family_name) == ("Pilar", "")  # --name, split
    database.dispose()


def test_exercise_sync_adds_updates_and_deactivates(db_session, catalogue):
    from server.core.exercises import sync_exercises
    from server.core.models import Exercise

    first = sync_exercises(db_session, the_course(db_session), catalogue)
    assert sorted(first["added"]) == sorted(catalogue)
    assert sync_exercises(db_session, the_course(db_session), catalogue) == {
        "added": [],
        "updated": [],
        "deactivated": [],
    }
    fewer = dict(catalogue)
    gone = fewer.pop("metrics")
    changed = sync_exercises(db_session, the_course(db_session), fewer)
    assert changed["deactivated"] == ["metrics"]
    row = db_session.scalar(sa.select(Exercise).where(Exercise.slug == "autograd-q"))
    assert row.deadline_policy == "penalty" and row.deadline.year == 2027 and row.max_attempts == 20
    assert sync_exercises(db_session, the_course(db_session), dict(fewer, metrics=gone))[
        "updated"
    ] == ["metrics"]


def test_the_runs_of_an_sqlite_database_keep_their_results_across_0016(
    database, catalogue, executor
):
    """0016 copies SQLite's grading_runs into a table that never gives an id twice: every run
    keeps its checks and diagnostics (the copy is made with foreign keys off)."""
    from helpers import REFERENCE_Q, grade, queue_submission

    from server.core import migrate
    from server.core.models import CheckResult, DiagnosticResult, GradingRun

    if database.engine.dialect.name != "sqlite":
        pytest.skip("other databases never give an id twice")
    wrong = queue_submission(database, REFERENCE_Q.replace("- b**2", "+ b**2"))
    assert grade(database, executor, catalogue, wrong) == "graded"
    counted = [
        sa.select(sa.func.count()).select_from(table)
        for table in (GradingRun, CheckResult, DiagnosticResult)
    ]
    with database.sessions() as session:
        before = [session.scalar(count) for count in counted]
    database.engine.dispose()
    url = str(database.engine.url)
    migrate.downgrade(url, "0015")
    migrate.upgrade(url)
    with database.sessions() as session:
        assert [session.scalar(count) for count in counted] == before
        assert before[2] > 0


def test_models_and_migrations_agree(database_url):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from server.core.db import Base

    engine = sa.create_engine(database_url)
    with engine.connect() as connection:
        assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []
    engine.dispose()


def test_the_migration_of_grades_set_by_hand_changes_no_grade(empty_database_url):
    """Before 0007 the score set by hand last on any submission was the grade; after it the best
    counts, adjusted or not, unless a grade is set: where the rules differ, the score set last
    becomes the grade set by hand, so that every grade shown stays what it was."""
    from sqlalchemy.orm import Session

    from server.core.models import SetGrade
    from server.web.course import standings

    migrate.upgrade(empty_database_url, "0006")
    engine = sa.create_engine(empty_database_url)
    noon = dt.datetime(2026, 11, 20, 12, tzinfo=dt.timezone.utc)
    hour = dt.timedelta(hours=1)
    with engine.begin() as connection:
        users = {
            name: insert(
                connection,
                "users",
                username=name,
                name=name.title(),
                email=f"{name}@uni.es",
                password_hash="x",
                role="student",
            )
            for name in ("ana", "bea", "carl", "dan", "eva")
        }
        exercise = insert(connection, "exercises", slug="autograd-q", title_en="Q", title_es="Q")
        for name, score, override, at in (
            ("ana", 9, 2, noon),
            ("ana", 10, None, None),  # 2, set last: not the best
            ("bea", 4, 7, noon),  # 7, set on the best: the same under both rules
            ("carl", 9, 0, noon),
            ("carl", 3, 5, noon + hour),  # 5, set last and the best
            ("dan", 8, 6, noon + hour),
            ("dan", 2, 9, noon),  # 6, set last, below the 9
            ("eva", 5, None, None),
        ):
            insert(
                connection,
                "submissions",
                user_id=users[name],
                exercise_id=exercise,
                filename="w.py",
                code=b"",
                sha256="0" * 64,
                status="graded",
                score=score,
                max_score=10,
                override_score=override,
                override_comment=override and f"why {name}",
                override_by=users["eva"] if override is not None else None,
                override_at=at,
            )
    migrate.upgrade(empty_database_url)
    with Session(engine) as session:
        course_id = session.scalar(sa.select(sa.text("course_id FROM exercises")))
        grades = {
            name: standings(session, course_id)[users[name], exercise].score for name in users
        }
        kept = {row.user_id: row for row in session.scalars(sa.select(SetGrade))}
    assert grades == {"ana": 2, "bea": 7, "carl": 5, "dan": 6, "eva": 5}
    assert set(kept) == {users["ana"], users["dan"]}
    assert (kept[users["dan"]].score, kept[users["dan"]].comment, kept[users["dan"]].set_by) == (
        6,
        "why dan",
        users["eva"],
    )
    assert kept[users["dan"]].set_at == noon + hour
    engine.dispose()


def insert(connection, table: str, **values) -> int:
    """A row written as an older schema has it (not the models' newest columns); its id."""
    now = dt.datetime(2026, 11, 20, tzinfo=dt.timezone.utc)
    defaults = {
        "users": {"created_at": now, "session_version": 0},
        "exercises": {
            "section": "",
            "deadline_policy": "none",
            "penalty_per_day": 0,
            "active": True,
            "synced_at": now,
            "position": 0,
        },
        "submissions": {"submitted_at": now, "late_days": 0, "penalty": 0, "retry_from": 0},
    }.get(table, {})
    values = {**defaults, **values}
    rows = sa.table(table, *(sa.column(name) for name in values), sa.column("id"))
    return connection.execute(sa.insert(rows).values(values).returning(rows.c.id)).scalar_one()

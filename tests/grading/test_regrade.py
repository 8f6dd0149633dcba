"""Grading again with a preview: "Grade all again" grades every finished submission of every
student into preview runs that change nothing until an instructor publishes them (or discards
them), and shows each student's grade before and after; one submission is graded again after a
confirmation."""

import datetime as dt
import re
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import REFERENCE_Q, dispatcher, grade, grade_next, logged_in
from sqlalchemy import event, select, text, update
from test_dispatch import ScriptedCluster

from server.core import runs
from server.core.catalogue import default_root, load_exercise_info
from server.core.config import app_settings
from server.core.grades import student_grade
from server.core.models import Exercise, GradingRun, Regrade, SetGrade, Submission, User, utcnow
from server.core.queue import MAIL, PREVIEWS, SUBMISSIONS, place
from server.core.users import add_user
from server.web.app import create_app
from server.web.regrade_preview import (
    PREVIEW_PICKUP_SECONDS,
    AlreadyOpen,
    preview_rows,
    publish,
    stalled,
    start,
)
from server.web.submissions import Rules, accept, reopen
from worker.grading import liveness
from worker.grading.preview import PreviewGrader
from worker.harness import spool
from worker.harness.report import Report

pytestmark = pytest.mark.whole_class
# a page, a permission or a count read as every other test reads them: the regrade's transitions
# run on both databases elsewhere in this file, so these run on PostgreSQL alone
PAGE_ONLY = pytest.mark.postgresql_only

SIGN_FLIPPED = (
    Path(__file__).parents[2] / "exercises" / "autograd-q" / "mutants" / "plus_b_squared.py"
).read_text()  # passes grad-a only: 3 / 10


@pytest.fixture
def graded(course, executor, catalogue):
    """ana: full marks; bea: a sign-flipped gradient, then full marks; carl: the sign-flipped
    one; prof, an instructor, tried it out (a preview is the students'). Returns the app and
    the submissions' ids by name (bea's latest as "bea")."""
    database = course.extensions["hpcgrade.db"]
    with database.sessions.begin() as session:
        add_user(session, "carl", "Carl", "c@uni.es", "student", "long-password")
        add_user(session, "prof", "Pilar", "p@uni.es", "instructor", "long-password")
        users = {u.username: u for u in session.scalars(select(User))}
        exercise = session.scalar(select(Exercise).where(Exercise.slug == "autograd-q"))
        made = {
            key: accept(
                session,
                users[name],
                exercise,
                "work.py",
                code.encode(),
                Rules(1024, 100, 60),
                dt.datetime.now(dt.timezone.utc),
            )
            for key, name, code in [
                ("ana", "ana", REFERENCE_Q),
                ("bea-first", "bea", SIGN_FLIPPED),
                ("bea", "bea", REFERENCE_Q),
                ("carl", "carl", SIGN_FLIPPED),
                ("prof", "prof", SIGN_FLIPPED),
            ]
        }
        session.flush()
        ids = {key: submission.id for key, submission in made.items()}
    for _ in ids:
        assert grade_next(database, executor, catalogue)[1] == "graded"
    return course, ids


@pytest.fixture
def changed_checks(tmp_path):
    """autograd-q with its checks fixed: grad-a is worth 1 point instead of 3, grad-b 5 instead
    of 3 (the reference keeps 10 / 10; the sign-flipped gradient drops from 3 to 1)."""
    folder = tmp_path / "autograd-q"
    shutil.copytree(
        Path(__file__).parents[2] / "exercises" / "autograd-q",
        folder,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    checks = (folder / "checks.py").read_text()
    checks = checks.replace('@check("grad-a", points=3', '@check("grad-a", points=1')
    checks = checks.replace('@check("grad-b", points=3', '@check("grad-b", points=5')
    (folder / "checks.py").write_text(checks)
    return {"autograd-q": load_exercise_info(folder)}


def state(app) -> dict[int, tuple]:
    """Every submission's status, score and result run."""
    with app.extensions["hpcgrade.db"].sessions() as session:
        return {
            s.id: (
                s.status,
                s.score,
                s.max_score,
                max((r.id for r in s.runs if r.status == "done"), default=None),
            )
            for s in session.scalars(select(Submission))
        }


def results(app, ids) -> dict[int, dict]:
    """The results the students are served (the API's JSON), with their checks."""
    api = app.test_client()
    bearer = {
        "Authorization": "Bearer "
        + api.post("/api/v1/tokens", json={"username": "prof", "password": "long-password"}).json[
            "token"
        ]
    }
    served = {i: api.get(f"/api/v1/submissions/{i}", headers=bearer).json for i in ids.values()}
    assert all(result["checks"] for result in served.values())
    return served


def start_preview(app) -> tuple[int, str]:
    """ "Grade all again" on the exercise's page, as prof: the regrade's id, and the page."""
    client, token = logged_in(app, "prof")
    started = client.post(
        "/courses/pytorch/staff/exercises/autograd-q/regrade", data={"csrf_token": token}
    )
    assert started.status_code == 303
    regrade_id = int(started.headers["Location"].rsplit("/", 1)[1])
    return regrade_id, client.get(started.headers["Location"]).text


def grade_preview(app, executor, catalogue, regrade_id, **settings) -> dict[int, str]:
    """What the `hpcgrade.preview` task does on a worker."""
    database = app.extensions["hpcgrade.db"]
    return PreviewGrader(
        dispatcher(database, executor, catalogue, **settings), poll_seconds=0
    ).grade_previews(regrade_id, lambda worker: False)


def words(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def preview_table(page: str) -> dict[str, list[str]]:
    """The preview's rows, username → the cells after the student's, as HTML."""
    body = re.search(r'<table class="regrade-table">.*?<tbody>(.*?)</tbody>', page, re.S).group(1)
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", body, re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        name, username = words(cells[0]).rsplit(" ", 1)
        rows[username] = cells[1:]
    return rows


def table(page: str) -> dict[str, list[str]]:
    """Each student's grade: username → [before, after, change, submissions changed, status]."""
    return {
        username: [words(re.sub(r"<ul.*?</ul>", "", cell, flags=re.S)) for cell in cells]
        for username, cells in preview_table(page).items()
    }


def submissions(page: str) -> dict[str, list[str]]:
    """Each student's submissions in the preview: username → ["#id before → after status"]."""
    return {
        username: [words(item) for item in re.findall(r"<li>(.*?)</li>", cells[3], re.S)]
        for username, cells in preview_table(page).items()
    }


def test_a_preview_changes_nothing_until_it_is_published(graded, executor, changed_checks):
    app, ids = graded
    with app.extensions["hpcgrade.db"].sessions.begin() as session:  # bea's grade, once 6 / 10
        session.execute(update(Submission).where(Submission.id == ids["bea"]).values(score=6.0))
    before, served = state(app), results(app, ids)
    regrade_id, page = start_preview(app)
    # this app has no broker: the page says so, and offers to start the grading again
    assert "grading queue does not answer" in page and "Start grading again" in page
    assert "0 of 4 graded" in page
    assert grade_preview(app, executor, changed_checks, regrade_id) != {}
    assert state(app) == before and results(app, ids) == served
    client, token = logged_in(app, "prof")
    page = client.get(f"/courses/pytorch/staff/regrades/{regrade_id}").text
    assert "4 of 4 graded" in page and "Publish these grades" in page
    assert table(page) == {
        "ana": ["10 / 10", "10 / 10", "+0", "0 of 1 changed", "ready"],
        "bea": ["6 / 10", "10 / 10", "+4", "2 of 2 changed", "ready"],
        "carl": ["3 / 10", "1 / 10", "-2", "1 of 1 changed", "ready"],
    }
    assert submissions(page)["bea"] == [
        f"#{ids['bea-first']} 3 / 10 → 1 / 10 ready",
        f"#{ids['bea']} 6 / 10 → 10 / 10 ready",
    ]
    for line in (
        "1 unchanged",
        "1 up",
        "1 down",
        "Submissions whose score changed: 3 of 4",
        "Mean change: +0.67",
    ):
        assert line in page
    # what changed: the exercise's files, the same for all four grades before, the checks' now
    said = " ".join(
        re.sub(
            r"<[^>]+>",
            " ",
            re.search(r'<p class="exercise-versions">(.*?)</p>', page, re.S).group(1),
        ).split()
    )
    old_files, new_files = (
        load_exercise_info(default_root() / "autograd-q"),
        changed_checks["autograd-q"],
    )
    assert (
        said.startswith(
            f"The exercise's files changed since these grades: before {old_files.version[:12]}"
        )
        and "(4 submissions)" in said
    )
    assert said.endswith(f"now {new_files.version[:12]} .")
    published = client.post(
        f"/courses/pytorch/staff/regrades/{regrade_id}/publish", data={"csrf_token": token}
    )
    assert (
        "The new scores of 4 submissions are published"
        in client.get(published.headers["Location"]).text
    )
    after = state(app)
    assert [after[ids[name]][:3] for name in ("ana", "bea-first", "bea", "carl")] == [
        ("graded", 10, 10),
        ("graded", 1, 10),
        ("graded", 10, 10),
        ("graded", 1, 10),
    ]
    assert after[ids["prof"]] == before[ids["prof"]]  # an instructor's try-out
    checks = {c["name"]: c["max_points"] for c in results(app, ids)[ids["carl"]]["checks"]}
    assert checks["grad-a"] == 1 and checks["grad-b"] == 5  # the result is the new checks'
    page = client.get(f"/courses/pytorch/staff/regrades/{regrade_id}").text
    assert "Publish these grades" not in page and "Discard the preview" not in page
    assert table(page)["carl"] == ["3 / 10", "1 / 10", "-2", "1 of 1 changed", "published"]
    again = client.post(
        f"/courses/pytorch/staff/regrades/{regrade_id}/publish", data={"csrf_token": token}
    )
    assert "published already" in client.get(again.headers["Location"]).text


def test_publishing_applies_each_submissions_late_penalty(graded, executor, changed_checks):
    app, ids = graded
    with app.extensions["hpcgrade.db"].sessions.begin() as session:  # two days late: −50 %
        session.execute(
            update(Submission)
            .where(Submission.id == ids["carl"])
            .values(late_days=2, penalty=0.5, score=1.5)
        )
    regrade_id, _ = start_preview(app)
    grade_preview(app, executor, changed_checks, regrade_id)
    client, token = logged_in(app, "prof")
    page = client.get(f"/courses/pytorch/staff/regrades/{regrade_id}").text
    assert table(page)["carl"][:3] == ["1.5 / 10", "0.5 / 10", "-1"]
    assert submissions(page)["carl"] == [f"#{ids['carl']} late: −50% 1.5 / 10 → 0.5 / 10 ready"]
    client.post(f"/courses/pytorch/staff/regrades/{regrade_id}/publish", data={"csrf_token": token})
    assert state(app)[ids["carl"]][:3] == ("graded", 0.5, 10)


def sent_by(app, executor, catalogue, username: str, *codes: str) -> list[int]:
    """A new student's autograd-q submissions, graded one after the other: their ids."""
    database = app.extensions["hpcgrade.db"]
    ids = []
    for code in codes:
        with database.sessions.begin() as session:
            user = session.scalar(select(User).where(User.username == username)) or add_user(
                session,
                username,
                username.title(),
                f"{username}@uni.es",
                "student",
                "long-password",
            )
            exercise = session.scalar(select(Exercise).where(Exercise.slug == "autograd-q"))
            submission = accept(
                session, user, exercise, "work.py", code.encode(), Rules(1024, 100, 60), utcnow()
            )
            session.flush()
            ids.append(submission.id)
        assert grade(database, executor, catalogue, ids[-1]) == "graded"
    return ids


def grade_of(app, username: str) -> tuple[float | None, int | None, bool]:
    """A student's grade on autograd-q: (score, the submission it comes from, set by hand)."""
    with app.extensions["hpcgrade.db"].sessions() as session:
        user = session.scalar(select(User).where(User.username == username))
        exercise = session.scalar(select(Exercise).where(Exercise.slug == "autograd-q"))
        found = student_grade(session, user.id, exercise.id)
        return found.score, found.submission_id, found.set_by_hand


def test_the_submission_that_makes_a_grade_is_graded_again(
    graded, executor, catalogue, changed_checks
):
    """dan's grade comes from his first submission (6 / 10 with checks since fixed), not from
    his latest (the sign-flipped gradient): the preview grades both, his grade goes 6 → 10, and
    it is his once published."""
    app, _ = graded
    best, latest = sent_by(app, executor, catalogue, "dan", REFERENCE_Q, SIGN_FLIPPED)
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        session.execute(update(Submission).where(Submission.id == best).values(score=6.0))
    assert grade_of(app, "dan") == (6, best, False)
    regrade_id, _ = start_preview(app)
    grade_preview(app, executor, changed_checks, regrade_id)
    client, token = logged_in(app, "prof")
    page = client.get(f"/courses/pytorch/staff/regrades/{regrade_id}").text
    assert table(page)["dan"] == ["6 / 10", "10 / 10", "+4", "2 of 2 changed", "ready"]
    assert submissions(page)["dan"] == [
        f"#{best} 6 / 10 → 10 / 10 ready",
        f"#{latest} 3 / 10 → 1 / 10 ready",
    ]
    assert grade_of(app, "dan") == (6, best, False)  # nothing changes before publishing
    client.post(f"/courses/pytorch/staff/regrades/{regrade_id}/publish", data={"csrf_token": token})
    assert grade_of(app, "dan") == (10, best, False)
    dan, _ = logged_in(app, "dan")
    assert re.search(
        r'Your grade</dt>\s*<dd>\s*<span class="score-value">10 / 10',
        dan.get("/courses/pytorch/exercises/autograd-q").text,
    )


def test_a_grade_set_by_hand_stays_as_it_is(graded, executor, changed_checks):
    """carl's grade was agreed in person: his submission's score moves, his grade does not."""
    app, ids = graded
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        carl = session.scalar(select(User).where(User.username == "carl"))
        session.add(
            SetGrade(
                user_id=carl.id,
                exercise_id=session.get(Submission, ids["carl"]).exercise_id,
                score=8.0,
                comment="agreed in person",
            )
        )
    regrade_id, _ = start_preview(app)
    grade_preview(app, executor, changed_checks, regrade_id)
    client, token = logged_in(app, "prof")
    page = client.get(f"/courses/pytorch/staff/regrades/{regrade_id}").text
    by_hand = "8 / 10 ✎ (set by hand)"
    assert table(page)["carl"] == [by_hand, by_hand, "+0", "1 of 1 changed", "ready"]
    assert submissions(page)["carl"] == [f"#{ids['carl']} 3 / 10 → 1 / 10 ready"]
    assert "3 unchanged" in page and "0 down" in page
    client.post(f"/courses/pytorch/staff/regrades/{regrade_id}/publish", data={"csrf_token": token})
    assert grade_of(app, "carl") == (8, None, True)
    assert state(app)[ids["carl"]][:3] == ("graded", 1, 10)


def test_an_adjusted_score_counts_before_and_after(graded, executor, changed_checks):
    """An instructor gave carl's sign-flipped gradient 5 points: the preview grades it 1
    automatically, but the adjustment still counts in its place."""
    app, ids = graded
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        session.execute(
            update(Submission)
            .where(Submission.id == ids["carl"])
            .values(override_score=5.0, override_comment="partial credit")
        )
    regrade_id, _ = start_preview(app)
    grade_preview(app, executor, changed_checks, regrade_id)
    client, token = logged_in(app, "prof")
    page = client.get(f"/courses/pytorch/staff/regrades/{regrade_id}").text
    adjusted = "5 / 10 ✎ (adjusted by hand)"
    assert table(page)["carl"] == [adjusted, adjusted, "+0", "0 of 1 changed", "ready"]
    assert submissions(page)["carl"] == [
        f"#{ids['carl']} {adjusted} → {adjusted} automatic score: 3 / 10 → 1 / 10 ready"
    ]
    client.post(f"/courses/pytorch/staff/regrades/{regrade_id}/publish", data={"csrf_token": token})
    assert grade_of(app, "carl") == (5, ids["carl"], False)
    assert state(app)[ids["carl"]][:3] == ("graded", 1, 10)


@PAGE_ONLY
def test_the_summary_counts_students_and_submissions(graded, executor, catalogue, changed_checks):
    """ana unchanged; bea's first submission drops, her grade (her latest) stays; carl's only
    submission was a grader error, graded now; dan's best goes up, his latest down."""
    app, ids = graded
    dan = sent_by(app, executor, catalogue, "dan", REFERENCE_Q, SIGN_FLIPPED)
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        session.execute(
            update(Submission)
            .where(Submission.id == ids["carl"])
            .values(status="error", score=None, max_score=None)
        )
        session.execute(update(Submission).where(Submission.id == dan[0]).values(score=6.0))
    regrade_id, _ = start_preview(app)
    grade_preview(app, executor, changed_checks, regrade_id)
    client, _ = logged_in(app, "prof")
    page = client.get(f"/courses/pytorch/staff/regrades/{regrade_id}").text
    assert table(page)["carl"] == ["—", "1 / 10", "—", "1 of 1 changed", "ready"]
    summary = [
        words(item)
        for item in re.findall(
            r"<li>(.*?)</li>",
            re.search(r'<ul class="regrade-summary">(.*?)</ul>', page, re.S).group(1),
            re.S,
        )
    ]
    assert summary == [
        "2 unchanged",
        "1 up",
        "0 down",
        "1 graded for the first time",
        "Submissions whose score changed: 4 of 6",
        "Mean change: +1.33",
    ]


def test_the_preview_page_reads_a_bounded_number_of_queries(graded, catalogue):
    """The page loads itself every few seconds while a preview is graded: as many queries for
    eight students with three submissions each as for three with one or two, and never the
    submissions' code."""
    app, _ = graded
    first = start_preview(app)[0]
    small = page_queries(app, first)
    with as_prof(app) as (session, exercise, _prof):
        session.get(Regrade, first).discarded_at = utcnow()
        for n in range(5):
            student = add_user(session, f"s{n}", "S", f"s{n}@uni.es", "student", "long-password")
            for _ in range(3):
                accept(
                    session,
                    student,
                    exercise,
                    "work.py",
                    REFERENCE_Q.encode(),
                    Rules(1024, 100, 60),
                    utcnow(),
                ).status = "graded"
        session.commit()
    large = page_queries(app, start_preview(app)[0])
    assert len(large) == len(small), large
    assert not any(
        "code" in re.findall(r"submissions\.(\w+)", statement) for statement in small + large
    )


def page_queries(app, regrade_id: int) -> list[str]:
    """The SQL statements of one load of the preview's page."""
    client, _ = logged_in(app, "prof")
    statements: list[str] = []
    engine = app.extensions["hpcgrade.db"].engine

    def seen(_connection, _cursor, statement, *_args):
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    try:
        assert client.get(f"/courses/pytorch/staff/regrades/{regrade_id}").status_code == 200
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    return statements


def test_discarding_leaves_every_grade_as_it_was(graded, executor, changed_checks):
    app, ids = graded
    before, served = state(app), results(app, ids)
    regrade_id, _ = start_preview(app)
    grade_preview(app, executor, changed_checks, regrade_id)
    client, token = logged_in(app, "prof")
    discarded = client.post(
        f"/courses/pytorch/staff/regrades/{regrade_id}/discard", data={"csrf_token": token}
    )
    page = client.get(discarded.headers["Location"]).text
    assert "no grade changed" in page and "Publish these grades" not in page
    assert state(app) == before and results(app, ids) == served
    refused = client.post(
        f"/courses/pytorch/staff/regrades/{regrade_id}/publish", data={"csrf_token": token}
    )
    assert "discarded already" in client.get(refused.headers["Location"]).text
    assert state(app) == before
    # a new preview can be started once the last one is closed
    assert start_preview(app)[0] != regrade_id


def test_discarding_a_preview_being_graded_stops_its_grading(graded, executor, changed_checks):
    app, ids = graded
    regrade_id, _ = start_preview(app)
    client, token = logged_in(app, "prof")
    client.post(f"/courses/pytorch/staff/regrades/{regrade_id}/discard", data={"csrf_token": token})
    assert grade_preview(app, executor, changed_checks, regrade_id) == {}
    with app.extensions["hpcgrade.db"].sessions() as session:
        assert {
            r.status
            for r in session.scalars(select(GradingRun).where(GradingRun.regrade_id == regrade_id))
        } == {"cancelled"}
        # a report that comes anyway finds its run no longer waiting
        run_id = session.scalar(select(GradingRun.id).where(GradingRun.regrade_id == regrade_id))
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        assert runs.record_preview(session, run_id, "t", graded_report(None)) == "stale"


def test_one_preview_at_a_time(graded):
    app, _ = graded
    regrade_id, _ = start_preview(app)
    client, token = logged_in(app, "prof")
    again = client.post(
        "/courses/pytorch/staff/exercises/autograd-q/regrade", data={"csrf_token": token}
    )
    assert again.headers["Location"].endswith(f"/courses/pytorch/staff/regrades/{regrade_id}")
    assert "already open" in client.get(again.headers["Location"]).text
    assert (
        client.post(
            "/courses/pytorch/staff/exercises/nothing/regrade", data={"csrf_token": token}
        ).status_code
        == 404
    )
    assert client.get("/courses/pytorch/staff/regrades/999999").status_code == 404


def test_a_submission_graded_again_meanwhile_keeps_its_newer_grade(
    graded, executor, catalogue, changed_checks
):
    app, ids = graded
    regrade_id, _ = start_preview(app)
    grade_preview(app, executor, changed_checks, regrade_id)
    database = app.extensions["hpcgrade.db"]
    with database.sessions.begin() as session:  # carl's graded again with the checks as they were
        reopen(session.get(Submission, ids["carl"]))
    assert grade(database, executor, catalogue, ids["carl"]) == "graded"
    newer = state(app)[ids["carl"]]
    client, token = logged_in(app, "prof")
    published = client.post(
        f"/courses/pytorch/staff/regrades/{regrade_id}/publish", data={"csrf_token": token}
    )
    page = client.get(published.headers["Location"]).text
    assert "The new scores of 3 submissions are published" in page
    assert "1 submission was graded again since the preview started" in page
    assert state(app)[ids["carl"]] == newer and newer[1] == 3
    assert table(page)["carl"][-1] == "not published: graded again since"


def test_a_submission_waiting_to_be_graded_is_not_published_over(graded, executor, changed_checks):
    app, ids = graded
    regrade_id, _ = start_preview(app)
    grade_preview(app, executor, changed_checks, regrade_id)
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        reopen(session.get(Submission, ids["ana"]))
    client, token = logged_in(app, "prof")
    client.post(f"/courses/pytorch/staff/regrades/{regrade_id}/publish", data={"csrf_token": token})
    assert state(app)[ids["ana"]][0] == "queued"


def test_the_recovery_and_the_queue_leave_preview_runs_alone(graded, executor, catalogue):
    app, ids = graded
    regrade_id, _ = start_preview(app)
    database = app.extensions["hpcgrade.db"]
    with database.sessions.begin() as session:  # held by a worker long dead, its lease run out
        session.execute(
            update(GradingRun)
            .where(GradingRun.regrade_id == regrade_id)
            .values(
                worker="gone@node:1",
                lease_until=dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1),
            )
        )
    before = state(app)
    assert liveness.recover(database.sessions, lambda worker: True) == []
    assert dispatcher(database, executor, catalogue).collect() == {}
    assert state(app) == before
    with database.sessions() as session:
        assert {
            r.status
            for r in session.scalars(select(GradingRun).where(GradingRun.regrade_id == regrade_id))
        } == {"previewing"}
    # a submission with a preview run pending is graded again normally as ever
    with database.sessions.begin() as session:
        reopen(session.get(Submission, ids["carl"]))
    assert grade(database, executor, catalogue, ids["carl"]) == "graded"
    with database.sessions() as session:
        carl = session.get(Submission, ids["carl"])
        assert [r.status for r in carl.runs] == ["done", "previewing", "done"]
        assert carl.retry_from == 2


def test_a_preview_whose_worker_died_is_started_again(graded, executor, changed_checks):
    app, ids = graded
    regrade_id, _ = start_preview(app)
    database = app.extensions["hpcgrade.db"]
    now = dt.datetime.now(dt.timezone.utc)
    with database.sessions.begin() as session:
        runs = session.scalars(
            select(GradingRun).where(GradingRun.regrade_id == regrade_id).order_by(GradingRun.id)
        ).all()
        runs[0].worker, runs[0].lease_until = "alive@node:1", now + dt.timedelta(hours=1)
        for run in runs[1:]:
            run.worker, run.lease_until = "dead@node:2", now - dt.timedelta(seconds=1)
        held = runs[0].id
    client, token = logged_in(app, "prof")
    page = client.get(f"/courses/pytorch/staff/regrades/{regrade_id}").text
    assert "Grading has stopped before the end" in page and "Start grading again" in page
    resumed = client.post(
        f"/courses/pytorch/staff/regrades/{regrade_id}/resume", data={"csrf_token": token}
    )
    assert "grading queue does not answer" in client.get(resumed.headers["Location"]).text
    outcomes = grade_preview(app, executor, changed_checks, regrade_id)
    assert held not in outcomes and set(outcomes.values()) == {"preview"}
    assert "3 of 4 graded" in client.get(f"/courses/pytorch/staff/regrades/{regrade_id}").text
    refused = client.post(
        f"/courses/pytorch/staff/regrades/{regrade_id}/publish", data={"csrf_token": token}
    )
    assert "still being graded" in client.get(refused.headers["Location"]).text


def test_a_preview_on_slurm_goes_out_in_batches(graded, tmp_path, changed_checks, executor):
    """An asynchronous executor's preview jobs are packed, polled and recorded as they end; a
    job that ended without its reports leaves those runs failed, and their submissions as
    they were."""
    app, ids = graded
    regrade_id, _ = start_preview(app)
    cluster = EndingCluster(tmp_path / "spool")
    outcomes = grade_preview(app, cluster, changed_checks, regrade_id, batch_size=3)
    assert [len(job["runs"]) for job in cluster.jobs.values()] == [3, 1]
    assert sorted(outcomes.values()) == ["failed", "preview", "preview", "preview"]
    client, _ = logged_in(app, "prof")
    page = client.get(f"/courses/pytorch/staff/regrades/{regrade_id}").text
    assert "Submissions not graded (grader error): 1" in page
    assert "ended COMPLETED without a report" in page
    with app.extensions["hpcgrade.db"].sessions() as session:
        seeds = set(
            session.scalars(
                select(GradingRun.seed).where(
                    GradingRun.regrade_id == regrade_id, GradingRun.status == "preview"
                )
            )
        )
        assert seeds == {EndingCluster.SEED}


def test_a_previews_runs_a_job_left_not_started_are_sent_again(graded, tmp_path, changed_checks):
    """A job whose time ran out grades its first run and leaves the others "not started": they
    go out again in a later job, as normal runs do, instead of failing."""
    app, _ = graded
    regrade_id, _ = start_preview(app)
    cluster = TimeRunningOutCluster(tmp_path / "spool")
    outcomes = grade_preview(app, cluster, changed_checks, regrade_id, batch_size=3)
    assert [len(job["runs"]) for job in cluster.jobs.values()] == [3, 1, 2]
    assert sorted(outcomes.values()) == ["preview"] * 4


def test_a_preview_renews_its_leases_now_and_then_not_after_each_run(
    graded, executor, changed_checks
):
    """Renewing every waiting run's lease after each run graded would write the rows of a
    thousand-run preview half a million times: a quick preview needs no renewal, and a long one
    gets them once a tenth of a lease has gone by."""
    app, _ = graded
    quick = renewals(
        app, lambda: grade_preview(app, executor, changed_checks, start_preview(app)[0])
    )
    assert quick == []
    with as_prof(app) as (session, _exercise, _prof):
        session.execute(update(Regrade).values(discarded_at=utcnow()))
        session.commit()
    regrade_id = start_preview(app)[0]
    slow = renewals(
        app, lambda: grade_preview(app, executor, changed_checks, regrade_id, lease=dt.timedelta(0))
    )
    assert len(slow) == 5  # a lease of no time: after the spool's leftovers, and each run
    with app.extensions["hpcgrade.db"].sessions() as session:
        assert set(
            session.scalars(select(GradingRun.status).where(GradingRun.regrade_id == regrade_id))
        ) == {"preview"}


def renewals(app, work) -> list[str]:
    """The statements that renewed preview runs' leases while `work` ran."""
    statements: list[str] = []
    engine = app.extensions["hpcgrade.db"].engine

    def seen(_connection, _cursor, statement, *_args):
        if re.match(r"UPDATE grading_runs SET lease_until=.* WHERE .*worker = ", statement, re.S):
            statements.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    try:
        work()
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    return statements


class EndingCluster(ScriptedCluster):
    """A cluster whose first job writes a report for every run, and whose second writes none;
    each job ends at its first poll."""

    SEED = 12345

    def submit(self, jobs, resources):
        ids = super().submit(jobs, resources)
        if self.submitted == 1:
            for job in jobs:
                spool.write_report(spool.run_dir(self.spool, job.id), graded_report(job))
        return ids

    def poll(self, ids):
        for job_id in ids:
            self.jobs[job_id]["state"] = "COMPLETED"
        return super().poll(ids)


class TimeRunningOutCluster(ScriptedCluster):
    """A cluster whose first job grades its first run and leaves the others not started; later
    jobs grade all theirs. Each job ends at its first poll."""

    def submit(self, jobs, resources):
        ids = super().submit(jobs, resources)
        for position, job in enumerate(jobs):
            folder = spool.run_dir(self.spool, job.id)
            if self.submitted == 1 and position > 0:
                spool.mark_not_started(folder)
            else:
                spool.write_report(folder, graded_report(job))
        return ids

    def poll(self, ids):
        for job_id in ids:
            self.jobs[job_id]["state"] = "COMPLETED"
        return super().poll(ids)


def graded_report(job) -> Report:
    return Report.from_dict(
        {
            "status": "graded",
            "score": 10.0,
            "max_score": 10.0,
            "seed": EndingCluster.SEED,
            "checks": [],
            "environment": {},
            "timing": {},
        }
    )


@PAGE_ONLY
def test_grading_again_one_submission_asks_first(graded):
    app, ids = graded
    client, token = logged_in(app, "prof")
    runs = client.get(f"/courses/pytorch/submissions/{ids['carl']}").text
    assert f'href="/courses/pytorch/staff/submissions/{ids["carl"]}/regrade"' in runs
    asked = client.get(f"/courses/pytorch/staff/submissions/{ids['carl']}/regrade")
    assert asked.status_code == 200 and "Grade submission #" in asked.text
    assert state(app)[ids["carl"]][0] == "graded"  # asking changed nothing
    assert "A preview of this exercise is open" not in asked.text
    start_preview(app)
    assert (
        "A preview of this exercise is open"
        in client.get(f"/courses/pytorch/staff/submissions/{ids['carl']}/regrade").text
    )
    done = client.post(
        f"/courses/pytorch/staff/submissions/{ids['carl']}/regrade", data={"csrf_token": token}
    )
    assert "queued for grading again" in client.get(done.headers["Location"]).text
    assert state(app)[ids["carl"]][0] == "queued"
    waiting = client.get(f"/courses/pytorch/staff/submissions/{ids['carl']}/regrade")
    assert "already waiting" in client.get(waiting.headers["Location"]).text
    assert client.get("/courses/pytorch/staff/submissions/999999/regrade").status_code == 404


@PAGE_ONLY
def test_every_run_shows_its_score_and_seed(graded):
    app, ids = graded
    client, _ = logged_in(app, "prof")
    with app.extensions["hpcgrade.db"].sessions() as session:
        run = session.get(Submission, ids["carl"]).runs[-1]
        assert (run.score, run.max_score) == (3, 10) and 0 <= run.seed < 2**48
    page = client.get(f"/courses/pytorch/submissions/{ids['carl']}").text
    runs = re.search(r"Grading runs.*?</table>", page, re.S).group(0)
    cells = [
        re.sub(r"<[^>]+>|\s+", " ", c).strip()
        for c in re.findall(r"<td[^>]*>(.*?)</td>", runs, re.S)
    ]
    assert cells[8:10] == ["3 / 10", str(run.seed)]


@PAGE_ONLY
def test_students_get_403(graded):
    app, ids = graded
    regrade_id, _ = start_preview(app)
    student, token = logged_in(app, "ana")
    assert student.get(f"/courses/pytorch/staff/regrades/{regrade_id}").status_code == 403
    assert (
        student.get(f"/courses/pytorch/staff/submissions/{ids['ana']}/regrade").status_code == 403
    )
    for path in (
        "/courses/pytorch/staff/exercises/autograd-q/regrade",
        f"/courses/pytorch/staff/regrades/{regrade_id}/publish",
        f"/courses/pytorch/staff/regrades/{regrade_id}/discard",
        f"/courses/pytorch/staff/regrades/{regrade_id}/resume",
        f"/courses/pytorch/staff/submissions/{ids['ana']}/regrade",
    ):
        assert student.post(path, data={"csrf_token": token}).status_code == 403
    with app.extensions["hpcgrade.db"].sessions() as session:
        regrade = session.get(Regrade, regrade_id)
        assert regrade.published_at is None and regrade.discarded_at is None


@PAGE_ONLY
def test_the_preview_page_in_spanish(graded, executor, changed_checks):
    app, _ = graded
    regrade_id, _ = start_preview(app)
    grade_preview(app, executor, changed_checks, regrade_id)
    client, _ = logged_in(app, "prof")
    page = client.get(f"/courses/pytorch/staff/regrades/{regrade_id}?lang=es").text
    assert "Publicar estas notas" in page and "4 de 4 corregidas" in page


@contextmanager
def as_prof(app):
    """A session inside the app, with autograd-q and prof, to call the regrade's steps."""
    with app.app_context(), app.extensions["hpcgrade.db"].sessions() as session:
        yield (
            session,
            session.scalar(select(Exercise).where(Exercise.slug == "autograd-q")),
            session.scalar(select(User).where(User.username == "prof")),
        )


def test_a_second_start_finds_the_open_preview(graded):
    app, _ = graded
    with as_prof(app) as (session, exercise, prof):
        first = start(session, exercise, prof, utcnow())
        session.commit()
        with pytest.raises(AlreadyOpen) as already:
            start(session, exercise, prof, utcnow())
        assert already.value.regrade.id == first.id


def test_two_instructors_starting_at_once_open_one_preview(empty_database_url, database):
    """On PostgreSQL, the second start waits for the first's lock on the exercise, then finds
    its preview open."""
    if not empty_database_url.startswith("postgresql"):
        pytest.skip("SQLite writes one transaction at a time: no two starts overlap")
    app = create_app(
        {
            "DATABASE_URL": empty_database_url,
            "SECRET_KEY": "test",
            "TESTING": True,
            "BROKER_URL": "redis://127.0.0.1:1/0",
        }
    )
    with database.sessions.begin() as session:
        add_user(session, "prof", "Pilar", "p@uni.es", "instructor", "long-password")
        ana = session.scalar(select(User).where(User.username == "ana"))
        exercise = session.scalar(select(Exercise).where(Exercise.slug == "autograd-q"))
        accept(
            session, ana, exercise, "work.py", REFERENCE_Q.encode(), Rules(1024, 100, 60), utcnow()
        ).status = "graded"

    def start_and_commit():
        with as_prof(app) as (session, exercise, prof):
            regrade = start(session, exercise, prof, utcnow())
            session.commit()
            return regrade.id

    try:
        with as_prof(app) as (session, exercise, prof), ThreadPoolExecutor(1) as pool:
            first = start(session, exercise, prof, utcnow())  # holds the lock until its commit
            second = pool.submit(start_and_commit)
            waiting_for_a_lock(database, second)
            session.commit()
            with pytest.raises(AlreadyOpen) as already:
                second.result()
            assert already.value.regrade.id == first.id
    finally:
        app.extensions["hpcgrade.db"].dispose()
    with database.sessions() as session:
        assert len(session.scalars(select(Regrade)).all()) == 1


def waiting_for_a_lock(database, task, most_seconds: float = 30) -> None:
    """Until a transaction waits for a row lock (or the task ended without waiting)."""
    deadline = time.monotonic() + most_seconds
    with database.engine.connect() as connection:
        while not task.done() and time.monotonic() < deadline:
            if connection.scalar(text("SELECT count(*) FROM pg_locks WHERE NOT granted")):
                return
            time.sleep(0.05)


def test_publishing_rereads_a_submission_reopened_since_the_page_loaded(
    graded, executor, changed_checks
):
    """A "Grade again" that reopens carl's submission after the publishing request has read the
    preview's rows (and with them carl's submission, then graded) keeps it queued."""
    app, ids = graded
    regrade_id, _ = start_preview(app)
    grade_preview(app, executor, changed_checks, regrade_id)
    database = app.extensions["hpcgrade.db"]
    with as_prof(app) as (session, _, _prof):
        regrade = session.get(Regrade, regrade_id)
        carl = next(
            previewed.submission
            for row in preview_rows(session, regrade)
            for previewed in row.previewed
            if previewed.submission.id == ids["carl"]
        )
        assert carl.status == "graded"
        with database.sessions.begin() as other:
            reopen(other.get(Submission, ids["carl"]))
        assert publish(session, regrade, utcnow()) == (3, 1)
        session.commit()
        assert carl.status == "queued"
    assert state(app)[ids["carl"]][0] == "queued"


def test_a_preview_run_does_not_cost_a_student_their_turn(graded):
    """ana was last graded before bea; a preview grades both now, and both send a new file,
    bea first: ana's is still graded first."""
    app, ids = graded
    database = app.extensions["hpcgrade.db"]
    now = utcnow()
    with database.sessions.begin() as session:
        for name, hours in (("ana", 2), ("bea", 1)):
            session.execute(
                update(GradingRun)
                .where(
                    GradingRun.submission_id.in_(
                        select(Submission.id)
                        .join(User, Submission.user_id == User.id)
                        .where(User.username == name)
                    )
                )
                .values(started_at=now - dt.timedelta(hours=hours))
            )
    start_preview(app)
    with database.sessions.begin() as session:
        exercise = session.scalar(select(Exercise).where(Exercise.slug == "autograd-q"))
        new = {}
        for name in ("bea", "ana"):
            user = session.scalar(select(User).where(User.username == name))
            new[name] = accept(
                session,
                user,
                exercise,
                "work.py",
                REFERENCE_Q.encode(),
                Rules(1024, 100, 60),
                utcnow(),
            )
        session.flush()
        assert place(session, new["ana"].id) == (1, 1)
        assert place(session, new["bea"].id) == (2, 1)


def test_a_preview_and_mail_go_on_queues_of_their_own_that_every_worker_consumes(app):
    celery = app.extensions["celery"]
    assert celery.amqp.router.route({}, "hpcgrade.preview")["queue"].name == PREVIEWS
    assert celery.amqp.router.route({}, "hpcgrade.dispatch")["queue"].name == SUBMISSIONS
    queues = celery.amqp.queues.consume_from  # a worker started without -Q
    assert set(queues) == {SUBMISSIONS, PREVIEWS, MAIL}
    assert celery.amqp.router.route({}, "hpcgrade.notify")["queue"].name == MAIL
    # each queue its own routing key: the default exchange copies no message into both
    assert all(queue.routing_key == name for name, queue in queues.items())


def test_a_preview_waiting_for_a_busy_worker_is_not_stalled(graded):
    """Unclaimed preview runs wait longer than a student's submission before the page offers
    to start the preview again."""
    app, _ = graded
    with as_prof(app) as (session, exercise, prof):
        now = utcnow()
        rows = preview_rows(session, start(session, exercise, prof, now))
        requeued = now + dt.timedelta(seconds=app_settings(app).requeue_after_seconds + 1)
        assert not stalled(rows, requeued)
        assert stalled(rows, now + dt.timedelta(seconds=PREVIEW_PICKUP_SECONDS + 1))


def test_a_preview_run_draws_the_hidden_inputs_of_the_grade_it_would_replace(
    graded, executor, changed_checks
):
    app, _ = graded
    regrade_id, _ = start_preview(app)
    grade_preview(app, executor, changed_checks, regrade_id)
    with app.extensions["hpcgrade.db"].sessions() as session:
        runs = session.scalars(select(GradingRun).where(GradingRun.regrade_id == regrade_id)).all()
        assert len(runs) == 4
        for run in runs:
            replaced = [r for r in run.submission.runs if r.status == "done"][-1]
            assert run.status == "preview" and run.seed == replaced.seed is not None


def test_a_preview_with_the_exercise_files_of_the_grades_before_says_so(
    graded, executor, catalogue
):
    app, _ = graded
    regrade_id, _ = start_preview(app)
    grade_preview(app, executor, catalogue, regrade_id)
    client, _ = logged_in(app, "prof")
    page = client.get(f"/courses/pytorch/staff/regrades/{regrade_id}").text
    said = re.search(r'<p class="exercise-versions muted">(.*?)</p>', page, re.S).group(1)
    assert "The same exercise files as the grades before:" in said
    assert catalogue["autograd-q"].version[:12] in said and "changed since" not in page
    with app.extensions["hpcgrade.db"].sessions.begin() as session:  # graded before runs said
        session.execute(
            update(GradingRun).where(GradingRun.regrade_id.is_(None)).values(exercise_version=None)
        )
    page = client.get(f"/courses/pytorch/staff/regrades/{regrade_id}").text
    assert "The preview grades with the exercise's files:" in page and "changed since" not in page


def test_the_job_a_dead_worker_left_is_cancelled(graded, tmp_path, changed_checks):
    """Its runs are sent again in a new job: the old one would only take a node for nothing."""
    app, _ = graded
    regrade_id, _ = start_preview(app)
    cluster = EndingCluster(tmp_path / "spool")
    cluster.jobs["77"] = {"state": "RUNNING", "runs": [], "resources": None}
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        session.execute(
            update(GradingRun)
            .where(GradingRun.regrade_id == regrade_id)
            .values(
                worker="dead@node:2",
                executor=cluster.name,
                external_id="77",
                lease_until=utcnow() - dt.timedelta(seconds=1),
            )
        )
    outcomes = grade_preview(app, cluster, changed_checks, regrade_id, batch_size=4)
    assert set(outcomes.values()) == {"preview"}
    assert cluster.jobs["77"]["state"] == "CANCELLED"


@pytest.fixture
def own_folder(graded, tmp_path):
    """The course's exercises in a folder of its own (autograd-q copied), whose checks a test
    changes: returns the app, the ids and autograd-q's checks.py."""
    app, ids = graded
    folder = tmp_path / "exercises" / "autograd-q"
    shutil.copytree(
        default_root() / "autograd-q", folder, ignore=shutil.ignore_patterns("__pycache__")
    )
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        session.execute(text("UPDATE courses SET exercises_dir = :d"), {"d": str(folder.parent)})
    return app, ids, folder / "checks.py"


def change_checks(checks: Path) -> None:
    """The checks fixed after the preview started (grad-a worth 1 point, not 3), their file
    written a moment later so that its stamp changes."""
    time.sleep(0.01)
    checks.write_text(
        checks.read_text().replace('@check("grad-a", points=3', '@check("grad-a", points=1')
    )


def test_a_preview_whose_checks_changed_since_it_started_says_so_and_is_not_published(
    own_folder, executor
):
    app, ids, checks = own_folder
    regrade_id, page = start_preview(app)
    with app.extensions["hpcgrade.db"].sessions() as session:
        started = session.get(Regrade, regrade_id).exercise_version
    assert started == load_exercise_info(checks.parent).version
    assert "checks changed after this preview started" not in page
    grade_preview(app, executor, {"autograd-q": load_exercise_info(checks.parent)}, regrade_id)
    change_checks(checks)
    client, token = logged_in(app, "prof")
    address = f"/courses/pytorch/staff/regrades/{regrade_id}"
    page = client.get(address).text
    assert "The exercise's checks changed after this preview started." in page
    assert "graded with the exercise's checks as they are now" not in page
    assert "Publish these grades" not in page and "Start a fresh preview" in page
    before = state(app)
    refused = client.post(f"{address}/publish", data={"csrf_token": token})
    assert (
        "checks changed after this preview started. Start a fresh"
        in client.get(refused.headers["Location"]).text
    )
    assert state(app) == before
    # "Grade all again" finds the open preview, and says it is stale
    again = client.post(
        "/courses/pytorch/staff/exercises/autograd-q/regrade", data={"csrf_token": token}
    )
    assert again.headers["Location"].endswith(address)
    assert "started before its checks changed" in client.get(again.headers["Location"]).text
    # a fresh preview: this one discarded, a new one with the files as they are now
    fresh = client.post(f"{address}/fresh", data={"csrf_token": token})
    fresh_id = int(fresh.headers["Location"].rsplit("/", 1)[1])
    assert fresh_id != regrade_id
    with app.extensions["hpcgrade.db"].sessions() as session:
        assert session.get(Regrade, regrade_id).discarded_at is not None
        assert (
            session.get(Regrade, fresh_id).exercise_version
            == load_exercise_info(checks.parent).version
        )
    page = client.get(fresh.headers["Location"]).text
    assert "checks changed after this preview started" not in page


@PAGE_ONLY
def test_a_teaching_assistant_reads_a_stale_preview_but_starts_no_fresh_one(own_folder):
    app, _ids, checks = own_folder
    regrade_id, _page = start_preview(app)
    change_checks(checks)
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        add_user(session, "teo", "Teo", "t@uni.es", "ta", "long-password")
    teo, token = logged_in(app, "teo")
    address = f"/courses/pytorch/staff/regrades/{regrade_id}"
    assert "checks changed after this preview started" in teo.get(address).text
    assert teo.post(f"{address}/fresh", data={"csrf_token": token}).status_code == 403


@PAGE_ONLY
def test_the_student_reads_that_a_regrade_changed_their_grade(graded, executor, changed_checks):
    """carl's 3 / 10 became 1 / 10 with the fixed checks: his result and exercise pages say
    when, and from what to what; ana's, unchanged, say nothing."""
    app, ids = graded
    regrade_id, _ = start_preview(app)
    grade_preview(app, executor, changed_checks, regrade_id)
    client, token = logged_in(app, "prof")
    client.post(f"/courses/pytorch/staff/regrades/{regrade_id}/publish", data={"csrf_token": token})
    for lang, said in (
        ("en", "regraded on {} after the checks changed: was 3 / 10, now 1 / 10"),
        ("es", "recorregida el {} tras cambiar las comprobaciones: antes 3 / 10, ahora 1 / 10"),
    ):
        carl, _ = logged_in(app, "carl", lang=lang)
        for page in (
            carl.get(f"/courses/pytorch/submissions/{ids['carl']}").text,
            carl.get("/courses/pytorch/exercises/autograd-q").text,
        ):
            found = re.search(r'<small class="muted under regraded">(.*?)</small>', page, re.S)
            assert found and re.fullmatch(
                said.format(r"\d+ \w+\.? \d{4}, \d\d:\d\d [A-Z]+"), found.group(1)
            )
    ana, _ = logged_in(app, "ana")
    assert "regraded" not in ana.get(f"/courses/pytorch/submissions/{ids['ana']}").text
    assert "regraded" not in ana.get("/courses/pytorch/exercises/autograd-q").text


def test_the_preview_lists_the_students_by_family_name(graded):
    """As every list of students: Álvarez, García, Martín; not by username."""
    app, _ids = graded
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        carl = session.scalar(select(User).where(User.username == "carl"))
        carl.name, carl.given_name, carl.family_name = "Carl Álvarez", "Carl", "Álvarez"
    _regrade_id, page = start_preview(app)
    assert list(preview_table(page)) == ["carl", "ana", "bea"]

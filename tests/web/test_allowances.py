"""Per-student exceptions (a later deadline, extra attempts) and scores set by hand: what they
change for that student only, what the student sees, and what the gradebook counts."""

import contextlib
import csv
import datetime as dt
import io
import re
import zoneinfo

import pytest
from helpers import change_settings, graded_report, logged_in, the_course
from sqlalchemy import select

from hpcgrade.summary import summary
from server.core import runs
from server.core.grades import terms
from server.core.models import Allowance, Exercise, Submission, User, utcnow
from server.core.users import add_user
from server.web import allowances as allowances_module
from server.web.course import standings
from server.web.results import exercise_rows
from server.web.submissions import Rules, accept

CODE = "def q_grads(a, b, v):\n    return a, b\n"
ZONE = "Europe/Madrid"
PAGE = "/courses/pytorch/staff/students/{}/exercises/autograd-q"


@contextlib.contextmanager
def database(app):
    """A session of the test's own, committed at the end (requests are made outside it: inside an
    app context they would share its session)."""
    with app.app_context():
        session = app.extensions["hpcgrade.db"].sessions()
        yield session
        session.commit()
        session.close()


@pytest.fixture
def staffed(course):
    """The course, in Madrid's time zone, with prof, an instructor."""
    change_settings(course, TIMEZONE=ZONE)
    with database(course) as session:
        add_user(session, "prof", "Pilar", "p@uni.es", "instructor", "long-password")
    return course


def set_exercise(app, **fields):
    with database(app) as session:
        exercise = session.scalar(select(Exercise).where(Exercise.slug == "autograd-q"))
        for name, value in fields.items():
            setattr(exercise, name, value)


def local(moment: dt.datetime) -> str:
    """A moment as a browser's datetime-local field sends it (ISO), which the form still takes."""
    return moment.astimezone(zoneinfo.ZoneInfo(ZONE)).strftime("%Y-%m-%dT%H:%M")


def as_page_writes(moment: dt.datetime) -> str:
    """A moment as the English pages write it, and the form's field shows it."""
    return moment.astimezone(zoneinfo.ZoneInfo(ZONE)).strftime("%-d %b %Y, %H:%M")


def submit(client, token):
    return client.post(
        "/courses/pytorch/exercises/autograd-q/submissions",
        data={"csrf_token": token, "code": CODE},
    )


def refusal(client, token) -> str:
    """A submission refused: the exercise's page it comes back to, which says why."""
    reply = submit(client, token)
    assert reply.status_code == 303 and reply.headers["Location"].endswith("?kept=1")
    return client.get(reply.headers["Location"]).text


def latest(app, username) -> Submission:
    with database(app) as session:
        return session.scalar(
            select(Submission)
            .join(Submission.user)
            .where(User.username == username)
            .order_by(Submission.id.desc())
        )


def rows_of(app, username) -> dict:
    with database(app) as session:
        user = session.scalar(select(User).where(User.username == username))
        return next(
            row
            for row in exercise_rows(session, user, the_course(session).id)
            if row["exercise"].slug == "autograd-q"
        )


def allowances(app) -> list[Allowance]:
    with database(app) as session:
        return list(session.scalars(select(Allowance)))


def graded(app, username, score, max_score=10.0) -> int:
    """A submission of the student's, graded with this score; its id."""
    with database(app) as session:
        user = session.scalar(select(User).where(User.username == username))
        exercise = session.scalar(select(Exercise).where(Exercise.slug == "autograd-q"))
        submission = accept(
            session, user, exercise, "work.py", CODE.encode(), Rules(1024, 100, 60), utcnow()
        )
        submission.status, submission.score, submission.max_score = "graded", score, max_score
        session.flush()
        return submission.id


def test_only_staff_get_in(staffed):
    submission_id = graded(staffed, "bea", 5)
    student, token = logged_in(staffed, "ana")
    assert student.get(PAGE.format("bea")).status_code == 403
    for path in (
        PAGE.format("bea"),
        PAGE.format("bea") + "/remove",
        f"/courses/pytorch/staff/submissions/{submission_id}/override",
        f"/courses/pytorch/staff/submissions/{submission_id}/override/remove",
    ):
        assert (
            student.post(
                path,
                data={"csrf_token": token, "extra_attempts": "5", "score": "10", "comment": "mine"},
            ).status_code
            == 403
        )
    assert allowances(staffed) == [] and latest(staffed, "bea").override_score is None
    assert (
        "Adjust this submission"
        not in student.get(f"/courses/pytorch/submissions/{graded(staffed, 'ana', 5)}").text
    )
    assert staffed.test_client().get(PAGE.format("ana")).headers["Location"].startswith("/login")


def test_an_extension_lets_one_student_submit_late_without_penalty(staffed):
    set_exercise(
        staffed,
        deadline=utcnow() - dt.timedelta(days=2, hours=12),
        deadline_policy="penalty",
        penalty_per_day=0.1,
    )
    prof, token = logged_in(staffed, "prof")
    new_deadline = (utcnow() + dt.timedelta(days=3)).replace(second=0, microsecond=0)
    sent = prof.post(
        PAGE.format("ana"),
        data={
            "csrf_token": token,
            "deadline": local(new_deadline),
            "extra_attempts": "0",
            "comment": "ill, note seen",
        },
    )
    assert sent.status_code == 303
    (granted,) = allowances(staffed)
    # typed in Madrid's time, stored in UTC; who granted it and when is recorded
    assert granted.deadline == new_deadline and granted.comment == "ill, note seen"
    assert granted.granted_by == prof_id(staffed)
    assert utcnow() - granted.granted_at < dt.timedelta(minutes=1)
    page = prof.get(PAGE.format("ana")).text
    assert "Pilar" in page and as_page_writes(new_deadline) in page and "ill, note seen" in page

    ana, ana_token = logged_in(staffed, "ana")
    bea, bea_token = logged_in(staffed, "bea")
    assert submit(ana, ana_token).status_code == 303 and submit(bea, bea_token).status_code == 303
    assert (latest(staffed, "ana").late_days, latest(staffed, "ana").penalty) == (0, 0)
    assert latest(staffed, "bea").late_days == 3
    assert latest(staffed, "bea").penalty == pytest.approx(0.3)
    assert rows_of(staffed, "ana")["deadline"] == new_deadline
    assert rows_of(staffed, "bea")["deadline"] < utcnow()

    set_exercise(staffed, deadline_policy="refuse")
    assert submit(ana, ana_token).status_code == 303
    assert "late work is not accepted" in refusal(bea, bea_token)


def prof_id(app) -> int:
    with database(app) as session:
        return session.scalar(select(User.id).where(User.username == "prof"))


def test_extra_attempts_for_one_student(staffed):
    set_exercise(staffed, max_attempts=1)
    ana, ana_token = logged_in(staffed, "ana")
    bea, bea_token = logged_in(staffed, "bea")
    assert submit(ana, ana_token).status_code == 303 and submit(bea, bea_token).status_code == 303
    assert "your only attempt" in refusal(ana, ana_token)
    prof, token = logged_in(staffed, "prof")
    assert (
        prof.post(
            PAGE.format("ana"), data={"csrf_token": token, "deadline": "", "extra_attempts": "2"}
        ).status_code
        == 303
    )
    assert rows_of(staffed, "ana")["max_attempts"] == 3
    assert rows_of(staffed, "ana")["attempts_left"] == 2
    assert submit(ana, ana_token).status_code == 303 and submit(ana, ana_token).status_code == 303
    assert "all 3 attempts" in refusal(ana, ana_token)
    assert "your only attempt" in refusal(bea, bea_token)
    assert rows_of(staffed, "bea")["attempts_left"] == 0
    student_page = prof.get("/courses/pytorch/staff/students/ana").text
    assert PAGE.format("ana") in student_page and "Exceptions" in student_page

    assert prof.post(PAGE.format("ana") + "/remove", data={"csrf_token": token}).status_code == 303
    assert allowances(staffed) == [] and rows_of(staffed, "ana")["max_attempts"] == 1


def test_a_score_set_by_hand_is_shown_and_counts(staffed):
    submission_id = graded(staffed, "ana", 4)
    graded(staffed, "bea", 10)
    api = staffed.test_client()
    bearer = {
        "Authorization": "Bearer "
        + api.post("/api/v1/tokens", json={"username": "ana", "password": "long-password"}).json[
            "token"
        ]
    }
    assert api.get(f"/api/v1/submissions/{submission_id}", headers=bearer).json["override"] is None

    prof, token = logged_in(staffed, "prof")
    assert (
        "Adjust this submission" in prof.get(f"/courses/pytorch/submissions/{submission_id}").text
    )
    sent = prof.post(
        f"/courses/pytorch/staff/submissions/{submission_id}/override",
        data={"csrf_token": token, "score": "8.5", "comment": "The report explains the sign."},
    )
    assert sent.status_code == 303
    stored = latest(staffed, "ana")
    assert (stored.score, stored.override_score) == (4, 8.5)  # the automatic score is kept
    assert stored.override_by == prof_id(staffed)
    assert utcnow() - stored.override_at < dt.timedelta(minutes=1)

    ana, _ = logged_in(staffed, "ana")
    page = ana.get(f"/courses/pytorch/submissions/{submission_id}").text
    assert "Score adjusted by the instructors" in page and "8.5 / 10" in page
    assert "automatic score: 4 / 10" in page and "The report explains the sign." in page
    assert "Pilar" not in page and "Adjust this submission" not in page
    assert (
        "Nota ajustada por el profesorado"
        in ana.get(f"/courses/pytorch/submissions/{submission_id}?lang=es").text
    )
    assert "Pilar" in prof.get(f"/courses/pytorch/submissions/{submission_id}").text
    override = api.get(f"/api/v1/submissions/{submission_id}", headers=bearer).json["override"]
    assert override["score"] == 8.5 and override["comment"] == "The report explains the sign."
    assert dt.datetime.fromisoformat(override["at"]) == stored.override_at
    assert rows_of(staffed, "ana")["grade"].score == 8.5
    assert grade_of(prof, "ana") == "8.5" and grade_of(prof, "bea") == "10"
    assert re.search(
        rf'/courses/pytorch/submissions/{submission_id}"[^<]*>8\.5\b',
        prof.get("/courses/pytorch/staff/grades").text,
    )

    removed = prof.post(
        f"/courses/pytorch/staff/submissions/{submission_id}/override/remove",
        data={"csrf_token": token},
    )
    assert removed.status_code == 303
    assert latest(staffed, "ana").override_score is None and grade_of(prof, "ana") == "4"
    assert api.get(f"/api/v1/submissions/{submission_id}", headers=bearer).json["override"] is None


def grade_of(client, username) -> str:
    """The student's cell for autograd-q in the gradebook's CSV."""
    rows = list(
        csv.reader(
            io.StringIO(client.get("/courses/pytorch/staff/grades.csv").text.lstrip("\ufeff"))
        )
    )
    column = next(row for row in rows if "autograd-q" in row).index("autograd-q")
    return next(row for row in rows if row[0] == username)[column]


@pytest.mark.parametrize(
    "form, message",
    [
        ({"deadline": "next friday"}, "must be a date and a time"),
        ({"deadline": "2027-02-30T18:00"}, "must be a date and a time"),
        ({"deadline": "2020-01-01T10:00"}, "has already passed"),
        ({"deadline": "in-exercise"}, "must end after the exercise"),
        ({"extra_attempts": "-1"}, "from 0 to 100"),
        ({"extra_attempts": "101"}, "from 0 to 100"),
        ({"extra_attempts": "two"}, "from 0 to 100"),
        ({"extra_attempts": "0"}, "Give a later deadline, extra attempts or both"),
        ({"extra_attempts": "1", "comment": "x" * 2001}, "longer than 2000 characters"),
    ],
)
def test_bad_exceptions_are_refused_and_store_nothing(staffed, form, message):
    set_exercise(staffed, deadline=utcnow() + dt.timedelta(days=5))
    if form.get("deadline") == "in-exercise":  # before the exercise's own deadline
        form = {"deadline": local(utcnow() + dt.timedelta(days=1))}
    prof, token = logged_in(staffed, "prof")
    reply = prof.post(PAGE.format("ana"), data={"csrf_token": token, **form})
    assert reply.status_code == 400 and message in reply.text
    assert allowances(staffed) == []
    spanish = prof.post(PAGE.format("ana") + "?lang=es", data={"csrf_token": token, **form})
    assert message not in spanish.text and 'class="flash error"' in spanish.text


def test_an_exercise_without_deadline_or_limit_has_nothing_to_extend(staffed):
    set_exercise(staffed, deadline=None, max_attempts=None)
    prof, token = logged_in(staffed, "prof")
    reply = prof.post(
        PAGE.format("ana"),
        data={
            "csrf_token": token,
            "extra_attempts": "3",
            "deadline": local(utcnow() + dt.timedelta(days=3)),
        },
    )
    assert reply.status_code == 400 and "no deadline to extend" in reply.text
    assert "no limit on attempts" in reply.text and allowances(staffed) == []
    removed = prof.post(
        PAGE.format("ana") + "/remove", data={"csrf_token": token}, follow_redirects=True
    )
    assert "has no exception on this exercise" in removed.text


@pytest.mark.parametrize(
    "form, message",
    [
        ({"score": "11", "comment": "why"}, "a number from 0 to 10"),
        ({"score": "-1", "comment": "why"}, "a number from 0 to 10"),
        ({"score": "nan", "comment": "why"}, "a number from 0 to 10"),
        ({"score": "inf", "comment": "why"}, "a number from 0 to 10"),
        ({"score": "", "comment": "why"}, "a number from 0 to 10"),
        ({"score": "7"}, "Write a comment that says why"),
        ({"score": "7", "comment": "   "}, "Write a comment that says why"),
        ({"score": "7", "comment": "x" * 2001}, "longer than 2000 characters"),
    ],
)
def test_bad_scores_are_refused_and_store_nothing(staffed, form, message):
    submission_id = graded(staffed, "ana", 4)
    prof, token = logged_in(staffed, "prof")
    reply = prof.post(
        f"/courses/pytorch/staff/submissions/{submission_id}/override",
        data={"csrf_token": token, **form},
    )
    assert reply.status_code == 400 and message in reply.text
    if form.get("comment") == "why":  # what was typed stays in the form
        assert ">why</textarea>" in reply.text
    assert latest(staffed, "ana").override_score is None


def test_a_submission_not_yet_graded_gets_no_score_by_hand(staffed):
    ana, ana_token = logged_in(staffed, "ana")
    submit(ana, ana_token)
    queued = latest(staffed, "ana").id
    prof, token = logged_in(staffed, "prof")
    reply = prof.post(
        f"/courses/pytorch/staff/submissions/{queued}/override",
        data={"csrf_token": token, "score": "5", "comment": "fine"},
    )
    assert reply.status_code == 400 and "Only a graded submission" in reply.text
    assert latest(staffed, "ana").override_score is None
    removed = prof.post(
        f"/courses/pytorch/staff/submissions/{queued}/override/remove",
        data={"csrf_token": token},
        follow_redirects=True,
    )
    assert "has no score set by hand" in removed.text
    assert (
        prof.post(
            "/courses/pytorch/staff/submissions/999999/override", data={"csrf_token": token}
        ).status_code
        == 404
    )
    assert (
        prof.get("/courses/pytorch/staff/students/nobody/exercises/autograd-q").status_code == 404
    )


def graded_late(app, username, run_score, submitted_at) -> int:
    """A submission sent at `submitted_at` and graded as the workers grade it: a run with this
    score out of 10, taken with the submission's late penalty; its id."""
    with database(app) as session:
        user = session.scalar(select(User).where(User.username == username))
        exercise = session.scalar(select(Exercise).where(Exercise.slug == "autograd-q"))
        submission = accept(
            session, user, exercise, "work.py", CODE.encode(), Rules(1024, 100, 60), submitted_at
        )
        session.flush()
        claimed = runs.claim(session, submission.id, "local", "test", dt.timedelta(minutes=5))
        runs.record(session, claimed.run_id, graded_report(run_score))
        return submission.id


def bearer(app, username) -> dict:
    token = (
        app.test_client()
        .post("/api/v1/tokens", json={"username": username, "password": "long-password"})
        .json["token"]
    )
    return {"Authorization": "Bearer " + token}


def test_an_extension_lifts_the_penalty_of_work_already_graded_and_its_removal_restores_it(staffed):
    set_exercise(
        staffed,
        deadline=utcnow() - dt.timedelta(days=3),
        deadline_policy="penalty",
        penalty_per_day=0.1,
    )
    submission_id = graded_late(staffed, "ana", 8, utcnow() - dt.timedelta(days=1, hours=12))
    stored = latest(staffed, "ana")
    assert (stored.late_days, stored.penalty, stored.score) == (2, pytest.approx(0.2), 6.4)
    api, ana = staffed.test_client(), bearer(staffed, "ana")
    assert api.get(f"/api/v1/submissions/{submission_id}", headers=ana).json["score"] == 6.4

    prof, token = logged_in(staffed, "prof")
    later = local(utcnow() + dt.timedelta(days=3))
    assert (
        prof.post(PAGE.format("ana"), data={"csrf_token": token, "deadline": later}).status_code
        == 303
    )
    stored = latest(staffed, "ana")
    assert (stored.late_days, stored.penalty, stored.score) == (0, 0, 8)
    answer = api.get(f"/api/v1/submissions/{submission_id}", headers=ana).json
    assert (answer["score"], answer["late_days"], answer["penalty"]) == (8, 0, 0)
    assert rows_of(staffed, "ana")["grade"].score == 8

    assert prof.post(PAGE.format("ana") + "/remove", data={"csrf_token": token}).status_code == 303
    stored = latest(staffed, "ana")
    assert (stored.late_days, stored.penalty, stored.score) == (2, pytest.approx(0.2), 6.4)
    assert api.get(f"/api/v1/submissions/{submission_id}", headers=ana).json["score"] == 6.4
    assert rows_of(staffed, "ana")["grade"].score == 6.4


def test_a_grant_that_races_another_becomes_a_change_of_it(staffed, monkeypatch):
    set_exercise(staffed, max_attempts=1)
    prof, token = logged_in(staffed, "prof")
    assert (
        prof.post(PAGE.format("ana"), data={"csrf_token": token, "extra_attempts": "2"}).status_code
        == 303
    )
    real, looks = allowances_module.student_terms, []

    def before_the_other_commits(session, user_id, exercise):
        """The first look finds no allowance, as when another instructor's grant had not
        committed yet; the database then refuses a second row for the student."""
        looks.append(user_id)
        return terms(exercise, None) if len(looks) == 1 else real(session, user_id, exercise)

    monkeypatch.setattr(allowances_module, "student_terms", before_the_other_commits)
    sent = prof.post(
        PAGE.format("ana"),
        data={"csrf_token": token, "extra_attempts": "3", "comment": "the second grant"},
    )
    assert sent.status_code == 303
    (granted,) = allowances(staffed)
    assert (granted.extra_attempts, granted.comment) == (3, "the second grant")


def override(client, token, submission_id, score, comment="why"):
    assert (
        client.post(
            f"/courses/pytorch/staff/submissions/{submission_id}/override",
            data={"csrf_token": token, "score": score, "comment": comment},
        ).status_code
        == 303
    )


def test_an_adjusted_score_competes_with_the_later_submissions(staffed):
    """Partial credit by hand on an early submission no longer freezes the grade: a later
    correct file is the best, on every page and in the CSV."""
    early = graded(staffed, "ana", 1)
    prof, token = logged_in(staffed, "prof")
    override(prof, token, early, "2.5", "Partial credit: the shapes are right.")
    assert rows_of(staffed, "ana")["grade"].score == 2.5 and grade_of(prof, "ana") == "2.5"
    correct = graded(staffed, "ana", 10)
    grade = rows_of(staffed, "ana")["grade"]
    assert (grade.score, grade.submission_id, grade.set_by_hand) == (10, correct, False)
    assert grade_of(prof, "ana") == "10"
    assert re.search(
        rf'/courses/pytorch/submissions/{correct}">10</a>',
        prof.get("/courses/pytorch/staff/grades").text,
    )
    ana, _ = logged_in(staffed, "ana")
    page = ana.get("/courses/pytorch/exercises/autograd-q").text
    assert re.search(
        rf'10 / 10</span>\s*<small class="muted under">your best: <a href="/courses/pytorch/submissions/{correct}">#{correct}</a>',
        page,
    )
    assert (
        "This is the best submission: its score is the grade"
        in ana.get(f"/courses/pytorch/submissions/{correct}").text
    )
    assert re.search(
        rf"The grade on this exercise is the best submission's: <a href=\"/courses/pytorch/submissions/{correct}\">#{correct}</a>, 10 / 10",
        ana.get(f"/courses/pytorch/submissions/{early}").text,
    )
    # a deduction on the best one lowers it below another: that other is then the best
    override(prof, token, correct, "2", "Copied the loop from the statement's example.")
    assert (
        rows_of(staffed, "ana")["grade"].submission_id == early and grade_of(prof, "ana") == "2.5"
    )


def set_grade(client, token, username, score, comment="Agreed in person."):
    return client.post(
        PAGE.format(username) + "/grade",
        data={"csrf_token": token, "score": score, "comment": comment},
    )


def test_a_grade_set_by_hand_holds_whatever_is_submitted_until_removed(staffed):
    first = graded(staffed, "ana", 9)
    prof, token = logged_in(staffed, "prof")
    assert set_grade(prof, token, "ana", "0", "Copied from another student.").status_code == 303
    later = graded(staffed, "ana", 10)
    grade = rows_of(staffed, "ana")["grade"]
    assert (grade.score, grade.submission_id, grade.best_id) == (0, None, later)
    assert grade.set_grade.set_by == prof_id(staffed)
    assert grade_of(prof, "ana") == "0"
    gradebook = prof.get("/courses/pytorch/staff/grades").text
    assert re.search(
        r'/courses/pytorch/staff/students/ana/exercises/autograd-q">0</a> <span class="by-hand" '
        r'title="set by hand"',
        gradebook,
    )

    ana, _ = logged_in(staffed, "ana")
    page = ana.get("/courses/pytorch/exercises/autograd-q").text
    assert "Your grade is set by an instructor" in page and "Copied from another student." in page
    assert re.search(r'0 / 10\s*<span class="by-hand" title="set by an instructor"', page)
    assert (
        "This submission does not change the grade: the grade on this exercise was set by an "
        "instructor (0 / 10)" in ana.get(f"/courses/pytorch/submissions/{later}").text
    )
    assert re.search(r'0 / 10\s*<span class="by-hand"', ana.get("/courses/pytorch/").text)
    exercises = staffed.test_client().get("/api/v1/exercises", headers=bearer(staffed, "ana")).json
    (listed,) = [e for e in exercises["exercises"] if e["slug"] == "autograd-q"]
    assert listed["best_score"] == 0 and listed["grade"]["submission_id"] is None
    assert listed["grade"]["set_by_instructor"]["comment"] == "Copied from another student."
    assert (
        "Tu nota la ha puesto un profesor"
        in ana.get("/courses/pytorch/exercises/autograd-q?lang=es").text
    )

    staff_page = prof.get(PAGE.format("ana")).text
    assert (
        "set by Pilar" in staff_page
        and f'best submission\'s: <a href="/courses/pytorch/submissions/{later}">' in staff_page
    )
    assert set_grade(prof, token, "ana", "11").status_code == 400  # out of 10
    assert set_grade(prof, token, "ana", "5", " ").status_code == 400  # no reason given
    assert rows_of(staffed, "ana")["grade"].score == 0
    assert (
        prof.post(PAGE.format("ana") + "/grade/remove", data={"csrf_token": token}).status_code
        == 303
    )
    grade = rows_of(staffed, "ana")["grade"]
    assert (grade.score, grade.submission_id, grade.set_by_hand) == (10, later, False)
    assert first != later and grade_of(prof, "ana") == "10"


def test_a_grade_set_for_a_student_who_never_submitted_counts(staffed):
    prof, token = logged_in(staffed, "prof")
    assert set_grade(prof, token, "ana", "6", "Done on paper in the lab.").status_code == 303
    assert grade_of(prof, "ana") == "6"
    assert rows_of(staffed, "ana")["grade"].score == 6


def test_the_staff_page_of_a_submission_lists_the_later_ones(staffed):
    first, second, third = (graded(staffed, "ana", score) for score in (3, 5, 7))
    prof, _ = logged_in(staffed, "prof")
    page = prof.get(f"/courses/pytorch/submissions/{first}").text
    assert (
        f'href="/courses/pytorch/submissions/{second}">#{second}' in page
        and f'href="/courses/pytorch/submissions/{third}">#{third}' in page
    )
    assert "None: this is the latest." in prof.get(f"/courses/pytorch/submissions/{third}").text
    ana, _ = logged_in(staffed, "ana")
    assert "Later submissions" not in ana.get(f"/courses/pytorch/submissions/{first}").text


def test_every_page_shows_the_score_that_counts_marked_when_set_by_hand(staffed):
    submission_id = graded(staffed, "ana", 4)
    prof, token = logged_in(staffed, "prof")
    override(prof, token, submission_id, "7.5", "The report explains it.")
    # by whom where a page shows the submission, how where it shows the grade it makes
    marked = re.compile(
        r'7\.5 / 10\s*<span class="by-hand" title="adjusted by (an instructor|hand)"'
    )
    ana, _ = logged_in(staffed, "ana")
    for path in (
        f"/courses/pytorch/submissions/{submission_id}",
        "/courses/pytorch/submissions",
        "/courses/pytorch/exercises/autograd-q",
        "/courses/pytorch/",
    ):
        assert marked.search(ana.get(path).text), path
    assert re.search(
        r'<strong class="score">7\.5 / 10\s*<span class="by-hand" title="adjusted by an instructor"',
        ana.get(f"/courses/pytorch/submissions/{submission_id}").text,
    )
    spanish = ana.get("/courses/pytorch/submissions?lang=es").text
    assert "7,5 / 10" in spanish and "ajustada por un profesor" in spanish
    assert "7,5 / 10" in ana.get(f"/courses/pytorch/submissions/{submission_id}?lang=es").text
    poll = ana.get(f"/courses/pytorch/submissions/{submission_id}/status").json
    assert (poll["score"], poll["counted_score"]) == (4, 7.5)
    answer = (
        staffed.test_client()
        .get(f"/api/v1/submissions/{submission_id}", headers=bearer(staffed, "ana"))
        .json
    )
    assert (answer["score"], answer["counted_score"]) == (4, 7.5)
    first_line = summary("work.py", answer).splitlines()[0]
    assert "7.5 / 10" in first_line and "adjusted by an instructor" in first_line
    assert answer["override"]["by"] == "instructor"
    assert "ajustada por un profesor" in summary("work.py", answer, lang="es")

    page = prof.get(PAGE.format("ana")).text
    assert marked.search(page) and re.search(r"<td>4 / 10</td>", page)  # and the automatic one
    gradebook = prof.get("/courses/pytorch/staff/grades").text
    assert re.search(
        rf'/courses/pytorch/submissions/{submission_id}">7\.5</a> <span class="by-hand" '
        r'title="adjusted by hand"',
        gradebook,
    )
    assert ">7,5</a>" in prof.get("/courses/pytorch/staff/grades?lang=es").text


def test_attempts_left_against_a_limit_lowered_below_those_used(staffed):
    ana, token = logged_in(staffed, "ana")
    for _ in range(3):
        assert submit(ana, token).status_code == 303
    set_exercise(staffed, max_attempts=2)
    page = ana.get("/courses/pytorch/exercises/autograd-q").text
    assert "0 of 2" in page and "You have used all 2 attempts" in page


def test_staff_count_attempts_as_the_student_limit_does(staffed):
    ana, token = logged_in(staffed, "ana")
    assert submit(ana, token).status_code == 303 and submit(ana, token).status_code == 303
    with database(staffed) as session:
        latest_one = session.get(Submission, latest(staffed, "ana").id)
        latest_one.status = "cancelled"  # staff stopped its grading: no attempt used
    with database(staffed) as session:
        user = session.scalar(select(User).where(User.username == "ana"))
        exercise = session.scalar(select(Exercise).where(Exercise.slug == "autograd-q"))
        staff_count = standings(session, exercise.course_id, exercise.id)[
            (user.id, exercise.id)
        ].attempts
    assert staff_count == rows_of(staffed, "ana")["attempts_used"] == 1

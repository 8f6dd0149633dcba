"""A student's accommodation (extra days on every deadline, a factor on every limit of attempts)
and the same exception for several students at once: the one rule (grades.terms) that the
pages, the refusals, the late penalty and the reminders all follow, and the staff's forms."""

import contextlib
import datetime as dt
from types import SimpleNamespace

import pytest
import sqlalchemy as sa
from helpers import logged_in, received, the_course
from sqlalchemy import select, update

from server.core import migrate
from server.core.grades import terms
from server.core.models import Accommodation, Allowance, Exercise, Submission, User, utcnow
from server.core.users import add_user
from server.web.results import exercise_rows

CODE = "def q_grads(a, b, v):\n    return a, b\n"
SLUG, OTHER = "autograd-q", "autograd-accumulation"
STAFF = "/courses/pytorch/staff"
DAY = dt.timedelta(days=1)


@contextlib.contextmanager
def database(app):
    with app.app_context():
        session = app.extensions["hpcgrade.db"].sessions()
        yield session
        session.commit()
        session.close()


@pytest.fixture
def staffed(course):
    """The course with prof, an instructor, and carl, a third student."""
    with database(course) as session:
        add_user(session, "prof", "Pilar", "p@uni.es", "instructor", "long-password")
        add_user(session, "carl", "Carl", "c@uni.es", "student", "long-password")
    return course


def set_exercise(app, slug=SLUG, **fields):
    with database(app) as session:
        session.execute(update(Exercise).where(Exercise.slug == slug).values(**fields))


def row_of(app, username, slug=SLUG) -> dict:
    with database(app) as session:
        user = session.scalar(select(User).where(User.username == username))
        return next(
            row
            for row in exercise_rows(session, user, the_course(session).id)
            if row["exercise"].slug == slug
        )


def submit(client, token, slug=SLUG):
    return client.post(
        f"/courses/pytorch/exercises/{slug}/submissions", data={"csrf_token": token, "code": CODE}
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


def accommodate(client, token, username, days="0", factor="1", comment=""):
    return client.post(
        f"{STAFF}/students/{username}/accommodation",
        data={
            "csrf_token": token,
            "extra_days": days,
            "attempts_factor": factor,
            "comment": comment,
        },
    )


def stored(app, table) -> list:
    with database(app) as session:
        return list(session.scalars(select(table).order_by(table.id)))


# --- the rule -----------------------------------------------------------------------------------


def test_the_accommodation_comes_first_and_an_exception_adds_to_it():
    deadline = dt.datetime(2030, 1, 31, 17, tzinfo=dt.timezone.utc)
    exercise = SimpleNamespace(deadline=deadline, max_attempts=5)
    plan = SimpleNamespace(extra_days=3, attempts_factor=1.5)
    assert (terms(exercise, None, plan).deadline, terms(exercise, None, plan).max_attempts) == (
        deadline + 3 * DAY,
        8,
    )  # 5 × 1.5 = 7.5, rounded up
    # an exception's date counts where it is later than the accommodated deadline, never earlier
    sooner = SimpleNamespace(deadline=deadline + DAY, extra_attempts=2)
    later = SimpleNamespace(deadline=deadline + 5 * DAY, extra_attempts=0)
    assert terms(exercise, sooner, plan).deadline == deadline + 3 * DAY
    assert terms(exercise, later, plan).deadline == deadline + 5 * DAY
    assert terms(exercise, sooner, plan).max_attempts == 10  # its extra attempts are added
    # no floating-point extra attempt: 10 × 1.1 is 11, not 12
    assert (
        terms(
            SimpleNamespace(deadline=None, max_attempts=10),
            None,
            SimpleNamespace(extra_days=2, attempts_factor=1.1),
        ).max_attempts
        == 11
    )
    unlimited = terms(SimpleNamespace(deadline=None, max_attempts=None), None, plan)
    assert (unlimited.deadline, unlimited.max_attempts) == (None, None)


# --- an accommodation ---------------------------------------------------------------------------


def test_an_accommodation_moves_every_deadline_and_limit_for_that_student_only(staffed):
    deadline = (utcnow() - 2 * DAY).replace(microsecond=0)
    set_exercise(staffed, deadline=deadline, deadline_policy="refuse", max_attempts=2)
    set_exercise(staffed, OTHER, deadline=deadline + 10 * DAY, max_attempts=3)
    prof, token = logged_in(staffed, "prof")
    assert accommodate(prof, token, "ana", "3", "1.5", "plan 2026-41").status_code == 303
    (plan,) = stored(staffed, Accommodation)
    assert (plan.extra_days, plan.attempts_factor, plan.comment) == (3, 1.5, "plan 2026-41")
    assert plan.granted_by is not None and utcnow() - plan.granted_at < dt.timedelta(minutes=1)

    # every exercise of the course, on every page and in every refusal
    assert (row_of(staffed, "ana")["deadline"], row_of(staffed, "ana")["max_attempts"]) == (
        deadline + 3 * DAY,
        3,
    )
    assert (
        row_of(staffed, "ana", OTHER)["deadline"],
        row_of(staffed, "ana", OTHER)["max_attempts"],
    ) == (deadline + 13 * DAY, 5)
    assert (row_of(staffed, "bea")["deadline"], row_of(staffed, "bea")["max_attempts"]) == (
        deadline,
        2,
    )
    ana, ana_token = logged_in(staffed, "ana")
    bea, bea_token = logged_in(staffed, "bea")
    assert "late work is not accepted" in refusal(bea, bea_token)
    for _attempt in range(3):
        assert submit(ana, ana_token).status_code == 303
    assert "all 3 attempts" in refusal(ana, ana_token)
    assert row_of(staffed, "ana")["attempts_left"] == 0

    page = prof.get(f"{STAFF}/students/ana").text
    assert "Accommodation" in page and "plan 2026-41" in page and "Change the accommodation" in page
    exception_page = prof.get(f"{STAFF}/students/ana/exercises/{SLUG}").text
    assert "3 extra days, attempts × 1.5" in exception_page
    assert "Give an accommodation" in prof.get(f"{STAFF}/students/bea").text


def test_the_student_reads_why_their_deadline_and_attempts_are_not_the_exercises(staffed):
    deadline = (utcnow() + 2 * DAY).replace(microsecond=0)
    set_exercise(staffed, deadline=deadline, max_attempts=10)
    prof, token = logged_in(staffed, "prof")
    ana, _token = logged_in(staffed, "ana")
    page = ana.get(f"/courses/pytorch/exercises/{SLUG}").text
    assert "deadline-why" not in page and "attempts-why" not in page

    assert accommodate(prof, token, "ana", "3", "1.5").status_code == 303
    page = " ".join(ana.get(f"/courses/pytorch/exercises/{SLUG}").text.split())
    assert "15 of 15" in page
    assert "The exercise allows 10: your accommodation gives 1.5 times as many." in page
    assert (
        "Moved for you: the 3 extra days of your accommodation; the exercise's deadline is" in page
    )

    later = (deadline + 10 * DAY).strftime("%Y-%m-%dT%H:%M")
    assert (
        prof.post(
            f"{STAFF}/students/ana/exercises/{SLUG}",
            data={"csrf_token": token, "deadline": later, "extra_attempts": "2", "comment": ""},
        ).status_code
        == 303
    )
    page = " ".join(ana.get(f"/courses/pytorch/exercises/{SLUG}").text.split())
    assert "17 of 17" in page
    assert (
        "The exercise allows 10: your accommodation gives 1.5 times as many; your "
        "instructor granted you 2 more."
    ) in page
    assert "Moved for you: an extension your instructor granted you;" in page
    ana_es, _token = logged_in(staffed, "ana", lang="es")
    assert "Cambiado para ti" in ana_es.get(f"/courses/pytorch/exercises/{SLUG}").text


def test_an_accommodation_reworks_the_late_penalty_both_ways(staffed):
    set_exercise(
        staffed, deadline=utcnow() - 1.5 * DAY, deadline_policy="penalty", penalty_per_day=0.1
    )
    ana, ana_token = logged_in(staffed, "ana")
    assert submit(ana, ana_token).status_code == 303
    assert (latest(staffed, "ana").late_days, latest(staffed, "ana").penalty) == (
        2,
        pytest.approx(0.2),
    )
    prof, token = logged_in(staffed, "prof")
    assert accommodate(prof, token, "ana", "2").status_code == 303
    assert (latest(staffed, "ana").late_days, latest(staffed, "ana").penalty) == (0, 0)

    confirm = prof.get(f"{STAFF}/students/ana/accommodation/remove")
    assert "Remove the accommodation?" in confirm.text and "Cancel: keep it" in confirm.text
    assert stored(staffed, Accommodation)  # asking is not removing
    assert (
        prof.post(
            f"{STAFF}/students/ana/accommodation/remove", data={"csrf_token": token}
        ).status_code
        == 303
    )
    assert stored(staffed, Accommodation) == []
    assert latest(staffed, "ana").late_days == 2


def test_the_accommodation_form_refuses_what_it_cannot_mean(staffed):
    prof, token = logged_in(staffed, "prof")
    for days, factor, said in (
        ("abc", "1", "Extra days must be a whole number from 0 to 60"),
        ("61", "1", "Extra days must be a whole number"),
        ("1", "0.5", "The attempts factor must be a number from 1 to 10"),
        ("1", "nan", "The attempts factor must be"),
        ("0", "1", "Give extra days, an attempts factor above 1 or both"),
    ):
        refused = accommodate(prof, token, "ana", days, factor)
        assert refused.status_code == 400 and said in refused.text
        assert f'value="{days}"' in refused.text  # what was typed stays in the form
    assert stored(staffed, Accommodation) == []
    # a decimal comma, as a Spanish reader writes it
    assert accommodate(prof, token, "ana", "0", "1,25").status_code == 303
    assert stored(staffed, Accommodation)[0].attempts_factor == 1.25
    # a changed accommodation is the same row
    assert accommodate(prof, token, "ana", "1", "1").status_code == 303
    assert [(a.extra_days, a.attempts_factor) for a in stored(staffed, Accommodation)] == [(1, 1)]


def test_only_staff_give_accommodations_and_bulk_exceptions(staffed):
    ana, token = logged_in(staffed, "ana")
    assert accommodate(ana, token, "ana", "5").status_code == 403
    assert ana.get(f"{STAFF}/exceptions").status_code == 403
    assert (
        ana.post(
            f"{STAFF}/exceptions",
            data={"csrf_token": token, "exercise": SLUG, "usernames": "ana", "extra_attempts": "3"},
        ).status_code
        == 403
    )
    assert stored(staffed, Accommodation) == [] and stored(staffed, Allowance) == []
    prof, prof_token = logged_in(staffed, "prof")
    assert accommodate(prof, prof_token, "prof", "5").status_code == 404  # staff, no student


# --- the same exception for several students ----------------------------------------------------


def bulk(client, token, **fields):
    return client.post(
        f"{STAFF}/exceptions", data={"csrf_token": token, "exercise": SLUG, **fields}
    )


def test_one_exception_for_several_students_pasted_or_ticked(staffed):
    set_exercise(staffed, deadline=utcnow() - DAY, deadline_policy="refuse", max_attempts=1)
    prof, token = logged_in(staffed, "prof")
    page = prof.get(f"{STAFF}/exceptions?exercise={SLUG}").text
    assert 'name="usernames"' in page and 'value="carl"' in page
    new_deadline = (utcnow() + 3 * DAY).replace(second=0, microsecond=0)
    sent = prof.post(
        f"{STAFF}/exceptions",
        data={
            "csrf_token": token,
            "exercise": SLUG,
            "usernames": "ana,\nbea  ana",
            "student": ["carl", "bea"],
            "deadline": new_deadline.strftime("%Y-%m-%d %H:%M"),
            "extra_attempts": "2",
            "comment": "server outage",
        },
    )
    assert sent.status_code == 303
    assert "saved for 3 students" in prof.get(sent.headers["Location"]).text
    rows = stored(staffed, Allowance)
    assert len(rows) == 3 and {(r.extra_attempts, r.comment) for r in rows} == {
        (2, "server outage")
    }
    for name in ("ana", "bea", "carl"):
        assert row_of(staffed, name)["max_attempts"] == 3
        assert row_of(staffed, name)["deadline"] > utcnow()


def test_a_bulk_exception_keeps_what_it_leaves_empty(staffed):
    set_exercise(staffed, deadline=utcnow() - DAY, max_attempts=1)
    prof, token = logged_in(staffed, "prof")
    mine = (utcnow() + 5 * DAY).replace(second=0, microsecond=0)
    assert (
        bulk(
            prof, token, usernames="ana", deadline=mine.strftime("%Y-%m-%d %H:%M"), comment="ill"
        ).status_code
        == 303
    )
    assert bulk(prof, token, usernames="ana bea", extra_attempts="1").status_code == 303
    ana, bea = stored(staffed, Allowance)
    assert (ana.extra_attempts, ana.comment) == (1, "ill") and ana.deadline is not None
    assert row_of(staffed, "ana")["deadline"] > utcnow() + 4 * DAY
    assert (bea.extra_attempts, bea.deadline) == (1, None)


def test_a_bulk_exception_naming_a_non_student_stores_nothing(staffed):
    set_exercise(staffed, max_attempts=1)
    prof, token = logged_in(staffed, "prof")
    refused = bulk(prof, token, usernames="ana nobody\nprof", student="bea", extra_attempts="2")
    assert refused.status_code == 400
    assert "nobody, prof are not students of this course: nothing was saved." in refused.text
    assert 'value="bea" checked' in refused.text  # the ticks stay for the corrected try
    assert stored(staffed, Allowance) == []
    refused = bulk(prof, token, usernames="ana", extra_attempts="500")
    assert refused.status_code == 400 and "Extra attempts must be a whole number" in refused.text
    assert "Choose the students" in bulk(prof, token, extra_attempts="2").text
    assert (
        "Give a later deadline, extra attempts or both." in bulk(prof, token, usernames="ana").text
    )
    assert stored(staffed, Allowance) == []


# --- reminders ----------------------------------------------------------------------------------


def test_deadline_reminders_follow_the_accommodation(mailing):
    """SLUG is due in 12 hours, OTHER was due 12 hours ago. ana's 3 extra days put both past the
    next 24 hours; bea's one day makes SLUG due in 36 hours and OTHER in 12; carl has none."""
    from server.core.notices import Kind, choose
    from worker.grading.tasks import remind_deadlines

    app, recorder, _sent = mailing
    now = utcnow()
    with database(app) as session:
        add_user(session, "carl", "Carl", "c@uni.es", "student", "long-password")
        session.execute(update(Exercise).values(deadline=None))
        session.execute(
            update(Exercise).where(Exercise.slug == SLUG).values(deadline=now + DAY / 2)
        )
        session.execute(
            update(Exercise).where(Exercise.slug == OTHER).values(deadline=now - DAY / 2)
        )
        course = the_course(session).id
        users = {u.username: u for u in session.scalars(select(User))}
        for name in ("ana", "bea", "carl"):
            choose(users[name], {Kind.deadline: True})
        session.add_all(
            [
                Accommodation(user_id=users["ana"].id, course_id=course, extra_days=3),
                Accommodation(user_id=users["bea"].id, course_id=course, extra_days=1),
            ]
        )
        title = {e.slug: e.title_en for e in session.scalars(select(Exercise))}
    assert remind_deadlines.apply().get() == 2
    assert sorted(
        (to, subject.split(" is due on ")[0]) for to, subject, _body in received(recorder)
    ) == [("b@uni.es", title[OTHER]), ("c@uni.es", title[SLUG])]


# --- the migration ------------------------------------------------------------------------------


def test_the_accommodations_migration_goes_up_and_down(empty_database_url):
    migrate.upgrade(empty_database_url, "0014")
    engine = sa.create_engine(empty_database_url)
    columns = {c["name"] for c in sa.inspect(engine).get_columns("accommodations")}
    assert {"user_id", "course_id", "extra_days", "attempts_factor", "comment"} <= columns
    migrate.downgrade(empty_database_url, "0013")
    assert "accommodations" not in sa.inspect(engine).get_table_names()
    migrate.upgrade(empty_database_url, "0014")
    engine.dispose()

"""Accepting submissions: file checks, attempts, rate limit, deadline policies."""

import datetime as dt

import pytest
from flask import Flask
from flask_babel import force_locale
from helpers import the_course

from server.core.config import SETTINGS_KEY, Settings
from server.core.models import Exercise, Submission, User
from server.web import i18n
from server.web.submissions import Refusal, Rules, accept

NOW = dt.datetime(2027, 1, 10, 12, 0, tzinfo=dt.timezone.utc)
RULES = Rules(max_upload_kb=64, per_window=3, window_minutes=60)
CODE = b"def q_grads(a, b, v):\n    return a, b\n"


@pytest.fixture(autouse=True)
def request_context():
    """Refusals are translated when shown, in the request's language."""
    app = Flask("server")
    app.extensions[SETTINGS_KEY] = Settings(timezone="Europe/Madrid")
    i18n.init_app(app)
    with app.test_request_context():
        yield


@pytest.fixture
def student(db_session):
    user = User(username="ana", name="Ana", email="a@uni.es", password_hash="x")
    db_session.add(user)
    return user


def exercise(db_session, **fields):
    row = Exercise(
        course_id=the_course(db_session).id,
        slug=fields.pop("slug", "autograd-q"),
        title_en="Q",
        title_es="Q",
        **fields,
    )
    db_session.add(row)
    db_session.flush()
    return row


def refused(status, *args):
    with pytest.raises(Refusal) as info:
        accept(*args)
    assert info.value.status == status
    with force_locale("es"):
        spanish = info.value.message
    assert spanish != info.value.message
    return info.value


def test_accepted_submission_is_queued_with_its_hash(db_session, student):
    row = exercise(db_session)
    submission = accept(db_session, student, row, "work.py", CODE, RULES, NOW)
    db_session.flush()
    assert submission.status == "queued" and submission.late_days == 0 and submission.penalty == 0
    assert len(submission.sha256) == 64 and submission.code == CODE


def test_bad_files_are_refused(db_session, student):
    row = exercise(db_session)
    refused(400, db_session, student, row, "work.txt", CODE, RULES, NOW)
    refused(413, db_session, student, row, "big.py", b"#" * (65 << 10), RULES, NOW)
    refused(400, db_session, student, row, "empty.py", b"  \n", RULES, NOW)
    refused(400, db_session, student, row, "bin.py", b"\x7fELF\x00\x00", RULES, NOW)
    refused(400, db_session, student, row, "latin.py", "año = 1".encode("latin-1"), RULES, NOW)
    refused(404, db_session, student, None, "work.py", CODE, RULES, NOW)
    closed = exercise(db_session, slug="closed-one", active=False)
    refused(404, db_session, student, closed, "work.py", CODE, RULES, NOW)
    assert db_session.query(Submission).count() == 0


def test_rate_limit_and_attempts(db_session, student):
    row = exercise(db_session, max_attempts=4)
    for minute in range(3):
        accept(db_session, student, row, "w.py", CODE, RULES, NOW + dt.timedelta(minutes=minute))
    db_session.flush()
    message = refused(
        429, db_session, student, row, "w.py", CODE, RULES, NOW + dt.timedelta(minutes=5)
    )
    assert "3 submissions every 60 minutes" in message.message
    later = NOW + dt.timedelta(minutes=70)
    accept(db_session, student, row, "w.py", CODE, RULES, later)
    db_session.flush()
    assert (
        "all 4 attempts"
        in refused(
            403, db_session, student, row, "w.py", CODE, RULES, later + dt.timedelta(hours=3)
        ).message
    )


def test_late_policies(db_session, student):
    deadline = NOW - dt.timedelta(days=2, hours=1)
    penalty = exercise(
        db_session,
        slug="late-penalty",
        deadline=deadline,
        deadline_policy="penalty",
        penalty_per_day=0.1,
    )
    submission = accept(db_session, student, penalty, "w.py", CODE, RULES, NOW)
    assert (submission.late_days, submission.penalty) == (3, pytest.approx(0.3))
    on_time = accept(db_session, student, penalty, "w.py", CODE, RULES, deadline)
    assert (on_time.late_days, on_time.penalty) == (0, 0.0)
    refuse = exercise(db_session, slug="late-refused", deadline=deadline, deadline_policy="refuse")
    # the deadline in the course's time zone (11:00 UTC is 12:00 in Madrid), not ISO
    assert (
        "(8 Jan 2027, 12:00 CET); late work is not accepted"
        in refused(403, db_session, student, refuse, "w.py", CODE, RULES, NOW).message
    )


def test_an_archived_course_takes_no_submission_whatever_the_way_in(db_session, student):
    """The rule lives in `accept`, which the portal, the API and MUNGE submits all go through."""
    row = exercise(db_session)
    row.course.archived_at = NOW
    refusal = refused(403, db_session, student, row, "work.py", CODE, RULES, NOW)
    assert refusal.message == f"course {row.course.slug} is archived: it takes no submissions"
    assert db_session.query(Submission).count() == 0

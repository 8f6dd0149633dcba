"""The notices the beat sends on rounds (worker/grading/tasks.py): deadline reminders, hourly,
and the instructors' mail about grader failures, every FAILURE_ROUND_SECONDS.

Both read what is committed, so they tell nothing a transaction may still undo, and record what
they mailed only once the server took it: a mail server that is away leaves the rest to the
next round. Failures are batched: one mail per course to each of its instructors per round,
however many of its submissions failed meanwhile (a broken node failing 200 files in a minute
is one mail), listing at most LISTED of them."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

from flask_babel import gettext as _
from flask_babel import ngettext
from sqlalchemy import and_, exists, or_, select
from sqlalchemy.orm import Session

from server.core.grades import MAX_EXTRA_DAYS, student_terms
from server.core.mail import MailAway, mail_configured
from server.core.models import (
    Accommodation,
    Allowance,
    Course,
    CourseRole,
    DeadlineReminder,
    Enrolment,
    Exercise,
    GradingRun,
    RunStatus,
    Submission,
    SubmissionStatus,
    User,
)
from server.core.notices import (
    Kind,
    Notice,
    compose,
    deliver,
    link,
    moment,
    titled,
    wants,
    writing_in,
)

REMIND_BEFORE = dt.timedelta(hours=24)
REMIND_SECONDS = 3600.0
FAILURE_ROUND_SECONDS = 300.0
# failures older than this are not mailed: a service that ran long without mail set up does
# not mail its whole history once it is
FAILURE_LOOKBACK = dt.timedelta(days=1)
LISTED = 20


# --- deadline reminders -----------------------------------------------------------------------


def remind_deadlines(session: Session, now: dt.datetime) -> int:
    """Mail each student who wants it, once, when an exercise of theirs is due within
    REMIND_BEFORE (their own deadline, an extension included) and they have sent nothing to it;
    how many were mailed."""
    if not mail_configured():
        return 0
    soon = now + REMIND_BEFORE
    due = [
        (user, exercise, deadline)
        for user, exercise in _unreminded(session, now, soon)
        if wants(user, Kind.deadline)
        and now < (deadline := student_terms(session, user.id, exercise).deadline) <= soon
    ]
    notices = [_reminder(n, *row) for n, row in enumerate(due)]
    try:
        deliver(session, notices)
        sent = [n.about for n in notices]
    except MailAway as away:  # those not sent wait for the next round
        sent = [n.about for n in notices if n.about not in away.left]
    session.add_all(
        DeadlineReminder(user_id=due[n][0].id, exercise_id=due[n][1].id, sent_at=now) for n in sent
    )
    session.commit()
    return len(sent)


def _unreminded(
    session: Session, now: dt.datetime, soon: dt.datetime
) -> list[tuple[User, Exercise]]:
    """(student, exercise) of active exercises of open courses that may be due by `soon`, with
    no submission of the student and no reminder yet."""
    extended = exists().where(
        Allowance.exercise_id == Exercise.id, Allowance.user_id == User.id, Allowance.deadline > now
    )
    # extra days on every deadline: those that ended less than the most there can be ago
    accommodated = and_(
        Exercise.deadline > now - dt.timedelta(days=MAX_EXTRA_DAYS),
        exists().where(
            Accommodation.user_id == User.id,
            Accommodation.course_id == Exercise.course_id,
            Accommodation.extra_days > 0,
        ),
    )
    return list(
        session.execute(
            select(User, Exercise)
            .join(Enrolment, Enrolment.user_id == User.id)
            .join(Exercise, Exercise.course_id == Enrolment.course_id)
            .join(Course, Course.id == Exercise.course_id)
            .where(
                Enrolment.role == CourseRole.student.value,
                Exercise.active,
                Course.archived_at.is_(None),
                Exercise.deadline.is_not(None),
                or_(Exercise.deadline.between(now, soon), extended, accommodated),
                ~exists().where(
                    Submission.user_id == User.id, Submission.exercise_id == Exercise.id
                ),
                ~exists().where(
                    DeadlineReminder.user_id == User.id, DeadlineReminder.exercise_id == Exercise.id
                ),
            )
            .order_by(User.id, Exercise.id)
        )
    )


def _reminder(about: int, user: User, exercise: Exercise, deadline: dt.datetime) -> Notice:
    return compose(
        user,
        about,
        lambda: _(
            "%(exercise)s is due on %(when)s", when=moment(deadline, exercise), **titled(exercise)
        ),
        lambda: _(
            "Hello %(name)s,\n\n%(exercise)s (%(course)s) is due on %(when)s, and you have not "
            "submitted anything to it yet.\n\n%(link)s\n",
            name=user.name,
            when=moment(deadline, exercise),
            link=link("portal.exercise", course=exercise.course.slug, slug=exercise.slug),
            **titled(exercise),
        ),
    )


# --- grader failures --------------------------------------------------------------------------


def report_failures(session: Session, now: dt.datetime) -> int:
    """One mail per course to each of its instructors who wants it, listing the submissions
    that became grader errors since the last round; how many mails went out. A course's
    failures are marked told once its mails are sent (or when no instructor wants them)."""
    if not mail_configured():
        return 0
    mailed = 0
    for course_id, failures in _new_failures(session, now).items():
        course = session.get(Course, course_id)
        notices = [
            _failure_notice(instructor, course, failures)
            for instructor in _instructors(session, course_id)
            if wants(instructor, Kind.grading_failed)
        ]
        mailed += deliver(
            session, notices
        )  # MailAway: this course and the next wait for the next round
        session.execute(
            GradingRun.__table__.update()
            .where(GradingRun.id.in_([run.id for run in failures]))
            .values(failure_noticed_at=now)
        )
        session.commit()
    return mailed


def _new_failures(session: Session, now: dt.datetime) -> dict[int, list]:
    """course id → the failed runs not told yet of its submissions that are grader errors (a
    run that failed before another graded the submission is no news)."""
    rows = session.execute(
        select(
            GradingRun.id,
            GradingRun.error,
            Submission.id.label("submission_id"),
            User.username,
            Exercise.slug,
            Exercise.course_id,
        )
        .join(Submission, GradingRun.submission_id == Submission.id)
        .join(User, Submission.user_id == User.id)
        .join(Exercise, Submission.exercise_id == Exercise.id)
        .where(
            Submission.status == SubmissionStatus.error.value,
            GradingRun.status.in_((RunStatus.failed.value, RunStatus.lost.value)),
            GradingRun.regrade_id.is_(None),
            GradingRun.failure_noticed_at.is_(None),
            GradingRun.finished_at > now - FAILURE_LOOKBACK,
        )
        .order_by(Exercise.course_id, GradingRun.id)
    ).all()
    by_course: dict[int, list] = defaultdict(list)
    for row in rows:
        by_course[row.course_id].append(row)
    return by_course


def _instructors(session: Session, course_id: int) -> list[User]:
    return list(
        session.scalars(
            select(User)
            .join(Enrolment, Enrolment.user_id == User.id)
            .where(Enrolment.course_id == course_id, Enrolment.role == CourseRole.instructor.value)
            .order_by(User.id)
        )
    )


def _failure_notice(instructor: User, course: Course, failures: list) -> Notice:
    """The submissions (each once: its last failed run says why) with a link to each page."""
    last = {row.submission_id: row for row in failures}
    shown = list(last.values())[:LISTED]

    def body() -> str:
        lines = [
            f"#{row.submission_id} {row.slug} ({row.username}): {row.error or ''}\n  "
            + link("portal.submission", course=course.slug, submission_id=row.submission_id)
            for row in shown
        ]
        if len(last) > len(shown):
            lines.append(
                ngettext("…and %(num)s more.", "…and %(num)s more.", len(last) - len(shown))
            )
        return _(
            "Hello %(name)s,\n\nthe grader failed on these submissions of %(course)s for "
            'reasons of its own, not the students\': they show "grader error", never a '
            "zero. Each page says why; once the cause is fixed, grade them again.\n\n"
            "%(lines)s\n",
            name=instructor.name,
            course=course.title(writing_in()),
            lines="\n".join(lines),
        )

    return compose(
        instructor,
        course.id,
        lambda: ngettext(
            "%(num)s submission of %(course)s could not be graded",
            "%(num)s submissions of %(course)s could not be graded",
            len(last),
            course=course.title(writing_in()),
        ),
        body,
    )

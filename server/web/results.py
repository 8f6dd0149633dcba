"""What a student may see of a submission, as plain data for the API and the pages."""

from __future__ import annotations

import datetime as dt
import json
import math
import time
from collections import defaultdict
from typing import NamedTuple

from flask_babel import get_locale, ngettext
from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from sqlalchemy import Row, bindparam, func, or_, select
from sqlalchemy.orm import Session, object_session, selectinload

from server.core import conditions
from server.core.conditions import Fault
from server.core.config import app_settings
from server.core.courses import role_in
from server.core.grades import DONE_RUN, Grade, student_terms, terms_of
from server.core.models import (
    STAFF_ROLES,
    CheckResult,
    ClusterState,
    Exercise,
    GradingRun,
    RunStatus,
    SetGrade,
    Submission,
    SubmissionStatus,
    User,
    aware,
    utcnow,
)
from server.core.queue import place
from server.web.submissions import COUNTS_AS_ATTEMPT, shown_name, where
from worker.harness.report import ADVICE, LOAD_ERROR
from worker.harness.submission import Unreadable, read

WAITING = (SubmissionStatus.queued.value, SubmissionStatus.running.value)


class SubmissionState(NamedTuple):
    """A submission's row, without its code or results: enough to authorise and answer a poll."""

    id: int
    user_id: int
    exercise: str
    course_id: int
    filename: str
    status: str
    submitted_at: dt.datetime
    score: float | None  # the automatic score, after any late penalty
    counted_score: float | None  # Submission.counted_score: an instructor's, else the automatic
    max_score: float | None
    late_days: int
    penalty: float
    done_run_id: int | None
    override_score: float | None  # the staff's score, kept beside the automatic one
    override_comment: str | None
    override_at: dt.datetime | None
    override_by: int | None


# built once: composing a statement costs about as much as running it, and polls are many
_STATE = (
    select(
        Submission.id,
        Submission.user_id,
        Exercise.slug,
        Exercise.course_id,
        Submission.filename,
        Submission.status,
        Submission.submitted_at,
        Submission.score,
        Submission.counted_score,
        Submission.max_score,
        Submission.late_days,
        Submission.penalty,
        DONE_RUN,
        Submission.override_score,
        Submission.override_comment,
        Submission.override_at,
        Submission.override_by,
    )
    .join(Exercise, Submission.exercise_id == Exercise.id)
    .where(Submission.id == bindparam("submission_id"))
)
# a running submission whose job the cluster has not started
_PENDING = select(GradingRun.job_reason).where(
    GradingRun.submission_id == bindparam("submission_id"),
    GradingRun.status == RunStatus.running.value,
    GradingRun.job_state == "PENDING",
)
_CHECKS = (selectinload(GradingRun.checks).selectinload(CheckResult.diagnostics),)


def may_see(owner_id: int, viewer_id: int, viewer_role: str | None) -> bool:
    """A submission is its student's and its course's staff's (`viewer_role`: the viewer's role
    in the submission's course); to anyone else it does not exist (404)."""
    return owner_id == viewer_id or viewer_role in STAFF_ROLES


def submission_state(session: Session, submission_id: int) -> SubmissionState | None:
    # Core, not the ORM: the row is plain values, and polls are the service's hottest path
    row = session.connection().execute(_STATE, {"submission_id": submission_id}).one_or_none()
    return SubmissionState(*row) if row is not None else None


def waiting(session: Session, state: SubmissionState | Submission, lang: str) -> dict:
    """Where a submission not graded yet stands: `queue_position` (1 for the next to be graded;
    None once grading has started), `estimate_seconds` and `estimate` (how long until it is
    graded, from the recent grading rate; None when too few runs finished lately to say),
    `stalled` (queued a while, and no grading run started or finished meanwhile),
    `waiting_for_cluster` (its job is sent, and the cluster has not started it: a node drained,
    a partition down, a busy cluster), `held_by` (what holds it back, by name: a fault of
    server/core/conditions.py, the cluster's state, a slow queue), and a `note` when it waits for
    its student's earlier ones, for the cluster, or longer than usual."""
    still = {"estimate_seconds": None, "estimate": None, "stalled": False}
    pace = recent_pace(session)
    if state.status == SubmissionStatus.running.value:
        pending = session.connection().execute(_PENDING, {"submission_id": state.id}).first()
        held_by = _running_held_by(pace, pending)
        return {
            "queue_position": None,
            "waiting_for_cluster": pending is not None,
            **still,
            "held_by": held_by,
            "note": _said(held_by),
        }
    found = place(session, state.id) if state.status == SubmissionStatus.queued.value else None
    if found is None:
        return {
            "queue_position": None,
            "waiting_for_cluster": False,
            **still,
            "held_by": None,
            "note": None,
        }
    position, turn = found
    seconds = pace.seconds_for(position)
    stalled = pace.stalled_since(state.submitted_at)
    notes = (
        [_("Your earlier submissions are graded first; this one starts when one of them finishes.")]
        if turn > app_settings().max_running_per_student
        else []
    )
    held_by = _queued_held_by(pace, stalled)
    if held_by:
        notes.append(_said(held_by))
    return {
        "queue_position": position,
        "waiting_for_cluster": pace.cluster_resting,
        "estimate_seconds": seconds,
        "estimate": _estimate_text(seconds),
        "stalled": stalled,
        "held_by": held_by,
        "note": " ".join(notes) or None,
    }


# squeue's reasons for a job that waits because its nodes are not there (drained, down, set
# aside), rather than busy with other jobs
MAINTENANCE_REASONS = (
    "ReqNodeNotAvail",
    "Nodes required for job are DOWN",
    "NodeDown",
    "PartitionDown",
    "PartitionInactive",
)


def _queued_held_by(pace: "Pace", stalled: bool) -> str | None:
    """What holds back a submission still in the queue: nothing is sent while the spool is
    full, nor while the cluster takes no jobs; else a queue slower than usual."""
    if Fault.spool_full in pace.faults:
        return Fault.spool_full.value
    if pace.cluster_resting:
        return "cluster_resting"
    return "slow" if stalled else None


def _running_held_by(pace: "Pace", pending: Row | None) -> str | None:
    """What holds back a submission whose run is out: its job waiting (the nodes away, or busy),
    the cluster not answering, the schedule that collects the reports stopped."""
    collected = app_settings().executor != "local"  # a local run is recorded by its own task
    if collected and Fault.schedule_stopped in pace.faults:
        return Fault.schedule_stopped.value
    if Fault.cluster_away in pace.faults:
        return Fault.cluster_away.value
    if pending is None:
        return None
    reason = pending[0] or ""
    return "cluster_maintenance" if reason.startswith(MAINTENANCE_REASONS) else "cluster_busy"


# what a student reads of what holds their submission back; the API's `held_by` names it
HELD_BY = {
    "cluster_busy": _l(
        "Waiting for the cluster to start grading it: the cluster is busy. It keeps its "
        "place; nothing is lost. Should the cluster not start it in time, it is marked a "
        "grader error (never a zero) for the course's staff to grade again."
    ),
    "cluster_maintenance": _l(
        "Waiting for the cluster: the nodes that grade are under maintenance just now, and "
        "grading starts once they are back. It keeps its place; nothing is lost. Should they "
        "not be back in time, it is marked a grader error (never a zero) for the course's "
        "staff to grade again."
    ),
    "cluster_resting": _l(
        "The cluster is not taking new jobs just now: grading goes on by itself "
        "once it does. It keeps its place; nothing is lost."
    ),
    "slow": _l(
        "Grading is slower than usual; your submission is safe and keeps its place in the queue."
    ),
    Fault.spool_full.value: _l(
        "Grading is paused: the grading service's disk is full, and its staff have been "
        "told. It starts again by itself once there is room. It keeps its place; nothing "
        "is lost."
    ),
    Fault.cluster_away.value: _l(
        "The cluster does not answer just now, so the end of its grading is not seen yet: "
        "it goes on by itself once the cluster answers. Nothing is lost."
    ),
    Fault.schedule_stopped.value: _l(
        "Its result waits to be collected: the part of the grading service that collects "
        "results has stopped, and its staff have been told. Nothing is lost."
    ),
}


def _said(held_by: str | None) -> str | None:
    return str(HELD_BY[held_by]) if held_by else None


# how far back the grading rate is measured, the fewest finished runs it is worth an estimate
# from, and how long without any run starting or finishing counts as a stall
PACE_WINDOW = dt.timedelta(minutes=10)
PACE_FEWEST_RUNS = 3
STALL_AFTER = dt.timedelta(seconds=60)
_PACE_KEPT_SECONDS = 2.0  # every waiting page asks; the service's pace is read once in a while


class Pace(NamedTuple):
    """The service's grading lately: runs finished in the last PACE_WINDOW, when a run last
    started or finished (None: none in the window), and whether the cluster is not taking jobs
    (sbatch refused the last, worker/grading/cluster_state.py)."""

    finished: int
    last_moved: dt.datetime | None
    read_at: dt.datetime
    cluster_resting: bool = False
    faults: frozenset[Fault] = frozenset()  # server/core/conditions.py: what holds now

    def seconds_for(self, position: int) -> int | None:
        """Seconds until the submission at `position` is graded, at the recent rate."""
        if self.finished < PACE_FEWEST_RUNS:
            return None
        return math.ceil(position * PACE_WINDOW.total_seconds() / self.finished)

    def stalled_since(self, submitted_at: dt.datetime) -> bool:
        """Nothing moved since a while before now, and the submission has waited that long."""
        before = self.read_at - STALL_AFTER
        return aware(submitted_at) < before and (
            self.last_moved is None or aware(self.last_moved) < before
        )


_pace_kept: tuple[float, Pace] | None = None


def recent_pace(session: Session) -> Pace:
    global _pace_kept
    if _pace_kept is not None and time.monotonic() - _pace_kept[0] < _PACE_KEPT_SECONDS:
        return _pace_kept[1]
    now = utcnow()
    since = now - PACE_WINDOW
    resting = (
        select(ClusterState.resting_until)
        .where(ClusterState.executor == app_settings().executor)
        .scalar_subquery()
    )
    finished, started_last, finished_last, resting_until = session.execute(
        select(
            func.count(GradingRun.finished_at).filter(GradingRun.finished_at > since),
            func.max(GradingRun.started_at),
            func.max(GradingRun.finished_at),
            resting,
        ).where(or_(GradingRun.started_at > since, GradingRun.finished_at > since))
    ).one()
    moved = [aware(t) for t in (started_last, finished_last) if t is not None]
    pace = Pace(
        finished,
        max(moved, default=None),
        now,
        resting_until is not None and aware(resting_until) > now,
        frozenset(conditions.current(session)),
    )
    _pace_kept = (time.monotonic(), pace)
    return pace


def _estimate_text(seconds: int | None) -> str | None:
    if seconds is None:
        return None
    if seconds < 60:
        return _("about a minute or less")
    minutes = math.ceil(seconds / 60)
    return ngettext("about %(num)s minute", "about %(num)s minutes", minutes)


class ResultCache:
    """Finished submissions' results as JSON, per process. A result changes only with the
    submission's status, a new grading run, an instructor's score or a late penalty worked out
    again (an allowance granted or removed), and all are part of the key."""

    def __init__(self, size: int = 4096):
        self._bodies: dict[tuple, str] = {}
        self._size = size

    def get_or_build(self, session: Session, state: SubmissionState, lang: str) -> str:
        if state.status in WAITING:
            return _json(submission_dict(session, state, lang))
        key = (
            state.id,
            state.status,
            state.done_run_id,
            state.override_at,
            state.late_days,
            state.penalty,
            lang,
        )
        body = self._bodies.get(key)
        if body is None:
            if len(self._bodies) >= self._size:
                self._bodies.clear()
            body = self._bodies[key] = _json(submission_dict(session, state, lang))
        return body


def _json(data: dict) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def submission_dict(session: Session, state: SubmissionState, lang: str) -> dict:
    """The submission as its student sees it: two queries while it waits, four once graded."""
    data = {
        "id": state.id,
        "exercise": state.exercise,
        "filename": state.filename,
        "status": state.status,
        "submitted_at": state.submitted_at.isoformat(),
        **waiting(session, state, lang),
        # `score` is the automatic one; `counted_score` the one that counts (an instructor's)
        "score": state.score,
        "counted_score": state.counted_score,
        "max_score": state.max_score,
        "late_days": state.late_days,
        "penalty": state.penalty,
        "override": None
        if state.override_score is None
        else {
            "score": state.override_score,
            "comment": state.override_comment,
            "at": state.override_at.isoformat(),
            # the adjuster's role ("ta", "instructor"); None once they left the course
            "by": role_in(session, state.override_by, state.course_id)
            if state.override_by is not None
            else None,
        },
        "checks": [],
        "notes": [],
        "output": "",
    }
    if state.status == SubmissionStatus.cancelled.value:
        data["message"] = _(
            "The instructors stopped the grading of this submission; this is not a grade."
        )
    if state.status == SubmissionStatus.error.value:
        data["message"] = _(
            "The grader failed repeatedly; your submission is kept and the "
            "instructors will look at it. This is not a grade."
        )
    if state.done_run_id is not None:
        run = session.get(GradingRun, state.done_run_id, options=_CHECKS)
        data["checks"] = [
            {
                "name": c.name,
                "title": (c.titles or {}).get(lang, c.title),
                "points": c.points,
                "max_points": c.max_points,
                "passed": c.passed,
                "diagnostics": [
                    {
                        "code": d.code,
                        "details": d.details,
                        **d.translations.get(lang, {"message": d.message, "hint": d.hint}),
                    }
                    for d in c.diagnostics
                ],
            }
            for c in run.checks
        ]
        data["notes"] = [_localised(note, lang) for note in run.notes or []]
        data["output"] = run.output or ""
    return data


def _localised(note: dict, lang: str) -> dict:
    """A note in the reader's language: a load error and advice carry their text in each (the
    harness's)."""
    texts = (
        (note.get("translations") or {}).get(lang)
        if note.get("kind") in (LOAD_ERROR, ADVICE)
        else None
    )
    return dict(note, **texts) if texts else note


def exercise_rows(session: Session, user: User, course_id: int) -> list[dict]:
    """The course's active exercises in course order with the user's grade (grades.Grade),
    attempts used and left, and the deadline and attempt limit the user has: the exercise's,
    with their accommodation and allowance (`terms`: grades.terms). What they sent to another
    course's exercises is not read."""
    grades: dict[int, Grade] = defaultdict(Grade)
    used: dict[int, int] = defaultdict(int)
    of_course = select(Exercise.id).where(Exercise.course_id == course_id)
    for row in session.execute(
        select(
            Submission.exercise_id,
            Submission.id,
            Submission.counted_score,
            Submission.max_score,
            Submission.override_score,
            COUNTS_AS_ATTEMPT.label("counts"),
        )
        .where(Submission.user_id == user.id, Submission.exercise_id.in_(of_course))
        .order_by(Submission.id)
    ):
        grades[row.exercise_id].add(
            row.id, row.counted_score, row.max_score, row.override_score is not None
        )
        used[row.exercise_id] += bool(row.counts)
    for row in session.scalars(
        select(SetGrade).where(SetGrade.user_id == user.id, SetGrade.exercise_id.in_(of_course))
    ):
        grades[row.exercise_id].set_by(row, None)  # the pages show it out of the exercise's points
    active = list(
        session.scalars(
            select(Exercise)
            .where(Exercise.course_id == course_id, Exercise.active)
            .order_by(Exercise.position, Exercise.slug)
        )
    )
    granted = terms_of(session, user.id, active)
    rows = []
    for exercise in active:
        mine = granted[exercise.id]
        rows.append(
            {
                "exercise": exercise,
                "deadline": mine.deadline,
                "terms": mine,
                "grade": grades[exercise.id],
                "attempts_used": used[exercise.id],
                "max_attempts": mine.max_attempts,
                "attempts_left": mine.attempts_left(used[exercise.id]),
            }
        )
    return rows


class CodeLine(NamedTuple):
    number: int
    text: str
    anchor: str  # the line's id in the page, for a diagnostic's link to it
    marked: bool  # a diagnostic or a note names this line


class CodeCell(NamedTuple):
    name: str | None  # "cell 3" in the reader's language; None for a .py file
    lines: list[CodeLine]


def page_view(submission: Submission, result: dict) -> dict:
    """What the result page shows besides the API's answer: why the file did not load (once, for
    the top of the page), the checks that failed (for a summary there), each diagnostic's and
    note's place in the student's own file ("work.py, line 3", "pasted code"), each hint once
    (a later diagnostic with the same hint shows none), the attempts the student has left, and
    the code line by line with the lines they name marked."""
    cells = code_cells(submission)
    anchors = {
        (label, number): f"line-{index}-{number}"
        for index, (label, code) in enumerate(cells, start=1)
        for number in range(1, code.count("\n") + 2)
    }
    hints_given: set[str] = set()

    def placed(item: dict, label: str | None, line: int | None, with_file: bool = True) -> dict:
        return dict(
            item,
            place=where(submission.filename if with_file else None, label, line),
            anchor=anchors.get((label, line)),
        )

    def hinted(item: dict) -> dict:
        hint = item.get("hint")
        repeated = hint in hints_given
        hints_given.add(hint)
        return dict(item, hint=None if repeated else hint)

    load_errors = [
        hinted(placed(n, n["details"].get("file"), n["details"].get("line")))
        for n in result["notes"]
        if n.get("kind") == "load-error"
    ]
    checks = [
        dict(
            c,
            anchor=f"check-{number}",
            diagnostics=[
                hinted(
                    placed(d, d["details"].get("file"), d["details"].get("line"))
                    if d["details"].get("line")
                    else d
                )
                for d in c["diagnostics"]
            ],
        )
        for number, c in enumerate(result["checks"], start=1)
    ]
    notes = [
        placed(n, n.get("cell"), _raised_at(n), with_file=False)
        for n in result["notes"]
        if n.get("kind") != "load-error"
    ]
    marked = {item["anchor"] for item in load_errors + notes if item["anchor"]} | {
        d["anchor"] for c in checks for d in c["diagnostics"] if d.get("anchor")
    }
    # the lines a hint names besides its diagnostic's own: where the code leaves the graph
    marked |= {
        anchors[cell, line]
        for c in checks
        for d in c["diagnostics"]
        for _kind, cell, line in d["details"].get("left_at", [])
        if (cell, line) in anchors
    }
    notebook = submission.filename.lower().endswith(".ipynb")
    return {
        "file": shown_name(submission.filename),
        "load_errors": load_errors,
        "checks": checks,
        "failed": [c for c in checks if not c["passed"]],
        "attempts_left": _attempts_left(submission),
        "notes": notes,
        "marked": bool(marked),
        "cells": [
            CodeCell(
                where(None, label, None) if notebook else None,
                [
                    CodeLine(number, text, anchors[label, number], anchors[label, number] in marked)
                    for number, text in enumerate(code.removesuffix("\n").split("\n"), start=1)
                ],
            )
            for label, code in cells
        ],
    }


def _attempts_left(submission: Submission) -> int | None:
    """The attempts its student has left at the exercise, with their accommodation and
    allowance; None: no limit."""
    session = object_session(submission)
    used = session.scalar(
        select(func.count())
        .select_from(Submission)
        .where(
            Submission.user_id == submission.user_id,
            Submission.exercise_id == submission.exercise_id,
            COUNTS_AS_ATTEMPT,
        )
    )
    return student_terms(session, submission.user_id, submission.exercise).attempts_left(used)


def _raised_at(note: dict) -> int | None:
    """The line of a notebook cell that raised, when it raised in that cell's own code."""
    frames = note.get("frames") or [{}]
    return frames[-1].get("line") if frames[-1].get("file") == note.get("cell") else None


def code_cells(submission: Submission) -> list[tuple[str, str]]:
    """The code as its student wrote it, with the grader's names: a .py file, or a notebook's
    code cells ("cell 3"), their magics as written, not as the grader rewrote them to skip them
    (`pass  # neutralised: …`, on the same line numbers)."""
    try:
        source = read(submission.code, submission.filename, len(submission.code))
    except Unreadable as exc:  # stored before such files were refused
        return [(submission.filename, exc.es if get_locale().language == "es" else exc.en)]
    if not source.notebook:
        return list(source.cells)
    written = json.loads(submission.code.decode("utf-8-sig"))["cells"]
    return [
        (label, _joined(written[int(label.removeprefix("cell ")) - 1].get("source", "")))
        for label, _rewritten in source.cells
    ]


def _joined(source: list[str] | str) -> str:
    return "".join(source) if isinstance(source, list) else str(source)

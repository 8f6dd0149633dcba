"""A regrade's preview as data: starting one (its preview runs), the rows its page shows (each
student's grade old → new), publishing it in one transaction and discarding it. The pages are
server/web/regrade.py's.

A preview run becomes its submission's result only when published, through the same step as a
normal grade (server/core/grades.py `take`: the submission's own late penalty applied). A
submission graded again normally since the preview started keeps its newer grade.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session, contains_eager, defer, load_only, selectinload

from server.core.catalogue import current_info
from server.core.config import app_settings
from server.core.courses import exercise_folder
from server.core.grades import DONE_RUN, Grade, maximum_points, penalised
from server.core.models import (
    Exercise,
    GradingRun,
    Regrade,
    RunStatus,
    SetGrade,
    Submission,
    SubmissionStatus,
    User,
)
from server.core.names import by_family_name
from server.core.runs import discard_previews, publish_preview, start_previews
from server.web.course import by_students
from server.web.results import WAITING

SAME_SCORE = 1e-9
# the submissions a preview grades: those with a grade, or a grader error to make good
FINISHED = (SubmissionStatus.graded.value, SubmissionStatus.error.value)
# how long a preview's runs may wait for a worker before its page calls them stalled: longer
# than a student's submission waits to be sent again (REQUEUE_AFTER_SECONDS), because the
# preview task waits on its own queue for a free worker process, and every process may be
# grading (a local worker grades a whole submission in its task; another preview holds one for
# its whole length): a busy queue is no reason to offer to start it again
PREVIEW_PICKUP_SECONDS = 600
# what the preview's page reads of a run: not its report (checks, output, environment)
PREVIEW_RUN_COLUMNS = (
    GradingRun.submission_id,
    GradingRun.attempt,
    GradingRun.status,
    GradingRun.score,
    GradingRun.max_score,
    GradingRun.error,
    GradingRun.lease_until,
    GradingRun.worker,
)


@dataclass(frozen=True)
class Previewed:
    """One submission of a preview: its automatic score (after its late penalty) before, and with
    the preview's run; its counted score (grades.Grade) is an instructor's adjustment, where one
    was made, both before and after."""

    submission: Submission  # its code left in the database
    run: GradingRun
    old_score: float | None
    old_max: float | None
    new_score: float | None  # None while the run is graded
    new_max: float | None

    @property
    def adjusted(self) -> bool:
        return self.submission.override_score is not None

    @property
    def pending(self) -> bool:
        return self.run.status == RunStatus.previewing.value

    @property
    def old(self) -> float | None:
        return self.submission.override_score if self.adjusted else self.old_score

    @property
    def new(self) -> float | None:
        return self.submission.override_score if self.adjusted else self.new_score

    @property
    def changed(self) -> bool:
        return not self.pending and _differ(self.old, self.new)


@dataclass(frozen=True)
class Untouched:
    """A submission the preview leaves as it is (waiting, stopped, or sent since it started)."""

    id: int
    counted_score: float | None
    max_score: float | None
    adjusted: bool


@dataclass(frozen=True)
class StudentRow:
    """One student of a preview: their grade on the exercise as it is and as the preview would
    make it (None until all their submissions are graded), and their previewed submissions."""

    user: User
    previewed: tuple[Previewed, ...]
    old: Grade
    new: Grade | None

    @property
    def change(self) -> float | None:
        if self.new is None or self.old.score is None or self.new.score is None:
            return None
        return self.new.score - self.old.score

    @property
    def changed(self) -> int:
        return sum(p.changed for p in self.previewed)

    @property
    def grade_changed(self) -> bool:
        """Whether the preview gives them another grade on the exercise (once all is graded)."""
        return self.new is not None and _differ(self.old.score, self.new.score)

    @property
    def statuses(self) -> list[str]:
        """What their submissions' runs are at, each said once (template: staff/regrade.html)."""
        return list(dict.fromkeys(p.run.status for p in self.previewed))


@dataclass(frozen=True)
class Summary:
    total: int  # the preview's runs
    graded: int  # the runs that finished, failed ones included
    unchanged: int  # students, once all their submissions are graded
    up: int
    down: int
    first: int  # a grade where there was none (grader errors before)
    changed: int  # submissions whose counted score changed
    failed: int  # runs
    mean_change: float | None  # of the students' grades


@dataclass(frozen=True)
class ExerciseVersions:
    """Which files of the exercise gave the grades the preview would replace, and which grade
    the preview: version (GradingRun.exercise_version) -> submissions, and the commits known."""

    before: dict[str, int]
    after: dict[str, int]
    commits: dict[str, str]

    @property
    def changed(self) -> bool:
        """False too where the grades before say nothing of their files (graded before runs
        recorded them)."""
        return bool(self.after and self.before) and set(self.after) != set(self.before)


def exercise_versions(session: Session, regrade: Regrade) -> ExerciseVersions:
    previewed = select(GradingRun.submission_id).where(GradingRun.regrade_id == regrade.id)
    runs = session.execute(
        select(
            GradingRun.submission_id,
            GradingRun.regrade_id,
            GradingRun.status,
            GradingRun.exercise_version,
            GradingRun.exercise_commit,
        )
        .where(GradingRun.submission_id.in_(previewed))
        .order_by(GradingRun.attempt)
    )
    before: dict[int, str] = {}  # submission -> the version of its latest grade before the preview
    after: Counter[str] = Counter()
    commits: dict[str, str] = {}
    reached: set[int] = set()  # submissions whose preview run came: later runs are not "before"
    for run in runs:
        if run.exercise_commit:
            commits[run.exercise_version] = run.exercise_commit
        if run.regrade_id == regrade.id:
            reached.add(run.submission_id)
            after.update([run.exercise_version] if run.exercise_version else [])
        elif (
            run.status == RunStatus.done.value
            and run.exercise_version
            and run.submission_id not in reached
        ):
            before[run.submission_id] = run.exercise_version
    return ExerciseVersions(dict(Counter(before.values())), dict(after), commits)


def files_now(exercise: Exercise) -> str | None:
    """The fingerprint of the exercise's files as its folder holds them now (what a worker
    grades with: jobs.exercise_version), or as last synced where the folder cannot be read."""
    info = current_info(exercise_folder(exercise))
    return info.version if info is not None else exercise.version


def is_stale(regrade: Regrade, exercise: Exercise) -> bool:
    """Whether the exercise's files changed after the preview started: its grades are not
    those of the checks as they are now, and it may not be published. A preview started before
    previews kept their files' fingerprint says nothing either way."""
    return (
        regrade.published_at is None
        and regrade.exercise_version is not None
        and files_now(exercise) not in (None, regrade.exercise_version)
    )


@dataclass(frozen=True)
class Regraded:
    """A submission whose score a published regrade changed: when, and from what to what
    (after its late penalty), for the student's pages."""

    at: dt.datetime
    was: float | None
    now: float | None
    max_score: float | None


def regraded(session: Session, submission_ids: list[int]) -> dict[int, Regraded]:
    """submission id → how a published regrade changed its score, for those whose result (their
    latest finished run) is a regrade's run with another score than the result it replaced.
    Two queries, however many submissions."""
    current = session.execute(
        select(Submission.id, Submission.penalty, Submission.score, Submission.max_score)
        .add_columns(Regrade.published_at, GradingRun.attempt)
        .join(GradingRun, GradingRun.id == DONE_RUN)
        .join(Regrade, Regrade.id == GradingRun.regrade_id)
        .where(Submission.id.in_(submission_ids), Regrade.published_at.is_not(None))
    ).all()
    if not current:
        return {}
    published_attempt = {row.id: row.attempt for row in current}
    before: dict[int, tuple[int, float | None]] = {}  # the latest finished run before it
    for run in session.execute(
        select(GradingRun.submission_id, GradingRun.attempt, GradingRun.score).where(
            GradingRun.submission_id.in_(list(published_attempt)),
            GradingRun.status == RunStatus.done.value,
        )
    ):
        latest = before.get(run.submission_id, (-1, None))[0]
        if latest < run.attempt < published_attempt[run.submission_id]:
            before[run.submission_id] = (run.attempt, run.score)
    found = {}
    for row in current:
        score = before.get(row.id, (None, None))[1]
        was = None if score is None else penalised(score, row.penalty)
        if _differ(was, row.score):
            found[row.id] = Regraded(row.published_at, was, row.score, row.max_score)
    return found


def _differ(old: float | None, new: float | None) -> bool:
    if old is None or new is None:
        return old is not new
    return abs(new - old) > SAME_SCORE


def open_regrade(session: Session, exercise_id: int) -> Regrade | None:
    """The exercise's preview that is neither published nor discarded (at most one)."""
    return session.scalar(
        select(Regrade).where(
            Regrade.exercise_id == exercise_id,
            Regrade.published_at.is_(None),
            Regrade.discarded_at.is_(None),
        )
    )


class AlreadyOpen(Exception):
    """The exercise has a preview open: publish or discard it before another starts."""

    def __init__(self, regrade: Regrade):
        super().__init__(f"regrade {regrade.id} is open")
        self.regrade = regrade


def start(session: Session, exercise: Exercise, user: User, now: dt.datetime) -> Regrade | None:
    """A regrade of the exercise with a preview run for every finished submission of every
    student of its course (a grade may come from any of them), waiting for a worker; None when there is
    nothing to grade. The exercise is locked before its open preview is looked for, so that two
    instructors clicking at once open one preview, not two: the second waits for the first's
    commit, then finds its preview (AlreadyOpen). The submissions are locked so that no "Grade
    again" numbers a run of theirs meanwhile."""
    session.get(Exercise, exercise.id, with_for_update=True)
    already = open_regrade(session, exercise.id)
    if already is not None:
        raise AlreadyOpen(already)
    finished = select(Submission.id).where(
        by_students(exercise.course_id, exercise.id), Submission.status.in_(FINISHED)
    )
    submission_ids = session.scalars(
        finished.order_by(Submission.id).with_for_update(of=Submission)
    ).all()
    if not submission_ids:
        return None
    last_attempt = dict(
        session.execute(
            select(GradingRun.submission_id, func.max(GradingRun.attempt))
            .where(GradingRun.submission_id.in_(finished))
            .group_by(GradingRun.submission_id)
        ).all()
    )
    regrade = Regrade(
        exercise_id=exercise.id,
        started_by=user.id,
        started_at=now,
        exercise_version=files_now(exercise),
    )
    session.add(regrade)
    session.flush()
    start_previews(
        session,
        regrade.id,
        {i: last_attempt.get(i, 0) + 1 for i in submission_ids},
        app_settings().executor,
        now,
        waits_until=now + dt.timedelta(seconds=PREVIEW_PICKUP_SECONDS),
    )
    return regrade


def preview_rows(session: Session, regrade: Regrade) -> list[StudentRow]:
    """The regrade's students, by family name then given name (server/core/names.py), with their
    grades before and after. The page reads
    them every few seconds while they are graded: a fixed number of queries however many
    students, and the submissions' code and the runs' reports stay in the database."""
    runs = _runs(session, regrade)
    users = {run.submission.user_id: run.submission.user for run in runs}
    others = _untouched(session, regrade, {run.submission_id for run in runs}, list(users))
    set_grades = {
        row.user_id: row
        for row in session.scalars(
            select(SetGrade).where(
                SetGrade.exercise_id == regrade.exercise_id, SetGrade.user_id.in_(users)
            )
        )
    }
    out_of = maximum_points(session, [session.get(Exercise, regrade.exercise_id)])
    replaced = _replaced(session, regrade) if regrade.published_at is not None else None
    by_user: dict[int, list[Previewed]] = defaultdict(list)
    for run in runs:
        by_user[run.submission.user_id].append(_previewed(run, regrade, replaced))
    max_points = out_of[regrade.exercise_id]
    return [
        _student_row(
            users[user_id], previewed, others[user_id], set_grades.get(user_id), max_points
        )
        for user_id, previewed in sorted(
            by_user.items(), key=lambda item: by_family_name(users[item[0]])
        )
    ]


def _runs(session: Session, regrade: Regrade) -> list[GradingRun]:
    """The regrade's runs, with their submissions and students, by submission."""
    submission = contains_eager(GradingRun.submission)
    return list(
        session.scalars(
            select(GradingRun)
            .join(Submission)
            .join(User, Submission.user_id == User.id)
            .where(GradingRun.regrade_id == regrade.id)
            .order_by(Submission.id)
            .options(
                load_only(*PREVIEW_RUN_COLUMNS),
                submission.defer(Submission.code),
                submission.contains_eager(Submission.user),
            )
        )
    )


def _untouched(
    session: Session, regrade: Regrade, previewed: set[int], user_ids: list[int]
) -> dict[int, list[Untouched]]:
    """user id → their submissions of the exercise that are not in the preview: they count in
    their grade before and after alike."""
    others: dict[int, list[Untouched]] = defaultdict(list)
    for row in session.execute(
        select(
            Submission.id,
            Submission.user_id,
            Submission.counted_score,
            Submission.max_score,
            Submission.override_score,
        ).where(Submission.exercise_id == regrade.exercise_id, Submission.user_id.in_(user_ids))
    ):
        if row.id not in previewed:
            others[row.user_id].append(
                Untouched(row.id, row.counted_score, row.max_score, row.override_score is not None)
            )
    return others


def _replaced(session: Session, regrade: Regrade) -> dict[int, tuple[float | None, float | None]]:
    """A published regrade: preview run id → the score and maximum of the result it replaced,
    its submission's latest "done" run before it (runs recorded since runs keep their score)."""
    runs = session.execute(
        select(
            GradingRun.id,
            GradingRun.submission_id,
            GradingRun.attempt,
            GradingRun.score,
            GradingRun.max_score,
            GradingRun.regrade_id,
        )
        .where(
            GradingRun.status == RunStatus.done.value,
            GradingRun.submission_id.in_(
                select(GradingRun.submission_id).where(GradingRun.regrade_id == regrade.id)
            ),
        )
        .order_by(GradingRun.submission_id, GradingRun.attempt)
    ).all()
    replaced, before = {}, {}
    for run in runs:
        if run.regrade_id == regrade.id:
            replaced[run.id] = before.get(run.submission_id, (None, None))
        before[run.submission_id] = (run.score, run.max_score)
    return replaced


def _previewed(
    run: GradingRun, regrade: Regrade, replaced: dict[int, tuple[float | None, float | None]] | None
) -> Previewed:
    """The run's submission before (as it is; once published, the result the run replaced) and
    after: the run's score once graded; a failed run, or one not published (its submission was
    graded again meanwhile), leaves the submission's."""
    submission = run.submission
    old_score, old_max = submission.score, submission.max_score
    if replaced is not None and run.status == RunStatus.done.value:
        score, old_max = replaced[run.id]
        old_score = None if score is None else penalised(score, submission.penalty)
    if run.status == RunStatus.previewing.value:
        new_score = new_max = None
    elif run.score is not None and (
        run.status == RunStatus.done.value
        or (run.status == RunStatus.preview.value and regrade.published_at is None)
    ):
        new_score, new_max = penalised(run.score, submission.penalty), run.max_score
    else:
        new_score, new_max = submission.score, submission.max_score
    return Previewed(submission, run, old_score, old_max, new_score, new_max)


def _student_row(
    user: User,
    previewed: list[Previewed],
    others: list[Untouched],
    set_grade: SetGrade | None,
    max_points: float | None,
) -> StudentRow:
    old, new = Grade(), Grade()
    for p in previewed:
        old.add(p.submission.id, p.old, p.old_max, p.adjusted)
        new.add(p.submission.id, p.new, p.new_max, p.adjusted)
    for other in others:
        for grade in (old, new):
            grade.add(other.id, other.counted_score, other.max_score, other.adjusted)
    for grade in (old, new):
        grade.set_by(set_grade, max_points)
    pending = any(p.pending for p in previewed)
    return StudentRow(user, tuple(previewed), old, None if pending else new)


def summarise(rows: list[StudentRow]) -> Summary:
    previewed = [p for row in rows for p in row.previewed]
    finished = [p for p in previewed if not p.pending]
    graded = [row for row in rows if row.new is not None]
    changes = [row.change for row in graded if row.change is not None]
    return Summary(
        total=len(previewed),
        graded=len(finished),
        unchanged=sum(1 for row in graded if not _differ(row.old.score, row.new.score)),
        up=sum(1 for c in changes if c > SAME_SCORE),
        down=sum(1 for c in changes if c < -SAME_SCORE),
        first=sum(1 for row in graded if row.old.score is None and row.new.score is not None),
        changed=sum(p.changed for p in finished),
        failed=sum(1 for p in finished if p.run.status == RunStatus.failed.value),
        mean_change=sum(changes) / len(changes) if changes else None,
    )


def stalled(rows: list[StudentRow], now: dt.datetime) -> bool:
    """Whether runs wait that no worker holds (never claimed, or their worker stopped)."""
    return any(p.pending and p.run.lease_until < now for row in rows for p in row.previewed)


def publish(session: Session, regrade: Regrade, now: dt.datetime) -> tuple[int, int]:
    """Every graded preview run becomes its submission's result, in this one transaction;
    (published, skipped: graded again normally since the preview started)."""
    published = skipped = 0
    graded = (GradingRun.regrade_id == regrade.id, GradingRun.status == RunStatus.preview.value)
    runs = session.scalars(
        select(GradingRun).where(*graded).order_by(GradingRun.submission_id)
    ).all()
    # locked and read again, with their runs: the preview's rows loaded them before a "Grade
    # again" may have reopened one, and the lock alone keeps the session's stale copy of them
    submissions = {
        submission.id: submission
        for submission in session.scalars(
            select(Submission)
            .where(Submission.id.in_(select(GradingRun.submission_id).where(*graded)))
            .order_by(Submission.id)
            .with_for_update(of=Submission)
            .options(defer(Submission.code), selectinload(Submission.runs))
            .execution_options(populate_existing=True)
        )
    }
    for run in runs:
        if graded_since(submissions[run.submission_id], run):
            skipped += 1
        else:
            publish_preview(run)
            published += 1
    regrade.published_at = now
    return published, skipped


def graded_since(submission: Submission, run: GradingRun) -> bool:
    """Whether the submission was sent to be graded again, or graded, after the preview run."""
    return submission.status in WAITING or any(
        r.status == RunStatus.done.value and r.attempt > run.attempt for r in submission.runs
    )


def run_counts(session: Session, regrade_id: int) -> Counter[str]:
    """How many of the regrade's runs are at each status."""
    return Counter(
        dict(
            session.execute(
                select(GradingRun.status, func.count())
                .where(GradingRun.regrade_id == regrade_id)
                .group_by(GradingRun.status)
            ).all()
        )
    )


def discard(session: Session, regrade: Regrade, now: dt.datetime) -> None:
    """The preview is dropped; its runs still waiting are cancelled (a worker grading them
    stops, and records nothing)."""
    regrade.discarded_at = now
    discard_previews(session, regrade.id, now)

"""The service's tables: users, exercises, submissions, grading runs and their results."""

from __future__ import annotations

import datetime as dt
import enum

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.ext.hybrid import hybrid_property
from sqlalchemy.orm import Mapped, mapped_column, relationship

from server.core.db import Base


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def aware(moment: dt.datetime) -> dt.datetime:
    """A stored time in UTC, as everything stored: SQLite gives datetimes back naive (and
    func.coalesce loses the column's type there)."""
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


class CourseRole(str, enum.Enum):
    """A user's role in one course (an admin, global, is an instructor of every course)."""

    student = "student"
    ta = "ta"  # grades by hand and grants exceptions; changes no exercise or setting
    instructor = "instructor"


STAFF_ROLES = (CourseRole.ta.value, CourseRole.instructor.value)


class AuthSource(str, enum.Enum):
    """Who vouches for a user at log-in; a user has one, never two."""

    local = "local"  # a password of hpcgrade's own (the demo, guests, break-glass admins)
    ldap = "ldap"  # a bind as the user against the centre's directory
    oidc = "oidc"  # the centre's OpenID Connect provider


class SubmissionStatus(str, enum.Enum):
    queued = "queued"
    running = "running"
    graded = "graded"
    error = "error"  # the grader failed for good; never shown as a zero
    cancelled = "cancelled"  # staff stopped its grading (or its Slurm job was cancelled)


class RunStatus(str, enum.Enum):
    """A grading run's: a submission's runs go from running to one of the four after it; a
    regrade's preview runs (worker/grading/preview.py) have statuses of their own, so that
    nothing that looks for a submission's live run or its result ever takes one of them."""

    running = "running"  # its worker, or its job on the cluster, grades it
    done = "done"  # graded: the latest is its submission's result
    failed = "failed"  # the grader failed (a preview's too), or the cluster cannot run it
    lost = "lost"  # its worker died, or its job ended without its report
    cancelled = "cancelled"  # staff stopped its grading
    previewing = "previewing"  # a regrade's preview run, not graded yet
    preview = "preview"  # a regrade's preview run, graded: its new score, until published


class Course(Base):
    """One course in one edition: its exercises' folder, its course venv, its Slurm settings
    and job names, its default late policy. Archived, it is read-only and still shown."""

    __tablename__ = "courses"

    id: Mapped[int] = mapped_column(primary_key=True)
    slug: Mapped[str] = mapped_column(String(64), unique=True)
    title_en: Mapped[str] = mapped_column(String(200))
    title_es: Mapped[str] = mapped_column(String(200))
    edition: Mapped[str] = mapped_column(String(64), default="", server_default="")
    timezone: Mapped[str | None] = mapped_column(String(64))  # None: the service's TIMEZONE
    # None: the service's exercises folder (HPCGRADE_EXERCISES, else exercises/)
    exercises_dir: Mapped[str | None] = mapped_column(String(1024))
    course_python: Mapped[str | None] = mapped_column(String(1024))  # None: COURSE_PYTHON
    # a `[slurm]`-like table over the service's SLURM_* settings; an exercise's goes on top
    slurm: Mapped[dict] = mapped_column(JSON, default=dict)
    # the policy and penalty of an exercise whose `[deadline]` names no policy
    deadline_policy: Mapped[str] = mapped_column(String(16), default="none", server_default="none")
    penalty_per_day: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")
    # how its Slurm jobs are named and accounted; None: hpcgrade-<slug>, "hpcgrade <slug>", slug
    job_name: Mapped[str | None] = mapped_column(String(64))
    job_comment: Mapped[str | None] = mapped_column(String(255))
    wckey: Mapped[str | None] = mapped_column(String(64))
    # role → the directory's (or the OpenID provider's) group names whose members it enrols
    directory_groups: Mapped[dict] = mapped_column(JSON, default=dict)
    # accommodations are its instructors' to grant, and its teaching assistants' too if this is set
    tas_grant_accommodations: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default="0"
    )
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    archived_at: Mapped[dt.datetime | None] = mapped_column()

    def title(self, lang: str) -> str:
        return self.title_es if lang == "es" else self.title_en


class User(Base):
    __tablename__ = "users"
    __table_args__ = (
        CheckConstraint("auth_source IN ('local', 'ldap', 'oidc')", name="auth_source"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(String(64), unique=True)
    # the full name pages show; the given and family names are kept apart for lists to sort by
    # family name (server/core/names.py)
    name: Mapped[str] = mapped_column(String(200))
    given_name: Mapped[str] = mapped_column(String(200), default="", server_default="")
    family_name: Mapped[str] = mapped_column(String(200), default="", server_default="")
    email: Mapped[str] = mapped_column(String(254))
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False, server_default="0")
    password_hash: Mapped[str] = mapped_column(String(255))
    auth_source: Mapped[str] = mapped_column(
        String(8), default=AuthSource.local.value, server_default=AuthSource.local.value
    )
    # the OpenID provider's `sub` of the person, once they logged in through it: a username
    # the provider gives to someone else later (renamed, reissued) is not this account
    subject: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    # a session cookie carries the version it was made under: log-out and a new password raise
    # it, which ends every session of the user at once (a copied cookie included)
    session_version: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # the language mail reaches them in: the last one they chose on a page (None: English)
    language: Mapped[str | None] = mapped_column(String(8))
    # notice kind → on/off, for the kinds they changed; the others keep notices.DEFAULTS
    notices: Mapped[dict] = mapped_column(JSON, default=dict)

    submissions: Mapped[list["Submission"]] = relationship(
        back_populates="user", foreign_keys="Submission.user_id"
    )


class Enrolment(Base):
    """A user's place in a course: the role every page, API route and command checks there."""

    __tablename__ = "enrolments"
    __table_args__ = (
        UniqueConstraint("user_id", "course_id"),
        CheckConstraint("role IN ('student', 'ta', 'instructor')", name="role"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"), index=True)
    role: Mapped[str] = mapped_column(String(16), default=CourseRole.student.value)
    # made from the course's directory groups: the next reading of them may change or end it;
    # one made by hand (roster, command line) they never touch
    from_directory: Mapped[bool] = mapped_column(Boolean, default=False, server_default="0")
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    user: Mapped[User] = relationship()
    course: Mapped[Course] = relationship()


class ApiToken(Base):
    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    label: Mapped[str] = mapped_column(String(100), default="", server_default="")
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[dt.datetime] = mapped_column()
    last_used_at: Mapped[dt.datetime | None] = mapped_column()

    user: Mapped[User] = relationship()


class Exercise(Base):
    """A row per folder of its course's exercises, kept in step by `hpcgrade exercises sync`."""

    __tablename__ = "exercises"
    __table_args__ = (UniqueConstraint("course_id", "slug"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id"), index=True)
    slug: Mapped[str] = mapped_column(String(64))
    title_en: Mapped[str] = mapped_column(String(200))
    title_es: Mapped[str] = mapped_column(String(200))
    section: Mapped[str] = mapped_column(String(64), default="")
    deadline: Mapped[dt.datetime | None] = mapped_column()
    deadline_policy: Mapped[str] = mapped_column(String(16), default="none")
    penalty_per_day: Mapped[float] = mapped_column(Float, default=0.0)
    max_attempts: Mapped[int | None] = mapped_column(Integer)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    position: Mapped[int] = mapped_column(Integer, default=0, server_default="0")  # course order
    synced_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    # the files as last synced (jobs.exercise_version) and their git commit, where the folder
    # is a checkout with no change since it
    version: Mapped[str | None] = mapped_column(String(64))
    commit: Mapped[str | None] = mapped_column(String(40))

    course: Mapped[Course] = relationship()


class Submission(Base):
    __tablename__ = "submissions"
    # a client that retries a request (after a time-out or a 500) sends the same key again and
    # gets the first submission back instead of a duplicate
    __table_args__ = (UniqueConstraint("user_id", "idempotency_key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    exercise_id: Mapped[int] = mapped_column(ForeignKey("exercises.id"), index=True)
    filename: Mapped[str] = mapped_column(String(255))
    code: Mapped[bytes] = mapped_column()
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    status: Mapped[str] = mapped_column(
        String(16), default=SubmissionStatus.queued.value, index=True
    )
    submitted_at: Mapped[dt.datetime] = mapped_column(default=utcnow, index=True)
    late_days: Mapped[int] = mapped_column(Integer, default=0)
    penalty: Mapped[float] = mapped_column(Float, default=0.0)
    score: Mapped[float | None] = mapped_column(Float)
    max_score: Mapped[float | None] = mapped_column(Float)
    enqueued_at: Mapped[dt.datetime | None] = mapped_column()
    # runs up to this attempt number do not count toward the retry limit (a staff regrade)
    retry_from: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    idempotency_key: Mapped[str | None] = mapped_column(String(128))
    # an instructor's adjustment of this submission's score (partial credit, a deduction), kept
    # beside the automatic one (which regrades go on updating); the submission then competes
    # with the student's others as any does
    override_score: Mapped[float | None] = mapped_column(Float)
    override_comment: Mapped[str | None] = mapped_column(Text)
    override_by: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    override_at: Mapped[dt.datetime | None] = mapped_column()

    user: Mapped[User] = relationship(back_populates="submissions", foreign_keys=[user_id])
    exercise: Mapped[Exercise] = relationship()
    override_user: Mapped[User | None] = relationship(foreign_keys=[override_by])
    runs: Mapped[list["GradingRun"]] = relationship(
        back_populates="submission", order_by="GradingRun.attempt"
    )

    @hybrid_property
    def counted_score(self) -> float | None:
        """The submission's score that counts: an instructor's adjustment where one was made,
        else the automatic one (after any late penalty). In SQL too: `Submission.counted_score`."""
        return self.override_score if self.override_score is not None else self.score

    @counted_score.inplace.expression
    @classmethod
    def _counted_score_sql(cls):
        return func.coalesce(cls.override_score, cls.score)


class Allowance(Base):
    """One student's exception on one exercise: a later deadline, extra attempts, or both."""

    __tablename__ = "allowances"
    __table_args__ = (UniqueConstraint("user_id", "exercise_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    exercise_id: Mapped[int] = mapped_column(ForeignKey("exercises.id", ondelete="CASCADE"))
    deadline: Mapped[dt.datetime | None] = mapped_column()
    extra_attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    comment: Mapped[str] = mapped_column(Text, default="", server_default="")
    granted_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    granted_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class Accommodation(Base):
    """One student's accommodation in one course, on every exercise of it (a disability plan,
    a part-time job): extra days on each deadline and a factor on each limit of attempts.
    grades.terms applies it, and a per-exercise Allowance on top of it."""

    __tablename__ = "accommodations"
    __table_args__ = (UniqueConstraint("user_id", "course_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"))
    # whole days added to every deadline of the course (the exercises have no publication time
    # that a factor on the time given could apply to)
    extra_days: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # every limit of attempts is max_attempts × this, rounded up; 1: unchanged
    attempts_factor: Mapped[float] = mapped_column(Float, default=1.0, server_default="1")
    comment: Mapped[str] = mapped_column(Text, default="", server_default="")
    granted_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    granted_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class SetGrade(Base):
    """A grade an instructor set for one student on one exercise (a 0 for plagiarism, a grade
    agreed in person): the student's grade there until removed, whatever they submit."""

    __tablename__ = "set_grades"
    __table_args__ = (UniqueConstraint("user_id", "exercise_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    exercise_id: Mapped[int] = mapped_column(ForeignKey("exercises.id", ondelete="CASCADE"))
    score: Mapped[float] = mapped_column(Float)
    comment: Mapped[str] = mapped_column(Text)  # why: the student reads it
    set_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    set_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    setter: Mapped[User | None] = relationship(foreign_keys=[set_by])


class DeadlineReminder(Base):
    """A student was reminded of an exercise's deadline: the reminder goes once."""

    __tablename__ = "deadline_reminders"
    __table_args__ = (UniqueConstraint("user_id", "exercise_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    exercise_id: Mapped[int] = mapped_column(ForeignKey("exercises.id", ondelete="CASCADE"))
    sent_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class Regrade(Base):
    """ "Grade all again" for one exercise: its runs are a preview until an instructor publishes
    them (or discards them)."""

    __tablename__ = "regrades"

    id: Mapped[int] = mapped_column(primary_key=True)
    exercise_id: Mapped[int] = mapped_column(
        ForeignKey("exercises.id", ondelete="CASCADE"), index=True
    )
    started_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    started_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    # the exercise's files when it started (Exercise.version): other files since, it is stale
    exercise_version: Mapped[str | None] = mapped_column(String(64))
    published_at: Mapped[dt.datetime | None] = mapped_column()
    discarded_at: Mapped[dt.datetime | None] = mapped_column()


class SimilarityRun(Base):
    """A comparison of an exercise's counted submissions, one per student, for code alike
    (server/core/similarity.py): requested by a member of the staff, computed by a worker. Its
    pairs are a lead for a person to read, never a grade."""

    __tablename__ = "similarity_runs"

    id: Mapped[int] = mapped_column(primary_key=True)
    exercise_id: Mapped[int] = mapped_column(
        ForeignKey("exercises.id", ondelete="CASCADE"), index=True
    )
    requested_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    requested_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[dt.datetime | None] = mapped_column()
    compared: Mapped[int | None] = mapped_column(Integer)  # submissions, one per student
    # the most alike pairs, most alike first: each with its two submissions, each one's share
    # of code found in the other, and the matching regions of each (character offsets)
    pairs: Mapped[list | None] = mapped_column(JSON)

    requester: Mapped[User | None] = relationship()


class GradingRun(Base):
    """One attempt at grading a submission; a retry after a platform failure is a new run."""

    __tablename__ = "grading_runs"
    # never an id given twice, on SQLite too (which reuses the highest of deleted rows): a run
    # released when sbatch did not answer may still be graded by the job it made late, which
    # must not find another run's folder under that id in the spool
    __table_args__ = (UniqueConstraint("submission_id", "attempt"), {"sqlite_autoincrement": True})

    id: Mapped[int] = mapped_column(primary_key=True)
    submission_id: Mapped[int] = mapped_column(
        ForeignKey("submissions.id", ondelete="CASCADE"), index=True
    )
    attempt: Mapped[int] = mapped_column(Integer)
    executor: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16), default=RunStatus.running.value)
    worker: Mapped[str | None] = mapped_column(String(255))  # the worker that dispatched it
    # where an asynchronous executor runs it (a Slurm job id), and what the cluster last said
    external_id: Mapped[str | None] = mapped_column(String(64))
    job_state: Mapped[str | None] = mapped_column(String(32))
    job_reason: Mapped[str | None] = mapped_column(String(255))  # why it waits (squeue's reason)
    node: Mapped[str | None] = mapped_column(String(255))
    started_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    # another worker may take the submission over once the lease has run out (while the run has
    # no external id: after that, the executor's poll says whether it is still alive)
    lease_until: Mapped[dt.datetime] = mapped_column()
    finished_at: Mapped[dt.datetime | None] = mapped_column()
    error: Mapped[str | None] = mapped_column(Text)
    environment: Mapped[dict | None] = mapped_column(JSON)
    sandbox: Mapped[dict | None] = mapped_column(JSON)
    timing: Mapped[dict | None] = mapped_column(JSON)
    notes: Mapped[list | None] = mapped_column(JSON)
    output: Mapped[str | None] = mapped_column(Text)
    seed: Mapped[int | None] = mapped_column(BigInteger)  # the harness draws 48 bits
    score: Mapped[float | None] = mapped_column(Float)  # before any late penalty
    max_score: Mapped[float | None] = mapped_column(Float)
    # the exercise's files it was graded with (the harness's word: jobs.exercise_version), and
    # their commit where they are those last synced from a checkout
    exercise_version: Mapped[str | None] = mapped_column(String(64))
    exercise_commit: Mapped[str | None] = mapped_column(String(40))
    regrade_id: Mapped[int | None] = mapped_column(
        ForeignKey("regrades.id", ondelete="SET NULL"), index=True
    )  # a preview run's regrade
    # when the course's instructors were mailed that it failed (server/core/notice_rounds.py)
    failure_noticed_at: Mapped[dt.datetime | None] = mapped_column()

    submission: Mapped[Submission] = relationship(back_populates="runs")
    checks: Mapped[list["CheckResult"]] = relationship(
        back_populates="run", order_by="CheckResult.position", cascade="all, delete-orphan"
    )


class CheckResult(Base):
    __tablename__ = "check_results"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(
        ForeignKey("grading_runs.id", ondelete="CASCADE"), index=True
    )
    position: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(128))
    title: Mapped[str] = mapped_column(String(255))
    points: Mapped[float] = mapped_column(Float)
    max_points: Mapped[float] = mapped_column(Float)
    passed: Mapped[bool] = mapped_column(Boolean)
    message: Mapped[str] = mapped_column(Text, default="")
    titles: Mapped[dict | None] = mapped_column(JSON)  # language → title; older runs have none

    run: Mapped[GradingRun] = relationship(back_populates="checks")
    diagnostics: Mapped[list["DiagnosticResult"]] = relationship(
        back_populates="check", cascade="all, delete-orphan"
    )


class DiagnosticResult(Base):
    __tablename__ = "diagnostics"

    id: Mapped[int] = mapped_column(primary_key=True)
    check_id: Mapped[int] = mapped_column(
        ForeignKey("check_results.id", ondelete="CASCADE"), index=True
    )
    code: Mapped[str] = mapped_column(String(64), index=True)
    message: Mapped[str] = mapped_column(Text)
    hint: Mapped[str] = mapped_column(Text)
    details: Mapped[dict] = mapped_column(JSON)
    translations: Mapped[dict] = mapped_column(JSON)

    check: Mapped[CheckResult] = relationship(back_populates="diagnostics")


class MungeCredential(Base):
    """A MUNGE credential a request used (its hash), kept until it could no longer pass: a
    second use is a replay (server/core/munge.py)."""

    __tablename__ = "munge_credentials"

    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    expires_at: Mapped[dt.datetime] = mapped_column(index=True)


class SavedComment(Base):
    """A comment the staff wrote once, to give again when they adjust a score by hand: for one
    exercise, or (no exercise) for every exercise of its course."""

    __tablename__ = "saved_comments"

    id: Mapped[int] = mapped_column(primary_key=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"), index=True)
    exercise_id: Mapped[int | None] = mapped_column(ForeignKey("exercises.id", ondelete="CASCADE"))
    text: Mapped[str] = mapped_column(Text)
    saved_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    saved_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class VisibleCheckStatus(str, enum.Enum):
    queued = "queued"
    running = "running"
    done = "done"  # the checks ran: their report is stored, whatever they found
    failed = "failed"  # the grader could not run them; never a result of the student's code


class VisibleCheck(Base):
    """A student's run of an exercise's visible checks from the portal ("Check"): no attempt, no
    grade, no business of the queue's submissions; its report is shown to its student alone.
    Its status is written by worker/grading/visible_checks.py alone, once the web adds it."""

    __tablename__ = "visible_checks"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    exercise_id: Mapped[int] = mapped_column(ForeignKey("exercises.id", ondelete="CASCADE"))
    filename: Mapped[str] = mapped_column(String(255))
    code: Mapped[bytes] = mapped_column()
    lang: Mapped[str] = mapped_column(String(8), default="en")
    status: Mapped[str] = mapped_column(String(16), default=VisibleCheckStatus.queued.value)
    requested_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    started_at: Mapped[dt.datetime | None] = mapped_column()  # when a worker last took it
    takes: Mapped[int] = mapped_column(Integer, default=0)  # how many times a worker took it
    finished_at: Mapped[dt.datetime | None] = mapped_column()
    report: Mapped[str | None] = mapped_column(Text)  # the harness's report, as JSON

    exercise: Mapped[Exercise] = relationship()


class WorkerHeartbeat(Base):
    """A Celery worker's last heartbeat: a message it sent itself through the broker and took
    back like a task (worker/grading/heartbeat.py). Stale: the worker is gone, or takes nothing."""

    __tablename__ = "worker_heartbeats"

    node: Mapped[str] = mapped_column(String(255), primary_key=True)  # Celery's node name
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[dt.datetime] = mapped_column()
    beat_at: Mapped[dt.datetime] = mapped_column()
    round_trip: Mapped[float] = mapped_column(Float)  # seconds, through the broker and back


class ScheduleRun(Base):
    """When a task of the schedule (Celery beat's) last ran: beat is alive while its reconcile,
    every 30 s, keeps running (worker/grading/tasks.py)."""

    __tablename__ = "schedule_runs"

    task: Mapped[str] = mapped_column(String(64), primary_key=True)
    ran_at: Mapped[dt.datetime] = mapped_column()


class ClusterState(Base):
    """Whether an executor's cluster takes jobs, as the dispatchers last found (one row per
    executor): while sbatch fails in a way that passes, nothing is sent until `resting_until`,
    each failure in a row doubling the wait. Students and operators read it here."""

    __tablename__ = "cluster_states"

    executor: Mapped[str] = mapped_column(String(32), primary_key=True)
    failures: Mapped[int] = mapped_column(Integer, default=0)  # in a row
    resting_until: Mapped[dt.datetime | None] = mapped_column()
    since: Mapped[dt.datetime | None] = mapped_column()  # the first failure of the row
    reason: Mapped[str | None] = mapped_column(Text)  # what sbatch said last


class Condition(Base):
    """A fault of the grading's infrastructure, while it lasts (one row; server/core/conditions.py
    is its one writer): the spool below its floor, the cluster's controller not answering, the
    schedule (Celery beat) stopped. Students' pages and the API say what it means for them."""

    __tablename__ = "conditions"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    since: Mapped[dt.datetime] = mapped_column()
    detail: Mapped[str] = mapped_column(Text, default="")  # for staff and the logs, in English


class Counter(Base):
    """An event count of the service's, for its operators (server/core/counters.py): what no
    other table keeps (mail sent, grader errors by cause, sbatch's refusals…)."""

    __tablename__ = "counters"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    labels: Mapped[str] = mapped_column(String(255), primary_key=True, default="")
    value: Mapped[float] = mapped_column(Float, default=0.0)

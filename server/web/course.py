"""The course as its staff see it: every student's grade per exercise (grades.Grade: the
best score, unless an instructor set the grade), what each exercise is out of, and which
diagnostics the students hit, as plain data for the staff pages and the grade export.

Every figure is one course's: its students (users enrolled in it as students) on its exercises.
A student of two courses counts in each with that course's submissions only; what the staff
submit to try an exercise out counts nowhere."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from sqlalchemy import ColumnElement, Row, Select, Text, case, cast, func, select
from sqlalchemy.orm import Session

from server.core.catalogue import current_info
from server.core.courses import exercise_folder
from server.core.grades import DONE_RUN, Grade, maximum_points
from server.core.models import (
    CheckResult,
    CourseRole,
    DiagnosticResult,
    Enrolment,
    Exercise,
    GradingRun,
    SetGrade,
    Submission,
    SubmissionStatus,
    User,
)
from server.core.names import by_family_name
from server.web.results import WAITING
from server.web.submissions import COUNTS_AS_ATTEMPT
from worker.harness.codes import said_elsewhere
from worker.harness.graph_exits import ways_out_words
from worker.harness.report import LOAD_ERROR

FULL_MARKS_SLACK = 1e-9
# why a file did not load, or lacks a function, is no check's diagnostic: the harness says it
# once, as a note of the run (JSON); this narrows the runs whose notes are read to those that
# may have one
MAY_HAVE_LOAD_ERROR = cast(GradingRun.notes, Text).contains(f'"{LOAD_ERROR}"')


@dataclass
class Standing:
    """One student on one exercise: their grade (grades.Grade) and their latest submission."""

    attempts: int = 0  # as the student's limit counts them (not the submissions staff stopped)
    grade: Grade = field(default_factory=Grade)
    latest_id: int | None = None
    latest_status: str | None = None
    latest_at: dt.datetime | None = None

    @property
    def score(self) -> float | None:
        return self.grade.score

    @property
    def max_score(self) -> float | None:
        return self.grade.max_score


@dataclass
class ExerciseSummary:
    exercise: Exercise
    max_points: float | None = None
    submissions: int = 0
    students: int = 0
    mean_best: float | None = None
    full_marks: int = 0
    waiting: int = 0
    errors: int = 0
    # code → how many students got it on at least one graded submission, most frequent first
    diagnostics: list[tuple[str, int]] = field(default_factory=list)
    # the named mistakes the students made (`mistake_counts`), most students first
    mistakes: list["MistakeCount"] = field(default_factory=list)


def student_ids(course_id: int) -> Select:
    """The ids of the users enrolled in the course as students: the figures are theirs."""
    return select(Enrolment.user_id).where(
        Enrolment.course_id == course_id, Enrolment.role == CourseRole.student.value
    )


def exercise_ids(course_id: int) -> Select:
    return select(Exercise.id).where(Exercise.course_id == course_id)


def by_students(course_id: int, exercise_id: int | None = None) -> ColumnElement[bool]:
    """A submission that counts in the course's figures: a student's of the course, to one of
    its exercises (to `exercise_id`, where given)."""
    counted = Submission.exercise_id.in_(exercise_ids(course_id)) & Submission.user_id.in_(
        student_ids(course_id)
    )
    return counted if exercise_id is None else counted & (Submission.exercise_id == exercise_id)


def students(session: Session, course_id: int) -> list[User]:
    """The course's students by family name, then given name (server/core/names.py)."""
    return sorted(
        session.scalars(select(User).where(User.id.in_(student_ids(course_id)))),
        key=by_family_name,
    )


def student_or_none(session: Session, course_id: int, username: str) -> User | None:
    """The user, if a student of the course: to its staff, anyone else is nobody."""
    return session.scalar(
        select(User).where(User.username == username, User.id.in_(student_ids(course_id)))
    )


def exercises(session: Session, course_id: int) -> list[Exercise]:
    """The course's active exercises in course order."""
    return list(
        session.scalars(
            select(Exercise)
            .where(Exercise.course_id == course_id, Exercise.active)
            .order_by(Exercise.position, Exercise.slug)
        )
    )


def standings(
    session: Session, course_id: int, exercise_id: int | None = None, user_id: int | None = None
) -> dict[tuple[int, int], Standing]:
    """(user id, exercise id) → the course's students' standings (on one of its exercises; of
    one of its students); one pass over the submissions."""
    query = (
        select(
            Submission.id,
            Submission.user_id,
            Submission.exercise_id,
            Submission.status,
            Submission.counted_score,
            Submission.max_score,
            Submission.override_score,
            Submission.submitted_at,
            COUNTS_AS_ATTEMPT.label("counts"),
        )
        .where(by_students(course_id, exercise_id))
        .order_by(Submission.id)
    )
    if user_id is not None:
        query = query.where(Submission.user_id == user_id)
    table: dict[tuple[int, int], Standing] = defaultdict(Standing)
    for row in session.execute(query):
        standing = table[(row.user_id, row.exercise_id)]
        standing.attempts += bool(row.counts)
        standing.latest_id, standing.latest_status, standing.latest_at = (
            row.id,
            row.status,
            row.submitted_at,
        )
        standing.grade.add(row.id, row.counted_score, row.max_score, row.override_score is not None)
    set_by_hand = select(SetGrade).where(
        SetGrade.user_id.in_(student_ids(course_id)),
        SetGrade.exercise_id.in_(exercise_ids(course_id)),
    )
    if exercise_id is not None:
        set_by_hand = set_by_hand.where(SetGrade.exercise_id == exercise_id)
    if user_id is not None:
        set_by_hand = set_by_hand.where(SetGrade.user_id == user_id)
    rows = session.scalars(set_by_hand).all()
    maxima = maximum_points(
        session,
        list({row.exercise_id: session.get(Exercise, row.exercise_id) for row in rows}.values()),
    )
    for row in rows:  # a student with no submission may have a grade set too
        table[(row.user_id, row.exercise_id)].grade.set_by(row, maxima[row.exercise_id])
    return dict(table)


def _current_runs(*columns, course_id: int, exercise_id: int | None = None) -> Select:
    """`columns` of the course's students' submissions (of one exercise) that have a finished
    run: their diagnostics are those of the latest (DONE_RUN), the one the student reads (a
    regrade preview's runs are not "done" until they are published)."""
    return (
        select(*columns)
        .select_from(Submission)
        .where(DONE_RUN.is_not(None), by_students(course_id, exercise_id))
    )


def _check_diagnostics(query: Select) -> Select:
    """`_current_runs` with their checks' diagnostics joined, one row each."""
    return query.join(CheckResult, CheckResult.run_id == DONE_RUN).join(
        DiagnosticResult, DiagnosticResult.check_id == CheckResult.id
    )


def _load_errors(session: Session, query: Select) -> Iterator[tuple[Row, dict]]:
    """Each load-error note of the runs of `query` (`_current_runs` with GradingRun.notes as
    its last column), with its row."""
    narrowed = query.join(GradingRun, GradingRun.id == DONE_RUN).where(MAY_HAVE_LOAD_ERROR)
    for row in session.execute(narrowed):
        for note in row[-1] or []:
            if note.get("kind") == LOAD_ERROR:
                yield row, note


def diagnostic_counts(
    session: Session, course_id: int, exercise_id: int | None = None
) -> dict[int, list[tuple[str, int, int]]]:
    """exercise id → [(code, students, submissions)], most students first: the checks'
    diagnostics and the load errors of the runs' notes."""
    columns = (Submission.exercise_id, Submission.user_id, Submission.id)
    which = {"course_id": course_id, "exercise_id": exercise_id}
    diagnosed = [
        *session.execute(
            _check_diagnostics(_current_runs(*columns, DiagnosticResult.code, **which)).distinct()
        ),
        *(
            (*row[:3], note["code"])
            for row, note in _load_errors(
                session, _current_runs(*columns, GradingRun.notes, **which)
            )
        ),
    ]
    # sets, not a sum of two counts: a student may get a code both ways (a check's import
    # error on a restart, say)
    who: dict[tuple[int, str], tuple[set[int], set[int]]] = defaultdict(lambda: (set(), set()))
    for exercise, user_id, submission_id, code in diagnosed:
        users, submissions = who[exercise, code]
        users.add(user_id)
        submissions.add(submission_id)
    counts: dict[int, list[tuple[str, int, int]]] = defaultdict(list)
    for (exercise, code), (users, submissions) in who.items():
        counts[exercise].append((code, len(users), len(submissions)))
    for rows in counts.values():
        rows.sort(key=lambda row: (-row[1], -row[2], row[0]))
    return dict(counts)


def summaries(session: Session, course_id: int, lang: str) -> list[ExerciseSummary]:
    table = standings(session, course_id)
    codes = diagnostic_counts(session, course_id)
    mistakes = mistake_counts(session, course_id, lang)
    status_counts = {
        (exercise_id, status): n
        for exercise_id, status, n in session.execute(
            select(Submission.exercise_id, Submission.status, func.count())
            .where(by_students(course_id))
            .group_by(Submission.exercise_id, Submission.status)
        )
    }
    result = []
    active = exercises(session, course_id)
    maxima = maximum_points(session, active)
    for exercise in active:
        mine = [s for (_, exercise_id), s in table.items() if exercise_id == exercise.id]
        bests = [s.score for s in mine if s.score is not None]
        out_of = maxima[exercise.id]
        result.append(
            ExerciseSummary(
                exercise=exercise,
                max_points=out_of,
                submissions=sum(s.attempts for s in mine),
                students=len(mine),
                mean_best=sum(bests) / len(bests) if bests else None,
                full_marks=sum(1 for best in bests if full_marks(best, out_of)),
                waiting=sum(status_counts.get((exercise.id, status), 0) for status in WAITING),
                errors=status_counts.get((exercise.id, SubmissionStatus.error.value), 0),
                diagnostics=[(code, n) for code, n, _ in codes.get(exercise.id, [])],
                mistakes=mistakes.get(exercise.id, []),
            )
        )
    return result


def full_marks(best: float | None, out_of: float | None) -> bool:
    return best is not None and bool(out_of) and best >= out_of - FULL_MARKS_SLACK


@dataclass(frozen=True)
class Column:
    """A gradebook column: an exercise and what it is out of."""

    exercise: Exercise
    max_points: float | None


@dataclass(frozen=True)
class GradebookRow:
    student: User
    cells: list[Standing | None]  # in the order of the columns; None: nothing submitted
    total: float  # the grades added up
    out_of: float  # the columns' maximum points added up

    @property
    def percent(self) -> float | None:
        return 100 * self.total / self.out_of if self.out_of else None

    @property
    def missing(self) -> bool:
        """Some exercise has no score yet (nothing submitted, or nothing graded)."""
        return any(cell is None or cell.score is None for cell in self.cells)


def gradebook(
    session: Session, course_id: int, only: int | None = None
) -> tuple[list[Column], list[GradebookRow]]:
    """Every student of the course (even one who never submitted) against every active exercise
    of it; or the one student whose user id is `only` (their staff page)."""
    table = standings(session, course_id, user_id=only)
    active = exercises(session, course_id)
    maxima = maximum_points(session, active)
    columns = [Column(e, maxima[e.id]) for e in active]
    out_of = sum(column.max_points or 0 for column in columns)
    rows = []
    for student in students(session, course_id):
        if only is not None and student.id != only:
            continue
        cells = [table.get((student.id, column.exercise.id)) for column in columns]
        rows.append(
            GradebookRow(student, cells, sum(c.score for c in cells if c and c.score), out_of)
        )
    return columns, rows


@dataclass(frozen=True)
class DiagnosedSubmission:
    """A submission whose grade stands on a run that gave a diagnostic, with its messages."""

    student: User
    submission_id: int
    submitted_at: dt.datetime
    score: float | None
    max_score: float | None
    messages: list[str]


@dataclass
class NamedMistake:
    """The submissions behind a diagnostic that name one mistake (`mistake_of`): the same
    known wrong program, or else the same check's same kind of failure, in one representative
    wording (`hint`: the one most of them read, or words of no one's line)."""

    hint: str
    wrong_program: str | None = None
    submissions: dict[int, DiagnosedSubmission] = field(default_factory=dict)
    identity: tuple = ()

    @property
    def students(self) -> int:
        return len({row.student.id for row in self.submissions.values()})

    @property
    def anchor(self) -> str:
        return mistake_anchor(self.wrong_program, self.identity)


def mistake_anchor(wrong_program: str | None, identity: tuple) -> str:
    """The id of a named mistake's section on a diagnostic's page, which the exercise's page
    links to: the known wrong program's name, or else a digest of its identity (`mistake_of`)."""
    digest = hashlib.sha256("\x1f".join(map(str, identity)).encode()).hexdigest()[:12]
    return "mistake-" + (wrong_program or digest)


def mistake_of(check: str | None, code: str, details: dict, said_in_english: str) -> tuple:
    """What makes two diagnostics one mistake whatever the student's lines and names: the
    check that found it and its code, and what its hint stands for — the ways out of the graph
    its hint named (`left_at`, whose words carry the lines), or the hint the check or the
    grader chose before filling in the student's names (`details.hint`: "{what} is all zeros"
    for `a.grad` and `b.grad` alike), or else the hint as said in English. A known wrong
    program is its own identity (its name), whatever check and code found it."""
    left_at = details.get("left_at")
    if left_at:
        return (check, code, "left-graph", *sorted({way[0] for way in left_at}))
    chosen = details.get("hint")
    if isinstance(chosen, dict):
        chosen = chosen.get("en") or next(iter(chosen.values()), "")
    if isinstance(chosen, str) and chosen:
        return (check, code, "hint", chosen)
    return (check, code, "said", said_in_english)


def _representative(wordings: Counter, details: dict, lang: str) -> str:
    """A mistake's words: of no one's line where the diagnostic names ways out of the graph,
    else the wording most of its students read (the first in order among equals)."""
    left_at = details.get("left_at")
    if left_at:
        return ways_out_words(way[0] for way in left_at)[lang]
    return max(wordings, key=wordings.__getitem__)  # the first seen of the most read


def diagnosed_submissions(
    session: Session, course_id: int, exercise_id: int, code: str, lang: str
) -> list[NamedMistake]:
    """The course's students' submissions of an exercise that got the diagnostic `code` (from a
    check, or as the load error of its run's notes), by named mistake (`mistake_of`: most
    students first), then by student. A submission that made two of them is under each."""
    columns = (
        User,
        Submission.id,
        Submission.submitted_at,
        Submission.counted_score,
        Submission.max_score,
    )
    which = {"course_id": course_id, "exercise_id": exercise_id}
    checks = (
        _check_diagnostics(
            _current_runs(
                *columns,
                DiagnosticResult.message,
                DiagnosticResult.hint,
                DiagnosticResult.translations,
                DiagnosticResult.details,
                CheckResult.name.label("check"),
                **which,
            ).join(User, Submission.user_id == User.id)
        )
        .where(DiagnosticResult.code == code)
        .order_by(Submission.id, CheckResult.position, DiagnosticResult.id)
    )
    said = [
        *(
            (
                row[:5],
                _in_language(note, lang),
                None,
                None,
                _said_mistake(None, note["code"], note),
                {},
            )
            for row, note in _load_errors(
                session,
                _current_runs(*columns, GradingRun.notes, **which).join(
                    User, Submission.user_id == User.id
                ),
            )
            if note["code"] == code
        ),
        # a later check's "the same mistake as in …" adds nothing to the first's words
        *(
            (
                row[:5],
                _in_language(row._asdict(), lang),
                (row.details or {}).get("wrong_program"),
                _derived_words(row.details or {}, lang),
                _said_mistake(row.check, code, row._asdict()),
                row.details or {},
            )
            for row in session.execute(checks)
            if not said_elsewhere(row.details or {})
        ),
    ]
    # by student, then submission; stable: the checks in order
    said.sort(key=lambda item: (by_family_name(item[0][0]), item[0][1]))
    mistakes: dict[tuple, NamedMistake] = {}
    wordings: dict[tuple, Counter] = defaultdict(Counter)
    for submitted, (message, hint), program, words, identity, details in said:
        user, submission_id, at, score, max_score = submitted
        key = (program,) if program else identity
        mistake = mistakes.setdefault(key, NamedMistake(words or hint, program, identity=identity))
        if not program:
            wordings[key][hint] += 1
            mistake.hint = _representative(wordings[key], details, lang)
        row = mistake.submissions.setdefault(
            submission_id, DiagnosedSubmission(user, submission_id, at, score, max_score, [])
        )
        if message not in row.messages:  # a failure that several checks hit is read once
            row.messages.append(message)
    return sorted(mistakes.values(), key=lambda mistake: (-mistake.students, mistake.hint))


def _said_mistake(check: str | None, code: str, said: dict) -> tuple:
    """`mistake_of` a stored diagnostic (or a load error's note), from its English words."""
    return mistake_of(check, code, said.get("details") or {}, _in_language(said, "en")[1])


def _in_language(said: dict, lang: str) -> tuple[str, str]:
    """A diagnostic's (or a load error's) message and hint in the reader's language."""
    words = (said.get("translations") or {}).get(lang, {})
    return (words.get("message", said["message"]), words.get("hint", said.get("hint") or ""))


@dataclass(frozen=True)
class CheckRate:
    """How often one check of an exercise passed: on the students' counted submissions (one a
    student: the best, whose score is the grade) and on all their graded submissions."""

    name: str
    title: str  # in the reader's language, as its latest run wrote it
    students_passed: int
    students: int  # whose counted submission ran the check
    submissions_passed: int
    submissions: int

    @property
    def student_rate(self) -> float | None:
        return self.students_passed / self.students if self.students else None

    @property
    def submission_rate(self) -> float | None:
        return self.submissions_passed / self.submissions if self.submissions else None


def check_rates(
    session: Session, course_id: int, exercise_id: int, counted: Iterable[int], lang: str
) -> list[CheckRate]:
    """Each check of the exercise (as graded last: DONE_RUN) in the order it runs, with its pass
    rates; `counted` are the students' counted submissions (`Standing.grade.best_id`). Two
    queries whatever the number of students: the counted ones' checks, and a sum over all."""
    which = {"course_id": course_id, "exercise_id": exercise_id}
    counted = list(counted)
    mine = (
        _current_runs(
            CheckResult.name,
            CheckResult.title,
            CheckResult.titles,
            CheckResult.position,
            CheckResult.passed,
            **which,
        )
        .join(CheckResult, CheckResult.run_id == DONE_RUN)
        .where(Submission.id.in_(counted))
        .order_by(Submission.id)
    )
    everyone = (
        _current_runs(
            CheckResult.name,
            func.max(CheckResult.title),
            func.max(CheckResult.position),
            func.count(),
            func.sum(case((CheckResult.passed, 1), else_=0)),
            **which,
        )
        .join(CheckResult, CheckResult.run_id == DONE_RUN)
        .group_by(CheckResult.name)
    )
    seen: dict[str, list] = {}  # name → [title, position, passed, students]
    for row in session.execute(mine):
        title = (row.titles or {}).get(lang, row.title)
        tally = seen.setdefault(row.name, [title, row.position, 0, 0])
        tally[0], tally[1] = title, row.position  # the newest submission's words and place
        tally[2] += bool(row.passed)
        tally[3] += 1
    rates = []
    for name, title, position, submissions, passed in session.execute(everyone):
        title, position, students_passed, students = seen.get(name, [title, position, 0, 0])
        rates.append(
            (
                position,
                CheckRate(name, title, students_passed, students, int(passed or 0), submissions),
            )
        )
    return [rate for _, rate in sorted(rates, key=lambda item: (item[0], item[1].name))]


@dataclass
class MistakeCount:
    """A named mistake of an exercise and who made it, in any of their submissions (as last
    graded): a known wrong program, in the words the exercise gives it, or else what a check's
    diagnostic stands for within its code (`mistake_of`), in one representative wording."""

    words: str  # inline Markdown, in the reader's language; "" for a diagnostic without hint
    wrong_program: str | None
    anchor: str  # its section on each diagnostic page that lists it (`mistake_anchor`)
    by_code: dict[str, set[int]] = field(default_factory=dict)  # code → students
    submission_ids: set[int] = field(default_factory=set)

    @property
    def students(self) -> int:
        return len(set().union(*self.by_code.values()))

    @property
    def submissions(self) -> int:
        return len(self.submission_ids)

    @property
    def codes(self) -> list[str]:
        """Its diagnostics' codes, the one most students got first: where its drill-down is."""
        return sorted(self.by_code, key=lambda code: (-len(self.by_code[code]), code))

    @property
    def gist(self) -> str:
        """Its words up to the end of their first clause (a colon, semicolon or full stop
        outside `code`), for a table with no room for the whole."""
        in_code = False
        for i, char in enumerate(self.words):
            in_code ^= char == "`"
            if not in_code and char in ".:;" and self.words[i + 1 : i + 2] in (" ", "\n"):
                return self.words[:i] + "…"
        return self.words


def mistake_counts(
    session: Session, course_id: int, lang: str, exercise_id: int | None = None
) -> dict[int, list[MistakeCount]]:
    """exercise id → its named mistakes, most students first: one query over the checks'
    diagnostics (and one over the runs' load errors), whatever the number of students."""
    columns = (Submission.exercise_id, Submission.user_id, Submission.id)
    which = {"course_id": course_id, "exercise_id": exercise_id}
    checks = _check_diagnostics(
        _current_runs(
            *columns,
            DiagnosticResult.code,
            DiagnosticResult.message,
            DiagnosticResult.hint,
            DiagnosticResult.translations,
            DiagnosticResult.details,
            CheckResult.name.label("check"),
            **which,
        )
    )
    said = [
        *(
            (
                row[:3],
                note["code"],
                _in_language(note, lang)[1],
                None,
                {},
                _said_mistake(None, note["code"], note),
            )
            for row, note in _load_errors(
                session, _current_runs(*columns, GradingRun.notes, **which)
            )
        ),
        # a later check's "the same mistake as in …" is the first's, already counted
        *(
            (
                row[:3],
                row.code,
                _in_language(row._asdict(), lang)[1],
                (row.details or {}).get("wrong_program"),
                row.details or {},
                _said_mistake(row.check, row.code, row._asdict()),
            )
            for row in session.execute(checks)
            if not said_elsewhere(row.details or {})
        ),
    ]
    says = _wrong_programs_words(session, course_id, lang)
    found: dict[tuple, MistakeCount] = {}
    wordings: dict[tuple, Counter] = defaultdict(Counter)
    for (exercise, user_id, submission_id), code, hint, program, details, identity in said:
        key = (exercise, program) if program else (exercise, *identity)
        mistake = found.get(key)
        if mistake is None:
            words = (
                says.get(exercise, {}).get(program, _derived_words(details, lang) or hint)
                if program
                else hint
            )
            mistake = found[key] = MistakeCount(words, program, mistake_anchor(program, identity))
        if not program:
            wordings[key][hint] += 1
            mistake.words = _representative(wordings[key], details, lang)
        mistake.by_code.setdefault(code, set()).add(user_id)
        mistake.submission_ids.add(submission_id)
    counts: dict[int, list[MistakeCount]] = defaultdict(list)
    for (exercise, *_rest), mistake in found.items():
        counts[exercise].append(mistake)
    for mistakes in counts.values():
        mistakes.sort(key=lambda m: (-m.students, -m.submissions, m.words))
    return dict(counts)


def _derived_words(details: dict, lang: str) -> str | None:
    """A derived wrong program's mistake in words of no one's line (worker/harness/derived.py)."""
    mistake = details.get("mistake")
    return mistake.get(lang, mistake.get("en")) if isinstance(mistake, dict) else None


def _wrong_programs_words(session: Session, course_id: int, lang: str) -> dict[int, dict]:
    """exercise id → {known wrong program: what the exercise says of it, in `lang`}, from the
    exercises' folders (read again only after a change); a folder that is missing or broken
    gives nothing, and its mistakes keep the words their diagnostics stored."""
    words = {}
    for exercise in session.scalars(select(Exercise).where(Exercise.course_id == course_id)):
        info = current_info(exercise_folder(exercise))
        if info is not None:
            # the words of the program itself (`says`): the page counts students whose values
            # were its values, and names the mistake, not what each one's code does
            words[exercise.id] = {
                name: program["says"].get(lang, program["says"]["en"])
                for name, program in info.wrong_programs.items()
            }
    return words


@dataclass(frozen=True)
class LatestSubmission:
    username: str
    submission_id: int
    filename: str
    submitted_at: dt.datetime


def latest_submissions(
    session: Session, course_id: int, exercise_id: int
) -> list[LatestSubmission]:
    """Each of the course's students' latest submission of an exercise (without its code, which
    can be large)."""
    latest = (
        select(func.max(Submission.id))
        .where(by_students(course_id, exercise_id))
        .group_by(Submission.user_id)
    )
    return [
        LatestSubmission(*row)
        for row in session.execute(
            select(User.username, Submission.id, Submission.filename, Submission.submitted_at)
            .join(User, Submission.user_id == User.id)
            .where(Submission.id.in_(latest))
            .order_by(User.username)
        )
    ]


@dataclass(frozen=True)
class RunRow:
    """One grading run, as staff read it: where it went and how long it waited and ran."""

    attempt: int
    status: str
    error: str | None
    executor: str
    job: str | None
    job_state: str | None
    job_reason: str | None  # why the cluster keeps it waiting, in Slurm's words
    node: str | None
    device: str | None
    started_at: dt.datetime
    queue_wait: float | None  # seconds from dispatch to the grader taking it
    run_time: float | None
    score: float | None = None  # before any late penalty
    max_score: float | None = None
    seed: int | None = None  # the hidden inputs' seed: runs that share it drew the same inputs
    regrade_id: int | None = None  # a preview's run (server/web/regrade.py)
    exercise_version: str | None = None  # the exercise's files it was graded with
    exercise_commit: str | None = None


def run_rows(submission: Submission) -> list[RunRow]:
    rows = []
    for run in submission.runs:
        environment, timing = run.environment or {}, run.timing or {}
        graded_from = timing.get("started_at")
        device = environment.get("gpu") or environment.get("device")
        rows.append(
            RunRow(
                run.attempt,
                run.status,
                run.error,
                run.executor,
                run.external_id,
                run.job_state,
                run.job_reason,
                environment.get("node") or run.node,
                f"{device} · torch {environment['torch']}"
                if device and environment.get("torch")
                else device,
                run.started_at,
                max(graded_from - run.started_at.timestamp(), 0.0) if graded_from else None,
                timing.get("total"),
                run.score,
                run.max_score,
                run.seed,
                run.regrade_id,
                run.exercise_version,
                run.exercise_commit,
            )
        )
    return rows

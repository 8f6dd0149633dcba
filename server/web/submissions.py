"""Accepting a submission: every check happens before anything is stored, then one commit.

What is refused is refused with a message in both languages and an HTTP status; what is
accepted is committed as `queued` before anything is queued, so it is never lost.
"""

from __future__ import annotations

import ast
import datetime as dt
import hashlib
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from flask_babel import LazyString
from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from server.core.catalogue import current_info
from server.core.config import Settings
from server.core.courses import exercise_folder
from server.core.grades import lateness, student_terms
from server.core.models import Exercise, Submission, SubmissionStatus, User
from server.web.i18n import when
from worker.harness.submission import Unreadable, notebook_cells

EXTENSIONS = (".py", ".ipynb")
# the name of code pasted into the page's form: a path, which no uploaded file's name is (a
# browser sends the name alone, and upload_name drops the folders another client may send)
PASTED = "/pasted.py"
# a submission whose grading staff stopped does not use up one of the student's attempts
COUNTS_AS_ATTEMPT = Submission.status != SubmissionStatus.cancelled.value
IDEMPOTENCY_KEY = re.compile(r"[\x20-\x7e]{1,128}")  # printable ASCII


class Refusal(Exception):
    """Why a submission is not accepted: an HTTP status and a message, translated when shown."""

    def __init__(self, status: int, message: LazyString):
        super().__init__(message)
        self.status, self.text = status, message

    @property
    def message(self) -> str:
        return str(self.text)  # in the language of the request that shows it


@dataclass(frozen=True)
class Rules:
    max_upload_kb: int
    per_window: int
    window_minutes: int

    @classmethod
    def from_settings(cls, settings: Settings) -> "Rules":
        return cls(
            settings.max_upload_kb,
            settings.submissions_per_window,
            settings.submission_window_minutes,
        )


def late_penalty(
    exercise: Exercise, deadline: dt.datetime | None, now: dt.datetime
) -> tuple[int, float]:
    """(started days late, fraction of the score lost) by the student's deadline (the exercise's,
    or their extension's); refuses late work where the policy says so."""
    if exercise.deadline_policy == "refuse" and deadline is not None and now > deadline:
        raise Refusal(
            403,
            LazyString(
                lambda: _(
                    "The deadline for this exercise passed (%(when)s); late work is not accepted.",
                    when=when(deadline),
                )
            ),
        )
    return lateness(exercise, deadline, now)


def too_large(limit_kb: int, pasted: bool = False) -> LazyString:
    if pasted:
        return _l("The pasted code is larger than %(kb)s KB.", kb=limit_kb)
    return _l(
        "The file is larger than %(kb)s KB. If it is a notebook, its outputs (plots, printed "
        "tensors) make most of its size: clear them (Edit → Clear All Outputs), save it and "
        "upload it again.",
        kb=limit_kb,
    )


def upload_name(filename: str) -> str:
    """An uploaded file's name without any folders sent with it: never taken for PASTED."""
    return re.split(r"[/\\]", filename)[-1]


def form_work(upload, pasted: str, rules: "Rules") -> tuple[str, bytes]:
    """What the exercise page's form sends (Submit, Check), as (file name, content): the file
    uploaded, else the code pasted (a browser sends a textarea's line ends as CRLF). One byte
    over the limit is read, enough to refuse a file (a request may be 32 times larger)."""
    if upload is not None and upload.filename:
        return upload_name(upload.filename), upload.read((rules.max_upload_kb << 10) + 1)
    return PASTED, pasted.replace("\r\n", "\n").encode()


def shown_name(filename: str) -> str:
    """A file as its student knows it: code pasted into the page has no name of its own."""
    return _("pasted code") if filename == PASTED else filename


def where(filename: str | None, label: str | None, line: int | None) -> str:
    """A place in a submission, as its student knows it: "work.py, line 3", "work.ipynb, cell 2,
    line 3", "pasted code"; without the file's name when `filename` is None. `label` is the
    grader's name for a piece of it: "cell 2" for a notebook's cell, its name for the file."""
    cell = re.fullmatch(r"cell (\d+)", label or "")
    parts = (
        ([shown_name(filename)] if filename else [])
        + ([_("cell %(num)s", num=cell[1])] if cell else [])
        + ([_("line %(num)s", num=line)] if line else [])
    )
    return ", ".join(parts)


def check_file(filename: str, data: bytes, rules: Rules, functions: tuple[str, ...] = ()) -> None:
    """Refuse what the grader could not grade, here, where it uses no attempt; with
    `functions`, the exercise's (wanted_functions), a file that defines none of them too."""
    if not filename.lower().endswith(EXTENSIONS):
        raise Refusal(400, _l("Upload a .py file or a Jupyter notebook (.ipynb)."))
    if len(data) > rules.max_upload_kb << 10:
        raise Refusal(413, too_large(rules.max_upload_kb, pasted=filename == PASTED))
    if not data.strip():
        if filename == PASTED:  # the form's: no file chosen, and nothing pasted
            raise Refusal(400, _l("Nothing was chosen: choose a file or paste your code."))
        raise Refusal(400, _l("The file is empty."))
    if b"\x00" in data:
        raise Refusal(400, _l("The file is binary, not Python source or a notebook."))
    try:
        text = data.decode("utf-8-sig")  # as the grader reads it
    except UnicodeDecodeError:
        raise Refusal(400, _l("The file is not UTF-8 text; save it as UTF-8.")) from None
    cells = check_code(filename, text)
    if functions and not defines_any(cells, functions):
        raise Refusal(
            400,
            _l(
                "The code defines none of the functions this exercise asks for: %(names)s. "
                "Define them with the names of the statement, at the top level of the file; "
                "nothing was graded and no attempt was used.",
                names=", ".join(functions),
            ),
        )


# names through which code may define a function without naming it in a statement: a file
# that uses one is never refused for what it seems not to define
DYNAMIC = frozenset(
    {"exec", "eval", "globals", "locals", "vars", "setattr", "__import__", "importlib"}
)


def defines_any(cells: Sequence[str], functions: tuple[str, ...]) -> bool:
    """Whether the code may define one of `functions`: a name bound anywhere in it (a def, a
    class, an assignment, an import), read from its syntax tree without running it. Generous
    where it cannot know (a star import, exec, globals()): only a file that plainly defines
    none of them is refused; the grader names the ones that are missing."""
    bound: set[str] = set()
    for code in cells:
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(node.name)
            elif isinstance(node, ast.Name):
                if not isinstance(node.ctx, ast.Load):
                    bound.add(node.id)
                elif node.id in DYNAMIC:
                    return True
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    if alias.name == "*" or alias.name.split(".")[0] in DYNAMIC:
                        return True
                    bound.add(alias.asname or alias.name.split(".")[0])
            elif isinstance(node, ast.Global):
                bound.update(node.names)
    return not bound.isdisjoint(functions)


def check_code(filename: str, text: str) -> list[str]:
    """Refuse what the grader could not load, here, where it uses no attempt: a notebook that
    cannot be read, or code that does not compile (Python's message, with the place). Returns
    the code the grader loads: the file's, or its notebook's cells."""
    cells: tuple[tuple[str | None, str], ...] = ((None, text),)
    if filename.lower().endswith(".ipynb"):
        try:  # the grader's reader: magics and shell lines are left out as the grader does
            cells = notebook_cells(text).cells
        except Unreadable:
            raise Refusal(
                400,
                _l(
                    "The notebook cannot be read: its JSON is damaged. Open it in "
                    "Jupyter, save it and upload it again."
                ),
            ) from None
        if not any(code.strip() for _label, code in cells):
            raise Refusal(400, _l("The notebook has no code in it."))
    for label, code in cells:
        try:
            # quietly: the compiler warns of, say, every "\d" in a string, which would fill the
            # portal's log (and, under `python -W error`, refuse code that the grader loads)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compile(code, label or filename, "exec", dont_inherit=True)
        except SyntaxError as exc:
            place = where(filename, label, exc.lineno)
            raise Refusal(
                400,
                _l(
                    "The code is not valid Python: %(error)s (%(place)s). Fix it and "
                    "submit again; nothing was graded and no attempt was used.",
                    error=exc.msg,
                    place=place,
                ),
            ) from None
        except (RecursionError, MemoryError):  # the compiler's own limits on nesting
            raise Refusal(
                400,
                _l(
                    "The code is nested too deeply for Python to compile it (%(place)s).",
                    place=where(filename, label, None),
                ),
            ) from None
    return [code for _label, code in cells]


def accept(
    session: Session,
    user: User,
    exercise: Exercise | None,
    filename: str,
    data: bytes,
    rules: Rules,
    now: dt.datetime,
    functions: tuple[str, ...] = (),
) -> Submission:
    """Validate and add a queued submission to the session (the caller commits); `functions`
    as check_file takes them."""
    if exercise is None or not exercise.active:
        raise Refusal(404, _l("There is no such exercise."))
    if exercise.course.archived_at is not None:
        raise Refusal(
            403,
            _l(
                "course %(course)s is archived: it takes no submissions",
                course=exercise.course.slug,
            ),
        )
    check_file(filename, data, rules, functions)
    granted = student_terms(session, user.id, exercise)  # with the student's allowance
    late_days, penalty = late_penalty(exercise, granted.deadline, now)
    mine = (
        select(func.count())
        .select_from(Submission)
        .where(Submission.user_id == user.id, Submission.exercise_id == exercise.id)
    )
    if (
        granted.max_attempts is not None
        and session.scalar(mine.where(COUNTS_AS_ATTEMPT)) >= granted.max_attempts
    ):
        # lazy, so no ngettext (pybabel extracts _l only): one attempt is worded apart
        raise Refusal(
            403,
            _l("You have used your only attempt for this exercise.")
            if granted.max_attempts == 1
            else _l(
                "You have used all %(num)s attempts for this exercise.", num=granted.max_attempts
            ),
        )
    since = now - dt.timedelta(minutes=rules.window_minutes)
    if session.scalar(mine.where(Submission.submitted_at > since)) >= rules.per_window:
        raise Refusal(
            429,
            _l(
                "At most %(num)s submissions every %(minutes)s minutes; try again later.",
                num=rules.per_window,
                minutes=rules.window_minutes,
            ),
        )
    submission = Submission(
        user=user,
        exercise=exercise,
        filename=filename[-255:],
        code=data,
        sha256=hashlib.sha256(data).hexdigest(),
        submitted_at=now,
        status=SubmissionStatus.queued.value,
        late_days=late_days,
        penalty=penalty,
    )
    session.add(submission)
    return submission


def wanted_functions(exercise: Exercise) -> tuple[str, ...]:
    """The functions the exercise's checks call (their `uses`, read from checks.py): a student's
    file that defines none of them would be graded "did not load", using an attempt."""
    info = current_info(exercise_folder(exercise))
    return info.functions if info is not None else ()


def idempotency_key(value: str | None) -> str | None:
    """The key a client sends so that a retried request stores nothing twice; None if none."""
    if not value:
        return None
    if not IDEMPOTENCY_KEY.fullmatch(value):
        raise Refusal(400, _l("The idempotency key must be 1 to 128 printable ASCII characters."))
    return value


def submit_once(
    session: Session,
    user: User,
    exercise: Exercise | None,
    filename: str,
    data: bytes,
    rules: Rules,
    now: dt.datetime,
    key: str | None,
) -> tuple[Submission, bool]:
    """Accept and commit a submission as a student sends it (the page's form, the API), once per
    idempotency key: a request sent again with its key gets the first submission back and uses
    no attempt; a file that defines none of the exercise's functions is refused.
    Returns (submission, whether new)."""
    user_id = user.id
    if (
        key is not None
        and exercise is not None
        and (earlier := _sent_before(session, user_id, key, exercise, data)) is not None
    ):
        return earlier, False
    functions = wanted_functions(exercise) if exercise is not None else ()
    submission = accept(session, user, exercise, filename, data, rules, now, functions)
    submission.idempotency_key = key
    try:
        session.commit()
    except IntegrityError:
        # the same key sent twice at once: the other request stored the submission first
        session.rollback()
        earlier = _sent_before(session, user_id, key, exercise, data) if key is not None else None
        if earlier is None:
            raise
        return earlier, False
    return submission, True


def _sent_before(
    session: Session, user_id: int, key: str, exercise: Exercise, data: bytes
) -> Submission | None:
    earlier = session.scalar(
        select(Submission).where(Submission.user_id == user_id, Submission.idempotency_key == key)
    )
    if earlier is not None and (
        earlier.exercise_id != exercise.id or earlier.sha256 != hashlib.sha256(data).hexdigest()
    ):
        raise Refusal(
            422,
            _l(
                "This idempotency key was already used for another file or exercise; "
                "send it with a new key (on the page: reload it)."
            ),
        )
    return earlier


def reopen(submission: Submission) -> None:
    """Grade a finished submission again (a staff regrade, e.g. after fixing an exercise's checks):
    its runs so far stop counting toward the retry limit, and its last grade stands until the
    new one."""
    submission.retry_from = len(submission.runs)
    submission.status = SubmissionStatus.queued.value
    submission.enqueued_at = None

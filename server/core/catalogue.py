"""The exercise catalogue: every `exercises/<slug>/` folder, read and validated from its files.

A plain dict keyed by slug. Read on the service side (it needs `tomllib`), so the harness itself
gets everything it needs inside the job and never parses configuration.
"""

from __future__ import annotations

import ast
import dataclasses
import datetime as dt
import functools
import os
import re
import subprocess
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from server.core.config import ConfigError, Resources
from worker.harness import visible_mistakes
from worker.harness.codes import CATALOGUE
from worker.harness.jobs import (
    HIDDEN_CHECKS,
    REQUIRED_LAYERS,
    VISIBLE_CHECKS,
    Job,
    Limits,
    exercise_version,
)

SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
REQUIRED_FILES = (
    "exercise.toml",
    "statement.en.md",
    "statement.es.md",
    "starter.py",
    "checks.py",
    "reference.py",
    VISIBLE_CHECKS,
)
DEADLINE_POLICIES = ("none", "penalty", "refuse")
# what a student may have of an exercise's folder (docs/writing-an-exercise.md): never its hidden
# checks, reference or mutants
PUBLIC_FILES = ("starter.py", "support.py", VISIBLE_CHECKS)
# and what `check` fetches to run the visible checks: the known wrong programs' failures of them,
# with their words (worker/harness/visible_mistakes.py), none of their code
CHECK_FILES = (*PUBLIC_FILES, visible_mistakes.FILE)


def download_names(slug: str) -> dict[str, str]:
    """The names the public files download as: support code as the code imports it (`import
    exercise_support`, never `import support`), the starter named after its exercise
    ("autograd_q.py", a name Python imports), as each exercise's would overwrite the last one's
    in the student's downloads folder otherwise."""
    return {"support.py": "exercise_support.py", "starter.py": slug.replace("-", "_") + ".py"}


class ExerciseConfigError(Exception):
    """An exercise folder is incomplete or its exercise.toml is wrong; the message says where."""


@dataclass(frozen=True)
class Deadline:
    """`policy`: none (no deadline), penalty (late work loses penalty_per_day of its score per
    started day, down to zero) or refuse (late work is not accepted); None where `at` is given
    without one: the course's policy and penalty (Deadline.in_course)."""

    policy: str | None = "none"
    at: dt.datetime | None = None
    penalty_per_day: float = 0.0

    @classmethod
    def from_toml(cls, data: dict, where: object) -> "Deadline":
        unknown = set(data) - {"policy", "at", "penalty_per_day"}
        if unknown:
            raise ExerciseConfigError(
                f"{where}: [deadline]: unknown keys {', '.join(sorted(unknown))}"
            )
        if "at" in data and "policy" not in data:
            data = {**data, "policy": None}
        deadline = cls(**data)
        if deadline.policy is not None and deadline.policy not in DEADLINE_POLICIES:
            raise ExerciseConfigError(
                f"{where}: [deadline] policy must be one of {DEADLINE_POLICIES}"
            )
        if deadline.policy != "none" and not (
            isinstance(deadline.at, dt.datetime) and deadline.at.tzinfo is not None
        ):
            raise ExerciseConfigError(
                f"{where}: [deadline] at must be a date and time with its "
                "UTC offset, like 2027-01-31T23:59:00+01:00"
            )
        if (
            not isinstance(deadline.penalty_per_day, (int, float))
            or not 0 <= deadline.penalty_per_day <= 1
        ):
            raise ExerciseConfigError(
                f"{where}: [deadline] penalty_per_day must be between 0 and 1"
            )
        return deadline

    def in_course(self, policy: str, penalty_per_day: float) -> "Deadline":
        """This deadline where the course's late policy is `policy` with `penalty_per_day`."""
        if self.policy is not None:
            return self
        return dataclasses.replace(self, policy=policy, penalty_per_day=penalty_per_day)


@dataclass(frozen=True)
class ExerciseInfo:
    slug: str
    path: Path
    title: dict
    section: str
    limits: dict
    deadline: Deadline
    slurm: dict
    mutants: dict = field(default_factory=dict)
    # the mutants that are known wrong programs: name -> what the grader tells a student whose
    # code behaves like it ({"en": …, "es": …})
    wrong_programs: dict = field(default_factory=dict)
    max_attempts: int | None = None
    order: int = 0  # place in the course: the exercise list is sorted by it, then by slug
    # the sum of the points of checks.py's checks; None where they are not all written as
    # numbers (see max_points)
    max_points: float | None = None
    # forged variants: mutants/<name>.py that forge, in their own process, what the harness
    # reports, name -> the mutant they forge; the self-check wants each to score no more than it
    forged: dict = field(default_factory=dict)
    # wrong programs written as students write them, from the statement alone:
    # student_programs/<name>.py -> {"code": …, "names": {"en": …, "es": …}}, the code it must
    # lose points with and words a diagnostic of that code must say, in each language
    student_programs: dict = field(default_factory=dict)
    # the student's functions the checks call (their `uses`), read as max_points reads points;
    # empty where that cannot be known without running checks.py
    functions: tuple[str, ...] = ()
    # the checks declared `timed=True` (a speed bonus), read as max_points reads points: the
    # machine's load can take their points, so the self-check compares seeds without them
    timed_checks: tuple[str, ...] = ()
    # `limits` and `slurm` are the tables as written (what a job and the API carry); parsed
    # once, here, for the dispatcher, which asks for them for every queued submission
    run_limits: Limits = field(init=False, repr=False, compare=False)
    slurm_overrides: dict = field(init=False, repr=False, compare=False)
    version: str = field(init=False, repr=False, compare=False)  # jobs.exercise_version

    def __post_init__(self) -> None:
        object.__setattr__(self, "version", exercise_version(self.path))
        where = self.path / "exercise.toml"
        try:
            object.__setattr__(self, "run_limits", Limits.from_dict(self.limits))
        except (ValueError, TypeError) as exc:
            raise ExerciseConfigError(f"{where}: [limits]: {exc}") from None
        try:
            object.__setattr__(
                self, "slurm_overrides", Resources.parse_overrides(self.slurm, "[slurm]")
            )
        except ConfigError as exc:
            raise ExerciseConfigError(f"{where}: {exc}") from None

    @property
    def commit(self) -> str | None:
        """The last git commit of the folder, where it is a checkout with no change since."""
        return _last_commit(self.path, self.version)

    def statement(self, lang: str) -> str:
        return (self.path / f"statement.{lang if lang in ('en', 'es') else 'en'}.md").read_text()

    def starter(self) -> str:
        return (self.path / "starter.py").read_text()

    def resources(self, default: Resources) -> Resources:
        """The Slurm job shape for this exercise: the service's default with `[slurm]` applied."""
        return dataclasses.replace(default, **self.slurm_overrides)

    def job(
        self,
        submission: Path | None,
        *,
        filename: str | None = None,
        lang: str = "en",
        seed: int | None = None,
        device: str = "auto",
        job_id: str = "",
        visible: bool = False,
        required_layers: tuple[str, ...] = REQUIRED_LAYERS,
    ) -> Job:
        """`submission`: the file, or None where the spool will hold it (`filename` names it
        then). `visible`: run the checks students have (visible.py) instead of the hidden ones."""
        return Job(
            exercise=self.slug,
            exercise_dir=str(self.path),
            submission=str(submission.resolve()) if submission else "",
            filename=filename or submission.name,
            limits=self.limits,
            seed=seed,
            lang=lang,
            device=device,
            id=job_id,
            checks=VISIBLE_CHECKS if visible else HIDDEN_CHECKS,
            wrong_programs={} if visible else self.wrong_programs,
            required_layers=required_layers,
        )


_COMMITS: dict[tuple[Path, str], str] = {}


def _last_commit(folder: Path, version: str) -> str | None:
    """A commit found is kept for these files (a sync asks for every exercise); none found is
    asked again, since the same files may be committed later."""
    if (folder, version) in _COMMITS:
        return _COMMITS[folder, version]

    def git(*arguments: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(folder), *arguments], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("log", "-1", "--format=%H", "--", ".")
    if commit and git("status", "--porcelain", "--ignored=no", "--", ".") == "":
        _COMMITS[folder, version] = commit
        return commit
    return None


def default_root() -> Path:
    return Path(
        os.environ.get("HPCGRADE_EXERCISES", Path(__file__).resolve().parents[2] / "exercises")
    )


def load_catalogue(root: Path | None = None) -> dict[str, ExerciseInfo]:
    root = Path(root or default_root())
    if not root.is_dir():
        raise ExerciseConfigError(f"exercises folder {root} does not exist")
    infos = [
        load_exercise_info(p)
        for p in root.iterdir()
        if p.is_dir() and (p / "exercise.toml").exists()
    ]
    return {info.slug: info for info in sorted(infos, key=lambda i: (i.order, i.slug))}


def load_exercise_info(path: Path) -> ExerciseInfo:
    where = path / "exercise.toml"
    if not SLUG.match(path.name):
        raise ExerciseConfigError(f"{path}: folder name must be a slug like 'autograd-q'")
    missing = [f for f in REQUIRED_FILES if not (path / f).is_file()]
    if missing:
        raise ExerciseConfigError(f"{path}: missing {', '.join(missing)}")
    try:
        data = tomllib.loads(where.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ExerciseConfigError(f"{where}: {exc}") from None
    unknown = set(data) - {
        "title",
        "section",
        "limits",
        "deadline",
        "slurm",
        "mutants",
        "max_attempts",
        "order",
        "forged",
        "student_programs",
    }
    if unknown:
        raise ExerciseConfigError(f"{where}: unknown keys {', '.join(sorted(unknown))}")
    title = data.get("title")
    if not isinstance(title, dict) or not all(isinstance(title.get(k), str) for k in ("en", "es")):
        raise ExerciseConfigError(f"{where}: title must be a table with 'en' and 'es' strings")
    deadline = Deadline.from_toml(data.get("deadline", {}), where)
    max_attempts = data.get("max_attempts")
    if max_attempts is not None and (not isinstance(max_attempts, int) or max_attempts < 1):
        raise ExerciseConfigError(f"{where}: max_attempts must be a positive whole number")
    order = data.get("order", 0)
    if not isinstance(order, int) or isinstance(order, bool) or order < 0:
        raise ExerciseConfigError(
            f"{where}: order must be a whole number, 0 or more (the "
            "exercise's place in the course: 10, 20, …)"
        )
    slurm = data.get("slurm", {})
    if not isinstance(slurm, dict):
        raise ExerciseConfigError(f"{where}: slurm must be a table")
    mutants, wrong_programs = _mutants(data.get("mutants", {}), path, where)
    return ExerciseInfo(
        path.name,
        path,
        title,
        str(data.get("section", "")),
        data.get("limits", {}),
        deadline,
        slurm,
        mutants,
        wrong_programs,
        max_attempts,
        order,
        max_points(path / "checks.py"),
        _forged(data.get("forged", {}), mutants, path, where),
        _student_programs(data.get("student_programs", {}), path, where),
        checked_functions(path / "checks.py"),
        timed_checks(path / "checks.py"),
    )


def _forged(table: object, mutants: dict, path: Path, where: Path) -> dict[str, str]:
    """`[forged]`: name = "mutant": mutants/<name>.py is that mutant plus a forgery of what the
    harness reports from its own process."""
    if not isinstance(table, dict):
        raise ExerciseConfigError(f"{where}: forged must be a table")
    for name, mutant in table.items():
        if not isinstance(mutant, str) or mutant not in mutants:
            raise ExerciseConfigError(
                f"{where}: forged {name}: {mutant!r} is not one of the exercise's mutants"
            )
        if not (path / "mutants" / f"{name}.py").is_file():
            raise ExerciseConfigError(f"{where}: forged {name}: mutants/{name}.py is missing")
    return dict(table)


def _student_programs(table: object, path: Path, where: Path) -> dict[str, dict]:
    """`[student_programs.name]`: `code`, and `names` = { en, es }, the words that name the
    mistake, which a diagnostic of that code must say."""
    if not isinstance(table, dict):
        raise ExerciseConfigError(f"{where}: student_programs must be a table")
    for name, entry in table.items():
        names = entry.get("names") if isinstance(entry, dict) else None
        if (
            not isinstance(entry, dict)
            or set(entry) != {"code", "names"}
            or not isinstance(names, dict)
            or set(names) != {"en", "es"}
            or not all(isinstance(w, str) and w.strip() for w in names.values())
        ):
            raise ExerciseConfigError(
                f"{where}: [student_programs.{name}] must have `code` and `names` = "
                '{ en = "…", es = "…" } (words its diagnostic must say in each language)'
            )
        if entry["code"] not in CATALOGUE:
            raise ExerciseConfigError(
                f"{where}: student program {name}: unknown diagnostic code {entry['code']!r}"
            )
        if not (path / "student_programs" / f"{name}.py").is_file():
            raise ExerciseConfigError(
                f"{where}: student program {name}: student_programs/{name}.py is missing"
            )
    return {name: {"code": e["code"], "names": dict(e["names"])} for name, e in table.items()}


def _mutants(table: object, path: Path, where: Path) -> tuple[dict[str, str], dict[str, dict]]:
    """`[mutants]`: name = "code", or a known wrong program: [mutants.name] with `code` and
    `says` (en, es), what a student whose code behaves like it is told. Words that state a fact
    about the code ("your output starts as `torch.zeros(...)`") come with `if_source` = { has =
    [names], lacks = [names] }, the names the file must use and must not for that fact to be
    read there, and `may` (en, es): the words where it is not, as a possibility."""
    if not isinstance(table, dict):
        raise ExerciseConfigError(f"{where}: mutants must be a table")
    mutants, wrong_programs = {}, {}
    for name, entry in table.items():
        if isinstance(entry, dict):
            wrong_programs[name] = _wrong_program(name, entry, where)
            entry = entry["code"]
        if entry not in CATALOGUE:
            raise ExerciseConfigError(f"{where}: mutant {name}: unknown diagnostic code {entry!r}")
        if not (path / "mutants" / f"{name}.py").is_file():
            raise ExerciseConfigError(f"{where}: mutant {name}: mutants/{name}.py is missing")
        mutants[name] = entry
    return mutants, wrong_programs


def _wrong_program(name: str, entry: dict, where: Path) -> dict:
    def words(key: str) -> dict[str, str] | None:
        text = entry.get(key)
        if not isinstance(text, dict) or not all(
            isinstance(text.get(k), str) and text[k].strip() for k in ("en", "es")
        ):
            return None
        return {"en": text["en"], "es": text["es"]}

    says, may, condition = words("says"), words("may"), entry.get("if_source")
    keys = {"code", "says"} | ({"if_source", "may"} if "if_source" in entry else set())
    if set(entry) != keys or says is None:
        raise ExerciseConfigError(
            f'{where}: [mutants.{name}] must have `code` and `says` = {{ en = "…", es = "…" }} '
            "(what a student whose code behaves like it is told), and may have `if_source` with "
            "`may`"
        )
    if condition is None:
        return {"says": says}
    names = [condition.get(k, []) for k in ("has", "lacks")]
    if (
        not isinstance(condition, dict)
        or set(condition) - {"has", "lacks", "in"}
        or not isinstance(condition.get("in", ""), str)
        or not any(names)
        or not all(isinstance(n, list) and all(isinstance(x, str) for x in n) for n in names)
        or may is None
    ):
        raise ExerciseConfigError(
            f"{where}: [mutants.{name}] `if_source` = {{ has = [names], lacks = [names] }} (and "
            '`in` = "a function" to read only its code), with '
            '`may` = { en = "…", es = "…" }: the words where the source does not show it'
        )
    within = {"in": condition["in"]} if condition.get("in") else {}
    return {"says": says, "may": may, "if_source": {"has": names[0], "lacks": names[1], **within}}


def max_points(checks: Path) -> float | None:
    """The points of every `@check(..., points=N)` in checks.py, added up. Read from its syntax
    tree: checks.py is the grader's, and importing it here would run it (and need torch). None
    where that cannot be known without running it (points given by a name or an expression, or
    a checks.py that does not parse): the pages then use the maximum the grader reported, and
    the grader reports any error in it."""
    return _read_checks(checks.read_text())[0]


def checked_functions(checks: Path) -> tuple[str, ...]:
    """The names in the `uses` of every `@check(...)` in checks.py, from its syntax tree as
    max_points reads it; empty where one is not written as a literal (or checks.py does not
    parse): then nothing is refused for want of them, and the grader says what is missing."""
    return _read_checks(checks.read_text())[1]


def timed_checks(checks: Path) -> tuple[str, ...]:
    """The names of the `@check(...)`s of checks.py written with `timed=True`, from its syntax
    tree as max_points reads it."""
    return _read_checks(checks.read_text())[2]


@functools.lru_cache(maxsize=64)
def _read_checks(source: str) -> tuple[float | None, tuple[str, ...], tuple[str, ...]]:
    """max_points, checked_functions and timed_checks of a checks.py's text, parsed once per
    text: an exercise's folder is read again whenever one of its files changes, and each
    course's copy of it is read too."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None, (), ()
    checks = [
        decorator
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for decorator in node.decorator_list
        if _is_check(decorator)
    ]
    points = [_points(decorator) for decorator in checks]
    timed = tuple(
        decorator.args[0].value
        for decorator in checks
        if decorator.args and isinstance(decorator.args[0], ast.Constant) and _is_timed(decorator)
    )
    return None if None in points else float(sum(points)), _uses(checks), timed


def _literal(decorator: ast.Call, keyword: str, absent: object) -> object:
    """The value of a decorator's keyword argument, `absent` where it is not given; ValueError
    where it is not written as a literal (a name, an expression)."""
    given = next((k.value for k in decorator.keywords if k.arg == keyword), None)
    if given is None:
        return absent
    try:
        return ast.literal_eval(given)
    except (ValueError, TypeError) as exc:
        raise ValueError(keyword) from exc


def _is_timed(decorator: ast.Call) -> bool:
    try:
        return _literal(decorator, "timed", False) is True
    except ValueError:
        return False


def _uses(checks: list[ast.Call]) -> tuple[str, ...]:
    names: set[str] = set()
    for decorator in checks:
        try:
            uses = _literal(decorator, "uses", ())
        except ValueError:
            return ()
        uses = (uses,) if isinstance(uses, str) else uses
        if not isinstance(uses, (tuple, list)) or not all(isinstance(u, str) for u in uses):
            return ()
        names.update(uses)
    return tuple(sorted(names))


def _is_check(decorator: ast.expr) -> bool:
    function = decorator.func if isinstance(decorator, ast.Call) else None
    return (
        isinstance(function, ast.Name)
        and function.id == "check"
        or isinstance(function, ast.Attribute)
        and function.attr == "check"
    )


def _points(decorator: ast.Call) -> float | None:
    try:
        points = _literal(decorator, "points", None)
    except ValueError:
        return None
    if isinstance(points, bool) or not isinstance(points, (int, float)) or points < 0:
        return None
    return float(points)


_READ: dict[Path, tuple[tuple, ExerciseInfo | None]] = {}
_CATALOGUE: dict[Path, tuple[tuple, dict[str, ExerciseInfo]]] = {}


def signature(folder: Path) -> tuple:
    """What changes when a file under `folder` is added, removed or written: each one's path,
    size and time of change (stat calls only: nothing is read). OSError when it is missing."""
    found = []
    root = os.fspath(folder)
    for parent, folders, files in os.walk(root, onerror=_raise):
        # compiled checks follow their sources: a grade that compiles them changes nothing
        folders[:] = sorted(name for name in folders if name != "__pycache__")
        below = parent[len(root) :].lstrip(os.sep)  # os.walk's parents start with root as given
        for name in sorted(files):
            try:
                stat = os.stat(os.path.join(parent, name))
            except FileNotFoundError:  # removed meanwhile: the next look sees it gone
                continue
            found.append((os.path.join(below, name), stat.st_size, stat.st_mtime_ns))
    return tuple(found)


def _raise(error: OSError) -> None:
    raise error


def current_catalogue(root: Path | None = None) -> dict[str, ExerciseInfo]:
    """`load_catalogue`, kept for this process and read again only when a file of the
    exercises folder changed since (`hpcgrade exercises sync` after an edit, an exercise
    added), so that a worker's tasks do not each read every exercise."""
    root = Path(root or default_root())
    try:
        stamp = signature(root)
    except OSError:
        return load_catalogue(root)  # which says what is wrong with the folder
    known = _CATALOGUE.get(root)
    if known is None or known[0] != stamp:  # each course's folder is kept, as the last read
        _CATALOGUE[root] = known = (stamp, load_catalogue(root))
    return known[1]


def current_info(path: Path) -> ExerciseInfo | None:
    """An exercise's folder, read again only when one of its files has changed since the last
    time (a page that shows its maximum points asks on each view); None while it is missing or
    broken."""
    try:
        stamp = signature(path)
    except OSError:
        return None
    known = _READ.get(path)
    if known is None or known[0] != stamp:
        try:
            info = load_exercise_info(path)
        except (ExerciseConfigError, OSError):
            info = None
        _READ[path] = known = (stamp, info)
    return known[1]

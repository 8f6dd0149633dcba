"""The report: the stable JSON contract of `hpcgrade grade --json` and of every grading run.

One type, `Report`, is the result of a run wherever it goes: from the harness (its stdout, or
report.json in the spool) through the executors and dispatch to the database
(server/core/runs.py). It crosses each process boundary as `to_dict` (JSON) and is read
back with `from_dict`, or `parse`, which turns whatever is not a report into the grader's error.
Who failed is its status: GRADED, the grader worked, and what the submission got wrong is in its
checks and notes (a zero is a grade); ERROR, the grader itself failed (`error` says why), which
is never shown as a zero and is retried.
"""

from __future__ import annotations

import enum
import json
import os
import platform
import sys
from dataclasses import asdict, dataclass, field, fields

# the kind of note that says why the file, or some of its functions, could not be checked at all
LOAD_ERROR = "load-error"
# the kind of note that holds an exercise's advice: how the code works, not graded
ADVICE = "advice"
# in the timing of a harness's first report: the seconds that harness took to start
HARNESS_START = "harness_start"

# Bounds on what a report carries, applied by the grader whatever the student's process sent
# (the harness code in that process is the submission's to rewrite, its caps included), and
# again by the service, which stores no report larger than MAX_REPORT_BYTES
# (server/core/runs.py).
MAX_REPORT_BYTES = 256 << 10  # the whole report, as JSON (json.dumps, ASCII)
MAX_TEXT = 2000  # characters of one string: a message, an exception's text, a note, a detail
MAX_OUTPUT = 64 << 10  # characters of the student's printed output
MAX_ITEMS = 100  # items of one list, or keys of one mapping, in notes and details
# what stands for what was cut: a cut string, list or report says so
CUT = "… [{count} more characters cut]"
CUT_ITEMS = "… [{count} more items cut]"
# the per-string limits tried, longest first, until the report fits: (text, output)
SQUEEZES = ((MAX_TEXT, MAX_OUTPUT), (500, 16 << 10), (160, 4 << 10), (60, 1 << 10), (20, 0))


@dataclass(frozen=True)
class CheckOutcome:
    name: str
    title: str
    points: float
    max_points: float
    passed: bool
    message: str
    diagnostics: tuple[dict, ...] = ()
    titles: dict = field(default_factory=dict)  # the title in every language, for the service

    @classmethod
    def from_dict(cls, data: dict) -> CheckOutcome:
        """ValueError when a field the service stores is missing."""
        missing = [f.name for f in fields(cls) if f.name not in data and f.name not in _OPTIONAL]
        if missing:
            raise ValueError(f"a check without {', '.join(missing)}")
        known = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        return cls(**dict(known, diagnostics=tuple(data["diagnostics"])))


_OPTIONAL = frozenset({"titles"})


class ReportStatus(str, enum.Enum):
    GRADED = "graded"  # the grader worked: a grade, a zero included
    ERROR = "error"  # the grader itself failed: never shown as a zero, and retried


@dataclass(frozen=True)
class Report:
    exercise: str | None
    status: ReportStatus
    score: float
    max_score: float | None
    checks: tuple[CheckOutcome, ...] = ()
    notes: tuple[dict, ...] = ()
    output: str = ""
    environment: dict = field(default_factory=dict)
    sandbox: dict = field(default_factory=dict)
    timing: dict = field(default_factory=dict)
    seed: int | None = None
    lang: str = "en"
    job_id: str | None = ""
    error: str | None = None  # why the grader failed
    exercise_version: str | None = None  # jobs.exercise_version of the files it graded with
    cut: bool = False  # strings, or the whole, were cut to fit the bounds (see `bounded`)

    @property
    def graded(self) -> bool:
        return self.status == ReportStatus.GRADED

    @classmethod
    def grader_error(
        cls,
        error: str,
        exercise: str | None = None,
        job_id: str | None = None,
        environment: dict | None = None,
        timing: dict | None = None,
    ) -> Report:
        """The grader failed, not the submission: `error` says why."""
        return cls(
            exercise,
            ReportStatus.ERROR,
            0.0,
            None,
            job_id=job_id,
            error=error,
            environment=environment or {},
            timing=timing or {},
        )

    def to_dict(self) -> dict:
        """The JSON contract (the fields above). Bounded: every string to MAX_TEXT characters, the
        output to MAX_OUTPUT, the whole to MAX_REPORT_BYTES (see `bounded`); "cut" only when
        something was."""
        data = _as_json(asdict(self))
        data["status"] = self.status.value
        if not data.pop("cut"):
            return bounded(data)
        return dict(bounded(data), cut=True)

    @classmethod
    def from_dict(cls, data: dict) -> Report:
        """A report as JSON: what it lacks takes its default, what this release does not know
        is left out. ValueError when it is not one the service stores: not an object, larger
        than MAX_REPORT_BYTES (an older or broken harness), of no known status, or graded
        without its score, maximum or checks."""
        if not isinstance(data, dict):
            raise ValueError(f"a JSON {type(data).__name__}, not an object")
        try:
            found = size(data)
        except (TypeError, ValueError) as exc:  # not JSON at all
            raise ValueError(f"the report cannot be stored: {clip(exc, 200)}") from None
        if found > MAX_REPORT_BYTES:
            raise ValueError(
                f"the report is {found} bytes, more than the {MAX_REPORT_BYTES} "
                "the service stores: nothing of it was stored"
            )
        status = ReportStatus(data.get("status"))
        missing = [k for k in ("score", "max_score", "checks") if k not in data]
        if status == ReportStatus.GRADED and missing:
            raise ValueError(f"a graded report without {', '.join(missing)}")
        known = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        try:
            checks = tuple(CheckOutcome.from_dict(c) for c in data.get("checks") or ())
        except (TypeError, KeyError) as exc:
            raise ValueError(f"a check is garbled: {exc}") from None
        return cls(
            **dict(
                known,
                exercise=data.get("exercise"),
                status=status,
                checks=checks,
                score=data.get("score", 0.0),
                max_score=data.get("max_score"),
                notes=tuple(data.get("notes") or ()),
            )
        )

    @classmethod
    def parse(cls, data: object, where: str = "") -> Report:
        """`from_dict` that never fails: what is not a report is the grader's error, which
        says why (after `where`, when given: where the report was read)."""
        try:
            return cls.from_dict(data)
        except ValueError as exc:
            return cls.grader_error(f"{where}: {exc}" if where else str(exc))


def _as_json(value: object) -> object:
    """`value` with its tuples as lists, as JSON reads them back: else `bounded`, which compares
    the report before and after, would find every report cut."""
    if isinstance(value, dict):
        return {k: _as_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_as_json(v) for v in value]
    return value


def clip(text: object, limit: int = MAX_TEXT) -> str:
    """`text` as a string of at most about `limit` characters; a cut one says how much went."""
    text = text if isinstance(text, str) else str(text)
    if len(text) <= limit:
        return text
    marker = CUT.format(count=len(text) - limit)
    return (
        text[: max(limit - len(marker), 0)] + marker
        if limit > len(marker)
        else text[:limit] + marker
    )


def _clipped(value: object, text: int, items: int = MAX_ITEMS) -> object:
    """Every string in `value` (lists and mappings walked) clipped to `text` characters, every
    list and mapping to `items` entries; keys too, since a student's text may make them."""
    if isinstance(value, str):
        return clip(value, text)
    if isinstance(value, dict):
        kept = list(value.items())
        out = {
            clip(k, text) if isinstance(k, str) else k: v
            if k in _NAMES and isinstance(v, str) and len(v) <= 64
            else _clipped(v, text, items)
            for k, v in kept[:items]
        }
        if len(kept) > items:
            out["…"] = CUT_ITEMS.format(count=len(kept) - items)
        return out
    if isinstance(value, (list, tuple)):
        out = [_clipped(v, text, items) for v in value[:items]]
        if len(value) > items:
            out.append(CUT_ITEMS.format(count=len(value) - items))
        return out
    return value


def size(report: dict) -> int:
    """A report's size as the spool and the service measure it: its JSON, in bytes."""
    return len(json.dumps(report, default=str).encode())


def bounded(report: dict) -> dict:
    """The report with every string clipped and, when it is still over MAX_REPORT_BYTES, its
    strings clipped shorter until it fits. Each cut string ends saying how much was cut, and a
    cut report has "cut": true. The grader's own fields (exercise, status, scores, points,
    check names, environment, timing) are never cut."""
    for text, output in SQUEEZES:  # never measured whole: it may be gigabytes as JSON
        candidate = _squeezed(report, text, output)
        if candidate != report:
            candidate["cut"] = True
        if size(candidate) <= MAX_REPORT_BYTES:
            return candidate
    # still too large (thousands of checks): the checks' diagnostics go, their points stay
    candidate["checks"] = [
        dict(c, diagnostics=[], message=clip(c.get("message", ""), 20))
        for c in candidate.get("checks", [])
    ]
    if size(candidate) <= MAX_REPORT_BYTES:
        return candidate
    return {
        "exercise": report.get("exercise"),
        "status": ReportStatus.ERROR,
        "score": 0.0,
        "max_score": report.get("max_score"),
        "job_id": report.get("job_id"),
        "environment": report.get("environment"),
        "seed": report.get("seed"),
        "error": f"the report is larger than {MAX_REPORT_BYTES} bytes even when cut",
    }


# the grader's own fields: numbers, names and codes it wrote, never the student's text
_KEPT = frozenset(
    {"exercise", "status", "score", "max_score", "seed", "lang", "job_id", "environment", "timing"}
)
# codes and kinds, which the service reads: whole when short (the grader's are)
_NAMES = frozenset({"code", "kind"})
_KEPT_IN_CHECK = frozenset({"name", "points", "max_points", "passed"})


def _squeezed(report: dict, text: int, output: int) -> dict:
    out = {}
    for key, value in report.items():
        if key in _KEPT:
            out[key] = value
        elif key == "output":
            out[key] = clip(value, output)
        elif key == "checks":
            out[key] = [
                {k: (v if k in _KEPT_IN_CHECK else _clipped(v, text)) for k, v in check.items()}
                for check in value
            ]
        else:
            out[key] = _clipped(value, text)
    return out


def codes(report: dict) -> set[str]:
    """The diagnostic codes a report (as JSON) carries: its checks', and why the file did not
    load or lacks a function, said once in its notes instead of on each check it stopped."""
    return {d["code"] for c in report.get("checks", []) for d in c["diagnostics"]} | {
        n["code"] for n in report.get("notes", []) if n.get("kind") == LOAD_ERROR
    }


def host_environment() -> dict:
    """Where the report was made; without torch, so that an error report can say it too."""
    restarts = os.environ.get("SLURM_RESTART_COUNT", "")
    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        "node": platform.node(),
        "slurm_job": os.environ.get("SLURM_JOB_ID"),
        "slurm_array_task": os.environ.get("SLURM_ARRAY_TASK_ID"),
        "slurm_restart_count": int(restarts) if restarts.isdigit() else None,
    }

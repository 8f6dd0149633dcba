"""The report: the stable JSON contract of `hpcgrade grade --json` and of every grading run."""
from __future__ import annotations

import os
import platform
import sys
from dataclasses import asdict, dataclass, field

# the kind of note that says why the file, or some of its functions, could not be checked at all
LOAD_ERROR = "load-error"


@dataclass(frozen=True)
class CheckResult:
    name: str
    title: str
    points: float
    max_points: float
    passed: bool
    message: str
    diagnostics: tuple[dict, ...] = ()
    titles: dict = field(default_factory=dict)  # the title in every language, for the service


@dataclass(frozen=True)
class Report:
    exercise: str
    status: str  # "graded", or "error" when the grader itself failed (never shown as a zero)
    score: float
    max_score: float
    checks: tuple[CheckResult, ...] = ()
    notes: tuple[dict, ...] = ()
    output: str = ""
    environment: dict = field(default_factory=dict)
    sandbox: dict = field(default_factory=dict)
    timing: dict = field(default_factory=dict)
    seed: int | None = None
    lang: str = "en"
    job_id: str = ""
    error: str | None = None

    def to_dict(self) -> dict:
        """The JSON contract (DESIGN.md); the service reads it back as plain JSON."""
        return asdict(self)


def codes(report: dict) -> set[str]:
    """The diagnostic codes a report (as JSON) carries: its checks', and why the file did not
    load or lacks a function, said once in its notes instead of on each check it stopped."""
    return {d["code"] for c in report.get("checks", []) for d in c["diagnostics"]} | {
        n["code"] for n in report.get("notes", []) if n.get("kind") == LOAD_ERROR}


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

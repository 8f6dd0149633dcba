"""A grading job as it crosses from the service to the harness (standard library only)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

# sandbox layers a job may require (see sandbox.py); "filesystem" is either of mount-namespace
# and landlock. A harness that cannot raise a required one grades nothing (a grader error).
SANDBOX_LAYERS = (
    "network-namespace",
    "pid-namespace",
    "ipc-namespace",
    "mount-namespace",
    "landlock",
    "filesystem",
    "seccomp",
    "rlimits",
    "non-dumpable",
    "scratch-limit",
    "task-limit",
    "seal",
    "gpu-memory",
)
REQUIRED_LAYERS = ("network-namespace", "pid-namespace", "seccomp", "rlimits", "filesystem", "seal")

HIDDEN_CHECKS = "checks.py"
VISIBLE_CHECKS = "visible.py"  # the checks students have: fixed inputs, no reference


def exercise_version(folder: str | Path) -> str:
    """The SHA-256 of an exercise's files (names and contents; caches and hidden files left
    out): what the harness reports it graded with, and what the service synced."""
    root = Path(folder)
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        parts = path.relative_to(root).parts
        if "__pycache__" in parts or any(part.startswith(".") for part in parts):
            continue
        data = path.read_bytes()
        digest.update(f"{'/'.join(parts)}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


@dataclass
class Limits:
    """Per-submission limits; exercise.toml's [limits] table overrides the defaults."""

    call_seconds: float = 10.0
    # running the file or every notebook cell, exploration included: a file that never finishes
    # loading holds a grading slot this long, so an exercise whose cells train asks for more
    load_seconds: float = 10.0
    cpu_seconds: int = 60
    # the wall-clock time of the whole submission (loading and every check): once it is spent,
    # the check running is stopped and the others are not run, each scoring 0 and saying so
    # ("budget-exhausted"); the second look keeps its own time and never uses it
    budget_seconds: float = 60.0
    memory_mb: int = 1024
    output_bytes: int = 64 << 10
    reply_mb: int = 64
    file_mb: int = 16
    submission_kb: int = 1024
    threads: int = 1
    # the student's scratch is a tmpfs of this size (its TMPDIR and HOME, where it may write)
    scratch_mb: int = 256
    # device memory on a GPU node: what torch's allocator may hold, and what the grader lets the
    # process hold beyond its CUDA context (gpu_memory.py); no bound on the CPU
    gpu_memory_mb: int = 2048

    @classmethod
    def from_dict(cls, data: dict) -> "Limits":
        known = cls.__dataclass_fields__
        unknown = set(data) - set(known)
        if unknown:
            raise ValueError(f"unknown limits: {', '.join(sorted(unknown))}")
        values = {k: type(getattr(cls, k))(v) for k, v in data.items()}
        wrong = [k for k, v in values.items() if v <= 0 or isinstance(data[k], bool)]
        if wrong:
            raise ValueError(f"limits must be positive numbers: {', '.join(wrong)}")
        return cls(**values)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Job:
    """One submission to grade; crosses the process boundary as JSON."""

    exercise: str
    exercise_dir: str
    submission: str
    filename: str
    limits: dict = field(default_factory=dict)
    seed: int | None = None
    lang: str = "en"
    device: str = "auto"
    id: str = ""
    checks: str = HIDDEN_CHECKS
    # known wrong programs of the exercise (mutants/<name>.py) and what each tells a student
    wrong_programs: dict = field(default_factory=dict)
    required_layers: tuple[str, ...] = REQUIRED_LAYERS

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict) -> "Job":
        required = tuple(data.get("required_layers", REQUIRED_LAYERS))
        unknown = sorted(set(required) - set(SANDBOX_LAYERS))
        if unknown:
            raise ValueError(
                f"unknown sandbox layers {', '.join(unknown)}; known: {', '.join(SANDBOX_LAYERS)}"
            )
        return cls(**dict(data, required_layers=required))

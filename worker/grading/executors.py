"""Executors: where runs are graded; a registry keyed by name (config EXECUTOR), see executor.py."""

from __future__ import annotations

import atexit

from server.core.config import Settings
from worker.grading.executor import Executor
from worker.grading.local import LocalExecutor
from worker.grading.slurm import SlurmExecutor

EXECUTORS: dict[str, type] = {"local": LocalExecutor, "slurm": SlurmExecutor}


def make_executor(settings: Settings) -> Executor:
    executor = EXECUTORS[settings.executor](settings)
    atexit.register(executor.close)
    return executor

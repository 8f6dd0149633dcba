"""The time a submission may take: its budget, and its limits read within it."""

from __future__ import annotations

import time

from worker.harness.diagnostics import Diagnostic
from worker.harness.jobs import Limits


class Budget:
    """The wall-clock time one submission may take, loading and checks together (the
    exercise's budget_seconds); the second look keeps its own time."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()

    @property
    def spent(self) -> bool:
        return self.left() <= 0

    def diagnostic(self, what: str | dict) -> Diagnostic:
        return Diagnostic("budget-exhausted", {"what": what, "budget": self.seconds})


class BudgetedLimits:
    """An exercise's limits, each call's and the loading's time capped by what is left of the
    budget (the grade's, or the second look's own): a check running when the budget ends is
    stopped then. Read by the student process at each request (StudentProcess keeps the object
    it is given)."""

    def __init__(self, limits: Limits, budget: Budget):
        self.limits, self.budget = limits, budget  # the exercise's, uncapped

    def __getattr__(self, name: str):
        return getattr(self.limits, name)

    @property
    def call_seconds(self) -> float:
        return max(min(self.limits.call_seconds, self.budget.left()), 0.0)

    @property
    def load_seconds(self) -> float:
        return max(min(self.limits.load_seconds, self.budget.left()), 0.0)

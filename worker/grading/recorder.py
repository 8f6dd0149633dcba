"""A worker's side of a run's end, for dispatch and collect alike: each run's end recorded in a
transaction of its own (server/core/runs.py writes it), then its spool folder removed; and the
jobs left with no live run cancelled on the cluster."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core import conditions, runs
from server.core.conditions import Fault
from server.core.db import Database
from server.core.models import GradingRun, RunStatus
from worker.grading.executor import ClusterError, Executor, reports_as_they_come
from worker.harness import spool
from worker.harness.report import Report

log = logging.getLogger(__name__)


@dataclass
class Recorder:
    database: Database
    executor: Executor
    spool: Path
    spool_min_free_mb: int = 0  # SPOOL_MIN_FREE_MB: below it, the spool takes no run

    def spool_room(self) -> str | None:
        """Why the spool cannot take a run's files now (spool.no_room), or None."""
        return spool.no_room(self.spool, self.spool_min_free_mb)

    def spool_takes_runs(self) -> bool:
        """Whether the spool can take runs (spool_room): the spool_full fault is held while it
        cannot and cleared once it can, by dispatch and collect alike, on one criterion, so that
        it never begins and ends by turns while a spool has megabytes but no inode."""
        why = self.spool_room()
        with self.database.sessions.begin() as session:
            if why is not None:
                conditions.hold(session, Fault.spool_full, f"{why}: nothing is sent")
            else:
                conditions.clear(session, Fault.spool_full)
        return why is None

    def collect_reports(self, run_ids: list[int], wait: float = 0.0) -> dict[int, runs.Settled]:
        """Record the reports of these runs that are there now, or appear within `wait` s."""
        reports: dict[int, Report] = {}
        for found in reports_as_they_come(self.executor, dict.fromkeys(run_ids), 0.02, wait):
            reports |= found
        return self.record(reports)

    def record(self, reports: dict[int, Report]) -> dict[int, runs.Settled]:
        outcomes = {}
        for run_id, report in reports.items():
            with self.database.sessions.begin() as session:
                outcomes[run_id] = runs.record(session, run_id, report)
            spool.remove_run(self.spool, str(run_id))
        return outcomes

    def settle(
        self,
        run_ids: list[int],
        transition: Callable[[Session, int, str], runs.Settled],
        reason: str,
    ) -> dict[int, runs.Settled]:
        """End these runs without a report (runs.lose, runs.refuse), each with the reason."""
        outcomes = {}
        for run_id in run_ids:
            with self.database.sessions.begin() as session:
                outcomes[run_id] = transition(session, run_id, reason)
            spool.remove_run(self.spool, str(run_id))
        return outcomes

    def release(self, run_ids: list[int]) -> None:
        """Runs that never reached the executor: as if never claimed."""
        with self.database.sessions.begin() as session:
            runs.release(session, run_ids)
        for run_id in run_ids:
            spool.remove_run(self.spool, str(run_id))

    def cancel_jobs(self, jobs: set[str]) -> None:
        """Cancel these jobs, those no other submission's run is left in."""
        if not jobs:
            return
        with self.database.sessions() as session:
            shared = set(
                session.scalars(
                    select(GradingRun.external_id).where(
                        GradingRun.status == RunStatus.running.value,
                        GradingRun.external_id.in_(jobs),
                    )
                )
            )
        try:
            self.executor.cancel(sorted(jobs - shared))
        except ClusterError as exc:  # the job runs on, and its reports are stale
            log.warning("cannot cancel jobs %s: %s", sorted(jobs - shared), exc)

"""What /metrics tells Prometheus (server/web/health.py serves it, prometheus_client writes it).

Read at each scrape from where the service keeps its state, so that one scrape of any portal
process sees the whole service, every worker and host included: the database (submissions and
runs by state and course, the queue, the time from a submission to its grade, Slurm's jobs, the
cluster's rest, workers' heartbeats, and the event counts of server/core/counters.py), the
spool's free space, and the pilots' heartbeats in it. Nothing is kept in a process's memory.
"""

from __future__ import annotations

import datetime as dt
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry
from sqlalchemy import case, extract, func, select
from sqlalchemy.orm import Session

from server.core import counters
from server.core.config import Settings
from server.core.db import Database
from server.core.models import (
    ClusterState,
    Condition,
    Course,
    Exercise,
    GradingRun,
    RunStatus,
    ScheduleRun,
    Submission,
    SubmissionStatus,
    WorkerHeartbeat,
    aware,
    utcnow,
)
from worker.harness.pilot import heartbeats

# a submission's time to its grade, in seconds: a warm local grade, through a busy queue, to a
# cluster that was down
GRADE_BUCKETS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
# the event counts, with the label values each has from the start (a rate needs a series that
# existed before its first event)
COUNTS = {
    "grader_errors": (
        "Grading runs that ended in the grader's error, by cause: harness (it "
        "reported one), job-ended (the job ended without the run's report), "
        "worker-lost (the worker died or its lease ran out), cluster-refused (the "
        "cluster cannot run it, or left it pending too long).",
        "cause",
        ("harness", "job-ended", "worker-lost", "cluster-refused"),
    ),
    "sbatch_refusals": (
        "sbatch's refusals: transient (the cluster rests, then is tried "
        "again) or permanent (the runs are a grader error).",
        "kind",
        ("transient", "permanent"),
    ),
    "mail_sent": ("Mails the mail server took.", None, ()),
    "mail_refused": ("Mails whose address the mail server refused.", None, ()),
}


def registry(database: Database, settings: Settings) -> CollectorRegistry:
    """A registry of the service's metrics alone (no process's own: which gunicorn process
    answers a scrape is chance)."""
    found = CollectorRegistry(auto_describe=False)
    found.register(ServiceCollector(database, settings))
    return found


class ServiceCollector(Collector):
    def __init__(self, database: Database, settings: Settings):
        self.database, self.settings = database, settings

    def collect(self) -> Iterator[Metric]:
        now = utcnow()
        with self.database.reads() as session:
            yield from self._submissions(session, now)
            yield self._runs(session)
            yield self._grade_times(session)
            yield from self._cluster(session, now)
            yield from self._workers(session, now)
            yield from self._counts(counters.read(session))
        yield from self._spool()
        yield from self._pilots()

    @staticmethod
    def _submissions(session: Session, now: dt.datetime) -> Iterator[Metric]:
        by_state = GaugeMetricFamily(
            "hpcgrade_submissions", "Submissions by course and status.", labels=["course", "status"]
        )
        queued = GaugeMetricFamily(
            "hpcgrade_queue_depth", "Submissions queued, by course.", labels=["course"]
        )
        oldest = GaugeMetricFamily(
            "hpcgrade_queue_oldest_seconds",
            "How long the oldest queued submission of each course has waited.",
            labels=["course"],
        )
        rows = session.execute(
            select(Course.slug, Submission.status, func.count(), func.min(Submission.submitted_at))
            .select_from(Submission)
            .join(Exercise)
            .join(Course)
            .group_by(Course.slug, Submission.status)
        ).all()
        for course, status, number, first in rows:
            by_state.add_metric([course, status], number)
            if status == SubmissionStatus.queued.value:
                queued.add_metric([course], number)
                oldest.add_metric([course], (now - aware(first)).total_seconds())
        yield from (by_state, queued, oldest)

    @staticmethod
    def _runs(session: Session) -> Metric:
        family = GaugeMetricFamily(
            "hpcgrade_runs",
            "Grading runs by course and status (previews included).",
            labels=["course", "status"],
        )
        for course, status, number in session.execute(
            select(Course.slug, GradingRun.status, func.count())
            .select_from(GradingRun)
            .join(Submission)
            .join(Exercise)
            .join(Course)
            .group_by(Course.slug, GradingRun.status)
        ):
            family.add_metric([course, status], number)
        return family

    @staticmethod
    def _grade_times(session: Session) -> Metric:
        """From each graded submission's arrival to its first grade."""
        first = (
            select(GradingRun.submission_id, func.min(GradingRun.finished_at).label("at"))
            .where(GradingRun.status == RunStatus.done.value, GradingRun.regrade_id.is_(None))
            .group_by(GradingRun.submission_id)
            .subquery()
        )
        seconds = _seconds_between(session, first.c.at, Submission.submitted_at)
        row = session.execute(
            select(
                func.count(),
                func.coalesce(func.sum(seconds), 0.0),
                *(
                    func.coalesce(func.sum(case((seconds <= bound, 1), else_=0)), 0)
                    for bound in GRADE_BUCKETS
                ),
            )
            .select_from(first)
            .join(Submission, Submission.id == first.c.submission_id)
        ).one()
        total, summed, *within = row
        return HistogramMetricFamily(
            "hpcgrade_submission_grade_seconds",
            "From a submission's arrival to its first grade.",
            buckets=[*((repr(b), n) for b, n in zip(GRADE_BUCKETS, within)), ("+Inf", total)],
            sum_value=float(summed),
        )

    def _cluster(self, session: Session, now: dt.datetime) -> Iterator[Metric]:
        jobs = GaugeMetricFamily(
            "hpcgrade_slurm_jobs",
            "Slurm jobs grading students' runs, by state (PENDING, RUNNING…) as last polled.",
            labels=["state"],
        )
        for state, number in session.execute(
            select(GradingRun.job_state, func.count(GradingRun.external_id.distinct()))
            .where(
                GradingRun.status == RunStatus.running.value,
                GradingRun.executor == "slurm",
                GradingRun.external_id.is_not(None),
            )
            .group_by(GradingRun.job_state)
        ):
            jobs.add_metric([state or "unknown"], number)
        resting = GaugeMetricFamily(
            "hpcgrade_cluster_resting_seconds",
            "How long nothing is sent to the cluster still: sbatch refused the last job.",
            labels=["executor"],
        )
        failures = GaugeMetricFamily(
            "hpcgrade_cluster_failures", "sbatch's refusals in a row.", labels=["executor"]
        )
        for state in session.scalars(select(ClusterState)):
            left = (
                (aware(state.resting_until) - now).total_seconds() if state.resting_until else 0.0
            )
            resting.add_metric([state.executor], max(left, 0.0))
            failures.add_metric([state.executor], state.failures)
        yield from (jobs, resting, failures)

    def _workers(self, session: Session, now: dt.datetime) -> Iterator[Metric]:
        age = GaugeMetricFamily(
            "hpcgrade_worker_heartbeat_age_seconds",
            "Since each Celery worker's last heartbeat came back through the broker.",
            labels=["node"],
        )
        trip = GaugeMetricFamily(
            "hpcgrade_worker_heartbeat_round_trip_seconds",
            "Its last heartbeat's way through the broker and back.",
            labels=["node"],
        )
        for beat in session.scalars(select(WorkerHeartbeat)):
            age.add_metric([beat.node], (now - aware(beat.beat_at)).total_seconds())
            trip.add_metric([beat.node], beat.round_trip)
        stale = GaugeMetricFamily(
            "hpcgrade_worker_heartbeat_stale_seconds",
            "A heartbeat older "
            "than this: the worker is gone or takes nothing "
            "(3 × WORKER_HEARTBEAT_SECONDS).",
            value=self.settings.worker_heartbeat_stale_seconds,
        )
        schedule = GaugeMetricFamily(
            "hpcgrade_schedule_age_seconds",
            "Since each task of the schedule (Celery beat's) last ran.",
            labels=["task"],
        )
        for task, ran_at in session.execute(select(ScheduleRun.task, ScheduleRun.ran_at)):
            schedule.add_metric([task], (now - aware(ran_at)).total_seconds())
        faults = GaugeMetricFamily(
            "hpcgrade_fault_seconds",
            "How long each fault of the grading's infrastructure has lasted (spool_full, "
            "cluster_away, schedule_stopped: server/core/conditions.py); absent while none.",
            labels=["fault"],
        )
        for name, since in session.execute(select(Condition.name, Condition.since)):
            faults.add_metric([name], (now - aware(since)).total_seconds())
        yield from (age, trip, stale, schedule, faults)

    @staticmethod
    def _counts(found: dict) -> Iterator[Metric]:
        for name, (about, label, values) in COUNTS.items():
            family = CounterMetricFamily(f"hpcgrade_{name}", about, labels=[label] if label else [])
            counted = {
                dict(pairs).get(label) if label else None: value
                for pairs, value in found.get(name, {}).items()
            }
            for value in sorted(set(values) | set(counted) - {None}) if label else [None]:
                family.add_metric([value] if label else [], counted.get(value, 0.0))
            yield family
        buckets = {
            dict(pairs)["le"]: value
            for pairs, value in found.get("harness_start_seconds_bucket", {}).items()
        }
        yield HistogramMetricFamily(
            "hpcgrade_harness_start_seconds",
            "Harness starts (a grader and its zygote, torch "
            "imported), on the workers and in the cluster's jobs, and how long each took.",
            buckets=[
                (bound, buckets.get(bound, 0.0))
                for bound in (*(repr(b) for b in counters.START_BUCKETS), "+Inf")
            ],
            sum_value=found.get("harness_start_seconds_sum", {}).get((), 0.0),
        )

    def _spool(self) -> Iterator[Metric]:
        try:
            free = shutil.disk_usage(self.settings.spool_dir).free
        except OSError:  # no spool yet (a local service that never graded): nothing to say
            return
        yield GaugeMetricFamily(
            "hpcgrade_spool_free_bytes", "Free space on the spool's filesystem.", value=free
        )
        yield GaugeMetricFamily(
            "hpcgrade_spool_min_free_bytes",
            "Below this, nothing is sent to be graded (SPOOL_MIN_FREE_MB).",
            value=self.settings.spool_min_free_mb * 2**20,
        )

    def _pilots(self) -> Iterator[Metric]:
        age = GaugeMetricFamily(
            "hpcgrade_pilot_heartbeat_age_seconds",
            "Since each pilot's last heartbeat in the spool.",
            labels=["pilot", "node"],
        )
        graded = CounterMetricFamily(
            "hpcgrade_pilot_graded", "Runs each pilot graded.", labels=["pilot", "node"]
        )
        now = time.time()
        for name, beat in sorted(heartbeats(Path(self.settings.spool_dir)).items()):
            labels = [name, str(beat.get("node", ""))]
            age.add_metric(labels, max(now - _number(beat.get("beat")), 0.0))
            graded.add_metric(labels, _number(beat.get("graded")))
        yield from (age, graded)


def _seconds_between(session: Session, later, earlier):
    """`later - earlier` in seconds, in the database's own terms."""
    if session.get_bind().dialect.name == "sqlite":
        return (func.julianday(later) - func.julianday(earlier)) * 86400.0
    return extract("epoch", later - earlier)


def _number(value: object) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0

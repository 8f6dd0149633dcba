"""Grades on a real single-node Slurm (scripts/slurm starts it): batches, jobs that end badly,
a node lost mid-job, the controller away, pilots. Jobs run the harness under the course venv of
the grading account (scripts/grading-account). The dispatcher is driven here, in-process, cycle
by cycle, as the Celery tasks drive it; test_slurm_service.py runs the whole service."""

import dataclasses
import datetime as dt
import getpass
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
import slurm_cluster
import sqlalchemy as sa
from helpers import (
    COURSE,
    REFERENCE_Q,
    end_process,
    graded_through_api,
    new_course,
    postgres_database,
    queue_submission,
    the_course,
)

from server.core import conditions, migrate
from server.core.catalogue import load_catalogue
from server.core.conditions import Fault
from server.core.config import Settings, load_settings
from server.core.courses import course_catalogue, edit_course, find_course
from server.core.exercises import sync_exercises
from server.core.models import (
    Exercise,
    GradingRun,
    Regrade,
    RunStatus,
    ScheduleRun,
    Submission,
    User,
    utcnow,
)
from server.core.runs import DONE, MAX_RUNS
from server.core.users import add_user
from server.web import results
from server.web.app import create_app
from server.web.course import run_rows
from server.web.results import MAINTENANCE_REASONS, waiting
from worker.cli.demo import write_config
from worker.grading.dispatch import Dispatcher
from worker.grading.preview import PreviewGrader
from worker.grading.slurm import SlurmExecutor
from worker.harness import pilot as pilot_layout
from worker.harness import spool

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.services,
    pytest.mark.skipif(
        not slurm_cluster.available(), reason="no Slurm cluster of scripts/slurm's here"
    ),
]
ROOT = Path(__file__).parents[2]
SLOW = "import time\ntime.sleep({seconds})\n" + REFERENCE_Q
# autograd-q with room for SLOW to load (the default load time-out is 10 s)
SLOW_LOADS = {"call_seconds": 10, "load_seconds": 60}


@pytest.fixture
def empty_database_url():
    """PostgreSQL, as in production: the state machine is tested on SQLite too (test_dispatch)."""
    yield from postgres_database()


@pytest.fixture
def shared():
    """A folder the grading account can reach, as a cluster's shared filesystem: the spool
    (owned by the account's group, set-group-ID, as deploy/ sets it up) and test exercises."""
    folder = Path(tempfile.mkdtemp(prefix="hpcgrade-test-", dir="/var/tmp"))
    folder.chmod(0o755)
    runs = folder / "spool"
    runs.mkdir()
    shutil.chown(runs, group=os.environ.get("HPCGRADE_TEST_USER", "root"))
    runs.chmod(0o2770)
    yield folder
    slurm_cluster.cancel_all()
    shutil.rmtree(folder, ignore_errors=True)


def settings(shared: Path, **overrides) -> Settings:
    """The service's settings for a course of its own (its job names are its own)."""
    return load_settings(
        {
            "EXECUTOR": "slurm",
            "SPOOL_DIR": str(shared / "spool"),
            "COURSE": f"t{uuid.uuid4().hex[:8]}",
            "COURSE_PYTHON": os.environ["HPCGRADE_TEST_COURSE_PYTHON"],
            "SLURM_PARTITION": os.environ.get("HPCGRADE_TEST_SLURM_PARTITION", "grading"),
            "SLURM_GPUS": 0,
            "SLURM_CPUS": 1,
            "SLURM_MEMORY": "2G",
            "SLURM_TIME": 5,
            "SLURM_BATCH_WAIT": 0,
            # a job is judged ended after two polls: a second apart here, where reports reach
            # the spool at once (no shared filesystem between the node and the service)
            "SLURM_POLL_SECONDS": 1,
            "MAX_RUNNING_PER_STUDENT": 100,  # one student's files packed
            **overrides,
        }
    )


def exercise_with(slug: str, **changes) -> dict:
    """The catalogue with one exercise changed (its [slurm] table, its limits): what the
    dispatcher reads of exercise.toml."""
    catalogue = load_catalogue()
    return {**catalogue, slug: dataclasses.replace(catalogue[slug], **changes)}


def exercises_folder(shared: Path, slug: str, slurm: str) -> Path:
    """An exercises folder where one exercise's [slurm] table is `slurm`."""
    root = shared / "exercises"
    shutil.copytree(ROOT / "exercises" / slug, root / slug)
    toml = root / slug / "exercise.toml"
    toml.write_text(toml.read_text().replace("[slurm]\ngpus = 0\n", f"[slurm]\n{slurm}\n"))
    return root


def make_dispatcher(database, config, catalogue=None) -> Dispatcher:
    """The dispatcher of the tests' course, its jobs named after config's COURSE (this test's
    own); `catalogue`: its exercises (default: its folder's)."""
    own_jobs(database, config)
    return Dispatcher.from_settings(
        database, SlurmExecutor(config), config, exercises=catalogue or course_catalogue
    )


def own_jobs(database, config: Settings, course: str = COURSE) -> Settings:
    """The course's job names made of config's COURSE, so that its jobs are this test's own;
    returns the settings on the test's database, where the course is (for `hpcgrade`'s
    commands)."""
    with database.sessions.begin() as session:
        edit_course(
            session,
            find_course(session, course),
            job_name=f"hpcgrade-{config.course}",
            job_comment=f"hpcgrade {config.course}",
            wckey=config.course,
        )
    return dataclasses.replace(
        config, database_url=database.engine.url.render_as_string(hide_password=False)
    )


def settle(
    grading: Dispatcher,
    ids: list[int],
    seconds: float = 90,
    until=lambda submissions: all(s.status in DONE for s in submissions),
):
    """Run collect and dispatch cycles, as the beat does, until the submissions are done."""
    deadline = time.monotonic() + seconds
    while True:
        grading.collect()
        grading.dispatch()
        with grading.database.sessions() as session:
            submissions = [session.get(Submission, i) for i in ids]
            for submission in submissions:
                submission.runs  # loaded before the session closes
            if until(submissions):
                return {s.id: s for s in submissions}
        assert time.monotonic() < deadline, [
            (s.status, [r.status for r in s.runs]) for s in submissions
        ]
        time.sleep(0.3)


def config_file(path: Path, config: Settings | dict) -> Path:
    """The settings as the TOML file HPCGRADE_CONFIG names, for processes of their own."""
    values = config.to_dict() if isinstance(config, Settings) else config
    write_config(path, {k: v for k, v in values.items() if v is not None})
    return path


def service_app(url: str, catalogue: dict, config: dict):
    """The portal on a new database at head, with the exercises and a student, ana."""
    migrate.upgrade(url)
    app = create_app({**config, "DATABASE_URL": url})
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        sync_exercises(session, the_course(session), catalogue)
        add_user(session, "ana", "Ana", "a@uni.es", "student", "long-password")
    return app


def test_a_terminal_grades_files_in_one_slurm_job(shared, tmp_path):
    good, wrong = tmp_path / "good.py", tmp_path / "wrong.py"
    good.write_text(REFERENCE_Q)
    wrong.write_text(REFERENCE_Q.replace("- b**2", "+ b**2"))
    env = dict(os.environ, HPCGRADE_CONFIG=str(config_file(tmp_path / "h.toml", settings(shared))))
    graded = subprocess.run(
        [
            sys.executable,
            "-m",
            "worker.cli",
            "grade",
            "autograd-q",
            str(good),
            str(wrong),
            "--executor",
            "slurm",
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert graded.returncode == 0, graded.stderr
    reports = [json.loads(line) for line in graded.stdout.splitlines()]
    assert [(r["file"], r["score"]) for r in reports] == [(str(good), 10), (str(wrong), 3)]
    assert reports[0]["environment"]["slurm_job"] == reports[1]["environment"]["slurm_job"]
    assert not any((shared / "spool" / "runs").iterdir())


def test_two_courses_runs_go_to_jobs_of_their_own_with_each_courses_options(database, shared):
    """A second course with its own account, job name, comment, exercises and venv (a wrapper
    that notes it ran, then runs the grading account's venv). Accounting is off on this cluster,
    so Slurm takes any account as given: what is checked is that each job carries its
    course's."""
    config = settings(shared)
    grading = make_dispatcher(database, config)
    marker, python = shared / "second-python-ran", shared / "second-python"
    python.write_text(f'#!/bin/sh\ntouch {marker}\nexec {config.course_python} "$@"\n')
    python.chmod(0o755)
    with database.sessions.begin() as session:
        second = new_course(
            session,
            "second",
            exercises_dir=str(exercises_folder(shared, "autograd-q", "gpus = 0")),
            course_python=str(python),
            slurm={"account": "second-lab"},
            job_name=f"second-{config.course}",
            job_comment="second course",
            wckey="second",
        )
        sync_exercises(session, second, course_catalogue(second))
        add_user(session, "sam", "Sam", "s@uni.es", "student", None, course=second)
    ids = [queue_submission(database, REFERENCE_Q)]
    with database.sessions.begin() as session:
        sam = session.scalar(sa.select(User).where(User.username == "sam"))
        exercise = session.scalar(sa.select(Exercise).where(Exercise.course_id == second.id))
        session.add(
            submission := Submission(
                user=sam,
                exercise=exercise,
                filename="work.py",
                code=REFERENCE_Q.encode(),
                sha256="x",
                status="queued",
                submitted_at=utcnow(),
            )
        )
        session.flush()
        ids.append(submission.id)
    done = settle(grading, ids)
    assert [s.score for s in done.values()] == [10, 10]
    jobs = [done[i].runs[0].external_id for i in ids]
    shown = [
        subprocess.run(
            ["squeue", "-h", "--states=all", "-j", job, "-o", "%j|%a|%k"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for job in jobs
    ]
    assert [line.split(" batch ")[0] for line in shown] == [
        f"hpcgrade-{config.course}|(null)|hpcgrade {config.course}",
        f"second-{config.course}|second-lab|second course",
    ]
    assert marker.exists()


def test_queued_submissions_go_out_packed_into_fewer_jobs(database, shared):
    """Five autograd-q runs in batches of three, and a metrics run on a (fake) GPU of its own."""
    catalogue = exercise_with("metrics", slurm={"gpus": 1})
    # 10 minutes: time for three runs at the default budget (spool.run_seconds)
    grading = make_dispatcher(
        database, settings(shared, SLURM_BATCH_SIZE=3, SLURM_TIME=10), catalogue
    )
    ids = [queue_submission(database, REFERENCE_Q) for _ in range(4)]
    ids.append(queue_submission(database, REFERENCE_Q.replace("- b**2", "+ b**2")))
    metrics = (ROOT / "exercises" / "metrics" / "reference.py").read_text()
    ids.append(queue_submission(database, metrics, "metrics"))
    grading.dispatch()
    done = settle(grading, ids)
    assert [s.score for s in done.values()] == [10] * 4 + [3, 10]
    runs = [s.runs[-1] for s in done.values()]
    assert len({run.external_id for run in runs}) == 3
    assert all(run.environment["slurm_job"] == run.external_id for run in runs)
    assert all(run.environment["node"] == slurm_cluster.node() for run in runs)
    holds = {
        run.external_id: subprocess.run(
            ["scontrol", "show", "job", "-o", run.external_id], capture_output=True, text=True
        ).stdout
        for run in runs
    }
    assert ["TresPerNode=gres:gpu:1" in holds[run.external_id] for run in runs] == [False] * 5 + [
        True
    ]  # a CPU-only exercise's job holds no GPU
    assert not any((shared / "spool" / "runs").iterdir())  # each run's folder, once recorded


def test_a_job_that_fails_is_dispatched_again_then_a_grader_error_never_a_zero(database, shared):
    grading = make_dispatcher(database, settings(shared, COURSE_PYTHON="/nonexistent/python"))
    submission_id = queue_submission(database, REFERENCE_Q)
    grading.dispatch()
    submission = settle(grading, [submission_id])[submission_id]
    assert (submission.status, submission.score) == ("error", None)
    assert [r.status for r in submission.runs] == ["lost"] * MAX_RUNS
    assert "ended FAILED" in submission.runs[0].error
    assert "/nonexistent/python" in submission.runs[0].error  # the end of the job's log


def test_a_job_out_of_memory_is_dispatched_again_then_a_grader_error(database, shared):
    catalogue = exercise_with("autograd-q", slurm={"gpus": 0, "memory": "150M"})
    grading = make_dispatcher(database, settings(shared), catalogue)
    submission_id = queue_submission(database, REFERENCE_Q)
    grading.dispatch()
    submission = settle(grading, [submission_id], seconds=120)
    submission = submission[submission_id]
    assert (submission.status, submission.score, len(submission.runs)) == ("error", None, MAX_RUNS)
    assert any(
        "OUT_OF_MEMORY" in (r.error or "") or r.job_state == "OUT_OF_MEMORY"
        for r in submission.runs
    )


def collect_until(grading: Dispatcher, run_id: int, seconds: float = 60) -> str:
    """Collect cycles alone (no dispatch: nothing is sent again) until the run is settled."""
    deadline = time.monotonic() + seconds
    while (outcome := grading.collect().get(run_id)) is None:
        assert time.monotonic() < deadline, f"run {run_id} not settled"
        time.sleep(0.3)
    return outcome


def collected_reason(grading: Dispatcher, database, run_id: int) -> str | None:
    """One collect cycle; the reason squeue gave for the run's job waiting, as recorded."""
    grading.collect()
    with database.sessions() as session:
        return session.get(GradingRun, run_id).job_reason


def test_an_admins_scancel_sends_the_runs_back_to_the_queue_unused(database, shared):
    """Only the instructors' Stop grading cancels a submission: a job cancelled from outside the
    service (an admin's scancel) sends its runs back to the queue, their attempts unused."""
    catalogue = exercise_with("autograd-q", slurm={"gpus": 0, "extra": ["--hold"]})
    grading = make_dispatcher(database, settings(shared), catalogue)
    submission_id = queue_submission(database, REFERENCE_Q)
    grading.dispatch()
    with database.sessions() as session:
        run_id, job = session.execute(sa.select(GradingRun.id, GradingRun.external_id)).one()
    subprocess.run(["scancel", job], check=True)  # an administrator, from a terminal
    assert collect_until(grading, run_id) == "requeued"
    with database.sessions() as session:
        submission = session.get(Submission, submission_id)
        assert (submission.status, submission.runs) == ("queued", [])
    grading.dispatch()  # sent again; now staff stop it: that cancels
    assert grading.cancel([submission_id]) == [submission_id]
    with database.sessions() as session:
        assert session.get(Submission, submission_id).status == "cancelled"


def test_runs_of_a_job_that_lost_its_node_go_back_unused(database, shared):
    """A job that may not be requeued ends NODE_FAIL when its node is lost: neither the run it
    was grading nor the one it had not begun caused it, and both are graded later, unused."""
    catalogue = exercise_with(
        "autograd-q", slurm={"gpus": 0, "extra": ["--no-requeue"]}, limits=SLOW_LOADS
    )
    grading = make_dispatcher(
        database, settings(shared, SLURM_BATCH_SIZE=2, SLURM_TIME=10), catalogue
    )
    slow = queue_submission(database, SLOW.format(seconds=10))
    other = queue_submission(database, REFERENCE_Q)
    grading.dispatch()
    with database.sessions() as session:
        run_id, job = session.execute(
            sa.select(GradingRun.id, GradingRun.external_id).where(GradingRun.submission_id == slow)
        ).one()
    settle(grading, [slow], until=lambda s: slurm_cluster.job_state(job) == "RUNNING")
    slurm_cluster.lose_node("test: a node lost mid-job")
    try:
        assert collect_until(grading, run_id) == "requeued"
        assert slurm_cluster.job_state(job) == "NODE_FAIL"
    finally:
        slurm_cluster.resume_node()
    done = settle(grading, [slow, other], seconds=120)
    for submission in done.values():
        assert [(r.attempt, r.status) for r in submission.runs] == [(1, "done")]
        assert submission.runs[0].external_id != job


def test_a_settled_run_shows_its_jobs_final_state(database, shared):
    """A run is graded from its report while its job still runs: the job's end is recorded on it
    later, not its last state seen."""
    grading = make_dispatcher(database, settings(shared))
    submission_id = queue_submission(database, REFERENCE_Q)
    grading.dispatch()
    settle(grading, [submission_id])
    deadline = time.monotonic() + 30
    while True:
        grading.collect()
        with database.sessions() as session:
            run = session.scalar(sa.select(GradingRun))
        if run.job_state == "COMPLETED" or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert (run.status, run.job_state) == ("done", "COMPLETED")


def student_reads(database, submission_id: int) -> tuple[dict, list]:
    """What the submission's page and the API say of a submission not graded yet
    (results.waiting: `held_by`, `note`), and its runs as staff read them."""
    app = create_app(
        {
            "DATABASE_URL": database.engine.url.render_as_string(False),
            "SECRET_KEY": "test",
            "TESTING": True,
            "EXECUTOR": "slurm",  # whose resting the cluster's state says
        }
    )
    results._pace_kept = None  # a portal reads the queue's pace again every few seconds: now
    with app.test_request_context(), database.sessions() as session:
        submission = session.get(Submission, submission_id)
        return waiting(session, submission, "en"), run_rows(submission)


def test_a_drained_node_is_waiting_for_the_cluster_then_cluster_unavailable(database, shared):
    """The student reads that the cluster has not started their grading, staff read squeue's
    reason; past SLURM_PENDING_LIMIT_SECONDS the job is cancelled and the run is a grader error,
    "cluster unavailable": never a zero, no try used."""
    grading = make_dispatcher(database, settings(shared, SLURM_PENDING_LIMIT_SECONDS=15))
    submission_id = queue_submission(database, REFERENCE_Q)
    slurm_cluster.drain_node("test: maintenance")
    try:
        grading.dispatch()
        with database.sessions() as session:
            run_id, job = session.execute(sa.select(GradingRun.id, GradingRun.external_id)).one()
        # squeue's reason is "None" until the scheduler has looked at the job, then
        # "ReqNodeNotAvail…" and "Nodes required for job are DOWN, DRAINED…": on a busy
        # machine, a few polls after sbatch
        deadline, reasons = time.monotonic() + 30, []
        while not (reason := collected_reason(grading, database, run_id) or "").startswith(
            MAINTENANCE_REASONS
        ):
            reasons.append(reason)
            assert time.monotonic() < deadline, reasons
            time.sleep(0.3)
        seen, (row,) = student_reads(database, submission_id)
        assert seen["waiting_for_cluster"] and seen["held_by"] == "cluster_maintenance"
        assert "the nodes that grade are under maintenance" in seen["note"]
        assert row.job_state == "PENDING" and row.job_reason, row
        assert collect_until(grading, run_id, seconds=60) == "error"
    finally:
        slurm_cluster.resume_node()
    with database.sessions() as session:
        submission = session.get(Submission, submission_id)
        assert (submission.status, submission.score) == ("error", None)
        (run,) = submission.runs
        assert run.status == "failed" and run.error.startswith("cluster unavailable")
        assert run.job_reason and run.job_reason in run.error
    assert slurm_cluster.job_state(job) == "CANCELLED"


def packed(monkeypatch):
    """The dispatcher packs runs as if each took a second; the job's harness, in a process of
    its own, still knows what each may take (spool.run_seconds)."""
    from worker.grading import dispatch

    monkeypatch.setattr(dispatch.spool, "run_seconds", lambda limits: 1.0)
    monkeypatch.setattr(dispatch, "JOB_START_SECONDS", 0)


def test_runs_a_job_has_no_time_for_go_back_to_the_queue_with_their_attempts(
    database, shared, monkeypatch
):
    """A 2-minute job, runs that may take 90 s + the second look (more than the job has left
    once it has graded one): the harness grades the first and leaves the others, which go back
    to the queue unused, and are graded by later jobs."""
    packed(monkeypatch)
    catalogue = exercise_with(
        "autograd-q", slurm={"gpus": 0, "time": 2}, limits={"budget_seconds": 90}
    )
    grading = make_dispatcher(database, settings(shared, SLURM_BATCH_SIZE=3), catalogue)
    ids = [queue_submission(database, REFERENCE_Q) for _ in range(3)]
    grading.dispatch()
    done = settle(grading, ids, seconds=150)
    assert [s.score for s in done.values()] == [10] * 3
    # one run each, its first attempt: the runs left were never charged
    assert [[(r.attempt, r.status) for r in s.runs] for s in done.values()] == [[(1, "done")]] * 3
    assert len({s.runs[0].external_id for s in done.values()}) == 3  # each job graded one


def test_a_job_over_its_time_charges_only_the_run_it_was_grading(database, shared, monkeypatch):
    """The first run of a batch sleeps past its job's limit (taken to nothing once that run has
    begun): the job ends TIMEOUT, that run is charged (lost), the two it never began are graded
    later, unused."""
    packed(monkeypatch)
    catalogue = exercise_with(
        "autograd-q",
        slurm={"gpus": 0, "time": 1},
        limits={
            "load_seconds": 300,
            "call_seconds": 300,
            "cpu_seconds": 300,
            "budget_seconds": 300,
        },
    )
    grading = make_dispatcher(database, settings(shared, SLURM_BATCH_SIZE=3), catalogue)
    slow = queue_submission(database, SLOW.format(seconds=240))
    others = [queue_submission(database, REFERENCE_Q) for _ in range(2)]
    grading.dispatch()
    with database.sessions() as session:
        jobs = set(session.scalars(sa.select(GradingRun.external_id)))
        slow_run = session.scalar(sa.select(GradingRun.id).where(GradingRun.submission_id == slow))
    assert len(jobs) == 1  # one batch
    begun = spool.run_dir(shared / "spool", str(slow_run))
    settle(grading, [slow], seconds=120, until=lambda _: spool.was_started(begun))
    slurm_cluster.time_out(jobs.pop())
    ended = settle(
        grading, [slow], seconds=200, until=lambda s: s[0].runs and s[0].runs[0].status != "running"
    )
    first = ended[slow].runs[0]
    assert first.status == "lost" and "ended TIMEOUT" in first.error
    grading.cancel([slow])  # its next try would take the others' next job to its limit again
    done = settle(grading, others, seconds=120)
    for other in others:
        assert done[other].score == 10
        assert [r.attempt for r in done[other].runs] == [1]  # its attempt was not used
        assert done[other].runs[0].external_id != first.external_id  # graded by a later job


def test_a_preview_packs_its_jobs_as_dispatch_does(database, shared):
    """A regrade's preview on a 2-minute job with 90-s runs: one run per job, as dispatch packs
    them (SLURM_BATCH_SIZE alone would put the three in one job, which would leave two)."""
    catalogue = exercise_with(
        "autograd-q", slurm={"gpus": 0, "time": 2}, limits={"budget_seconds": 90}
    )
    grading = make_dispatcher(database, settings(shared, SLURM_BATCH_SIZE=3), catalogue)
    ids = [queue_submission(database, REFERENCE_Q) for _ in range(3)]
    with database.sessions.begin() as session:
        first = session.get(Submission, ids[0])
        regrade = Regrade(
            exercise_id=first.exercise_id, started_by=first.user_id, started_at=utcnow()
        )
        session.add(regrade)
        session.flush()
        regrade_id = regrade.id
        session.add_all(
            GradingRun(
                submission_id=i,
                attempt=1,
                executor="slurm",
                status=RunStatus.previewing.value,
                regrade_id=regrade_id,
                started_at=utcnow(),
                lease_until=utcnow(),
            )
            for i in ids
        )
    outcomes = PreviewGrader(grading, poll_seconds=0.5).grade_previews(
        regrade_id, lambda worker: False
    )
    assert sorted(outcomes.values()) == ["preview"] * 3
    with database.sessions() as session:
        assert len(set(session.scalars(sa.select(GradingRun.external_id)))) == 3


def test_a_node_lost_mid_job_is_graded_once_when_the_job_restarts(database, shared):
    grading = make_dispatcher(
        database,
        settings(shared, SLURM_BATCH_SIZE=2, SLURM_TIME=10),
        exercise_with("autograd-q", limits=SLOW_LOADS),
    )
    quick = queue_submission(database, REFERENCE_Q)
    slow = queue_submission(database, SLOW.format(seconds=8))
    grading.dispatch()
    settle(grading, [quick], until=lambda s: s[0].status == "graded")
    with database.sessions() as session:
        job = session.scalar(
            sa.select(GradingRun.external_id).where(GradingRun.submission_id == slow)
        )
    slurm_cluster.lose_node("test: a node lost mid-job")
    try:
        settle(grading, [slow], until=lambda s: slurm_cluster.job_state(job) == "PENDING")
    finally:
        slurm_cluster.resume_node()
    slurm_cluster.start_now(job)
    done = settle(grading, [quick, slow])
    assert [(s.status, s.score) for s in done.values()] == [("graded", 10), ("graded", 10)]
    for submission in done.values():
        assert [(r.status, r.external_id) for r in submission.runs] == [("done", job)], (
            "quick" if submission.id == quick else "slow",
            [(r.status, r.external_id, r.job_state, r.error) for r in submission.runs],
        )
    assert done[slow].runs[0].environment["slurm_restart_count"] in (1, "1")


def test_the_controller_away_loses_nothing(database, shared):
    grading = make_dispatcher(database, settings(shared))
    running = queue_submission(database, SLOW.format(seconds=5))
    grading.dispatch()
    with database.sessions() as session:
        job = session.scalar(sa.select(GradingRun.external_id))
    settle(grading, [running], until=lambda s: slurm_cluster.job_state(job) == "RUNNING")
    slurm_cluster.stop_controller()
    try:
        waiting = queue_submission(database, REFERENCE_Q)
        grading.dispatch()  # sbatch fails: the submission stays queued, with no run
        seen, runs = student_reads(database, waiting)
        assert (seen["held_by"], runs) == ("cluster_resting", [])
        assert "not taking new jobs just now" in seen["note"]
        # the running job's report needs no controller to be read
        settle(grading, [running], until=lambda s: s[0].status == "graded")
        with database.sessions() as session:
            still = session.get(Submission, waiting)
            assert (still.status, still.runs) == ("queued", [])
            # squeue did not answer: the fault a running submission's student reads
            assert Fault.cluster_away in conditions.current(session)
    finally:
        slurm_cluster.start_controller()
    done = settle(grading, [running, waiting])
    assert [(s.status, s.score, len(s.runs)) for s in done.values()] == [("graded", 10, 1)] * 2


def test_a_report_beat_no_longer_collects_is_said_so_then_graded(database, shared):
    """Celery beat killed: the job has ended and its report waits in the spool, and nothing
    collects it. The student reads that its result waits to be collected (it once read
    "waiting for the cluster"), as soon as a worker's heartbeat finds beat's reconcile stale;
    once collect runs again the submission is graded, no try used."""
    grading = make_dispatcher(database, settings(shared))
    submission_id = queue_submission(database, REFERENCE_Q)
    grading.dispatch()
    with database.sessions() as session:
        job = session.scalar(sa.select(GradingRun.external_id))
    deadline = time.monotonic() + 120
    while slurm_cluster.job_state(job) != "COMPLETED":  # ended; nothing has collected it
        assert time.monotonic() < deadline, slurm_cluster.job_state(job)
        time.sleep(0.5)
    with database.sessions.begin() as session:
        stale = utcnow() - dt.timedelta(seconds=conditions.SCHEDULE_STALE_SECONDS + 60)
        session.merge(ScheduleRun(task="reconcile", ran_at=stale))
        conditions.watch_the_schedule(session)  # as each worker's heartbeat asks
    seen, (row,) = student_reads(database, submission_id)
    assert seen["held_by"] == "schedule_stopped" and "waits to be collected" in seen["note"]
    assert row.status == "running"
    done = settle(grading, [submission_id])  # beat back: collect runs again
    assert [(s.status, s.score, len(s.runs)) for s in done.values()] == [("graded", 10, 1)]


def test_a_request_no_node_can_hold_is_refused_not_left_pending(
    database, shared, tmp_path, monkeypatch
):
    catalogue = exercise_with("autograd-q", slurm={"gpus": 0, "cpus": 4})
    config = settings(shared)
    grading = make_dispatcher(database, config, catalogue)
    submission_id = queue_submission(database, REFERENCE_Q)
    grading.dispatch()
    with database.sessions() as session:
        submission = session.get(Submission, submission_id)
        assert (submission.status, submission.score) == ("error", None)
        assert "asks 4 CPUs, the largest node of partition grading has" in submission.runs[0].error
    assert slurm_cluster.jobs() == []
    # and at start-up: the dispatcher's unit runs `hpcgrade slurm check` before it starts
    env = dict(
        os.environ,
        HPCGRADE_CONFIG=str(config_file(tmp_path / "h.toml", own_jobs(database, config))),
        HPCGRADE_EXERCISES=str(exercises_folder(shared, "autograd-q", "gpus = 0\ncpus = 4")),
    )
    checked = subprocess.run(
        [sys.executable, "-m", "worker.cli", "slurm", "check"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert checked.returncode == 1
    assert "autograd-q: asks 4 CPUs, the largest node of partition grading has" in checked.stderr


def test_slurm_check_probes_the_sandbox_of_a_node(database, shared, tmp_path):
    """A probe job starts a student process on a node as a grade does: every layer is raised
    there, and the check refuses a checkout the job's account may write (root may write all),
    and jobs that run as the account submitting them (here root, as the tests submit)."""
    config = own_jobs(database, settings(shared))
    env = dict(
        os.environ,
        HPCGRADE_CONFIG=str(config_file(tmp_path / "h.toml", config)),
        HPCGRADE_EXERCISES=str(exercises_folder(shared, "autograd-q", "gpus = 0")),
    )
    checked = subprocess.run(
        [sys.executable, "-m", "worker.cli", "slurm", "check", "--wait", "120"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    probed = [
        line
        for line in checked.stdout.splitlines()
        if line.startswith(f"course {COURSE}, partition grading: probe on ")
    ]
    assert probed and "mount-namespace" in probed[0] and "seccomp" in probed[0], (
        checked.stdout + checked.stderr
    )
    assert checked.returncode == 1
    assert "can write the code the jobs run" in checked.stderr, checked.stderr
    assert f"the jobs run as {getpass.getuser()}, the account that submits them" in checked.stderr
    skipped = subprocess.run(
        [sys.executable, "-m", "worker.cli", "slurm", "check", "--no-probe"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert skipped.returncode == 0 and "probe on" not in skipped.stdout, skipped.stderr


def test_a_pilot_grades_as_runs_arrive_and_its_runs_survive_its_end(database, shared, tmp_path):
    config = settings(shared)
    grading = make_dispatcher(database, config, exercise_with("autograd-q", limits=SLOW_LOADS))
    env = dict(
        os.environ,
        HPCGRADE_CONFIG=str(config_file(tmp_path / "h.toml", own_jobs(database, config))),
    )
    started = subprocess.run(
        [
            sys.executable,
            "-m",
            "worker.cli",
            "pilot",
            "start",
            "--course",
            COURSE,
            "--hours",
            "0.2",
        ],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    pilot = started.stdout.split()[1]
    with database.sessions() as session:
        course_id = find_course(session, COURSE).id
    shape = grading.exercise(course_id, "autograd-q")[1]
    deadline = time.monotonic() + 60
    while grading.pilots.choose(shape) != pilot:
        assert time.monotonic() < deadline, "the pilot never took runs"
        time.sleep(0.2)

    first = queue_submission(database, REFERENCE_Q)
    # graded within the dispatch, by the pilot: no job, no batch wait, no poll (how fast is
    # bench/slurm.py's to say, not a wall-clock bound that a busy machine can break)
    assert grading.dispatch().outcomes == {first: "graded"}
    listed = subprocess.run(
        [sys.executable, "-m", "worker.cli", "pilot", "list"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    ).stdout
    assert pilot in listed and "RUNNING" in listed

    slow = queue_submission(database, SLOW.format(seconds=8))
    grading.dispatch()
    with database.sessions() as session:
        run_id = str(
            session.scalar(sa.select(GradingRun.id).where(GradingRun.submission_id == slow))
        )
    folder = pilot_layout.pilot_dir(shared / "spool", pilot)
    settle(
        grading, [slow], until=lambda s: pilot_layout.read_heartbeat(folder)["grading"] == run_id
    )
    subprocess.run(["scancel", pilot], check=True)  # the allocation is lost mid-run
    done = settle(grading, [first, slow], seconds=120)
    assert [r.executor for r in done[first].runs] == ["pilot"]
    # not the run's doing: it goes to sbatch without using a try
    assert [(r.executor, r.status, r.attempt) for r in done[slow].runs] == [("slurm", "done", 1)]
    assert done[slow].score == 10


def test_the_service_grades_a_submission_on_slurm_through_the_api(
    shared, redis_server, catalogue, tmp_path
):
    """The portal, a dispatcher (a Celery worker with EXECUTOR=slurm) and beat as their own
    processes, as deploy/systemd runs them; Slurm's commands over ssh on a submit host, as the
    grading account, so the harness runs unprivileged inside the job."""
    for url in postgres_database():
        config = {
            **settings(shared).to_dict(),
            "BROKER_URL": redis_server.url,
            "SECRET_KEY": "test",
            "COLLECT_SECONDS": 0.5,
            "SLURM_BATCH_WAIT": 0.2,
            "SLURM_SUBMIT_HOST": os.environ["HPCGRADE_TEST_SSH_HOST"],
            "SLURM_SSH_OPTIONS": json.loads(os.environ["HPCGRADE_TEST_SSH_OPTIONS"]),
        }
        app = service_app(url, catalogue, config)
        env = dict(
            os.environ,
            HPCGRADE_CONFIG=str(config_file(tmp_path / "h.toml", {**config, "DATABASE_URL": url})),
        )
        celery = [sys.executable, "-m", "celery", "-A", "worker.celery_app"]
        services = [
            subprocess.Popen(
                [
                    *celery,
                    "worker",
                    "--concurrency=2",
                    "--without-gossip",
                    "--without-mingle",
                    "-l",
                    "warning",
                ],
                cwd=ROOT,
                env=env,
            ),
            subprocess.Popen(
                [*celery, "beat", "-l", "warning", "--schedule", str(tmp_path / "beat")],
                cwd=ROOT,
                env=env,
            ),
        ]
        try:
            status = graded_through_api(app, "ana", seconds=90)
        finally:
            for process in services:
                process.terminate()
            for process in services:
                end_process(process)
        assert status["score"] == 10 and all(c["passed"] for c in status["checks"])
        with app.extensions["hpcgrade.db"].sessions() as session:
            run = session.scalar(sa.select(GradingRun))
            assert (run.executor, run.status) == ("slurm", "done")
            assert run.environment["slurm_job"] == run.external_id
            assert run.sandbox["unavailable"] == [] and "network-namespace" in run.sandbox["layers"]
        owner = subprocess.run(
            ["squeue", "-h", "-t", "all", "-j", run.external_id, "-o", "%u"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        assert owner == os.environ["HPCGRADE_TEST_USER"]
        app.extensions["hpcgrade.db"].dispose()


def test_a_celery_worker_in_an_allocation_grades_with_the_local_executor(
    shared, redis_server, catalogue, tmp_path
):
    """deploy/slurm/celery-worker.sbatch, for clusters whose nodes reach Redis and the database."""
    for url in postgres_database():
        config = {
            "DATABASE_URL": url,
            "BROKER_URL": redis_server.url,
            "SECRET_KEY": "test",
            "EXECUTOR": "local",
            "SPOOL_DIR": str(shared / "spool"),
            "COURSE_PYTHON": os.environ["HPCGRADE_TEST_COURSE_PYTHON"],
        }
        app = service_app(url, catalogue, config)
        worker = subprocess.run(
            [
                "sbatch",
                "--parsable",
                "--time=10",
                "--mem=4G",
                f"--output={tmp_path}/worker.out",
                f"--export=HPCGRADE_HOME={ROOT},"
                f"HPCGRADE_CONFIG={config_file(tmp_path / 'worker.toml', config)}",
                str(ROOT / "deploy" / "slurm" / "celery-worker.sbatch"),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        try:
            status = graded_through_api(
                app, "ana", seconds=90, context=lambda: (tmp_path / "worker.out").read_text()
            )
        finally:
            subprocess.run(["scancel", worker], check=True)
        assert status["score"] == 10
        with app.extensions["hpcgrade.db"].sessions() as session:
            run = session.scalar(sa.select(GradingRun))
            assert (run.executor, run.environment["slurm_job"]) == ("local", worker)
        app.extensions["hpcgrade.db"].dispose()

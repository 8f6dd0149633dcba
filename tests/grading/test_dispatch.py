"""The dispatch/collect state machine on SQLite and PostgreSQL, against a cluster whose jobs end
as each test says (tests/slurm/test_slurm.py runs the same flows on a real Slurm). Reports are real
ones from the harness, written into the spool as a job would write them."""

import dataclasses
import datetime as dt
import json
import threading
import time

import pytest
import sqlalchemy as sa
from helpers import REFERENCE_Q, dispatcher, queue_submission

from server.core.models import Course, GradingRun, Submission
from server.core.queue import enqueue
from server.core.runs import MAX_RUNS
from worker.grading.executor import ClusterError, ImpossibleRequest, JobState, SubmitError
from worker.harness import spool
from worker.harness.pilot import Pilot

LATER = dt.timedelta(hours=1)


class ScriptedCluster:
    """The executor interface over jobs that a test ends by hand."""

    name, synchronous = "slurm", False

    def __init__(self, spool_dir):
        self.spool, self.jobs, self.down, self.refusing = spool_dir, {}, False, None
        self.submitted = 0

    def submit(self, jobs, resources):
        if self.refusing:
            raise ImpossibleRequest(self.refusing)
        if self.down:
            raise SubmitError("sbatch failed (exit 1)", "Unable to contact slurm controller")
        job_id = str(100 + self.submitted)
        self.submitted += 1
        self.jobs[job_id] = {
            "state": "PENDING",
            "runs": [job.id for job in jobs],
            "resources": resources,
        }
        return [job_id] * len(jobs)

    def poll(self, ids):
        if self.down:
            raise ClusterError("squeue failed (exit 1)", "Unable to contact slurm controller")
        return {i: JobState(self.jobs[i]["state"], "node7") for i in ids if i in self.jobs}

    def read_report(self, run_id):
        return spool.read_report(spool.run_dir(self.spool, run_id))

    def cancel(self, ids):
        for i in ids:
            self.jobs[i]["state"] = "CANCELLED"

    def log_tail(self, external_id):
        return "slurmstepd: error: the end of the job's log"

    def close(self):
        pass

    def end(self, job_id, state, report=None, runs=None):
        """The job ends in `state`, having written `report` for `runs` (default: all of them)."""
        for run_id in self.jobs[job_id]["runs"] if runs is None else runs:
            if report is not None:
                spool.write_report(spool.run_dir(self.spool, run_id), report)
        self.jobs[job_id]["state"] = state


@pytest.fixture(scope="module")
def report(harness, tmp_path_factory, catalogue):
    """A real report of the reference of autograd-q: full marks."""
    path = tmp_path_factory.mktemp("reference") / "work.py"
    path.write_text(REFERENCE_Q)
    return harness.report_for(catalogue["autograd-q"].job(path, seed=3))


@pytest.fixture
def cluster(tmp_path):
    return ScriptedCluster(tmp_path / "spool")


@pytest.fixture
def grading(database, cluster, catalogue):
    """Ana's many submissions are packed together: no bound per student here (see
    tests/grading/test_fairness.py)."""
    return dispatcher(database, cluster, catalogue, batch_size=3, batch_wait=0.0, per_student=100)


def states(database):
    with database.sessions() as session:
        return {
            s.id: (s.status, s.score, [(r.status, r.external_id) for r in s.runs])
            for s in session.scalars(sa.select(Submission).order_by(Submission.id))
        }


def shape_of(database, grading, slug="autograd-q"):
    """The shape of the tests' course's runs of this exercise."""
    with database.sessions() as session:
        course_id = session.scalar(sa.select(Course.id))
    return grading.exercise(course_id, slug)[1]


def run_error(database, submission_id, attempt):
    with database.sessions() as session:
        return session.scalar(
            sa.select(GradingRun.error).where(
                GradingRun.submission_id == submission_id, GradingRun.attempt == attempt
            )
        )


def test_runs_are_packed_into_one_job_per_shape(database, cluster, catalogue, grading):
    on_a_gpu = dataclasses.replace(catalogue["autograd-q"], slurm={"gpus": 1})
    small = dataclasses.replace(catalogue["metrics"], slurm={"gpus": 0, "memory": "2G"})
    changed = dict(catalogue, metrics=small, **{"autograd-q": on_a_gpu})
    grading.exercises = lambda course: changed
    ids = [queue_submission(database, REFERENCE_Q) for _ in range(5)]
    ids += [queue_submission(database, "def accuracy(): pass", "metrics") for _ in range(2)]
    grading.dispatch()
    shapes = sorted(
        (len(job["runs"]), job["resources"].gpus, job["resources"].memory)
        for job in cluster.jobs.values()
    )
    assert shapes == [(2, 0, 2048), (2, 1, 4096), (3, 1, 4096)]
    assert all(status == "running" for status, _, _ in states(database).values())
    jobs = {
        job_id: spool.read_job(spool.run_dir(cluster.spool, job["runs"][0]))
        for job_id, job in cluster.jobs.items()
    }
    assert {(j.exercise, j.device) for j in jobs.values()} == {
        ("autograd-q", "auto"),
        ("metrics", "cpu"),
    }
    assert open(jobs["100"].submission).read() == REFERENCE_Q


def test_a_partial_batch_waits_only_while_a_job_of_ours_waits_to_start(database, cluster, grading):
    grading.batch_wait = 60.0
    queue_submission(database, REFERENCE_Q)
    grading.dispatch()
    assert len(cluster.jobs) == 1  # nothing of ours waits to start: holding it gains nothing
    later = [queue_submission(database, REFERENCE_Q) for _ in range(2)]
    waiting = grading.dispatch()
    assert len(cluster.jobs) == 1 and 55 < waiting.due_in <= 60  # job 100 is PENDING
    assert states(database)[later[0]][0] == "queued"
    grading.dispatch(now=dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=61))
    assert [len(job["runs"]) for job in cluster.jobs.values()] == [1, 2]
    cluster.end("100", "RUNNING")
    cluster.end("101", "RUNNING")
    grading.collect()  # the poll sees both jobs start
    queue_submission(database, REFERENCE_Q)
    grading.dispatch()
    assert len(cluster.jobs) == 3


def test_the_harness_marks_runs_done_and_collect_reads_those_between_polls(
    database, cluster, grading, report
):
    """Reports are read every collect (one listing of done/); the cluster is asked, and every
    run's folder looked into, once per SLURM_POLL_SECONDS."""
    grading.collector.poll_every = 3600.0
    ids = [queue_submission(database, REFERENCE_Q) for _ in range(2)]
    grading.dispatch()
    polls = []
    cluster.poll = lambda job_ids: polls.append(job_ids) or {}
    assert grading.collect() == {} and len(polls) == 1  # the first collect polls
    first, second = cluster.jobs["100"]["runs"]
    cluster.end("100", "RUNNING", report, runs=[first])
    assert spool.done_runs(cluster.spool) == {first}
    assert list(grading.collect().values()) == ["graded"] and len(polls) == 1
    assert spool.done_runs(cluster.spool) == set()
    # a report without its mark waits for the next poll
    spool.write_atomically(
        spool.run_dir(cluster.spool, second) / spool.REPORT, json.dumps(report.to_dict()).encode()
    )
    assert grading.collect() == {} and len(polls) == 1
    (cluster.spool / ".polled-at").write_text("0")
    assert list(grading.collect().values()) == ["graded"] and len(polls) == 1
    assert states(database)[ids[1]][0] == "graded"


def test_reports_become_grades_as_they_appear_and_are_read_once(database, cluster, grading, report):
    for _ in range(2):
        queue_submission(database, REFERENCE_Q)
    grading.dispatch()
    first_run = cluster.jobs["100"]["runs"][0]
    cluster.end("100", "RUNNING", report, runs=[first_run])
    assert list(grading.collect().values()) == ["graded"]
    assert not spool.run_dir(cluster.spool, first_run).exists()
    assert grading.collect() == {}
    assert [s[:2] for s in states(database).values()] == [("graded", 10), ("running", None)]


def test_a_job_that_ends_without_a_report_is_dispatched_again_then_a_grader_error(
    database, cluster, grading, report
):
    graded, unlucky = (queue_submission(database, REFERENCE_Q) for _ in range(2))
    grading.dispatch()
    cluster.end("100", "FAILED", report, runs=cluster.jobs["100"]["runs"][:1])
    # the report is trusted at once; the run without one waits for a second poll to agree
    # that its job ended (its report could still be on its way through a shared filesystem)
    assert list(grading.collect().values()) == ["graded"]
    assert list(grading.collect().values()) == ["requeued"]
    assert "FAILED on node7 without a report" in run_error(database, unlucky, 1)
    assert "the end of the job's log" in run_error(database, unlucky, 1)
    for attempt in range(2, MAX_RUNS + 1):
        grading.dispatch()
        cluster.end(str(100 + attempt - 1), "FAILED")
        grading.collect()
        grading.collect()
    assert states(database)[unlucky][:2] == ("error", None)  # never a zero
    assert states(database)[graded][:2] == ("graded", 10)


@pytest.mark.parametrize("state", ["OUT_OF_MEMORY", "TIMEOUT", "COMPLETED"])
def test_a_report_counts_whatever_slurm_says_of_the_job(database, cluster, grading, report, state):
    submission_id = queue_submission(database, REFERENCE_Q)
    grading.dispatch()
    cluster.end("100", state, report)
    grading.collect()
    assert states(database)[submission_id][:2] == ("graded", 10)


@pytest.mark.parametrize("state", ["CANCELLED", "PREEMPTED", "NODE_FAIL", "BOOT_FAIL"])
def test_a_job_the_service_did_not_stop_sends_its_runs_back_unused(
    database, cluster, grading, state
):
    """An administrator's scancel, a preemption, a lost node: no run caused it."""
    submission_id = queue_submission(database, REFERENCE_Q)
    grading.dispatch()
    cluster.end("100", state)
    grading.collect()
    assert grading.collect() == {1: "requeued"}
    assert states(database)[submission_id] == ("queued", None, [])


def test_a_job_slurm_forgot_is_dispatched_again(database, cluster, grading):
    submission_id = queue_submission(database, REFERENCE_Q)
    grading.dispatch()
    del cluster.jobs["100"]
    grading.collect()
    grading.collect()
    assert "VANISHED" in run_error(database, submission_id, 1)
    grading.dispatch()
    assert states(database)[submission_id][2] == [("lost", "100"), ("running", "101")]


def test_a_requeued_job_keeps_its_runs(database, cluster, grading, report):
    submission_id = queue_submission(database, REFERENCE_Q)
    grading.dispatch()
    for state in ("RUNNING", "PENDING", "RUNNING"):  # the node went down; Slurm requeued it
        cluster.jobs["100"]["state"] = state
        assert grading.collect() == {}
    cluster.end("100", "COMPLETED", report)
    grading.collect()
    assert states(database)[submission_id] == ("graded", 10, [("done", "100")])


def test_sbatch_failing_leaves_the_submissions_queued_and_nothing_half_done(
    database, cluster, grading
):
    cluster.down = True
    ids = [queue_submission(database, REFERENCE_Q) for _ in range(2)]
    grading.dispatch()
    assert states(database) == {i: ("queued", None, []) for i in ids}
    assert not any((cluster.spool / "runs").iterdir())
    assert grading.collect() == {}  # the controller is down: polling changes nothing either
    cluster.down = False
    grading.dispatch()
    assert [len(job["runs"]) for job in cluster.jobs.values()] == [2]


def test_a_spool_that_cannot_be_written_leaves_the_submissions_queued(
    database, cluster, grading, tmp_path
):
    grading.spool = tmp_path / "not-a-folder"
    grading.spool.write_text("the shared filesystem is not mounted")
    submission_id = queue_submission(database, REFERENCE_Q)
    grading.dispatch()
    assert states(database)[submission_id] == ("queued", None, []) and cluster.jobs == {}


def test_the_controller_down_while_jobs_run_loses_nothing(database, cluster, grading, report):
    submission_id = queue_submission(database, REFERENCE_Q)
    grading.dispatch()
    cluster.down = True
    cluster.end("100", "COMPLETED", report)
    grading.collect()  # reports need no controller
    assert states(database)[submission_id][:2] == ("graded", 10)


def test_a_request_no_node_can_hold_is_refused_with_a_message(database, cluster, grading):
    cluster.refusing = "asks 4 CPUs, the largest node of partition grading has 2"
    submission_id = queue_submission(database, REFERENCE_Q)
    grading.dispatch()
    assert states(database)[submission_id][:2] == ("error", None)
    assert "largest node of partition grading has 2" in run_error(database, submission_id, 1)


def test_a_newer_submission_does_not_cancel_an_older_one(database, cluster, grading, report):
    queue_submission(database, REFERENCE_Q)  # the older
    grading.dispatch()
    queue_submission(database, REFERENCE_Q)  # the newer
    grading.dispatch()
    for job_id in cluster.jobs:
        cluster.end(job_id, "COMPLETED", report)
    grading.collect()
    assert [s[:2] for s in states(database).values()] == [("graded", 10), ("graded", 10)]


@pytest.mark.sandbox  # a pilot's life: its harness started, then killed (tests/README.md)
def test_runs_go_to_a_live_pilot_at_once_and_back_to_sbatch_when_it_dies(
    database, cluster, grading, report, monkeypatch
):
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    pilot = Pilot(cluster.spool, "77", minutes=30)
    shape = shape_of(database, grading)
    grading.pilots.belong("77", shape)
    serving = threading.Thread(
        target=pilot.serve, args=(lambda run: spool.write_report(run, report),), daemon=True
    )
    serving.start()
    grading.batch_wait = 60.0  # a pilot does not wait for a batch to fill
    submission_id = queue_submission(database, REFERENCE_Q)
    assert grading.dispatch().outcomes == {submission_id: "graded"}
    assert states(database)[submission_id] == ("graded", 10, [("done", "77")])
    (cluster.spool / "pilots" / "77" / "stop").touch()
    serving.join(timeout=10)
    assert grading.pilots.choose(shape) is None  # stopping: it takes no more runs

    # a pilot that holds a run and falls silent (Slurm says it runs, its last heartbeat is a
    # minute old): the run goes back to the queue, then to sbatch
    cluster.jobs["77"] = {"state": "RUNNING", "runs": [], "resources": grading.resources}
    beat = cluster.spool / "pilots" / "77" / "heartbeat.json"
    beat.write_text(json.dumps(dict(json.loads(beat.read_text()), beat=time.time() - 60)))
    silent = queue_submission(database, REFERENCE_Q)
    with database.sessions.begin() as session:
        run = GradingRun(
            submission_id=silent,
            attempt=1,
            executor="pilot",
            status="running",
            worker="t",
            external_id="77",
            job_state="RUNNING",
            started_at=dt.datetime.now(dt.timezone.utc),
            lease_until=dt.datetime.now(dt.timezone.utc) + LATER,
        )
        session.add(run)
        session.get(Submission, silent).status = "running"
    grading.collect()
    grading.collect()
    assert "pilot job 77 ended SILENT" in run_error(database, silent, 1)
    grading.batch_wait = 0.0
    grading.dispatch()
    assert states(database)[silent][2] == [("lost", "77"), ("running", "100")]


def test_a_pilot_an_administrator_cancels_sends_its_run_back_unused(database, cluster, grading):
    """As a batch job's (issue 18, point 3): `scancel` of a pilot, or `hpcgrade pilot stop --now`,
    is not the run's doing."""
    cluster.jobs["78"] = {"state": "CANCELLED", "runs": [], "resources": grading.resources}
    held = queue_submission(database, REFERENCE_Q)
    with database.sessions.begin() as session:
        session.add(
            GradingRun(
                submission_id=held,
                attempt=1,
                executor="pilot",
                status="running",
                worker="t",
                external_id="78",
                job_state="RUNNING",
                started_at=dt.datetime.now(dt.timezone.utc),
                lease_until=dt.datetime.now(dt.timezone.utc) + LATER,
            )
        )
        session.get(Submission, held).status = "running"
    grading.collect()  # one poll saw it end: a report may still be on its way
    grading.collect()
    assert states(database)[held][0] == "queued"
    with database.sessions() as session:
        assert session.scalar(sa.select(sa.func.count()).select_from(GradingRun)) == 0


def test_a_pilot_whose_harness_stopped_answering_loses_its_run_and_is_cancelled(
    database, cluster, grading, monkeypatch
):
    """Its heartbeat goes on (a thread of its own) while it has held one run longer than the
    run may take: the run is lost, a try used (a submission that hangs every pilot is not sent
    round them for ever), and the pilot's job is cancelled."""
    monkeypatch.setenv("SLURM_JOB_ID", "79")
    Pilot(cluster.spool, "79", minutes=30)._done.set()  # its folder, inbox and heartbeat
    cluster.jobs["79"] = {"state": "RUNNING", "runs": [], "resources": grading.resources}
    held = queue_submission(database, REFERENCE_Q)
    with database.sessions.begin() as session:
        run = GradingRun(
            submission_id=held,
            attempt=1,
            executor="pilot",
            status="running",
            worker="t",
            external_id="79",
            job_state="RUNNING",
            started_at=dt.datetime.now(dt.timezone.utc),
            lease_until=dt.datetime.now(dt.timezone.utc) + LATER,
        )
        session.add(run)
        session.get(Submission, held).status = "running"
    beat = cluster.spool / "pilots" / "79" / "heartbeat.json"
    for since, left in ((time.time() - 60, "running"), (time.time() - 3600, "lost")):
        beat.write_text(
            json.dumps(
                dict(
                    json.loads(beat.read_text()),
                    beat=time.time(),
                    grading=str(run.id),
                    grading_since=since,
                )
            )
        )
        grading.collect()
        grading.collect()
        assert states(database)[held][2] == [(left, "79")]  # within its time, then far past
    assert "pilot job 79 ended STUCK" in run_error(database, held, 1)
    assert states(database)[held][2] == [("lost", "79")]
    assert cluster.jobs["79"]["state"] == "CANCELLED"


def test_staff_stop_a_submission_and_its_job_once_no_one_else_is_in_it(
    database, cluster, grading, report
):
    first, second = (queue_submission(database, REFERENCE_Q) for _ in range(2))
    waiting = queue_submission(database, REFERENCE_Q)
    grading.batch_size = 2
    grading.dispatch()
    assert grading.cancel([first]) == [first]
    assert cluster.jobs["100"]["state"] == "PENDING"  # the second's run is still in it
    run_dir = spool.run_dir(cluster.spool, cluster.jobs["100"]["runs"][0])
    assert spool.is_cancelled(run_dir)  # the harness skips it
    assert grading.cancel([second, waiting]) == [second, waiting]
    assert cluster.jobs["100"]["state"] == "CANCELLED"
    cluster.end("100", "CANCELLED", report)  # a report that arrives after is stale
    grading.collect()
    assert [s[:2] for s in states(database).values()] == [("cancelled", None)] * 3
    assert grading.cancel([first]) == []


@pytest.mark.postgresql_only
def test_a_submission_is_claimable_from_the_moment_its_message_is_sent(database, grading, cluster):
    """A worker takes a dispatch message within milliseconds of its sending, and its dispatch
    skips the rows another transaction holds (FOR UPDATE SKIP LOCKED). enqueue once marked a
    submission sent after its message went: a dispatch that looked meanwhile found the row held
    by that update, claimed nothing, and the submission waited for the reconcile (bench/
    service.py's submission stayed queued 300 s, in CI and beside a CPU load)."""
    submission_id = queue_submission(database, REFERENCE_Q)
    sent, dispatched = [], []

    class Broker:
        def send_task(self, name, args, retry):
            sent.append((name, args))

    def a_worker_takes_it(*_args):  # the first moment it can: the next commit after the send
        if sent and not dispatched:
            dispatched.append(grading.dispatch())

    with database.sessions() as session:
        sa.event.listen(session, "before_commit", a_worker_takes_it)
        assert enqueue(Broker(), session, [submission_id]) == [submission_id]
    a_worker_takes_it()
    assert states(database)[submission_id][0] == "running" and len(cluster.jobs) == 1


# --- faults of the infrastructure (issue 40): held while they last, no try used ----------


def held(database) -> dict:
    from server.core import conditions

    with database.sessions() as session:
        return {fault.value: row.detail for fault, row in conditions.current(session).items()}


def test_a_spool_below_its_floor_sends_nothing_says_so_once_and_then_grades(
    database, cluster, grading, caplog
):
    submission_id = queue_submission(database, REFERENCE_Q)
    cluster.spool.mkdir()
    grading.recorder.spool_min_free_mb = 10**12  # more than any disk has
    for _ in range(3):
        grading.dispatch()
    assert cluster.jobs == {} and states(database)[submission_id] == ("queued", None, [])
    assert "nothing is sent" in held(database)["spool_full"]
    began = [r for r in caplog.records if "spool_full began" in r.getMessage()]
    assert len(began) == 1
    grading.recorder.spool_min_free_mb = 0
    grading.dispatch()
    assert held(database) == {} and len(cluster.jobs) == 1


def test_a_spool_that_cannot_be_written_is_one_fault_until_it_can(
    database, cluster, grading, monkeypatch, caplog
):
    """Megabytes free but no file can be written (no inode left, a read-only mount): dispatch
    sends nothing and collect's failed write holds the same fault. Before, dispatch cleared what
    collect held, by free megabytes alone, so the fault began and ended every cycle, and jobs
    were sent to a spool that could not take their files."""

    def no_inode(path, data):
        raise OSError(28, "No space left on device")

    submission_id = queue_submission(database, REFERENCE_Q)
    cluster.spool.mkdir()
    grading.collector.poll_every = 60.0  # collect writes the mark of its last poll
    monkeypatch.setattr(spool, "write_atomically", no_inode)
    for _ in range(3):
        grading.dispatch()
        grading.collect()
    assert cluster.jobs == {} and states(database)[submission_id] == ("queued", None, [])
    assert "No space left" in held(database)["spool_full"]
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("spool_full")]
    assert len(said) == 1 and "began" in said[0], said
    monkeypatch.undo()
    grading.dispatch()
    assert held(database) == {} and len(cluster.jobs) == 1


def test_a_job_that_ended_while_the_spool_was_full_uses_no_try(database, cluster, grading):
    """A job with nowhere to write its report ends FAILED with an empty log: the spool failed,
    not the run, which goes back to the queue unused."""
    submission_id = queue_submission(database, REFERENCE_Q)
    grading.dispatch()
    grading.recorder.spool_min_free_mb = 10**12
    cluster.end("100", "FAILED")
    grading.collect()
    assert list(grading.collect().values()) == ["requeued"]
    assert states(database)[submission_id] == ("queued", None, [])


def test_collect_polls_on_when_the_spool_cannot_be_written(
    database, cluster, grading, monkeypatch, report
):
    def full(path, data):
        raise OSError(28, "No space left on device")

    submission_id = queue_submission(database, REFERENCE_Q)
    grading.dispatch()
    monkeypatch.setattr(spool, "write_atomically", full)
    grading.collector.poll_every = 60.0  # the mark of the last poll is written, or tried
    polls = []
    poll = cluster.poll
    cluster.poll = lambda ids: polls.append(ids) or poll(ids)
    grading.collect()
    grading.collect()
    assert len(polls) == 2 and "No space left" in held(database)["spool_full"]
    monkeypatch.undo()
    cluster.end("100", "COMPLETED", report)
    grading.collect()
    assert states(database)[submission_id][:2] == ("graded", 10)


def test_a_controller_that_does_not_answer_is_held_until_it_answers(database, cluster, grading):
    queue_submission(database, REFERENCE_Q)
    grading.dispatch()
    cluster.down = True
    grading.collect()
    assert "Unable to contact slurm controller" in held(database)["cluster_away"]
    cluster.down = False
    grading.collect()
    assert held(database) == {}

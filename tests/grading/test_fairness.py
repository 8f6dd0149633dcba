"""Fair grading: one student's files never hold every grading slot, nor delay another student's
file; the load of a file that never finishes is cut short. On SQLite and PostgreSQL."""

import io

import pytest
import sqlalchemy as sa
from helpers import dispatcher, queue_submission

from server.core.models import Submission, User
from worker.harness import spool
from worker.harness.jobs import Limits
from worker.harness.report import LOAD_ERROR, Report

GRADED = Report.from_dict({"status": "graded", "score": 1.0, "max_score": 1.0, "checks": []})


class Slots:
    """A synchronous executor that grades at once, and records the order it was given runs in;
    `meanwhile` runs while the first run is being graded (another slot of the worker)."""

    name, synchronous = "local", True

    def __init__(self, spool_dir, meanwhile=None):
        self.spool, self.meanwhile, self.graded = spool_dir, meanwhile, []

    def submit(self, jobs, resources=None):
        for job in jobs:
            self.graded.append(int(job.id))
            if self.meanwhile is not None:
                during, self.meanwhile = self.meanwhile, None
                during()
            spool.write_report(spool.run_dir(self.spool, job.id), GRADED)
        return [f"local-{job.id}" for job in jobs]

    def read_report(self, run_id):
        return spool.read_report(spool.run_dir(self.spool, run_id))


def add_students(database, *usernames):
    with database.sessions.begin() as session:
        for username in usernames:
            session.add(
                User(
                    username=username, name=username, email=f"{username}@uni.es", password_hash="x"
                )
            )


def queue_as(database, username: str) -> int:
    submission_id = queue_submission(database, "def f(): pass\n")
    with database.sessions.begin() as session:
        session.get(Submission, submission_id).user = session.scalar(
            sa.select(User).where(User.username == username)
        )
    return submission_id


def submissions_of(database, run_ids):
    from server.core.models import GradingRun

    with database.sessions() as session:
        return [session.get(GradingRun, run_id).submission_id for run_id in run_ids]


def test_one_slot_goes_round_robin_between_students(database, catalogue, tmp_path):
    add_students(database, "bea", "cris")
    ana = [queue_as(database, "ana") for _ in range(3)]
    bea = queue_as(database, "bea")
    slots = Slots(tmp_path)
    grading = dispatcher(database, slots, catalogue, spool=tmp_path)
    ana.append(queue_as(database, "ana"))
    while grading.dispatch().outcomes:
        if len(slots.graded) == 2:
            cris = queue_as(database, "cris")
    assert submissions_of(database, slots.graded) == [ana[0], bea, cris, ana[1], ana[2], ana[3]]


def test_a_student_holds_one_slot_and_the_other_goes_to_another_student(
    database, catalogue, tmp_path
):
    add_students(database, "bea")
    ana = [queue_as(database, "ana") for _ in range(2)]
    bea = queue_as(database, "bea")
    second_slot = []

    def meanwhile():  # ana's first file is in flight: the other slot must not take her second
        second_slot.append(
            dispatcher(database, Slots(tmp_path), catalogue, spool=tmp_path).dispatch().outcomes
        )
        second_slot.append(
            dispatcher(database, Slots(tmp_path), catalogue, spool=tmp_path).dispatch()
        )

    first = dispatcher(database, Slots(tmp_path, meanwhile), catalogue, spool=tmp_path)
    done = first.dispatch()
    assert done.outcomes == {ana[0]: "graded"} and done.more
    assert second_slot[0] == {bea: "graded"}
    assert second_slot[1].outcomes == {} and not second_slot[1].more
    assert dispatcher(database, Slots(tmp_path), catalogue, spool=tmp_path).dispatch().outcomes == {
        ana[1]: "graded"
    }


def test_a_bound_of_two_lets_two_in_flight(database, catalogue, tmp_path):
    ana = [queue_as(database, "ana") for _ in range(3)]
    nested = []

    def meanwhile():
        nested.append(
            dispatcher(database, Slots(tmp_path), catalogue, spool=tmp_path, per_student=2)
            .dispatch()
            .outcomes
        )

    dispatcher(
        database, Slots(tmp_path, meanwhile), catalogue, spool=tmp_path, per_student=2
    ).dispatch()
    assert nested == [{ana[1]: "graded"}]


class Batches:
    """An asynchronous executor: runs are submitted and stay pending."""

    name, synchronous = "slurm", False

    def __init__(self, spool_dir):
        self.spool, self.jobs = spool_dir, []

    def submit(self, jobs, resources):
        self.jobs.append([int(job.id) for job in jobs])
        return [str(len(self.jobs))] * len(jobs)

    def read_report(self, run_id):
        return spool.read_report(spool.run_dir(self.spool, run_id))

    def poll(self, ids):
        from worker.grading.executor import JobState

        return {i: JobState("RUNNING") for i in ids}


def test_slurm_batches_take_one_file_per_student_in_the_queues_order(database, catalogue, tmp_path):
    add_students(database, "bea")
    ana = [queue_as(database, "ana") for _ in range(3)]
    bea = queue_as(database, "bea")
    cluster = Batches(tmp_path)
    grading = dispatcher(database, cluster, catalogue, spool=tmp_path, batch_size=10)
    grading.dispatch()
    assert [submissions_of(database, job) for job in cluster.jobs] == [[ana[0], bea]]
    spool.write_report(spool.run_dir(tmp_path, str(cluster.jobs[0][0])), GRADED)
    assert list(grading.collect().values()) == ["graded"]
    grading.dispatch()
    assert submissions_of(database, cluster.jobs[1]) == [ana[1]]


def test_the_student_is_told_why_a_file_waits(course):
    import datetime as dt

    from server.core.runs import claim

    client = course.test_client()
    token = client.post(
        "/api/v1/tokens", json={"username": "ana", "password": "long-password"}
    ).json["token"]
    headers = {"Authorization": f"Bearer {token}"}

    def send():
        return client.post(
            "/api/v1/submissions",
            headers=headers,
            data={"exercise": "autograd-q", "file": (io.BytesIO(b"def q_grads(): pass\n"), "w.py")},
        ).json

    first, second = send(), send()
    waiting = client.get(second["url"], headers=headers).json
    assert waiting["queue_position"] == 2 and "earlier submissions" in waiting["note"]
    assert client.get(first["url"], headers=headers).json["note"] is None
    with course.extensions["hpcgrade.db"].sessions.begin() as session:
        assert claim(session, first["id"], "local", "w", dt.timedelta(minutes=5)) is not None
    waiting = client.get(second["url"] + "?lang=es", headers=headers).json
    assert waiting["queue_position"] == 1 and "entregas anteriores" in waiting["note"]


@pytest.mark.sandbox  # waits out a deadline
def test_a_file_that_never_finishes_loading_is_cut_short_at_the_exercises_load_time(grade):
    """Cut at the exercise's `load_seconds` (its own, here 2 s; by default at most 10 s)."""
    assert Limits().load_seconds <= 10
    report = grade("autograd-q", "print('TOP')\nwhile True:\n    pass\n", load_seconds=2)
    cut = [note for note in report["notes"] if note.get("kind") == LOAD_ERROR]
    assert [note["code"] for note in cut] == ["timeout"]  # said once, not on every check
    assert cut[0]["details"]["seconds"] == 2
    assert report["output"].startswith("TOP")  # printed before it hung, not flushed: kept


def test_reconcile_sends_again_only_the_files_whose_turn_has_come(database):
    """A file waiting for its student's earlier one is sent by the dispatch that ends that one;
    reconcile re-sending it every cycle would only cost queue queries."""
    import datetime as dt

    from server.core.queue import stuck

    add_students(database, "bea")
    first, second = (queue_as(database, "ana") for _ in range(2))
    other = queue_as(database, "bea")
    with database.sessions() as session:
        assert stuck(session, dt.timedelta(seconds=120), 1) == [first, other]
        assert stuck(session, dt.timedelta(seconds=120), 2) == [first, other, second]

"""Grading per course (issue 20): a run's exercise is its course's, its job has its course's venv
and Slurm options, runs of two courses never share a job nor a pilot, and the queue shares the
grading slots fairly between courses. On SQLite and PostgreSQL; Slurm's side on outputs
recorded from a real Slurm 22.05 (tests/slurm/ runs it for real)."""

import datetime as dt
import json
import re
import shutil
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from helpers import REFERENCE_Q, dispatcher, new_course

from server.core.catalogue import default_root
from server.core.config import Resources, Settings, load_settings
from server.core.courses import course_catalogue, edit_course, find_course
from server.core.exercises import sync_exercises
from server.core.models import Enrolment, Exercise, GradingRun, Regrade, Submission, User
from server.core.queue import place
from server.web.submissions import Rules, accept
from worker.cli.demo import write_config
from worker.cli.main import main
from worker.grading.executor import ClusterError
from worker.grading.local import LocalExecutor
from worker.grading.pilots import Pilots
from worker.grading.preview import PreviewGrader
from worker.grading.shapes import course_shape
from worker.grading.slurm import SlurmExecutor
from worker.harness import spool
from worker.harness.report import Report
from worker.harness.runner import PACKAGE_ROOT

RECORDED = Path(__file__).parent / "recorded" / "slurm"
GOLDEN = Path(__file__).parent / "golden"
# the second course: another account, partition, QoS, reservation, venv, job name, comment and
# wckey
MPI = dict(
    slurm={
        "account": "mpi-lab",
        "partition": "grading",
        "qos": "teaching",
        "reservation": "mpi-lab-tuesday",
    },
    job_name="mpi-grading",
    job_comment="MPI course 2026",
    wckey="mpi26",
    course_python="/shared/mpi-venv/bin/python",
)
GRADED = Report.from_dict({"status": "graded", "score": 1.0, "max_score": 1.0, "checks": []})


@pytest.fixture
def mpi(database, tmp_path):
    """Course mpi beside the tests' course (pytorch, charged to account dl-lab): its exercises
    folder holds an autograd-q of its own, the same slug with other files."""
    folder = tmp_path / "mpi-exercises"
    shutil.copytree(
        default_root() / "autograd-q",
        folder / "autograd-q",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (folder / "autograd-q" / "notes.md").write_text("the MPI course's copy\n")
    with database.sessions.begin() as session:
        edit_course(session, find_course(session, "pytorch"), slurm={"account": "dl-lab"})
        course = new_course(session, "mpi", exercises_dir=str(folder), **MPI)
        sync_exercises(session, course, course_catalogue(course))
    return folder


def add_student(database, username: str, course: str) -> None:
    with database.sessions.begin() as session:
        session.add(
            user := User(
                username=username, name=username, email=f"{username}@uni.es", password_hash="x"
            )
        )
        session.flush()
        session.add(
            Enrolment(user_id=user.id, course_id=find_course(session, course).id, role="student")
        )


def queue_in(
    database, username: str, course: str, code: str = REFERENCE_Q, slug: str = "autograd-q"
) -> int:
    """A submission of `username` to the course's exercise `slug`, committed as queued."""
    with database.sessions.begin() as session:
        exercise = session.scalar(
            sa.select(Exercise).where(
                Exercise.slug == slug, Exercise.course_id == find_course(session, course).id
            )
        )
        user = session.scalar(sa.select(User).where(User.username == username))
        submission = accept(
            session,
            user,
            exercise,
            "work.py",
            code.encode(),
            Rules(1024, 100, 60),
            dt.datetime.now(dt.timezone.utc),
        )
        session.flush()
        return submission.id


def external_ids(database, ids):
    with database.sessions() as session:
        return {
            i: session.scalar(
                sa.select(GradingRun.external_id).where(GradingRun.submission_id == i)
            )
            for i in ids
        }


class RecordedSlurm:
    """Slurm's commands answered from tests/grading/recorded/slurm/; what sbatch was given is
    kept. `refuse` maps an sbatch option to the error sbatch gives a job that has it."""

    def __init__(self, refuse=None):
        self.sbatch, self.refuse = [], refuse or {}

    def __call__(self, args, stdin=None):
        if args[0] == "scontrol":
            return (RECORDED / "scontrol-partitions.txt").read_text()
        if args[0] == "sinfo":
            return (
                RECORDED
                / (
                    "sinfo-nodes.txt"
                    if "--format=%c|%m|%G" in args
                    else "sinfo-partition-nodes.txt"
                )
            ).read_text()
        if args[0] == "sbatch":
            self.sbatch.append((args, stdin))
            options = set(args) | set(re.findall(r"#SBATCH (\S+)", stdin or ""))
            for option, error in self.refuse.items():
                if option in options:
                    raise ClusterError("sbatch failed (exit 1)", error)
            return f"{100 + len(self.sbatch)}\n"
        raise ClusterError(f"{args[0]} failed (exit 1)", "not recorded")


@pytest.fixture
def slurm(tmp_path):
    executor = SlurmExecutor(
        load_settings(
            {
                "EXECUTOR": "slurm",
                "SPOOL_DIR": str(tmp_path / "spool"),
                "COURSE_PYTHON": "/shared/course-venv/bin/python",
            }
        )
    )
    executor.commands.run = RecordedSlurm()
    return executor


def normalised(script: str, spool_dir: Path) -> str:
    """A job script with what changes from run to run (the spool, run ids, the batch's tag, the
    checkout) replaced by names."""
    script = script.replace(str(spool_dir), "SPOOL").replace(str(PACKAGE_ROOT), "CHECKOUT")
    script = re.sub(r"batch [0-9a-f]{16} runs [0-9,]+", "batch TAG runs RUNS", script)
    return re.sub(r"harness spool SPOOL [0-9]+( [0-9]+)*", "harness spool SPOOL RUNS", script)


def test_runs_of_two_courses_go_to_two_jobs_with_each_courses_options(database, mpi, slurm):
    add_student(database, "carl", "mpi")
    add_student(database, "bea", "pytorch")
    ids = [
        queue_in(database, "ana", "pytorch"),
        queue_in(database, "carl", "mpi"),
        queue_in(database, "bea", "pytorch"),
        queue_in(database, "carl", "mpi"),
    ]
    grading = dispatcher(
        database,
        slurm,
        course_catalogue,
        resources=Resources(gpus=0),
        batch_size=10,
        per_student=10,
    )
    grading.dispatch()
    jobs = external_ids(database, ids)
    assert jobs[ids[0]] == jobs[ids[2]] != jobs[ids[1]] == jobs[ids[3]]
    scripts = [normalised(stdin, slurm.spool) for _args, stdin in slurm.commands.run.sbatch]
    assert scripts == [
        (GOLDEN / "course-pytorch-job.sh").read_text(),
        (GOLDEN / "course-mpi-job.sh").read_text(),
    ]


def test_two_courses_of_the_same_slurm_settings_still_never_share_a_job(database, mpi, slurm):
    with database.sessions.begin() as session:
        for slug in ("pytorch", "mpi"):
            edit_course(
                session,
                find_course(session, slug),
                slurm={},
                course_python="",
                job_name="",
                job_comment="",
                wckey="",
            )
    add_student(database, "carl", "mpi")
    ids = [queue_in(database, "ana", "pytorch"), queue_in(database, "carl", "mpi")]
    dispatcher(database, slurm, course_catalogue, batch_size=10).dispatch()
    jobs = external_ids(database, ids)
    assert None not in jobs.values() and len(set(jobs.values())) == 2
    assert [
        re.findall(r"--job-name=(\S+)", stdin) for _args, stdin in slurm.commands.run.sbatch
    ] == [["hpcgrade-pytorch"], ["hpcgrade-mpi"]]


def test_a_runs_exercise_is_its_courses_of_that_slug(database, mpi, slurm):
    """Both courses have an autograd-q: each run is spooled with its own course's folder."""
    add_student(database, "carl", "mpi")
    ids = {
        "pytorch": queue_in(database, "ana", "pytorch"),
        "mpi": queue_in(database, "carl", "mpi"),
    }
    dispatcher(database, slurm, course_catalogue, batch_size=10).dispatch()
    with database.sessions() as session:
        run_of = {
            course: session.scalar(sa.select(GradingRun.id).where(GradingRun.submission_id == i))
            for course, i in ids.items()
        }
    folders = {
        course: json.loads((spool.run_dir(slurm.spool, str(run)) / "job.json").read_text())[
            "exercise_dir"
        ]
        for course, run in run_of.items()
    }
    assert folders == {
        "pytorch": str(default_root() / "autograd-q"),
        "mpi": str(mpi / "autograd-q"),
    }


def test_slurm_check_checks_each_courses_shapes_naming_the_course(database, mpi, tmp_path):
    """sbatch --test-only is asked with each course's account: the one the cluster does not
    know is named with its course, the other course passes."""
    settings = load_settings(
        {"EXECUTOR": "slurm", "SPOOL_DIR": str(tmp_path / "spool"), "SLURM_GPUS": 0}
    )
    slurm = SlurmExecutor(settings)
    refusal = (
        "sbatch: error: Batch job submission failed: Invalid account or account/partition "
        "combination specified"
    )
    slurm.commands.run = RecordedSlurm(refuse={"--account=mpi-lab": refusal})
    with database.sessions() as session:
        shapes = {
            f"course {course.slug}": course_shape(course, settings.slurm_resources)
            for course in (find_course(session, "pytorch"), find_course(session, "mpi"))
        }
    problems, warnings = slurm.check(shapes)
    assert problems == [
        "course pytorch: neither the course's python nor COURSE_PYTHON is set: jobs would run "
        "python3 from the node's PATH",
        f"course mpi: sbatch refuses it: {refusal}",
    ]
    tested = [args for args, _stdin in slurm.commands.run.sbatch]
    assert [
        [o for o in args if o.split("=")[0] in ("--account", "--wckey", "--qos")] for args in tested
    ] == [
        ["--wckey=pytorch", "--account=dl-lab"],
        ["--wckey=mpi26", "--account=mpi-lab", "--qos=teaching"],
    ]


def test_a_pilot_takes_runs_of_its_own_course_alone(database, mpi, tmp_path):
    pilots = Pilots(tmp_path / "spool")
    with database.sessions() as session:
        shapes = {
            slug: course_shape(find_course(session, slug), Resources(gpus=0))
            for slug in ("pytorch", "mpi")
        }
    for name in ("41", "42", "43"):
        folder = spool.make_folder(pilots.spool, "pilots", name, "inbox").parent
        (folder / "heartbeat.json").write_text(
            json.dumps({"name": name, "beat": time.time(), "until": time.time() + 600, "gpus": 0})
        )
    pilots.belong("41", shapes["pytorch"])
    pilots.belong("42", shapes["mpi"])  # 43 belongs to no course: it takes no runs
    assert (pilots.choose(shapes["pytorch"]), pilots.choose(shapes["mpi"])) == ("41", "42")
    with database.sessions.begin() as session:
        edit_course(session, find_course(session, "mpi"), course_python="/shared/mpi-2/bin/python")
        changed = course_shape(find_course(session, "mpi"), Resources(gpus=0))
    assert pilots.choose(changed) is None  # started with the venv the course left


def noting_python(database, tmp_path):
    """Course mpi's python becomes a wrapper that notes its arguments at each start, then runs
    this venv's; the file of its notes."""
    started = tmp_path / "started"
    wrapper = tmp_path / "mpi-python"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {started}\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    with database.sessions.begin() as session:
        edit_course(session, find_course(session, "mpi"), course_python=str(wrapper))
    return started


@pytest.mark.sandbox  # a harness started under each course's python
@pytest.mark.postgresql_only  # the course's python is read as the other tests read it, on both
def test_the_local_executor_grades_each_course_with_its_own_python(database, mpi, tmp_path):
    """Course mpi's python is a wrapper that notes each start, then runs this venv's: its runs
    start it once (a warm harness of its own); the other course's runs never do."""
    started = noting_python(database, tmp_path)
    add_student(database, "carl", "mpi")
    add_student(database, "dora", "mpi")
    local = LocalExecutor(Settings(spool_dir=str(tmp_path / "spool"), course_python=None))
    try:
        grading = dispatcher(database, local, course_catalogue)
        ids = [
            queue_in(database, "carl", "mpi"),
            queue_in(database, "ana", "pytorch"),
            queue_in(database, "dora", "mpi"),
        ]
        outcomes = [grading.dispatch().outcomes for _ in ids]
    finally:
        local.close()
    assert {i: o for outcome in outcomes for i, o in outcome.items()} == dict.fromkeys(
        ids, "graded"
    )
    assert started.read_text() == "-m worker.harness serve\n"


class Slots:
    """A synchronous executor that grades at once and records the order of its runs."""

    name, synchronous = "local", True

    def __init__(self, spool_dir):
        self.spool, self.graded, self.folders = spool_dir, [], []

    def submit(self, jobs, shape=None):
        for job in jobs:
            self.graded.append((shape.course, int(job.id)))
            self.folders.append((shape.course, job.exercise_dir))
            spool.write_report(spool.run_dir(self.spool, job.id), GRADED)
        return [f"local-{job.id}" for job in jobs]

    def read_report(self, run_id):
        return spool.read_report(spool.run_dir(self.spool, run_id))


def test_the_queue_goes_round_robin_between_courses_then_their_students(database, mpi, tmp_path):
    """Four pytorch students queued first do not hold back the mpi students: one slot grades
    a course's file, then the other's, then the students of each in turn."""
    for name in ("bea", "cris", "dan"):
        add_student(database, name, "pytorch")
    for name in ("carl", "dora"):
        add_student(database, name, "mpi")
    pytorch = [
        queue_in(database, name, "pytorch", "def f(): pass\n")
        for name in ("ana", "bea", "cris", "dan")
    ]
    queued_mpi = [queue_in(database, name, "mpi", "def f(): pass\n") for name in ("carl", "dora")]
    with database.sessions() as session:
        assert place(session, queued_mpi[0])[0] == 2
    slots = Slots(tmp_path / "spool")
    grading = dispatcher(database, slots, course_catalogue, spool=tmp_path / "spool")
    for _ in range(6):
        grading.dispatch()
    with database.sessions() as session:
        graded = [session.get(GradingRun, run_id).submission_id for _course, run_id in slots.graded]
    assert [course for course, _run in slots.graded] == [
        "pytorch",
        "mpi",
        "pytorch",
        "mpi",
        "pytorch",
        "pytorch",
    ]
    assert graded == [pytorch[0], queued_mpi[0], pytorch[1], queued_mpi[1], pytorch[2], pytorch[3]]


@pytest.mark.sandbox  # a harness started under each course's python
@pytest.mark.postgresql_only  # the course's python is read as the other tests read it, on both
def test_sandbox_check_probes_each_courses_python_naming_the_course(database, mpi, tmp_path):
    """The service's python and folder are checked for pytorch (it names neither); mpi's
    wrapper python is started for mpi, with its own exercises folder."""
    started = noting_python(database, tmp_path)
    config = tmp_path / "h.toml"
    write_config(
        config, {"DATABASE_URL": database.engine.url.render_as_string(hide_password=False)}
    )
    checked = CliRunner().invoke(main, ["sandbox", "check"], env={"HPCGRADE_CONFIG": str(config)})
    layers = [
        line.split(":")[0] for line in checked.output.splitlines() if ": sandbox layers on " in line
    ]
    assert layers == ["course pytorch", "course mpi"], checked.output
    assert f"--code {mpi}" in started.read_text()
    # root may write both folders: each is named with its course
    assert "unsafe: course mpi: " in checked.output and "unsafe: course pytorch: " in checked.output


def test_a_regrade_preview_runs_its_courses_exercise_with_its_courses_shape(
    database, mpi, tmp_path
):
    """mpi's "grade all again" of its autograd-q: its runs are spooled from mpi's folder and
    graded with mpi's shape, though pytorch has an autograd-q too."""
    add_student(database, "carl", "mpi")
    submission_id = queue_in(database, "carl", "mpi")
    with database.sessions.begin() as session:
        submission = session.get(Submission, submission_id)
        submission.status = "graded"
        session.add(regrade := Regrade(exercise_id=submission.exercise_id))
        session.flush()
        session.add(
            GradingRun(
                submission_id=submission_id,
                attempt=1,
                executor="local",
                status="previewing",
                regrade_id=regrade.id,
                lease_until=dt.datetime.now(dt.timezone.utc),
            )
        )
        regrade_id = regrade.id
    slots = Slots(tmp_path / "spool")
    grader = PreviewGrader(
        dispatcher(database, slots, course_catalogue, spool=slots.spool), poll_seconds=0
    )
    assert list(grader.grade_previews(regrade_id, lambda worker: False).values()) == ["preview"]
    assert slots.folders == [("mpi", str(mpi / "autograd-q"))]


def test_a_course_whose_exercises_cannot_be_read_holds_back_no_other_course(
    database, mpi, tmp_path
):
    """mpi's file comes second in the queue: it waits, and pytorch's third goes before it."""
    add_student(database, "carl", "mpi")
    add_student(database, "bea", "pytorch")
    first = queue_in(database, "ana", "pytorch")
    waits = queue_in(database, "carl", "mpi")
    third = queue_in(database, "bea", "pytorch")
    (mpi / "autograd-q" / "exercise.toml").write_text("[slurm\n")  # an edit gone wrong
    slots = Slots(tmp_path / "spool")
    grading = dispatcher(database, slots, course_catalogue, spool=slots.spool)
    assert [grading.dispatch().outcomes for _ in range(3)] == [
        {first: "graded"},
        {third: "graded"},
        {},
    ]
    with database.sessions() as session:
        assert session.get(Submission, waits).status == "queued"

"""`hpcgrade pilot start|list` and `hpcgrade slurm check` against what an administrator does to
the real single-node Slurm of scripts/slurm (issue 18, points 6 and 8): a partition's MaxTime
lowered, the node drained, the partition set down; each put back afterwards."""

import json
import subprocess
import time

import pytest
import slurm_cluster
from click.testing import CliRunner
from helpers import new_course
from test_slurm import config_file, empty_database_url, exercises_folder, own_jobs, settings, shared  # noqa: F401

from server.core.courses import course_catalogue
from server.core.exercises import sync_exercises
from worker.cli.main import main
from worker.harness import spool

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(
        not slurm_cluster.available(), reason="no Slurm cluster of scripts/slurm's here"
    ),
]


@pytest.fixture
def config(database, shared):
    """The settings of a course of its own (the tests' course, its jobs named after COURSE)."""
    return own_jobs(database, settings(shared))


@pytest.fixture
def hpcgrade(config, shared, tmp_path):
    """Runs `hpcgrade ARGS…` in-process with these settings and one exercise, autograd-q
    without GPUs; returns click's result."""
    env = {
        "HPCGRADE_CONFIG": str(config_file(tmp_path / "h.toml", config)),
        "HPCGRADE_EXERCISES": str(exercises_folder(shared, "autograd-q", "gpus = 0")),
    }
    return lambda *args: CliRunner().invoke(main, list(args), env=env)


@pytest.fixture
def partition_restored():
    """The partition's MaxTime and State as they were, whatever the test set."""
    was = {key: slurm_cluster.partition_field(key) for key in ("MaxTime", "State")}
    yield
    slurm_cluster.update_partition(**was)


@pytest.fixture
def drained():
    """The node drained for the test, then resumed."""
    slurm_cluster.drain_node("hpcgrade test")
    yield slurm_cluster.node()
    slurm_cluster.resume_node()


def pilot_jobs(course: str) -> list[str]:
    return subprocess.run(
        ["squeue", "-h", "--states=all", f"--name=hpcgrade-{course}-pilot", "-o", "%i"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()


def test_pilot_start_refuses_more_time_than_the_partition_allows(
    hpcgrade, config, partition_restored
):
    slurm_cluster.update_partition(MaxTime="10")
    by_default = hpcgrade("pilot", "start")
    assert by_default.exit_code == 1
    assert (
        f"partition {slurm_cluster.partition()} allows 10 minutes; --hours 2 asks 120: use "
        "--hours 0.16 or less"
    ) in by_default.output
    assert (
        "allows 10 minutes; --hours 0.5 asks 30"
        in hpcgrade("pilot", "start", "--hours", "0.5").output
    )
    assert pilot_jobs(config.course) == []  # no sbatch


def pending_reason(job: str) -> str:
    return subprocess.run(
        ["squeue", "-h", "-j", job, "-o", "%r"], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_pilot_list_shows_a_pilot_slurm_has_not_started_and_hides_dead_ones(
    hpcgrade, config, drained
):
    started = hpcgrade("pilot", "start", "--hours", "0.2")
    assert started.exit_code == 0, started.output
    pending = started.output.split()[1]
    # a pilot that ended an hour ago, whose job Slurm has forgotten
    dead = spool.make_folder(config.spool_dir, "pilots", "999999")
    (dead / "heartbeat.json").write_text(
        json.dumps(
            {"name": "999999", "node": drained, "beat": time.time() - 3600, "until": time.time()}
        )
    )
    try:
        # the scheduler words a pending job's reason again as it looks at it (ReqNodeNotAvail,
        # then "Nodes required for job are DOWN, DRAINED…"): the list is read between two
        # readings of squeue's that agree
        for _ in range(30):
            before = pending_reason(pending)
            listed = hpcgrade("pilot", "list")
            if pending_reason(pending) == before:
                break
        assert listed.exit_code == 0, listed.output
        (line,) = [line for line in listed.output.splitlines() if line.split()[0] == pending]
        assert "PENDING" in line and line.endswith(f"({before})"), line
        assert "999999" not in listed.output
        (everyone,) = [
            line
            for line in hpcgrade("pilot", "list", "--all").output.splitlines()
            if line.split()[0] == "999999"
        ]
        assert everyone.endswith("(dead)"), everyone
    finally:
        subprocess.run(["scancel", pending], check=True)


def test_slurm_check_fails_on_a_drained_node_naming_its_reason(hpcgrade, drained):
    checked = hpcgrade("slurm", "check", "--no-probe")
    assert checked.exit_code == 1
    assert (
        f"cannot run: partition {slurm_cluster.partition()}: no node takes jobs: node "
        f"{drained} is drain (hpcgrade test)"
    ) in checked.output, checked.output


def test_slurm_check_fails_on_a_partition_down(hpcgrade, partition_restored):
    slurm_cluster.update_partition(State="DOWN")
    checked = hpcgrade("slurm", "check", "--no-probe")
    assert checked.exit_code == 1
    assert f"cannot run: partition {slurm_cluster.partition()} is DOWN, not UP" in checked.output, (
        checked.output
    )
    assert "no node takes jobs" not in checked.output


def job_state(job_id: str) -> str:
    return subprocess.run(
        ["squeue", "-h", "--states=all", "-j", job_id, "-o", "%T"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_pilot_stop_cancels_a_pilot_slurm_has_not_started(hpcgrade, drained):
    """It holds no run and would never see a stop file (before, `pilot stop` said "stopping"
    and the pilot started later, taking runs)."""
    first, second = (
        hpcgrade("pilot", "start", "--hours", "0.2").output.split()[1] for _ in range(2)
    )
    try:
        stopped = hpcgrade("pilot", "stop", first)
        assert stopped.exit_code == 0 and f"cancelled, not started: {first}" in stopped.output
        assert job_state(first) == "CANCELLED" and job_state(second) == "PENDING"
        everyone = hpcgrade("pilot", "stop", "--all")
        assert everyone.exit_code == 0 and second in everyone.output
        assert job_state(second) == "CANCELLED"
    finally:
        subprocess.run(["scancel", first, second], check=True)


def test_slurm_check_and_pilots_take_each_course_with_its_own_account(
    database, hpcgrade, config, shared
):
    """A second course whose Slurm settings the cluster refuses (its accounting is off, so
    sbatch takes any account: a feature it does not have stands in for an unknown account) and
    job names of its own: `slurm check` names it and passes the tests' course; a pilot is
    started for the course named, with its job name and comment."""
    with database.sessions.begin() as session:
        second = new_course(
            session,
            "second",
            exercises_dir=str(shared / "exercises"),
            slurm={"account": "second-lab", "extra": ["--constraint=nonexistent"]},
            job_name=f"second-{config.course}",
            wckey="second",
        )
        sync_exercises(session, second, course_catalogue(second))
    checked = hpcgrade("slurm", "check", "--no-probe")
    assert checked.exit_code == 1
    assert (
        "cannot run: course second (its [slurm] over SLURM_*): sbatch refuses it" in checked.output
    )
    assert "cannot run: course pytorch" not in checked.output, checked.output
    assert hpcgrade("pilot", "start").exit_code == 2  # which course's?
    started = hpcgrade("pilot", "start", "--course", "pytorch", "--hours", "0.2")
    assert started.exit_code == 0, started.output
    pilot = started.output.split()[1]
    try:
        fields = subprocess.run(
            ["squeue", "-h", "-j", pilot, "-o", "%j|%k"], capture_output=True, text=True, check=True
        ).stdout.strip()
        assert fields == f"hpcgrade-{config.course}-pilot|hpcgrade {config.course} pilot"
        assert (
            json.loads(
                (spool.make_folder(config.spool_dir, "pilots", pilot) / "course.json").read_text()
            )["course"]
            == "pytorch"
        )
    finally:
        subprocess.run(["scancel", pilot], check=True)

"""`hpcgrade slurm check` against what an administrator does to the real single-node Slurm of
scripts/slurm (issue 18, point 6): the node drained, the partition set down; each put back
afterwards."""

import pytest
from click.testing import CliRunner

import slurm_cluster
from test_slurm import config_file, exercises_folder, settings, shared  # noqa: F401
from worker.cli import main

pytestmark = [pytest.mark.slurm,
              pytest.mark.skipif(not slurm_cluster.available(),
                                 reason="no Slurm cluster of scripts/slurm's here")]


@pytest.fixture
def config(shared):
    """The settings of a course of its own."""
    return settings(shared)


@pytest.fixture
def hpcgrade(config, shared, tmp_path):
    """Runs `hpcgrade ARGS…` in-process with these settings and one exercise, autograd-q
    without GPUs; returns click's result."""
    env = {"HPCGRADE_CONFIG": str(config_file(tmp_path / "h.toml", config)),
           "HPCGRADE_EXERCISES": str(exercises_folder(shared, "autograd-q", "gpus = 0"))}
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


def test_slurm_check_fails_on_a_drained_node_naming_its_reason(hpcgrade, drained):
    checked = hpcgrade("slurm", "check", "--no-probe")
    assert checked.exit_code == 1
    assert (f"cannot run: partition {slurm_cluster.partition()}: no node takes jobs: node "
            f"{drained} is drain (hpcgrade test)") in checked.output, checked.output


def test_slurm_check_fails_on_a_partition_down(hpcgrade, partition_restored):
    slurm_cluster.update_partition(State="DOWN")
    checked = hpcgrade("slurm", "check", "--no-probe")
    assert checked.exit_code == 1
    assert (f"cannot run: partition {slurm_cluster.partition()} is DOWN, not UP"
            in checked.output), checked.output
    assert "no node takes jobs" not in checked.output

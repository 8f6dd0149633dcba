"""What hpcgrade writes for Slurm and reads from it, on outputs recorded from a real Slurm 22.05
(tests/grading/recorded/slurm/) and the job script against a golden file."""

from pathlib import Path

import pytest

from server.core.config import Resources, load_settings
from worker.grading.executor import ClusterError, JobState
from worker.grading.slurm import SlurmExecutor
from worker.grading.slurm_text import (
    NodeState,
    gres_gpus,
    job_script,
    late_job_id,
    limits,
    parse_comments,
    parse_nodes,
    parse_partition_nodes,
    parse_partitions,
    parse_sacct,
    parse_sbatch,
    parse_squeue,
    permanent_sbatch_error,
    sbatch_options,
)

RECORDED = Path(__file__).parent / "recorded" / "slurm"
GOLDEN = Path(__file__).parent / "golden"


def recorded(name: str) -> str:
    return (RECORDED / name).read_text()


def test_squeue_lists_every_state_with_its_node_and_reason():
    states = parse_squeue(recorded("squeue.txt"))
    assert {i: s.state for i, s in states.items()} == {
        "4": "COMPLETED",
        "5": "FAILED",
        "6": "CANCELLED",
        "7": "OUT_OF_MEMORY",
        "8": "PENDING",
        "9": "RUNNING",
    }
    assert states["9"] == JobState("RUNNING", "vm", None)
    assert states["8"] == JobState("PENDING", None, "PartitionConfig")
    assert parse_squeue(recorded("squeue-requeued.txt"))["18"].reason == "BeginTime"
    assert parse_squeue(recorded("squeue-timeout-completing.txt"))["1"].outcome == "waiting"


def test_sacct_skips_steps_and_keeps_a_requeued_jobs_last_line():
    states = parse_sacct(recorded("sacct-c.txt"))
    assert {i: s.state for i, s in states.items()} == {
        "6": "CANCELLED",
        "4": "COMPLETED",
        "5": "FAILED",
        "7": "OUT_OF_MEMORY",
        "1": "TIMEOUT",
    }
    assert states["6"].node is None and states["5"].reason == "exit code 3:0"
    assert parse_sacct(recorded("sacct-c-requeued.txt"))["18"].state == "COMPLETED"
    # with accounting on, sacct prints steps, and who cancelled
    with_steps = "12|CANCELLED by 1001|0:15|gpu7\n12.batch|CANCELLED|0:15|gpu7\n"
    assert parse_sacct(with_steps) == {"12": JobState("CANCELLED", "gpu7", "exit code 0:15")}


@pytest.mark.parametrize(
    "state, outcome",
    [
        ("PENDING", "waiting"),
        ("CONFIGURING", "waiting"),
        ("RUNNING", "waiting"),
        ("COMPLETING", "waiting"),
        ("REQUEUED", "waiting"),
        ("COMPLETED", "completed"),
        ("CANCELLED", "cancelled"),
        ("FAILED", "failed"),
        ("TIMEOUT", "failed"),
        ("OUT_OF_MEMORY", "failed"),
        ("NODE_FAIL", "failed"),
        ("PREEMPTED", "failed"),
        ("BOOT_FAIL", "failed"),
        ("VANISHED", "failed"),
    ],
)
def test_states_map_to_what_becomes_of_the_runs(state, outcome):
    assert JobState(state).outcome == outcome


def test_sbatch_gives_the_id_or_a_named_error_with_the_output():
    assert parse_sbatch("1234\n") == "1234" and parse_sbatch("1234;cluster2\n") == "1234"
    with pytest.raises(ClusterError) as raised:
        parse_sbatch(recorded("sbatch-bad-partition.txt"))
    assert "Invalid partition name specified" in raised.value.output


@pytest.mark.parametrize(
    "parse, text",
    [
        (parse_squeue, "12 PENDING\n"),
        (parse_sacct, "garbage\n"),
        (parse_nodes, "vm|2|21695|gpu:2\n"),
        (parse_partitions, "Nodes=vm State=UP\n"),
        (parse_partition_nodes, "vm|idle|none\n"),
        (parse_partition_nodes, "up|vm|idle|none\ndown|vm2|idle|none\n"),
    ],
)
def test_unexpected_output_is_a_named_error_carrying_it(parse, text):
    with pytest.raises(ClusterError) as raised:
        parse(text)
    assert raised.value.output == text


def test_the_largest_node_of_the_partition_bounds_a_request():
    fields = parse_partitions(recorded("scontrol-partitions.txt"))["grading"]
    found = limits("grading", fields, parse_nodes(recorded("sinfo-nodes.txt")))
    assert (found.cpus, found.memory, found.gpus, found.time) == (2, 21695, 2, 60)
    assert found.refuse(Resources(cpus=2, gpus=2, memory=4096, time=60)) == []
    assert found.refuse(Resources(cpus=4, gpus=3, memory=32768, time=90)) == [
        "asks 4 CPUs, the largest node of partition grading has 2",
        "asks 32768 MB of memory, the largest node of partition grading has 21695",
        "asks 3 GPUs, the largest node of partition grading has 2",
        "asks 90 minutes, partition grading allows 60",
    ]
    capped = limits(
        "p",
        {"MaxCPUsPerNode": "1", "MaxMemPerNode": "1000", "MaxTime": "UNLIMITED"},
        [(64, 512000, 8)],
    )
    assert (capped.cpus, capped.memory, capped.time) == (1, 1000, None)


def test_sinfo_gives_the_partitions_availability_and_its_nodes_states_and_reasons():
    assert parse_partition_nodes(recorded("sinfo-partition-nodes.txt")) == (
        "up",
        [NodeState("vm", "idle", None)],
    )
    assert parse_partition_nodes(recorded("sinfo-partition-nodes-drained.txt")) == (
        "up",
        [NodeState("vm", "drain", "hpcgrade test")],
    )
    assert parse_partition_nodes(recorded("sinfo-partition-down.txt"))[0] == "down"
    assert parse_partition_nodes("up|gpu1|down*|power cut | rack 3\n")[1] == [
        NodeState("gpu1", "down*", "power cut | rack 3")
    ]


@pytest.mark.parametrize(
    "state, takes_jobs",
    [
        ("idle", True),
        ("mix", True),
        ("alloc", True),
        ("comp", True),
        ("idle~", True),
        ("drain", False),
        ("drng", False),
        ("down", False),
        ("down*", False),
        ("fail", False),
        ("failg", False),
        ("drain$", False),
        ("idle*", False),
    ],
)
def test_nodes_down_drained_draining_failing_or_silent_take_no_jobs(state, takes_jobs):
    assert NodeState("n", state, None).takes_jobs is takes_jobs


def test_some_nodes_taking_no_jobs_warn_all_of_them_fail_the_check(tmp_path):
    slurm = SlurmExecutor(load_settings({"EXECUTOR": "slurm", "SPOOL_DIR": str(tmp_path)}))

    def availability(sinfo: str) -> tuple[list[str], list[str]]:
        slurm.commands.run = lambda args: sinfo
        return slurm.availability("gpu")

    assert availability(
        "up|gpu1|mix|none\nup|gpu2|drain|disk swap\nup|gpu3|down*|Not responding\n"
    ) == (
        [],
        [
            "partition gpu: node gpu2 is drain (disk swap)",
            "partition gpu: node gpu3 is down* (Not responding)",
        ],
    )
    assert availability("inact|gpu2|drain|disk swap\n") == (
        [
            "partition gpu is INACT, not UP: new jobs would not run",
            "partition gpu: no node takes jobs: node gpu2 is drain (disk swap)",
        ],
        [],
    )


@pytest.mark.parametrize(
    "gres, gpus",
    [
        ("gpu:2", 2),
        ("gpu:a100:4(S:0-1)", 4),
        ("gpu:2,mps:100", 2),
        ("gpu:a100:2,gpu:v100:1", 3),
        ("(null)", 0),
        ("", 0),
    ],
)
def test_gpus_in_a_gres_list(gres, gpus):
    assert gres_gpus(gres) == gpus


def test_the_job_script_matches_the_golden_file():
    resources = Resources(
        partition="gpu",
        account="cs101",
        qos="normal",
        gpus=1,
        cpus=4,
        memory=8192,
        time=45,
        extra=("--constraint=a100",),
    )
    options = sbatch_options(
        resources,
        job_name="hpcgrade-cs101",
        comment="hpcgrade cs101 runs 7,8",
        wckey="cs101",
        log="/shared/spool/jobs/%j.out",
    )
    script = job_script(
        options,
        python="/shared/course-venv/bin/python",
        checkout="/shared/hpcgrade",
        harness=["spool", "/shared/spool", "7", "8"],
        modules=("cuda/12.4",),
    )
    assert script == (GOLDEN / "job-script.sh").read_text()


def test_the_extra_options_come_last_so_that_they_override_the_services_own():
    """sbatch takes the last of an option given twice: an exercise's `--no-requeue` (a job that
    must not run twice) beats the service's `--requeue`, wherever a new option is declared."""
    options = sbatch_options(
        Resources(extra=("--no-requeue", "--time=5")), job_name="j", comment="c", wckey="w", log="l"
    )
    assert options[-2:] == ["--no-requeue", "--time=5"]
    assert options.index("--requeue") < options.index("--no-requeue")


def test_a_cpu_only_shape_holds_no_gpu():
    options = sbatch_options(Resources(gpus=0), job_name="j", comment="c", wckey="w", log="l")
    assert not any(o.startswith("--gres") for o in options)
    assert "--gres=gpu:2" in sbatch_options(
        Resources(gpus=2), job_name="j", comment="c", wckey="w", log="l"
    )


def test_a_late_sbatchs_id_is_read_from_what_it_printed():
    assert late_job_id("42\n") == "42"
    assert late_job_id("") is None


def test_squeue_comments_are_read_whole():
    assert parse_comments("12|hpcgrade c batch ab12 runs 3,4\n13|a|b\n") == {
        "12": "hpcgrade c batch ab12 runs 3,4",
        "13": "a|b",
    }
    with pytest.raises(ClusterError) as raised:
        parse_comments("slurm_load_jobs error\n")
    assert raised.value.output == "slurm_load_jobs error\n"


@pytest.mark.parametrize(
    "message",
    [
        "Batch job submission failed: Invalid feature specification",
        "Batch job submission failed: Invalid account or account/partition combination specified",
        "Batch job submission failed: Invalid qos specification",
        "Batch job submission failed: Invalid wckey specification",
        "Batch job submission failed: Invalid partition name specified",
        "Batch job submission failed: Requested node configuration is not available",
        "Batch job submission failed: Invalid generic resource (gres) specification",
    ],
)
def test_sbatchs_refusals_for_good(message):
    assert permanent_sbatch_error(f"sbatch: error: {message}\n")


@pytest.mark.parametrize(
    "message",
    [
        "Batch job submission failed: Socket timed out on send/recv operation",
        "Batch job submission failed: Unable to contact slurm controller (connect failure)",
        "Batch job submission failed: Resource temporarily unavailable",
        "slurm_persist_conn_open_without_init: failed to open persistent connection",
        "Batch job submission failed: Job violates accounting/QOS policy (job submit limit, user's "
        "size and/or time limits)",
        "QOSMaxSubmitJobPerUserLimit",
        "Invalid authentication credential",
        "something sbatch never said before",
    ],
)
def test_sbatchs_failures_that_pass(message):
    assert not permanent_sbatch_error(f"sbatch: error: {message}\n")

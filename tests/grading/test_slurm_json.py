"""squeue's JSON (`squeue --json`), on output recorded from a real Slurm 22.05
(tests/grading/recorded/slurm/squeue.json), and the named error for anything else."""

import json
from pathlib import Path

import pytest

from worker.grading.executor import ClusterError, JobState
from worker.grading.slurm_text import parse_squeue_json

RECORDED = Path(__file__).parent / "recorded" / "slurm"


def test_squeue_json_gives_each_jobs_state_node_and_reason():
    states = parse_squeue_json((RECORDED / "squeue.json").read_text())
    assert states == {
        "133": JobState("FAILED", "vm", "NonZeroExitCode"),
        "134": JobState("OUT_OF_MEMORY", "vm", "OutOfMemory"),
        "137": JobState("CANCELLED", None, "JobHeldUser"),
        "138": JobState("COMPLETED", "vm", None),
    }


def test_newer_slurms_list_a_state_with_its_flags():
    """Slurm 23.11 and later: job_state is a list, the base state first."""
    output = json.dumps(
        {
            "jobs": [
                {
                    "job_id": 9,
                    "job_state": ["PENDING", "REQUEUED"],
                    "nodes": "",
                    "state_reason": "BeginTime",
                }
            ]
        }
    )
    assert parse_squeue_json(output) == {"9": JobState("PENDING", None, "BeginTime")}


@pytest.mark.parametrize(
    "output",
    [
        "squeue: error: Unable to contact slurm controller\n",
        '{"meta": {}}',
        '{"jobs": [{"job_id": 1}]}',
    ],
)
def test_squeue_json_that_is_not_a_job_list_is_a_named_error_carrying_it(output):
    with pytest.raises(ClusterError) as raised:
        parse_squeue_json(output)
    assert raised.value.output == output

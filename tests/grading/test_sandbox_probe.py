"""What `hpcgrade slurm check` makes of a probe job's account (worker/grading/sandbox_probe.py)."""

from worker.grading.sandbox_probe import runs_as_the_submitter


def test_a_job_run_as_the_account_that_submitted_it_is_unsafe():
    (problem,) = runs_as_the_submitter({"node": "gpu07", "user": "hpcgrade"}, "hpcgrade")
    assert problem.startswith("gpu07 as hpcgrade: the jobs run as hpcgrade")
    assert "SLURM_SUBMIT_HOST" in problem


def test_a_job_run_as_the_grading_account_is_not():
    assert runs_as_the_submitter({"node": "gpu07", "user": "hpcgrade-grader"}, "hpcgrade") == []

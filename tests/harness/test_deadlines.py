"""Every wait on a harness has an end: one that stops answering (here its grader is stopped by
a signal) is killed with its zygote after its run's longest time and a margin; the local
executor's run is then the grader's error (tried again, never a zero), and the next job gets a
fresh harness."""
import os
import signal
import time
from types import SimpleNamespace

import pytest

from helpers import REFERENCE_Q, alive, descendants
from server.core.catalogue import default_root, load_exercise_info
from worker.grading.local import LocalExecutor
from worker.harness import runner


def quick_deadline(monkeypatch) -> None:
    """From now on, a run may take 1 s and the harness 1 s more (not the exercise's budget)."""
    monkeypatch.setattr(runner, "run_seconds", lambda limits: 1.0)
    monkeypatch.setattr(runner, "ANSWER_MARGIN_SECONDS", 1.0)


@pytest.fixture
def job(tmp_path):
    work = tmp_path / "work.py"
    work.write_text(REFERENCE_Q)
    return load_exercise_info(default_root() / "autograd-q").job(work, seed=1)


def test_a_harness_that_stops_answering_is_killed_with_all_it_started(tmp_path, job,
                                                                      monkeypatch):
    with runner.HarnessProcess(scratch=str(tmp_path)) as harness:
        quick_deadline(monkeypatch)
        started = descendants(harness.process.pid)
        assert started  # the zygote and its spare
        os.kill(harness.process.pid, signal.SIGSTOP)
        began = time.monotonic()
        with pytest.raises(runner.HarnessUnanswered, match="did not answer within 2 s"):
            harness.report_for(job)
        assert time.monotonic() - began < 5
        assert harness.process.poll() is not None
        deadline = time.monotonic() + 5
        while any(alive(pid) for pid in started) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in started if alive(pid)]


def test_the_local_executors_run_is_a_grader_error_and_the_next_gets_a_new_harness(
        tmp_path, job, monkeypatch):
    executor = LocalExecutor(SimpleNamespace(spool_dir=str(tmp_path), course_python=None))
    try:
        executor.submit([job])
        assert executor.read_report(job.id).score == 10  # the harness is warm
        (harness,) = executor._harnesses.values()
        quick_deadline(monkeypatch)
        os.kill(harness.process.pid, signal.SIGSTOP)
        executor.submit([job])
        failed = executor.read_report(job.id)
        assert not failed.graded and "did not answer" in failed.error
        monkeypatch.undo()  # a new harness's first job takes its lazy imports' time
        executor.submit([job])
        assert executor.read_report(job.id).score == 10
        assert harness.process.poll() is not None
    finally:
        executor.close()

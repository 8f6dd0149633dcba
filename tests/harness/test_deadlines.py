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
from worker.harness.launch import is_stopped


def quick_deadline(monkeypatch) -> None:
    """From now on, a run may take 1 s and the harness 1 s more (not the exercise's budget)."""
    monkeypatch.setattr(runner, "run_seconds", lambda limits: 1.0)
    monkeypatch.setattr(runner, "ANSWER_MARGIN_SECONDS", 1.0)


@pytest.fixture
def job(tmp_path):
    work = tmp_path / "work.py"
    work.write_text(REFERENCE_Q)
    return load_exercise_info(default_root() / "autograd-q").job(work, seed=1)


def test_a_harness_that_stops_answering_is_killed_with_all_it_started(tmp_path, job, monkeypatch):
    with runner.HarnessProcess(scratch=str(tmp_path)) as harness:
        quick_deadline(monkeypatch)
        started = descendants(harness.process.pid)
        assert started  # the zygote
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
    tmp_path, job, monkeypatch
):
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


def test_the_command_grades_the_next_file_with_a_new_harness(tmp_path, monkeypatch, job):
    """`hpcgrade grade A B`: A's harness stopped answering (here A sleeps past a deadline of 2
    s); B is graded by a new one, where it said "the harness process is gone"."""
    from worker.cli.main import _here

    slow = tmp_path / "slow.py"
    slow.write_text("import time\ntime.sleep(30)\n")
    first = type(job)(**dict(job.to_dict(), submission=str(slow), filename="slow.py"))
    real, deadlines = runner.run_seconds, iter([1.0])
    monkeypatch.setattr(runner, "run_seconds", lambda limits: next(deadlines, None) or real(limits))
    monkeypatch.setattr(runner, "ANSWER_MARGIN_SECONDS", 1.0)
    stopped, graded = _here([first, job], None)
    assert not stopped.graded and "did not answer within 2 s" in stopped.error
    assert graded.score == 10


def test_a_stop_found_when_the_last_student_process_is_reaped_is_the_submissions(
    tmp_path, monkeypatch
):
    """The second look's own student process stopped the zygote: the reap at the end of the
    grade finds it (it was a grader error, the stop found outside the grade's handling)."""
    from worker.harness.grader import Harness

    wrong = tmp_path / "wrong.py"
    wrong.write_text(REFERENCE_Q.replace("- b**2", "+ b**2"))
    job = load_exercise_info(default_root() / "autograd-q").job(wrong, seed=1)
    second_look = Harness._results

    def stopping_the_zygote(self, session, *args):
        found = second_look(self, session, *args)
        assert session.process is not None and session.process.alive  # the second look's
        os.kill(self.zygote.process.pid, signal.SIGSTOP)
        while not is_stopped(self.zygote.process.pid):  # a signal is delivered on its own time
            time.sleep(0.01)
        return found

    monkeypatch.setattr(Harness, "_results", stopping_the_zygote)
    with Harness(str(tmp_path)) as harness:
        report = harness.grade_job(job)
    assert report.graded and report.score == 0, report.error
    assert report.notes[0]["code"] == "forbidden-operation"


@pytest.mark.parametrize("mistake", ["a wrong formula", "backward twice"])
def test_a_stop_found_by_the_second_look_is_the_submissions(tmp_path, monkeypatch, mistake):
    """The first look's student process stopped the zygote as it ended (where the kernel lets
    it): the second look, starting its own process, finds it; that is the submission's doing,
    not advice left out (a review: the look swallowed it, and the grade went on), and the look
    ends there: it makes no zygote again to turn anomaly mode off (a backward error's look)."""
    from worker.harness import second_look
    from worker.harness.grader import Harness

    wrong = tmp_path / "wrong.py"
    exercise = default_root() / "autograd-q"
    wrong.write_text(
        REFERENCE_Q.replace("- b**2", "+ b**2")
        if mistake == "a wrong formula"
        else (exercise / "mutants" / "backward_twice.py").read_text()
    )
    job = load_exercise_info(exercise).job(wrong, seed=1)
    first_look_done = Harness._results

    def stopped_as_the_look_starts(self, session, *args):
        os.kill(self.zygote.process.pid, signal.SIGSTOP)
        while not is_stopped(self.zygote.process.pid):
            time.sleep(0.01)
        return first_look_done(self, session, *args)

    monkeypatch.setattr(Harness, "_results", stopped_as_the_look_starts)
    monkeypatch.setattr(second_look, "SECONDS", 30.0)
    with Harness(str(tmp_path)) as harness:
        stopped = harness.zygote
        report = harness.grade_job(job)
        assert harness.zygote is stopped  # replaced by the next grade, not within this one
    assert report.graded and report.score == 0, report.error
    assert report.notes[0]["code"] == "forbidden-operation"


def test_the_next_grade_pays_nothing_for_a_zygote_the_one_before_stopped(
    tmp_path, monkeypatch, job
):
    """A zygote found stopped as a grade starts (by the student before, whose reap is still
    owed) is looked at again, closed and made afresh before the submission's time starts: here
    the look alone takes longer than the whole budget (a review: the next grade paid for it)."""
    from worker.harness import launch
    from worker.harness.grader import Harness

    monkeypatch.setattr(launch, "STOPPED_AGAIN_SECONDS", 8.0)
    tight = type(job).from_dict(dict(job.to_dict(), limits={"budget_seconds": 6.0}))
    with Harness(str(tmp_path)) as harness:
        assert harness.grade_job(job).score == 10
        stopped = harness.zygote
        os.kill(stopped.process.pid, signal.SIGSTOP)
        while not is_stopped(stopped.process.pid):
            time.sleep(0.01)
        report = harness.grade_job(tight)
        assert harness.zygote is not stopped
    assert (report.score, report.timing["budget_spent"]) == (10, False), report.checks


def test_the_second_look_ends_within_its_time_whatever_the_submission_does(tmp_path, monkeypatch):
    """Each of its requests is cut at the look's end: a failing function that takes most of a
    call's time ran the look to 57 s against its 20 s (here 0.2 s, and 3 s a call; the look
    also starts a fresh student process, which takes up to a second on a loaded machine)."""
    from worker.harness import second_look
    from worker.harness.grader import Harness

    wrong = tmp_path / "wrong.py"
    wrong.write_text(
        "import time\n"
        + REFERENCE_Q.replace("- b**2", "+ b**2").replace(
            "    Q = ", "    time.sleep(3)\n    Q = ", 1
        )
    )
    info = load_exercise_info(default_root() / "autograd-q")
    job = info.job(wrong, seed=1)
    job = type(job)(
        **{**job.to_dict(), "limits": {**info.limits, "call_seconds": 4, "budget_seconds": 120}}
    )
    monkeypatch.setattr(second_look, "SECONDS", 0.2)
    with Harness(str(tmp_path)) as harness:
        report = harness.grade_job(job)
    assert report.graded and report.score < 10, report.error
    assert 0 < report.timing["second_look"] < 2.5, report.timing  # a whole call takes 3 s

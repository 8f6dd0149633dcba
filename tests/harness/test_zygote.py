"""The zygote forks every student: what it has done, each student inherits."""

import os
import re
import signal
import time

import pytest
import torch
from torch.autograd.variable import Variable

from worker.harness import zygote


class EngineRun(Exception):
    pass


class NoEngine:
    def run_backward(self, *args, **kwargs):
        raise EngineRun("the zygote ran autograd's engine")


def test_the_warm_up_never_runs_autograds_engine(monkeypatch):
    """On a GPU node the engine's first backward initialises CUDA and starts device threads,
    after which every forked student's backward fails ("Unable to handle autograd's threading in
    combination with fork-based multiprocessing") and its first CUDA call raises."""
    monkeypatch.setattr(Variable, "_execution_engine", NoEngine())
    with pytest.raises(EngineRun):  # the guard itself catches a backward
        torch.ones(1, requires_grad=True).sum().backward()
    zygote.warm_up_autograd()
    zygote.warm_up_optimizers()


def test_the_zygote_warms_up_while_idle_and_freezes_what_students_share(tmp_path):
    """A cold harness's first student of an exercise that steps optimizers starts without their
    warm-up (torch._dynamo, about 1 s) and the next, sent after a quiet moment, with it: the
    zygote paid for it between the two grades, not in either. An exercise that steps none never
    makes the zygote pay it, nor its students carry it. And each student's collector walks its
    own objects alone: what the zygote loaded (torch's, about 170,000) is frozen before it
    forks; a full collection cost 70 ms before, and autograd-saved-hooks' checks ask for one per
    case (a seed of its programs took 19 s, 5.5 s once frozen)."""
    from server.core.catalogue import default_root, load_exercise_info
    from worker.harness.runner import HarnessProcess

    said = "import gc, sys\nprint('dynamo loaded:', 'torch._dynamo' in sys.modules)\n"
    said += "print('frozen:', gc.get_freeze_count())\n"
    outputs = []
    with HarnessProcess(scratch=str(tmp_path)) as harness:
        for slug in ("autograd-q", "training-step"):
            info = load_exercise_info(default_root() / slug)
            work = tmp_path / f"{slug}.py"
            work.write_text(said + (default_root() / slug / "reference.py").read_text())
            for _ in range(2):
                report = harness.report_for(info.job(work, seed=1, lang="en"))
                assert report.score == report.max_score, report.output
                outputs.append(report.output)
                time.sleep(zygote.IDLE_BEFORE_WARM * 10)  # a quiet moment, between two grades
    loaded = [output.split("dynamo loaded:")[1].split()[0] for output in outputs]
    assert loaded == ["False", "False", "False", "True"], outputs
    for output in outputs:
        assert int(output.split("frozen:")[1].split()[0]) > 100_000, output


def test_a_student_that_ended_keeps_its_pid_until_the_grader_lets_go(tmp_path):
    """The keeper learns at once how its student ended, and reaps it only once the zygote has
    answered the grader's reap: until then the pid, which the grader may still signal, names no
    other process (a review: reaped at once, the pid could be reused before the grader's kill)."""
    import os

    from worker.harness import launch, sandbox
    from worker.harness.jobs import Limits

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    confinement = sandbox.Confinement(
        scratch=str(scratch),
        memory_bytes=1 << 30,
        cpu_seconds=30,
        file_bytes=1 << 20,
        open_files=64,
        read_paths=sandbox.python_read_paths(),
    )
    process = launch.Zygote(launch.child_environment())
    try:
        answer, fds = process.spawn(confinement, Limits())
        pid = answer["pid"]
        os.close(fds[0])  # no more requests: the student process exits
        deadline = time.monotonic() + 10
        while state(pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)
        assert state(pid) == "Z"  # ended, and not reaped
        assert process.reap(pid, 1.0) == {"exit_code": 0, "signal": None, "killed": False}
        while state(pid) is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert state(pid) is None
        for fd in fds[1:]:
            os.close(fd)
    finally:
        process.close()


def state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or before the read
        return None


def confinement_in(scratch):
    """A student's confinement with the default limits, its scratch made in `scratch`."""
    from worker.harness import sandbox
    from worker.harness.jobs import Limits

    limits = Limits()
    return sandbox.Confinement(
        scratch=str(scratch),
        memory_bytes=limits.memory_mb << 20,
        cpu_seconds=limits.cpu_seconds,
        file_bytes=limits.file_mb << 20,
        open_files=256,
        read_paths=sandbox.python_read_paths(),
    )


def test_each_student_is_made_ready_while_the_one_before_runs_and_is_never_reused(tmp_path):
    """Issue 39's pool, on a CPU: each student is set up (here with a slow start standing for
    CUDA's context) as soon as the one before is handed over, so the next spawn takes it at
    once; a student serves once, and one that died while it waited is replaced (by the zygote,
    or by the grader where it died as it was handed over)."""
    from worker.harness import launch
    from worker.harness.grader import Harness
    from worker.harness.jobs import Limits
    from worker.harness.student_process import Output, StudentProcess

    slow = 2.0
    limits, confinement = Limits(), confinement_in(tmp_path)
    environment = dict(launch.child_environment(), **{zygote.READY_DELAY: str(slow)})
    harness = Harness(str(tmp_path), zygote=launch.Zygote(environment))
    process = harness.zygote

    def spawned() -> tuple[StudentProcess, float]:
        started = time.monotonic()
        student = harness.spawn(confinement, limits, Output(1000))
        return student, time.monotonic() - started

    try:
        assert process.ready_pid() is None  # nothing is known of the first spawn's shape
        first, waited = spawned()
        assert waited >= slow and "seccomp" in first.hello["layers"]
        ready = process.ready_pid()
        assert ready not in (None, first.pid)
        time.sleep(slow + 1)  # the first student's work: the next is set up meanwhile
        second, waited = spawned()
        assert second.pid == ready and waited < slow, waited
        assert "seccomp" in second.hello["layers"]
        scratches = {first.scratch["path"], second.scratch["path"]}
        assert len(scratches) == 2 and all(path.startswith(str(tmp_path)) for path in scratches)
        first.stop()
        second.stop()

        dead = process.ready_pid()
        assert dead not in (None, first.pid, second.pid)
        os.kill(dead, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while state(dead) not in (None, "Z") and time.monotonic() < deadline:
            time.sleep(0.01)
        third, _ = spawned()
        assert third.pid not in (dead, first.pid, second.pid)
        assert "seccomp" in third.hello["layers"]
        third.stop()
    finally:
        harness.close()
    # each student's scratch went with its reap, and the one held ready with it: gone
    assert list(tmp_path.iterdir()) == []


def test_a_killed_student_is_reaped_without_the_grade_waiting_for_its_end(tmp_path):
    """A grade ends once its student is killed: the zygote's answer to the reap (sent when the
    student's memory is freed, about 6 ms after) is read before the next request, which is
    answered in its turn, and the zygote removes the scratch. A zygote found stopped while that
    answer is owed was stopped by a student of the grade that killed it: blamed within that
    grade, not by the next (settle, as a grade starts: the zygote is made again), and the
    scratches of students it had not reaped are removed all the same."""
    from worker.harness import launch
    from worker.harness.grader import Harness
    from worker.harness.jobs import Limits
    from worker.harness.student_process import Output

    limits, confinement = Limits(), confinement_in(tmp_path)
    harness = Harness(str(tmp_path))

    def stopped_with_a_reap_owed():
        student = harness.spawn(confinement, limits, Output(1000))
        student.stop()
        os.kill(harness.zygote.process.pid, signal.SIGSTOP)
        while state(harness.zygote.process.pid) != "T":
            time.sleep(0.01)
        return harness.zygote

    try:
        student = harness.spawn(confinement, limits, Output(1000))
        assert student.stop() == {} and harness.zygote.owed == [student.scratch["path"]]
        ready = harness.zygote.ready_pid()  # the reap's answer read first, then this one's
        assert harness.zygote.owed == [] and ready not in (None, student.pid)
        deadline = time.monotonic() + 10
        while state(student.pid) is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert state(student.pid) is None
        assert not os.path.exists(student.scratch["path"])

        stopped = stopped_with_a_reap_owed()  # within a grade: its student's doing
        with pytest.raises(launch.ZygoteLost) as lost:
            harness.spawn(confinement, limits, Output(1000))
        assert lost.value.stopped, lost.value

        stopped = stopped_with_a_reap_owed()
        stopped.settle()  # a grade starts
        assert stopped.lost is not None and not stopped.lost.stopped, stopped.lost
        later = harness.spawn(confinement, limits, Output(1000))
        assert harness.zygote is not stopped
        later.stop()
    finally:
        harness.close()
    assert list(tmp_path.iterdir()) == []


def test_each_check_after_the_first_drops_what_the_one_before_left(tmp_path, monkeypatch):
    """A check starts with a reset, which drops the objects earlier requests left in the student
    process (on its own thread: their finalizers are the submission's code); a process that
    has only loaded its file holds none, and is asked for no reset (one request a grade less)."""
    from server.core.catalogue import default_root, load_exercise_info
    from worker.harness.grader import Harness
    from worker.harness.student_process import StudentProcess

    asked = []
    exchange = StudentProcess.exchange

    def recorded(self, header, buffers, timeout):
        asked.append(header and header["op"])
        return exchange(self, header, buffers, timeout)

    monkeypatch.setattr(StudentProcess, "exchange", recorded)
    info = load_exercise_info(default_root() / "autograd-q")
    with Harness(str(tmp_path)) as harness:
        report = harness.grade_job(info.job(default_root() / "autograd-q" / "reference.py"))
    assert report.score == report.max_score == 10
    checks = [[]]
    for op in asked[asked.index("load") + 1 :]:
        if op == "reset":
            checks.append([])
        checks[-1].append(op)
    assert len(checks) == 4 and "reset" not in checks[0], asked  # four checks
    assert all(ops[0] == "reset" and len(ops) > 1 for ops in checks[1:]), asked


def test_a_student_is_made_ready_whatever_is_left_of_the_budget(tmp_path):
    """A student's hello is the grader's set-up, not the submission's time: a check that starts
    a process just as the budget ends gets the budget's diagnostic at its first request, not a
    process said never to have started (a grader error; its wait was capped by the budget)."""
    from worker.harness.budget import Budget, BudgetedLimits
    from worker.harness.grader import Harness
    from worker.harness.jobs import Limits
    from worker.harness.student_process import Output

    with Harness(str(tmp_path)) as harness:
        student = harness.spawn(
            confinement_in(tmp_path), BudgetedLimits(Limits(), Budget(0.0)), Output(1000)
        )
        assert "seccomp" in student.hello["layers"]
        student.stop()


def test_a_harness_forks_its_zygote_with_nothing_of_the_graders(tmp_path, monkeypatch):
    """A harness imports torch once and forks its zygote before it reads a job (an exec'd one
    imported it again: 1.5 s of CPU a start). The zygote, and so every student, holds nothing of
    the grader's: not its pipes (a student holding them could read the jobs or write reports),
    not its command line or its first environment, which /proc shows to each student."""
    from server.core.catalogue import default_root, load_exercise_info
    from worker.harness.runner import HarnessProcess

    monkeypatch.setenv("SLURM_JOB_COMMENT", "graders-environment")  # reaches the grader alone
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    submission = tmp_path / "submission.py"
    submission.write_text(
        """import os, sys
HELD = []  # its own /proc is out of its sight: what each descriptor it holds is
for fd in range(1024):
    try:
        HELD.append(f"{os.fstat(fd).st_ino}")
    except OSError:
        pass
def q_grads(a, b, v):
    raise RuntimeError(f"{sys.argv} {sys.orig_argv} HELD {HELD} {dict(os.environ)}")
"""
    )
    with HarnessProcess(scratch=str(scratch)) as process:
        grader = process.process.pid
        pipes = {os.readlink(f"/proc/{grader}/fd/{fd}") for fd in os.listdir(f"/proc/{grader}/fd")}
        pipes -= {os.readlink(f"/proc/{grader}/fd/2")}  # its stderr, the zygote's too
        (forked,) = open(f"/proc/{grader}/task/{grader}/children").read().split()
        assert open(f"/proc/{forked}/cmdline", "rb").read().split(b"\0")[0] == zygote.TITLE
        assert open(f"/proc/{forked}/environ", "rb").read().strip(b"\0") == b""
        held = {
            fd: os.readlink(f"/proc/{forked}/fd/{fd}") for fd in os.listdir(f"/proc/{forked}/fd")
        }
        assert held.pop("0") == "/dev/null" and held.pop("1") == held.pop("2")
        (channel,) = held.values()  # its socket to the grader, nothing else
        assert channel.startswith("socket:") and channel not in pipes
        job = load_exercise_info(default_root() / "autograd-q").job(submission, seed=7)
        seen = str(process.report_for(job).to_dict())
    held_by_student = re.search(r"HELD \[([^]]*)\]", seen).group(1)
    inodes = {link.split("[")[1].rstrip("]") for link in pipes if "[" in link}  # pipe:[N]
    assert inodes and not inodes & set(re.findall(r"\d+", held_by_student))
    assert "--scratch" not in seen  # the grader's command line
    assert "HOME" in seen and "graders-environment" not in seen


def test_a_forked_zygote_that_fails_to_start_ends_there(monkeypatch):
    """Whatever goes wrong in the forked child before the zygote serves, the child exits: it
    never returns into the code that forked it (a grader, holding the jobs' and reports' pipes:
    a review found an import outside the child's guard)."""
    from worker.harness import launch

    def fails(fd, env, sealed):
        raise ImportError("a broken checkout")

    monkeypatch.setattr(zygote, "run_forked", fails)
    parent = os.getpid()
    forked = launch.ForkedZygote(-1, {}, sealed=True)
    assert os.getpid() == parent  # this is the test's process, not the child going on
    assert forked.wait(timeout=30) == 70

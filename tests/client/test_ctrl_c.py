"""Ctrl-C in the terminal client: one line that says what happened and what goes on, an exit
status of its own (130, the shell's for SIGINT), never click's "Aborted!" (status 1, "no grade")
or Python's traceback."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers import REFERENCE_Q
from test_client_output import portal, run_submit  # noqa: F401 - a fixture

from hpcgrade.terminal import STOPPED


def test_ctrl_c_while_waiting_says_the_submission_is_still_graded(portal, monkeypatch, tmp_path):  # noqa: F811
    def interrupted(_seconds):  # Ctrl-C arrives while the client waits between two polls
        raise KeyboardInterrupt

    monkeypatch.setattr("hpcgrade.service.time.sleep", interrupted)
    result = run_submit(tmp_path, REFERENCE_Q, "--lang", "es")
    assert result.exit_code == STOPPED, result.output
    assert "Aborted" not in result.output and "Traceback" not in result.output
    assert f"la entrega se sigue calificando: {portal}/courses/pytorch/submissions/" in (
        result.stderr
    )


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def harness_started(pid: int) -> bool:
    """Whether the process's harness runs (exec'd): a SIGINT in the instant between its fork
    and its own session would reach it too, which no hand on a keyboard times."""
    for child in children(pid):
        try:
            if b"worker.harness" in Path(f"/proc/{child}/cmdline").read_bytes():
                return True
        except OSError:
            pass
    return False


def generations(pid: int) -> int:
    """How deep the process's tree goes: the student's code runs four below the client
    (harness, zygote, keeper, student)."""
    return 1 + max((generations(child) for child in children(pid)), default=0)


def in_a_terminal(command: list[str]) -> subprocess.Popen:
    """The command as a terminal's foreground job: a process group of its own, SIGINT neither
    ignored nor blocked. A test run in the background of a script (`.ci/run &`) inherits SIGINT
    ignored, and Python keeps an inherited SIG_IGN: the client then ran to its end."""

    def foreground() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    return subprocess.Popen(
        command,
        start_new_session=True,
        preexec_fn=foreground,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_ctrl_c_during_a_check_stops_it_in_one_line(tmp_path):
    """The real command, sent SIGINT as a terminal sends it (to the foreground process group)
    once the checks run: a file that sleeps keeps them running."""
    work = tmp_path / "work.py"
    work.write_text("import time\n\ntime.sleep(120)\n")
    command = [str(Path(sys.executable).parent / "hpcgrade"), "check", "autograd-q", str(work)]
    check = in_a_terminal(command)
    deadline = time.monotonic() + 60
    while not harness_started(check.pid) and time.monotonic() < deadline:
        time.sleep(0.01)  # then the checks are under way
    os.killpg(check.pid, signal.SIGINT)
    out, err = check.communicate(timeout=60)
    assert check.returncode == STOPPED, err
    assert err.strip() == "stopped: the checks did not finish (no attempt was used)"
    assert out == ""


def test_ctrl_c_while_the_students_code_runs_stops_at_once(tmp_path):
    work = tmp_path / "work.py"
    work.write_text("import time\n\ntime.sleep(120)\n")  # loading it takes its 10 s
    command = [str(Path(sys.executable).parent / "hpcgrade"), "check", "autograd-q", str(work)]
    check = in_a_terminal(command)
    deadline = time.monotonic() + 60
    while generations(check.pid) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(check.pid, signal.SIGINT)
    stopped = time.monotonic()
    out, err = check.communicate(timeout=60)
    # at once, not once the student's code has run out its 10 s of loading (27 s were seen)
    assert time.monotonic() - stopped < 8
    assert check.returncode == STOPPED, err
    assert err.strip() == "stopped: the checks did not finish (no attempt was used)"
    assert out == ""

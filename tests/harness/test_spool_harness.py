"""`python -m worker.harness spool`: grading runs that the service left in a spool, as a Slurm
batch job does, with a real harness process and the layout of worker/harness/spool.py."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from helpers import REFERENCE_Q, alive, descendants, notebook

from worker.harness import spool
from worker.harness.jobs import Job
from worker.harness.report import Report

ROOT = Path(__file__).resolve().parents[2]
EXERCISE = ROOT / "exercises" / "autograd-q"
SIGN_FLIPPED = REFERENCE_Q.replace("- b**2", "+ b**2")
USER = os.environ.get("HPCGRADE_TEST_USER")
PYTHON = os.environ.get("HPCGRADE_TEST_COURSE_PYTHON")


def job(run_id: str, filename: str = "work.py", **limits) -> Job:
    return Job(
        exercise="autograd-q",
        exercise_dir=str(EXERCISE),
        submission="",
        filename=filename,
        limits=limits,
        seed=5,
        id=run_id,
    )


def write(root: Path, run: Job, code: bytes) -> Path:
    """The run written into the spool at `root`; its folder."""
    spool.write_run(root, run, code)
    return spool.run_dir(root, run.id)


def spool_command(root: Path, *run_ids: str, flags: tuple[str, ...] = ()) -> list[str]:
    """Students' scratch folders go into the test's own folder: a killed harness leaves its
    last one behind."""
    return [
        sys.executable,
        *flags,
        "-m",
        "worker.harness",
        "spool",
        "--scratch",
        str(root),
        str(root),
        *run_ids,
    ]


def environment(**extra: str) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), **extra}


def run_spool(
    root: Path, *run_ids: str, flags: tuple[str, ...] = (), **env: str
) -> subprocess.CompletedProcess:
    return subprocess.run(
        spool_command(root, *run_ids, flags=flags),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=environment(**env),
    )


# --- the layout ------------------------------------------------------------------------------


def test_write_run_and_read_job(tmp_path):
    umask = os.umask(0o077)  # the service's umask must not keep the grading account out
    try:
        written = spool.write_run(tmp_path, job("7", "nb.ipynb"), b"{}")
    finally:
        os.umask(umask)
    folder = spool.run_dir(tmp_path, "7")
    assert folder == spool.run_dir(tmp_path, "7") == tmp_path / "runs" / "7"
    assert sorted(p.name for p in folder.iterdir()) == ["job.json", "submission.ipynb"]
    assert json.loads((folder / "job.json").read_text())["submission"] == "submission.ipynb"
    for path in (folder.parent, folder):
        assert path.stat().st_mode & 0o7777 == 0o2770
    for path in folder.iterdir():
        assert path.stat().st_mode & 0o777 == 0o660
    read = spool.read_job(folder)
    assert read.submission == str(folder.resolve() / "submission.ipynb")
    assert (read.exercise, read.filename, read.id, read.seed) == ("autograd-q", "nb.ipynb", "7", 5)
    assert written == read  # what the service keeps is what the harness reads


def test_bad_runs_and_reports_are_named(tmp_path):
    for bad in ("../x", "a/b", "", ".hidden", "x" * 200):
        with pytest.raises(ValueError):
            spool.run_dir(tmp_path, bad)
    with pytest.raises(ValueError):
        write(tmp_path, job("8", "work.txt"), b"")
    folder = write(tmp_path, job("9"), b"")
    assert spool.read_report(folder) is None
    for garbled in ('{"status": "gra', "[1, 2]", "\x00"):
        (folder / "report.json").write_text(garbled)
        assert spool.read_report(folder).status == "error"
    for text in ("{", '{"submission": "../../etc/passwd", "exercise": "x"}', '{"nope": 1}'):
        (folder / "job.json").write_text(text)
        with pytest.raises(spool.UnreadableRun):
            spool.read_job(folder)
    (folder / "job.json").unlink()
    with pytest.raises(spool.UnreadableRun):
        spool.read_job(folder)
    graded = Report.from_dict({"status": "graded", "score": 1.0, "max_score": 1.0, "checks": []})
    spool.write_report(folder, graded)
    assert spool.read_report(folder) == graded
    assert sorted(p.name for p in folder.iterdir()) == ["report.json", "submission.py"]
    spool.remove_run(tmp_path, "9")
    assert not folder.exists()
    spool.remove_run(tmp_path, "9")


# --- one batch job ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """One spool job over five runs: two to grade, one reported before (a requeued job), one
    cancelled, one whose job.json is garbled."""
    root = tmp_path_factory.mktemp("spool")
    write(root, job("1"), REFERENCE_Q.encode())
    write(root, job("2"), SIGN_FLIPPED.encode())
    done = write(root, job("3"), REFERENCE_Q.encode())
    plant(done, {"status": "graded", "score": 1.5, "from": "the first start"})
    cancelled = write(root, job("4"), REFERENCE_Q.encode())
    spool.mark_cancelled(cancelled)
    (write(root, job("5"), REFERENCE_Q.encode()) / "job.json").write_text("{garbled")
    stamp = (done / "report.json").stat().st_mtime_ns
    result = run_spool(root, "1", "5", "2", "3", "4", SLURM_RESTART_COUNT="1", SLURM_JOB_ID="4242")
    return root, result, stamp


def plant(folder: Path, report: dict) -> None:
    """A report.json as an earlier start of the job left it, to be left untouched."""
    spool.write_atomically(folder / spool.REPORT, json.dumps(report).encode())


def report(root: Path, run_id: str) -> dict | None:
    """The run's report.json as JSON, as the harness wrote it."""
    written = spool.run_dir(root, run_id) / spool.REPORT
    return json.loads(written.read_bytes()) if written.exists() else None


def test_batch_grades_every_run_and_exits_0(batch):
    root, result, _ = batch
    assert result.returncode == 0, result.stderr
    first, second = report(root, "1"), report(root, "2")
    assert (first["status"], first["score"], first["max_score"]) == ("graded", 10, 10)
    assert (second["status"], second["score"]) == ("graded", 3)
    assert {d["code"] for c in second["checks"] for d in c["diagnostics"]} == {"grad-sign-flipped"}
    assert first["environment"]["slurm_job"] == "4242"
    assert first["environment"]["slurm_restart_count"] == 1
    assert first["timing"]["started_at"] < second["timing"]["started_at"] <= time.time()
    assert "network-namespace" in first["sandbox"]["layers"]


def test_a_reported_run_is_skipped_untouched(batch):
    root, result, stamp = batch
    assert report(root, "3") == {"status": "graded", "score": 1.5, "from": "the first start"}
    assert (spool.run_dir(root, "3") / "report.json").stat().st_mtime_ns == stamp
    assert "run 3: already reported" in result.stderr
    assert "SLURM_RESTART_COUNT=1" in result.stderr


def test_a_cancelled_run_is_skipped(batch):
    root, result, _ = batch
    assert report(root, "4") is None
    assert "run 4: cancelled" in result.stderr


def test_a_garbled_job_is_an_error_report_for_that_run_alone(batch):
    root, result, _ = batch
    error = report(root, "5")
    assert error["status"] == "error" and "job.json" in error["error"]
    assert error["job_id"] == "5"
    assert report(root, "2")["status"] == "graded"  # graded after it
    lines = [line for line in result.stderr.splitlines() if line.startswith("hpcgrade: run")]
    assert [line.split(":")[1] for line in lines] == [
        " run 3",
        " run 4",
        " run 1",
        " run 5",
        " run 2",
    ]


def test_no_temporary_file_is_left(batch):
    root, _, _ = batch
    assert [p for p in (root / "runs").rglob("*") if p.name.startswith(".")] == []


# --- failures of the job itself --------------------------------------------------------------


def test_killed_half_way_keeps_the_reports_written(tmp_path):
    write(tmp_path, job("1"), REFERENCE_Q.encode())
    write(tmp_path, job("2", load_seconds=100), b"import time\ntime.sleep(100)\n")
    write(tmp_path, job("3"), REFERENCE_Q.encode())
    with open(tmp_path / "log", "w") as log:
        process = subprocess.Popen(
            spool_command(tmp_path, "1", "2", "3"), stderr=log, cwd=ROOT, env=environment()
        )
    deadline = time.monotonic() + 60
    # until the second run's student is asleep beside the zygote and the next, ready (each a
    # keeper and the student process it forked into a PID namespace)
    while (
        report(tmp_path, "1") is None or len(descendants(process.pid)) < 5
    ) and time.monotonic() < deadline:
        time.sleep(0.05)
    processes = descendants(process.pid)
    process.kill()  # the grader itself: the zygote and the students must die with it
    process.wait()
    assert report(tmp_path, "1")["score"] == 10
    assert report(tmp_path, "2") is None and report(tmp_path, "3") is None
    assert "run 1: graded 10/10" in (tmp_path / "log").read_text()
    deadline = time.monotonic() + 5
    while any(map(alive, processes)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(alive, processes))


def test_without_torch_every_run_gets_an_error_report_and_the_job_fails(tmp_path):
    write(tmp_path, job("1"), REFERENCE_Q.encode())
    done = write(tmp_path, job("2"), REFERENCE_Q.encode())
    plant(done, {"status": "graded", "score": 10})
    result = run_spool(tmp_path, "1", "2", flags=("-S",))  # no site-packages: no torch
    assert result.returncode != 0
    error = report(tmp_path, "1")
    assert error["status"] == "error" and "torch" in error["error"], error
    assert error["environment"]["python"]
    assert report(tmp_path, "2") == {"status": "graded", "score": 10}


def test_nothing_to_grade_starts_nothing(tmp_path):
    spool.mark_cancelled(write(tmp_path, job("1"), REFERENCE_Q.encode()))
    result = run_spool(tmp_path, "1", flags=("-S",))  # a harness could not start without torch
    assert result.returncode == 0 and report(tmp_path, "1") is None


# --- as the grading account ------------------------------------------------------------------


@pytest.mark.skipif(
    not (USER and PYTHON),
    reason="HPCGRADE_TEST_USER and "
    'HPCGRADE_TEST_COURSE_PYTHON are not set: run `eval "$(scripts/grading-account)"`'
    " first (scripts/test does)",
)
def test_the_grading_account_reports_into_runs_the_service_wrote():
    root = Path(tempfile.mkdtemp(prefix="hpcgrade-spool-"))
    try:
        shutil.chown(root, USER, USER)
        root.chmod(0o2770)  # the spool's group is shared by the service and the grading account
        for run_id, code in (("11", REFERENCE_Q), ("12", SIGN_FLIPPED)):
            write(root, job(run_id), code.encode())
        assert (root / "runs" / "11").stat().st_uid == 0
        command = [
            "runuser",
            "-u",
            USER,
            "--",
            "env",
            "-i",
            "PATH=/usr/bin:/bin",
            f"PYTHONPATH={ROOT}",
            PYTHON,
            "-m",
            "worker.harness",
            "spool",
            str(root),
            "11",
            "12",
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert result.returncode == 0, result.stderr
        first, second = report(root, "11"), report(root, "12")
        assert (first["score"], second["score"]) == (10, 3), (first, second)
        assert first["sandbox"]["unavailable"] == []
        assert first["environment"]["executable"] == PYTHON
        written = spool.run_dir(root, "11") / "report.json"
        assert written.stat().st_uid != 0 and written.stat().st_mode & 0o777 == 0o660
    finally:
        shutil.rmtree(root)


# --- a pilot ---------------------------------------------------------------------------------


def test_a_pilot_grades_what_arrives_warm_from_the_first_and_ends_when_asked(tmp_path):
    from worker.harness import pilot

    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "worker.harness",
            "pilot",
            "--scratch",
            str(tmp_path),
            str(tmp_path),
            "--minutes",
            "30",
        ],
        cwd=ROOT,
        env=environment(SLURM_JOB_ID="31"),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        folder = pilot.pilot_dir(tmp_path, "31")
        deadline = time.monotonic() + 60
        while pilot.read_heartbeat(folder) is None:
            assert time.monotonic() < deadline and process.poll() is None, process.stderr.read()
            time.sleep(0.05)
        reports = []
        said = "import sys\nprint('dynamo loaded:', 'torch._dynamo' in sys.modules)\n"
        for run_id, source in (("1", said + REFERENCE_Q), ("2", SIGN_FLIPPED)):
            write(tmp_path, job(run_id), source.encode())
            (pilot.inbox(tmp_path, "31") / run_id).touch()
            while (report := spool.read_report(spool.run_dir(tmp_path, run_id))) is None:
                assert time.monotonic() < deadline and process.poll() is None
                time.sleep(0.02)
            reports.append(report.to_dict())
        assert [r["score"] for r in reports] == [10, 3]
        assert all(r["environment"]["slurm_job"] == "31" for r in reports)
        # the optimizers were warmed (torch._dynamo imported) before the first run, not after it
        assert "dynamo loaded: True" in reports[0]["output"], reports[0]["output"]
        # a run writes its report, and the pilot counts it after: its next heartbeat says so
        while pilot.read_heartbeat(folder)["graded"] != 2:
            assert time.monotonic() < deadline, pilot.read_heartbeat(folder)
            time.sleep(0.02)
        (folder / "stop").touch()
        assert process.wait(timeout=30) == 0
        assert pilot.read_heartbeat(folder)["stopping"] is True
    finally:
        process.kill()
        process.wait()


# --- the file's kind, what the student printed --------------------------------------------------


def test_a_notebook_is_a_notebook_whatever_the_case_of_its_extension(grade, tmp_path):
    cells = notebook("import torch", REFERENCE_Q)
    for name in ("CAROL.IPYNB", "carol.IpYnB"):
        report = grade("autograd-q", cells, filename=name)
        assert report["score"] == report["max_score"], name
    folder = write(tmp_path, job("8", "CAROL.IPYNB"), cells.encode())
    assert spool.read_job(folder).submission.endswith("submission.ipynb")


def test_what_the_student_printed_without_flushing_is_in_the_report(grade):
    printed = "print('TOP')\nimport sys\nsys.stderr.write('ERR')\nprint('no newline', end='')\n"
    report = grade("autograd-q", printed + REFERENCE_Q)
    assert report["score"] == 10
    assert report["output"] == "TOP\nERRno newline"
    report = grade(
        "autograd-q", notebook(printed, REFERENCE_Q, "print('LAST', end='')"), filename="work.ipynb"
    )
    assert report["score"] == 10 and report["output"] == "TOP\nERRno newlineLAST"

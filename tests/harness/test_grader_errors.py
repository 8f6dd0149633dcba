"""Replies a submission forges (its own copy of the harness's server patched, with the seal taken
away) and scratch trees it builds must fail the submission on that check, with a diagnostic:
never a grader error."""

import os
from pathlib import Path

import pytest

from server.core.catalogue import default_root

EXERCISES = default_root()


@pytest.fixture
def grade(grade_unsealed):
    """The harness's server patched in the student's process: what the seal refuses
    (tests/harness/test_seal.py); here the grader's answer to replies forged all the same."""
    return grade_unsealed


def reference(exercise: str) -> str:
    return (EXERCISES / exercise / "reference.py").read_text()


def failed_checks(report: dict) -> dict[str, list[str]]:
    """Check name -> diagnostic codes, for the checks that lost points."""
    assert report["status"] == "graded", report.get("error")
    return {
        c["name"]: [d["code"] for d in c["diagnostics"]]
        for c in report["checks"]
        if c["points"] < c["max_points"]
    }


@pytest.mark.parametrize(
    "reply",
    [
        '{"class": "Nothing"}',  # no parameters at all
        '{"class": "TinyNet", "training": True, "parameters": 5, "modules": []}',  # not a dict
        '{"class": "TinyNet", "training": True, "parameters": {"w": 1}, "modules": []}',  # no tensors
    ],
)
def test_training_step_describe_without_parameters_is_a_crash(grade, reply):
    report = grade(
        "training-step",
        reference("training-step")
        + f"""
from worker.harness.student import Server
Server.op_describe = lambda self, header, buffers: {reply}
""",
    )
    failed = failed_checks(report)
    assert failed and report["score"] == 0, report["checks"]
    assert all(codes == ["crashed"] for codes in failed.values()), failed


def test_a_module_description_missing_its_module_fields_is_malformed(grade):
    """A description with some of a module's fields (training) but not the others."""
    report = grade(
        "training-step",
        reference("training-step")
        + """
from worker.harness.student import Server
_describe = Server.op_describe
def op_describe(self, header, buffers):
    reply = _describe(self, header, buffers)
    reply.pop("modules", None)
    return reply
Server.op_describe = op_describe
""",
    )
    failed = failed_checks(report)
    assert failed and all(codes == ["crashed"] for codes in failed.values()), failed


ATTR_DATA_IS_INT = """
from worker.harness.student import Server as _Server
_attr = _Server.op_attr
def _op_attr(self, header, buffers):
    if header.get("name") == {name!r}:
        return {{"value": 0}}
    return _attr(self, header, buffers)
_Server.op_attr = _op_attr
"""


@pytest.mark.parametrize("name", ["data", "grad", "weight"])
def test_accumulation_attr_not_a_tensor_is_output_mismatch(grade, name):
    report = grade(
        "autograd-accumulation",
        reference("autograd-accumulation") + ATTR_DATA_IS_INT.format(name=name),
    )
    failed = failed_checks(report)
    assert failed, report["checks"]
    assert all(codes == ["output-mismatch"] for codes in failed.values()), failed


def test_no_track_attr_data_not_a_tensor_is_output_mismatch(grade):
    report = grade(
        "autograd-no-track", reference("autograd-no-track") + ATTR_DATA_IS_INT.format(name="data")
    )
    failed = failed_checks(report)
    assert {"frozen-shares-memory", "sgd-in-place"} <= set(failed), failed
    assert all(codes == ["output-mismatch"] for codes in failed.values()), failed


def test_no_track_method_not_a_tensor_is_output_mismatch(grade):
    """`leaf.mul(2.0)`, asked of the student's process, answered with a number."""
    report = grade(
        "autograd-no-track",
        reference("autograd-no-track")
        + """
from worker.harness.student import Server as _Server
_call = _Server.op_call
def _op_call(self, header, buffers):
    if header.get("target", {}).get("method") == "mul":
        return {"value": 0}
    return _call(self, header, buffers)
_Server.op_call = _op_call
""",
    )
    failed = failed_checks(report)
    assert failed, report["checks"]
    assert all(codes == ["output-mismatch"] for codes in failed.values()), failed


def test_saved_hooks_deep_folders_are_left_not_a_grader_error(grade):
    source = (
        reference("autograd-saved-hooks")
        + """
import os as _os
_fd = _os.open(".", _os.O_RDONLY)
for _ in range(3000):
    _os.mkdir("d")
    _os.chdir("d")
open("leftover", "w").close()
_os.fchdir(_fd)
_os.close(_fd)
"""
    )
    report = grade("autograd-saved-hooks", source)
    failed = failed_checks(report)
    assert failed and report["score"] < report["max_score"], report["checks"]


def test_the_scratch_walk_is_bounded(tmp_path):
    """A folder deeper than MAX_SCRATCH_DEPTH is something left, reported like an unreadable
    folder; clear_files leaves it, and clears what lies above it."""
    from worker.harness.checks import MAX_SCRATCH_DEPTH, Context

    scratch = tmp_path / "scratch"
    deep = scratch.joinpath(*["d"] * (MAX_SCRATCH_DEPTH + 5))
    deep.mkdir(parents=True)
    (deep / "x").write_text("left")
    (scratch / "d" / "y").write_text("left")
    (scratch / "empty").mkdir()
    ctx = Context(None, None, None, None, None, scratch)
    too_deep = "/".join(["d"] * (MAX_SCRATCH_DEPTH + 1)) + "/"
    assert ctx.files_left() == [too_deep, "d/y"]
    ctx.clear_files()
    assert ctx.files_left() == [too_deep]
    assert (deep / "x").read_text() == "left" and not (scratch / "d" / "y").exists()
    assert Path(scratch / "empty").is_dir()


def test_the_scratch_walk_survives_thousands_of_levels(tmp_path):
    from worker.harness.checks import MAX_SCRATCH_DEPTH, Context

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    here = os.open(".", os.O_RDONLY)
    try:
        os.chdir(scratch)
        for _ in range(3000):
            os.mkdir("d")
            os.chdir("d")
    finally:
        os.fchdir(here)
        os.close(here)
    ctx = Context(None, None, None, None, None, scratch)
    try:
        assert ctx.files_left() == ["/".join(["d"] * (MAX_SCRATCH_DEPTH + 1)) + "/"]
        ctx.clear_files()
    finally:
        remove_chain(scratch)


def remove_chain(folder: Path) -> None:
    """Folders d/d/d/… removed from the bottom up, a level at a time (shutil.rmtree, and so
    pytest's clean-up of old temporary folders, recurses once per level)."""
    here = os.open(".", os.O_RDONLY)
    try:
        os.chdir(folder)
        depth = 0
        while os.path.isdir("d"):
            os.chdir("d")
            depth += 1
        for _ in range(depth):
            os.chdir("..")
            os.rmdir("d")
    finally:
        os.fchdir(here)
        os.close(here)


def test_a_plain_value_where_the_grader_asks_an_object_of_the_process_is_the_submissions(grade):
    """put() answered with a number the third time, where the check asks the tensor it sent
    for a transposed view before any function of the submission runs."""
    source = (
        (EXERCISES / "tensors-channels-last" / "reference.py").read_text()
        + """
import worker.harness.student as _student
_put, _puts = _student.Server.op_put, []
def _third_is_a_number(self, header, buffers):
    _puts.append(1)
    return {"value": 0} if len(_puts) == 3 else _put(self, header, buffers)
_student.Server.op_put = _third_is_a_number
"""
    )
    report = grade("tensors-channels-last", source)
    assert report["status"] == "graded", report
    assert report["score"] < report["max_score"]

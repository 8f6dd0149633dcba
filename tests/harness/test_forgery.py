"""Forgeries: a wrong solution plus code that rewrites, in its own process, what the harness
reports about it. No point may rest on what the student's process says about itself: a forged
variant scores no more than its mutant, a malformed reply is the submission's failure with a
diagnostic (never a grader error), and types cross as they are."""

import shutil

import pytest

from server.core.catalogue import default_root, load_exercise_info
from worker.cli.self_check import self_check

EXERCISES = default_root()


def mutant(slug: str, name: str) -> str:
    return (EXERCISES / slug / "mutants" / f"{name}.py").read_text()


def failed(report: dict) -> dict[str, list[str]]:
    """Codes of each failed check, by check name."""
    return {
        c["name"]: [d["code"] for d in c["diagnostics"]]
        for c in report["checks"]
        if not c["passed"]
    }


# --- the forgeries seen ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "slug,forged,plain,check",
    [
        # x.contiguous() whose replies claim the channels_last flags: was 10/10, its mutant 7/10
        ("tensors-channels-last", "forged_contiguous_only", "contiguous_only", "channels-last"),
        # the same, claiming channels-last strides too (over NCHW bytes)
        (
            "tensors-channels-last",
            "forged_strides_contiguous_only",
            "contiguous_only",
            "channels-last",
        ),
        # x.data swapped for channels-last memory, x's replies claiming NCHW strides: was 10/10
        ("tensors-channels-last", "forged_data_swap", "data_swap", "input-unchanged"),
        # flatten().clone() whose replies all claim one storage: was 12/12, its mutant 10/12
        ("tensors-reshape", "forged_flatten_clone", "flatten_clone", "flat-view-shares"),
        # a frozen copy of the embeddings claiming requires_grad and a grad_fn
        ("embeddings", "forged_from_pretrained", "from_pretrained", "embed-gradient"),
        # a slow loop run as the inputs arrive (the harness's handler rewritten), the timed call
        # returning its cache: was 11/11, its mutant 10/11
        ("conv2d-einsum", "forged_python_loops", "python_loops", "speed-bonus"),
    ],
)
def test_a_forged_variant_scores_no_more_than_its_mutant(grade, slug, forged, plain, check):
    honest, forgery = grade(slug, mutant(slug, plain)), grade(slug, mutant(slug, forged))
    assert honest["status"] == forgery["status"] == "graded"
    assert forgery["score"] <= honest["score"] < honest["max_score"], (honest, forgery)
    assert check in failed(forgery), forgery


def test_work_moved_out_of_the_timed_call_is_timed_too(grade_unsealed):
    """Without the seal (which refuses the rewritten handler as the file loads), the slow loop
    run as the inputs arrive is counted by the process's CPU clock: no bonus."""
    forgery = grade_unsealed("conv2d-einsum", mutant("conv2d-einsum", "forged_python_loops"))
    assert forgery["status"] == "graded" and failed(forgery) == {"speed-bonus": ["timeout"]}
    assert forgery["score"] == forgery["max_score"] - 1


def test_built_in_conv2d_with_its_graph_renamed_earns_nothing_more(grade):
    """F.conv2d whose graph description names the convolution's node like an einsum's: was
    10/11 (speed bonus included), F.conv2d as it is 4/11."""
    honest = grade("conv2d-einsum", mutant("conv2d-einsum", "built_in_conv2d"))
    forgery = grade("conv2d-einsum", mutant("conv2d-einsum", "forged_built_in_conv2d"))
    assert forgery["status"] == "graded"
    assert forgery["score"] <= honest["score"] < honest["max_score"], (honest, forgery)


JSON_FORGED = """
import json
_dumps = json.dumps
def _forge(v):
    if isinstance(v, list):
        return [_forge(x) for x in v]
    if isinstance(v, dict):
        v = {k: _forge(x) for k, x in v.items()}
        if "__tensor__" in v:
            v["storage"] = 1
            v.setdefault("claims", {})["storage"] = 1
    return v
json.dumps = lambda obj, *a, **k: _dumps(_forge(obj), *a, **k)
"""


def test_storage_address_claimed_in_the_json_earns_no_sharing_point(grade_unsealed):
    """The wire itself rewritten (json.dumps in the student's process), the seal taken away:
    every tensor claims the same storage; the sharing points stay with memory that is shared."""
    forgery = grade_unsealed(
        "tensors-reshape", mutant("tensors-reshape", "flatten_clone") + JSON_FORGED
    )
    assert forgery["status"] == "graded"
    assert failed(forgery)["flat-view-shares"] == ["storage-not-shared"]


def test_a_module_the_replies_are_made_with_changed_is_refused_at_the_next_reply(grade):
    """Sealed, the rewritten json.dumps is found before the first reply it would have made:
    every check is the submission's failure, naming the module."""
    forgery = grade("tensors-reshape", mutant("tensors-reshape", "flatten_clone") + JSON_FORGED)
    assert forgery["status"] == "graded" and forgery["score"] == 0, forgery
    (note,) = forgery["notes"]
    assert note["code"] == "forbidden-operation" and "`json`" in note["message"], note


def test_real_channels_last_memory_sent_by_the_harness_is_what_solving_costs(grade_unsealed):
    """The one way through: the encoder sends channels-last memory holding the right values.
    That is the solution itself, done in the harness instead of the function."""
    report = grade_unsealed(
        "tensors-channels-last",
        mutant("tensors-channels-last", "contiguous_only")
        + """
import torch
import worker.harness.student as _student
_encode = _student.Server.encode_tensor
def _solved(self, t):
    if t.dim() == 4 and t.is_contiguous() and not t.is_contiguous(memory_format=torch.channels_last):
        t = t.contiguous(memory_format=torch.channels_last)
    return _encode(self, t)
_student.Server.encode_tensor = _solved
""",
    )
    assert report["status"] == "graded"
    assert "same-values" not in failed(report)


# --- malformed replies ----------------------------------------------------------------------

PATCH_ENCODER = (
    mutant("tensors-reshape", "flatten_clone").replace("x.flatten().clone()", "x.view(-1)")
    + """
import worker.harness.student as _student
_encode = _student.Server.encode_tensor
def _malformed(self, t):
    reply = _encode(self, t)
{change}
    return reply
_student.Server.encode_tensor = _malformed
"""
)


@pytest.mark.parametrize(
    "change",
    [
        '    reply["shape"] = "four"',  # a field of the wrong type
        '    del reply["dtype"]',  # a missing key
        '    reply["device"] = "tpu:0"',  # an unknown device
        '    reply["device"] = 7',
        '    reply["strides"] = [-1] * len(reply["shape"])',  # strides that go backwards
        '    reply["strides"] = [s * 2 for s in reply["strides"]]',  # more than the bytes sent
        '    reply["strides"] = reply["strides"][:-1]',  # fewer strides than dimensions
        '    reply["__handle__"] = "one"',
        '    reply["claims"] = ["requires_grad"]',
        '    reply["dtype"] = "float128"',
    ],
)
def test_a_malformed_tensor_reply_is_the_submissions_failure(grade_unsealed, change):
    report = grade_unsealed("tensors-reshape", PATCH_ENCODER.format(change=change))
    assert report["status"] == "graded", report
    assert report["score"] < report["max_score"]
    codes = {code for found in failed(report).values() for code in found}
    assert codes and codes <= {"crashed"}, report


def test_a_reply_expanded_by_zero_strides_is_bounded_before_it_is_copied(grade_unsealed):
    """A stride of 0 makes a 512 MiB tensor of a 4-byte span: the grader refuses it as the
    submission's reply too large (memory-limit), without copying it."""
    change = (
        '    reply["shape"], reply["strides"] = [1 << 27], [0]\n'
        "    self.buffers[-1] = self.buffers[-1][:reply_bytes(reply)]"
    )
    source = PATCH_ENCODER.format(change=change).replace(
        "_student.Server.encode_tensor = _malformed",
        "def reply_bytes(reply):\n"
        "    return {'float32': 4, 'float64': 8}.get(reply['dtype'], 8)\n"
        "_student.Server.encode_tensor = _malformed",
    )
    report = grade_unsealed("tensors-reshape", source)
    assert report["status"] == "graded", report
    codes = {code for found in failed(report).values() for code in found}
    assert "memory-limit" in codes, report


@pytest.mark.parametrize(
    "patch",
    [
        # a value tagged as a device that is none
        """_encode = _student.Server.encode
def _bad(self, value, depth=0):
    if isinstance(value, torch.device):
        return {"__device__": "quantum"}
    return _encode(self, value, depth)
_student.Server.encode = _bad""",
        # the answer to load with a field of the wrong type
        """_load = _student.Server.op_load
def _bad(self, header, buffers):
    reply = _load(self, header, buffers)
    reply["defined"] = {name: "yes" for name in reply["defined"]}
    return reply
_student.Server.op_load = _bad""",
        # an answer to a call without its value
        """_call = _student.Server.op_call
def _bad(self, header, buffers):
    reply = _call(self, header, buffers)
    reply.pop("value")
    return reply
_student.Server.op_call = _bad""",
        # a student's exception that is not an object
        """_call = _student.Server.op_call
def _bad(self, header, buffers):
    return {"error": ["no"]}
_student.Server.op_call = _bad""",
    ],
)
def test_other_malformed_replies_are_the_submissions_failure(grade, patch):
    # describe returns t.device: the one place a device crosses
    source = (
        mutant("tensors-create", "describe_device_object")
        + "\nimport torch\nimport worker.harness.student as _student\n"
        + patch
        + "\n"
    )
    report = grade("tensors-create", source)
    assert report["status"] == "graded", report
    assert report["score"] < report["max_score"]
    assert all(c["diagnostics"] or c["message"] for c in report["checks"] if not c["passed"])


# --- types cross as they are ----------------------------------------------------------------


def test_describe_returning_a_device_object_loses_the_point(grade):
    """A `torch.device` where the device type's string is asked for: it arrives as a
    `torch.device`, so it loses the point on a CPU node as it would on a GPU node."""
    report = grade("tensors-create", mutant("tensors-create", "describe_device_object"))
    assert report["status"] == "graded"
    assert failed(report) == {"describe": ["output-mismatch"]}
    reference = grade("tensors-create", (EXERCISES / "tensors-create" / "reference.py").read_text())
    assert reference["score"] == reference["max_score"]


# --- the self-check -------------------------------------------------------------------------


@pytest.mark.selfcheck
def test_the_self_check_refuses_a_forged_variant_that_outscores_its_mutant(
    harness, second_harness, tmp_path
):
    folder = tmp_path / "tensors-reshape"
    shutil.copytree(
        EXERCISES / "tensors-reshape", folder, ignore=shutil.ignore_patterns("__pycache__")
    )
    info = load_exercise_info(folder)
    assert info.forged == {"forged_flatten_clone": "flatten_clone"}
    assert self_check(harness, info, (3,), second=second_harness) == []
    # a "forgery" that outscores its mutant: here, simply the solution
    shutil.copy(folder / "reference.py", folder / "mutants" / "forged_flatten_clone.py")
    problems = self_check(harness, load_exercise_info(folder), (3,), second=second_harness)
    assert (
        len(problems) == 1
        and "forged variant forged_flatten_clone scored 12.0, more than "
        "its mutant flatten_clone (10.0)"
        in problems[0]
    ), problems
    assert "flat-view-shares" in problems[0]


def test_a_forged_variant_must_name_a_mutant(tmp_path):
    from server.core.catalogue import ExerciseConfigError

    folder = tmp_path / "tensors-reshape"
    shutil.copytree(
        EXERCISES / "tensors-reshape", folder, ignore=shutil.ignore_patterns("__pycache__")
    )
    toml = folder / "exercise.toml"
    toml.write_text(toml.read_text().replace('= "flatten_clone"  #', '= "no_such_mutant"  #'))
    with pytest.raises(ExerciseConfigError, match="not one of the exercise's mutants"):
        load_exercise_info(folder)


@pytest.mark.parametrize(
    "slug",
    [
        "tensors-create",
        "tensors-reshape",
        "tensors-combine",
        "tensors-channels-last",
        "embeddings",
        "metrics",
        "conv2d-einsum",
    ],
)
def test_every_forged_file_is_declared(slug):
    info = load_exercise_info(EXERCISES / slug)
    for path in (EXERCISES / slug / "mutants").glob("forged_*.py"):
        assert path.stem in set(info.forged) | set(info.mutants), f"{path.name} is declared nowhere"


# what ran, read from the output's autograd graph by the harness: the source reading's second
# opinion on conv2d-einsum
PICKLED_CONV2D = """
import pickle


def conv2d(input, filter):
    return pickle.loads(b"ctorch.nn.functional\\nconv2d\\n.")(input, filter)
"""
FUNCTION_MADE_BY_TYPE = """
import torch


def _forward(ctx, input, filter):
    windows = input.unfold(2, filter.shape[-2], 1).unfold(3, filter.shape[-1], 1)
    return torch.einsum("bchwij,ocij->bohw", windows, filter)


def _backward(ctx, grad):
    return None, None


Made = type("Made", (torch.autograd.Function,), {"forward": staticmethod(_forward),
                                                 "backward": staticmethod(_backward)})


def conv2d(input, filter):
    return Made.apply(input, filter)
"""


def test_a_convolution_the_source_hides_is_found_in_the_graph(grade_unsealed):
    """F.conv2d reached through pickle (the seal refuses that unpickling; taken away here) is
    what the output's graph says ran: the values earn nothing, as F.conv2d's own."""
    report = grade_unsealed("conv2d-einsum", PICKLED_CONV2D)
    values = next(c for c in report["checks"] if c["name"] == "values-fixed")
    assert not values["passed"] and values["diagnostics"][0]["code"] == "forbidden-operation"
    assert "`ConvolutionBackward0`, read from its autograd graph" in values["message"], values


def test_a_function_made_without_a_class_statement_is_found_in_the_graph(grade):
    report = grade("conv2d-einsum", FUNCTION_MADE_BY_TYPE)
    values = next(c for c in report["checks"] if c["name"] == "values-fixed")
    assert not values["passed"] and "`MadeBackward`" in values["message"], values
    assert "a Function of your own" in values["message"]

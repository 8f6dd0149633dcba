"""Forgeries in the autograd exercises and conv2d-einsum, graded by the real harness: a wrong
program plus a few lines that rewrite, in its own process, what the harness reports (graph node
names, flags, storage addresses, a model's description). None may score more than the wrong
program it hides: every point rests on values the grader checks, or on its reading of the file."""

from pathlib import Path

import pytest
from test_source_rules import FAKE_BASE

EXERCISES = Path(__file__).resolve().parents[2] / "exercises"

# the harness's description of graphs renamed: a built-in convolution's node passes as an einsum's
RENAMED_GRAPH = """
import sys

import torch.nn.functional as F

_server = sys.modules["worker.harness.student"].Server
_graph = _server.graph


def _renamed(self, root):
    nodes = _graph(self, root)
    for node in nodes:
        if "conv" in node["name"].lower():
            node["name"] = "BmmBackward0"
    return nodes


_server.graph = _renamed


def conv2d(input, filter):
    return F.conv2d(input, filter)
"""

# the same, reaching the harness by a plain import rather than sys.modules
RENAMED_GRAPH_IMPORTED = RENAMED_GRAPH.replace(
    "import sys\n", "import worker.harness.student as _student\n"
).replace('_server = sys.modules["worker.harness.student"].Server', "_server = _student.Server")


def _mutant(slug: str, name: str) -> str:
    return (EXERCISES / slug / "mutants" / f"{name}.py").read_text()


def _no_more(grade, slug: str, forged: str, mutant: str) -> tuple[dict, dict]:
    wrong, report = grade(slug, _mutant(slug, mutant)), grade(slug, forged)
    assert report["status"] == "graded" and wrong["status"] == "graded"
    assert report["score"] <= wrong["score"] < report["max_score"], (report, wrong)
    return report, wrong


@pytest.mark.parametrize("forged", [RENAMED_GRAPH, RENAMED_GRAPH_IMPORTED])
def test_conv2d_renamed_graph_earns_nothing(grade_unsealed, forged):
    """With the seal taken away (it refuses the patch as the file loads): the source rule."""
    report, wrong = _no_more(grade_unsealed, "conv2d-einsum", forged, "built_in_conv2d")
    checks = {c["name"]: c for c in report["checks"]}
    assert not checks["own-convolution"]["passed"] and not checks["values-fixed"]["passed"]
    refused = checks["values-fixed"]["diagnostics"][0]  # explained there first, once
    assert refused["code"] == "forbidden-operation"
    assert "F.conv2d" in refused["message"] and "line" in refused["message"]


def test_conv2d_obfuscated_lookup_is_refused(grade):
    """A built-in convolution reached by a computed name: the reading cannot follow it, and
    the check that rests on the reading fails, naming why."""
    report = grade(
        "conv2d-einsum",
        """
import torch.nn.functional as F
NAME = "conv" + "2d"


def conv2d(input, filter):
    return getattr(F, NAME)(input, filter)
""",
    )
    checks = {c["name"]: c for c in report["checks"]}
    assert not checks["own-convolution"]["passed"] and not checks["values-fixed"]["passed"]
    diagnostic = checks["values-fixed"]["diagnostics"][0]
    assert diagnostic["details"]["rule"] == "obfuscated-lookup"
    assert "getattr" in diagnostic["message"]
    assert "getattr" in diagnostic["translations"]["es"]["message"]


@pytest.mark.parametrize(
    "slug, forged, mutant",
    [
        ("autograd-custom-function", "forged_without_function", "without_function"),
        ("autograd-no-track", "forged_clone_detach", "clone_detach"),
        ("autograd-no-track", "forged_frozen_requires_grad_false", "frozen_requires_grad_false"),
        ("autograd-no-track", "forged_predict_without_no_grad", "predict_without_no_grad"),
        ("autograd-finetune", "forged_eval_only", "eval_only"),
        ("autograd-finetune", "forged_replaced_before_freezing", "replaced_before_freezing"),
    ],
)
def test_forged_variant_earns_no_more_than_its_mutant(grade, slug, forged, mutant):
    _no_more(grade, slug, _mutant(slug, forged), mutant)


def test_custom_function_dead_call_earns_nothing_a_correct_call_would_not(grade):
    """`SiLU.apply(x)` called and dropped: the reading of the source counts it, and the
    points it may add are those of a correct `silu`, never more."""
    source = _mutant("autograd-custom-function", "without_function").replace(
        "def silu(x):\n", "def silu(x):\n    SiLU.apply(x)\n"
    )
    report = grade("autograd-custom-function", source)
    reference = grade(
        "autograd-custom-function",
        (EXERCISES / "autograd-custom-function" / "reference.py").read_text(),
    )
    assert report["score"] <= reference["score"]


# autograd-custom-function: `SiLU.apply(x)` called and its result dropped, or behind `if False`,
# with a wrong backward; silu's gradient came from autograd differentiating x·σ(x)
SILU_DROPPED_APPLY = """
import torch


class SiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        s = torch.sigmoid(x)
        ctx.save_for_backward(x, s)
        return x * s

    @staticmethod
    def backward(ctx, grad_output):
        x, s = ctx.saved_tensors
        return grad_output * s  # missing_product_term's wrong backward


def silu(x):
    SiLU.apply(x)
    return x * torch.sigmoid(x)
"""

SILU_IF_FALSE = """
import torch


class SiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


def silu(x):
    if False:
        return SiLU.apply(x)
    return x * torch.sigmoid(x)
"""

# a local `Function` whose `apply` is autograd's silu: the Function's backward never runs
SILU_FAKE_FUNCTION_BASE = FAKE_BASE


@pytest.mark.parametrize(
    "forged, mutant",
    [
        (SILU_DROPPED_APPLY, "missing_product_term"),
        (SILU_IF_FALSE, "without_function"),
        (SILU_FAKE_FUNCTION_BASE, "without_function"),
    ],
)
def test_custom_function_gradient_is_the_functions_own(grade, forged, mutant):
    """The gradient points are those of `SiLU.apply`'s own backward, called by the grader, and
    only for a subclass of torch's own autograd.Function: none of these earns them."""
    report, _ = _no_more(grade, "autograd-custom-function", forged, mutant)
    checks = {c["name"]: c for c in report["checks"]}
    assert not checks["graph-uses-function"]["passed"]
    for name in ("backward-finite-differences", "non-contiguous-input", "float32"):
        assert not checks[name]["passed"], name


def test_custom_function_honest_variants_keep_full_marks(grade):
    """`from torch.autograd import Function`, a docstring, `silu = SiLU.apply`: full marks."""
    reference = (EXERCISES / "autograd-custom-function" / "reference.py").read_text()
    variants = [
        reference.replace(
            "import torch\n", "import torch\nfrom torch.autograd import Function\n"
        ).replace("(torch.autograd.Function)", "(Function)"),
        reference.replace(
            "    return SiLU.apply(x)", '    """x·σ(x)."""\n    return SiLU.apply(x)'
        ),
        reference.split("def silu")[0] + "silu = SiLU.apply\n",
    ]
    for source in variants:
        report = grade("autograd-custom-function", source)
        assert report["score"] == report["max_score"], report


# conv2d-einsum: built-ins the old reading did not see
CONV_THNN = """
import torch


def conv2d(input, filter):
    return torch._C._nn.thnn_conv2d(input, filter, tuple(filter.shape[-2:]))
"""
CONV_GETATTR_ALIAS = """
import torch.nn.functional as F

look = getattr


def conv2d(input, filter):
    return look(F, "conv" + "2d")(input, filter)
"""
CONV_REDUCE_GETATTR = """
import functools

import torch.nn.functional as F


def conv2d(input, filter):
    return functools.reduce(getattr, ["conv" + "2d"], F)(input, filter)
"""
CONV_INSPECT = """
import inspect

import torch.nn.functional as F

_members = dict(inspect.getmembers(F))


def conv2d(input, filter):
    return _members["d2vnoc"[::-1]](input, filter)
"""


@pytest.mark.parametrize(
    "forged", [CONV_THNN, CONV_GETATTR_ALIAS, CONV_REDUCE_GETATTR, CONV_INSPECT]
)
def test_conv2d_hidden_built_in_earns_no_more_than_the_mutant(grade, forged):
    report, _ = _no_more(grade, "conv2d-einsum", forged, "built_in_conv2d")
    checks = {c["name"]: c for c in report["checks"]}
    assert not checks["own-convolution"]["passed"] and not checks["values-fixed"]["passed"]
    assert checks["values-fixed"]["diagnostics"][0]["code"] == "forbidden-operation"


# an honest einsum summing in another order (one kernel offset at a time): float32 sums of
# 16·3·3 terms differ from the reference's in the last bits
CONV_OTHER_ORDER = """
import torch


def conv2d(input, filter):
    kh, kw = filter.shape[-2:]
    height, width = input.shape[2] - kh + 1, input.shape[3] - kw + 1
    out = None
    for i in range(kh):
        for j in range(kw):
            term = torch.einsum("bchw,oc->bohw", input[:, :, i:i + height, j:j + width],
                                filter[:, :, i, j])
            out = term if out is None else out + term
    return out
"""


def test_conv2d_speed_bonus_accepts_another_summation_order(grade):
    """The bonus compares values as float32 sums of that length allow: another order keeps it
    (only its time may lose it)."""
    report = grade("conv2d-einsum", CONV_OTHER_ORDER)
    checks = {c["name"]: c for c in report["checks"]}
    assert all(checks[name]["passed"] for name in checks if name != "speed-bonus"), report
    bonus = checks["speed-bonus"]
    assert bonus["passed"] or [d["code"] for d in bonus["diagnostics"]] == ["timeout"], bonus


def test_conv2d_speed_bonus_values_fit_float32_sums():
    """PyTorch's own F.conv2d adds the 144 products in another order than the reference's einsum
    (max. error about 2e-5 on outputs near 0, where the values checks' rtol/atol reject it):
    the bonus compares with the exact sum, as float32 sums of that length allow, and still
    refuses a wrong output."""
    import importlib.util

    import torch
    import torch.nn.functional as F

    path = EXERCISES / "conv2d-einsum" / "checks.py"
    spec = importlib.util.spec_from_file_location("conv2d_einsum_checks_speed", path)
    checks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checks)
    spec = importlib.util.spec_from_file_location(
        "conv2d_einsum_reference", EXERCISES / "conv2d-einsum" / "reference.py"
    )
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    generator = torch.Generator().manual_seed(7)
    for _ in range(10):
        input, filter = (torch.randn(*shape, generator=generator) for shape in checks.SPEED_SHAPES)
        other_order = F.conv2d(input, filter)
        assert checks.speed_values_close(other_order, input, filter, reference)
        flipped = F.conv2d(input, filter.flip(-1, -2))
        assert not checks.speed_values_close(flipped, input, filter, reference)
        assert not checks.speed_values_close(other_order + 1e-2, input, filter, reference)

"""Forgeries in the autograd exercises and conv2d-einsum, graded by the real harness: a wrong
program plus a few lines that rewrite, in its own process, what the harness reports (graph node
names, flags, storage addresses, a model's description). None may score more than the wrong
program it hides: every point rests on values the grader checks, or on its reading of the file."""
from pathlib import Path

import pytest

EXERCISES = Path(__file__).resolve().parent.parent / "exercises"

# the harness's description of graphs renamed: a built-in convolution's node passes as an einsum's
RENAMED_GRAPH = '''
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
'''

# the same, reaching the harness by a plain import rather than sys.modules
RENAMED_GRAPH_IMPORTED = RENAMED_GRAPH.replace(
    'import sys\n', 'import worker.harness.student as _student\n').replace(
    '_server = sys.modules["worker.harness.student"].Server', '_server = _student.Server')


def _mutant(slug: str, name: str) -> str:
    return (EXERCISES / slug / "mutants" / f"{name}.py").read_text()


def _no_more(grade, slug: str, forged: str, mutant: str) -> tuple[dict, dict]:
    wrong, report = grade(slug, _mutant(slug, mutant)), grade(slug, forged)
    assert report["status"] == "graded" and wrong["status"] == "graded"
    assert report["score"] <= wrong["score"] < report["max_score"], (report, wrong)
    return report, wrong


@pytest.mark.parametrize("forged", [RENAMED_GRAPH, RENAMED_GRAPH_IMPORTED])
def test_conv2d_renamed_graph_earns_nothing(grade, forged):
    report, wrong = _no_more(grade, "conv2d-einsum", forged, "built_in_conv2d")
    checks = {c["name"]: c for c in report["checks"]}
    assert not checks["own-convolution"]["passed"] and not checks["values-fixed"]["passed"]
    refused = checks["values-fixed"]["diagnostics"][0]  # explained there first, once
    assert refused["code"] == "forbidden-operation"
    assert "F.conv2d" in refused["message"] and "line" in refused["message"]


def test_conv2d_obfuscated_lookup_is_refused(grade):
    """A built-in convolution reached by a computed name: the reading cannot follow it, and
    the check that rests on the reading fails, naming why."""
    report = grade("conv2d-einsum", '''
import torch.nn.functional as F
NAME = "conv" + "2d"


def conv2d(input, filter):
    return getattr(F, NAME)(input, filter)
''')
    checks = {c["name"]: c for c in report["checks"]}
    assert not checks["own-convolution"]["passed"] and not checks["values-fixed"]["passed"]
    diagnostic = checks["values-fixed"]["diagnostics"][0]
    assert diagnostic["details"]["rule"] == "obfuscated-lookup"
    assert "getattr" in diagnostic["message"]
    assert "getattr" in diagnostic["translations"]["es"]["message"]


@pytest.mark.parametrize("slug, forged, mutant", [
    ("autograd-custom-function", "forged_without_function", "without_function"),
    ("autograd-no-track", "forged_clone_detach", "clone_detach"),
    ("autograd-no-track", "forged_frozen_requires_grad_false", "frozen_requires_grad_false"),
    ("autograd-no-track", "forged_predict_without_no_grad", "predict_without_no_grad"),
    ("autograd-finetune", "forged_eval_only", "eval_only"),
    ("autograd-finetune", "forged_replaced_before_freezing", "replaced_before_freezing"),
])
def test_forged_variant_earns_no_more_than_its_mutant(grade, slug, forged, mutant):
    _no_more(grade, slug, _mutant(slug, forged), mutant)


def test_custom_function_dead_call_earns_nothing_a_correct_call_would_not(grade):
    """`SiLU.apply(x)` called and dropped: the reading of the source counts it, and the
    points it may add are those of a correct `silu`, never more."""
    source = _mutant("autograd-custom-function", "without_function").replace(
        "def silu(x):\n", "def silu(x):\n    SiLU.apply(x)\n")
    report = grade("autograd-custom-function", source)
    reference = grade("autograd-custom-function",
                      (EXERCISES / "autograd-custom-function" / "reference.py").read_text())
    assert report["score"] <= reference["score"]

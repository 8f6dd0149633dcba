"""The grader's own reading of a submission's source (worker/harness/source_rules.py): what it
refuses (built-in convolutions, Functions of one's own, lookups it cannot follow), what it finds
(a Function applied in `silu`), and the honest code it must leave alone."""
import pytest

from worker.harness.source_rules import (applies_own_function, forbidden_uses,
                                         obfuscated_lookups, own_functions)

CONVOLUTIONS = {"conv2d", "Conv2d", "conv1d", "convolution", "_convolution"}


def conv(name: str) -> bool:
    return name in CONVOLUTIONS


def cells(*codes: str) -> list[tuple[str, str]]:
    if len(codes) == 1:
        return [("submission.py", codes[0])]
    return [(f"cell {i}", code) for i, code in enumerate(codes, start=1)]


HONEST_CONV = '''
import torch


def conv2d(input, filter):
    """A valid convolution, as F.conv2d's: stride 1, no padding."""
    kh, kw = filter.shape[-2:]
    windows = input.unfold(2, kh, 1).unfold(3, kw, 1)
    return torch.einsum("bchwij,ocij->bohw", windows, filter)


__all__ = ["conv2d"]
print("conv2d of a 4x4 input:", conv2d(torch.ones(1, 1, 4, 4), torch.ones(1, 1, 2, 2)).shape)
out = getattr(torch, "einsum")("ij->ji", torch.ones(2, 3))
'''


@pytest.mark.parametrize("source, found", [
    ("import torch.nn.functional as F\ndef conv2d(i, f):\n    return F.conv2d(i, f)\n", "`F.conv2d`"),
    ("import torch\ndef conv2d(i, f):\n    return torch.nn.functional.conv2d(i, f)\n",
     "`torch.nn.functional.conv2d`"),
    ("from torch.nn.functional import conv2d as c\ndef conv2d(i, f):\n    return c(i, f)\n",
     "`from torch.nn.functional import conv2d`"),
    ("from torch.nn import *\ndef conv2d(i, f):\n    return Conv2d(1, 1, 2)(i)\n", "`Conv2d`"),
    ("import torch\ndef conv2d(i, f):\n    return torch.ops.aten.convolution(i, f, None, [1, 1], "
     "[0, 0], [1, 1], False, [0, 0], 1)\n", "`torch.ops.aten.convolution`"),
    ("import torch.nn.functional as F\ndef conv2d(i, f):\n    return getattr(F, 'conv2d')(i, f)\n",
     "'conv2d'"),
])
def test_forbidden_calls_are_found(source, found):
    names = [f.name for f in forbidden_uses(cells(source), conv)]
    assert found in names
    assert all(f.kind == "forbidden" and f.line >= 1 for f in forbidden_uses(cells(source), conv))


def test_honest_convolution_is_left_alone():
    """Its own `conv2d` (defined, called, named in `__all__`), `Tensor.unfold`, words in
    strings, a getattr with a written name: nothing to refuse."""
    assert forbidden_uses(cells(HONEST_CONV), conv) == []
    assert obfuscated_lookups(cells(HONEST_CONV)) == []
    assert own_functions(cells(HONEST_CONV)) == []


@pytest.mark.parametrize("source, found", [
    ("import torch.nn.functional as F\nname = 'conv' + '2d'\nc = getattr(F, name)\n",
     "`getattr()` with a computed name"),
    ("f = __import__('torch.nn.functional')\n", "`__import__`"),
    ("import importlib\nF = importlib.import_module('torch.nn.functional')\n",
     "`import importlib`"),
    ("from importlib import import_module\n", "`from importlib import …`"),
    ("eval('1 + 1')\n", "`eval`"),
    ("exec('x = 1')\n", "`exec`"),
    ("code = compile('x = 1', 'x', 'exec')\n", "`compile`"),
    ("globals()['conv2d'] = print\n", "`globals`"),
    ("v = vars()\n", "`vars`"),
    ("import torch.nn.functional as F\nc = F.__dict__['conv' + '2d']\n", "`F.__dict__`"),
    ("b = __builtins__\n", "`__builtins__`"),
    ("import sys\nserver = sys.modules['worker.harness.student']\n", "`sys.modules`"),
    ("import operator\ng = operator.attrgetter('conv' + '2d')\n", "`attrgetter()` with a computed name"),
    ("import torch\nsetattr(torch, name, None)\n", "`setattr()` with a computed name"),
    ("import submission\n", "`import submission`"),
])
def test_obfuscated_lookups_are_found(source, found):
    assert found in [f.name for f in obfuscated_lookups(cells(source))]


def test_findings_name_the_cell_and_line():
    found = obfuscated_lookups(cells("import torch\n", "x = 1\ny = eval('x')\n"))
    assert [(f.cell, f.line, f.where()) for f in found] == [("cell 2", 2, "cell 2, line 2")]
    found = forbidden_uses(cells("import torch\n\nimport torch.nn.functional as F\nF.conv2d\n"), conv)
    assert [(f.line, f.where()) for f in found] == [(4, "line 4")]


def test_a_cell_that_does_not_parse_is_skipped():
    """It never runs either: what it would refuse is not there."""
    assert forbidden_uses(cells("F.conv2d(", "import torch\n"), conv) == []


def test_own_function_is_found():
    source = ("import torch\nfrom torch.autograd import Function\n"
              "class A(torch.autograd.Function):\n    pass\nclass B(Function):\n    pass\n"
              "class C(torch.nn.Module):\n    pass\n")
    assert [f.name for f in own_functions(cells(source))] == ["`class A`", "`class B`"]


SILU = '''
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
        return grad_output * s * (1 + x * (1 - s))

'''


@pytest.mark.parametrize("tail, applied, to_expression", [
    ("def silu(x):\n    return SiLU.apply(x)\n", True, False),
    ("def silu(t: torch.Tensor) -> torch.Tensor:\n    y = SiLU.apply(t)\n    return y\n", True, False),
    ("silu = SiLU.apply\n", True, False),
    ("def silu(x):\n    return x * torch.sigmoid(x)\n", False, False),
    ("def silu(x):\n    return SiLU.apply(x * torch.sigmoid(x))\n", False, True),
    ("def silu(x):\n    x = x * torch.sigmoid(x)\n    return SiLU.apply(x)\n", False, True),
    # rebound after its definition, or its Function changed: what runs is not what was read
    ("def silu(x):\n    return SiLU.apply(x)\nsilu = lambda x: x * torch.sigmoid(x)\n", False, False),
    ("def silu(x):\n    return SiLU.apply(x)\nSiLU.apply = staticmethod(torch.sigmoid)\n", False, False),
    ("def silu(x):\n    return SiLU.apply(x)\nclass SiLU:\n    pass\n", False, False),
    ("def wrap(f):\n    return lambda x: x\n@wrap\ndef silu(x):\n    return SiLU.apply(x)\n", False, False),
    ("def silu(x):\n    return SiLU.apply(x)\ndef later():\n    global silu\n    silu = None\n",
     False, False),
])
def test_applies_own_function(tail, applied, to_expression):
    found = applies_own_function(cells(SILU + tail), "silu")
    assert (found.applied, found.to_expression) == (applied, to_expression)


def test_applies_own_function_in_a_notebook_reads_the_last_definition():
    first = "def silu(x):\n    return x * torch.sigmoid(x)\n"
    second = "def silu(x):\n    return SiLU.apply(x)\n"
    assert applies_own_function(cells(SILU, first, second), "silu").applied
    assert not applies_own_function(cells(SILU, second, first), "silu").applied


def test_a_class_without_backward_is_not_a_function_of_ones_own():
    source = ("import torch\nclass SiLU(torch.autograd.Function):\n    @staticmethod\n"
              "    def forward(ctx, x):\n        return x\n"
              "def silu(x):\n    return SiLU.apply(x)\n")
    assert not applies_own_function(cells(source), "silu").applied

"""The grader's own reading of a submission's source (worker/harness/source_rules.py): what it
refuses (built-in convolutions, Functions of one's own, lookups it cannot follow), what it finds
(a Function applied in `silu`), and the honest code it must leave alone."""

import pytest

from worker.harness.source_rules import (
    applies_own_function,
    forbidden_uses,
    hand_written_grads,
    obfuscated_lookups,
    own_function,
    own_functions,
)

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


@pytest.mark.parametrize(
    "source, found",
    [
        (
            "import torch.nn.functional as F\ndef conv2d(i, f):\n    return F.conv2d(i, f)\n",
            "`F.conv2d`",
        ),
        (
            "import torch\ndef conv2d(i, f):\n    return torch.nn.functional.conv2d(i, f)\n",
            "`torch.nn.functional.conv2d`",
        ),
        (
            "from torch.nn.functional import conv2d as c\ndef conv2d(i, f):\n    return c(i, f)\n",
            "`from torch.nn.functional import conv2d`",
        ),
        ("from torch.nn import *\ndef conv2d(i, f):\n    return Conv2d(1, 1, 2)(i)\n", "`Conv2d`"),
        (
            "import torch\ndef conv2d(i, f):\n    return torch.ops.aten.convolution(i, f, None, [1, 1], "
            "[0, 0], [1, 1], False, [0, 0], 1)\n",
            "`torch.ops.aten.convolution`",
        ),
        (
            "import torch.nn.functional as F\ndef conv2d(i, f):\n    return getattr(F, 'conv2d')(i, f)\n",
            "'conv2d'",
        ),
        # a name of its own, bound again to torch's module (a review: was 11/11)
        (
            "import torch\ndef F():\n    pass\nF = torch.nn.functional\ndef conv2d(i, f):\n"
            "    return F.conv2d(i, f)\n",
            "`F.conv2d`",
        ),
        (
            "import torch\nclass F:\n    pass\nfrom torch.nn import functional as F\ndef conv2d(i, f):\n"
            "    return F.conv2d(i, f)\n",
            "`F.conv2d`",
        ),
    ],
)
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


@pytest.mark.parametrize(
    "source, found",
    [
        (
            "import torch.nn.functional as F\nname = 'conv' + '2d'\nc = getattr(F, name)\n",
            "`getattr()` with a computed name",
        ),
        ("f = __import__('torch.nn.functional')\n", "`__import__`"),
        (
            "import importlib\nF = importlib.import_module('torch.nn.functional')\n",
            "`import importlib`",
        ),
        ("from importlib import import_module\n", "`from importlib import …`"),
        ("eval('1 + 1')\n", "`eval`"),
        ("exec('x = 1')\n", "`exec`"),
        ("code = compile('x = 1', 'x', 'exec')\n", "`compile`"),
        ("globals()['conv2d'] = print\n", "`globals`"),
        ("v = vars()\n", "`vars`"),
        ("import torch.nn.functional as F\nc = F.__dict__['conv' + '2d']\n", "`F.__dict__`"),
        ("b = __builtins__\n", "`__builtins__`"),
        ("import sys\nserver = sys.modules['worker.harness.student']\n", "`sys.modules`"),
        ("import operator\ng = operator.attrgetter('conv' + '2d')\n", "`operator.attrgetter`"),
        ("import torch\nsetattr(torch, name, None)\n", "`setattr()` with a computed name"),
        ("import submission\n", "`import submission`"),
    ],
)
def test_obfuscated_lookups_are_found(source, found):
    assert found in [f.name for f in obfuscated_lookups(cells(source))]


@pytest.mark.parametrize(
    "source",
    [
        # /tmp/attacks/conv_getattr_alias.py, conv_reduce_getattr.py, conv_inspect.py
        "import torch.nn.functional as F\nlook = getattr\ndef conv2d(i, f):\n"
        '    return look(F, "conv" + "2d")(i, f)\n',
        "import functools\nimport torch.nn.functional as F\ndef conv2d(i, f):\n"
        '    return functools.reduce(getattr, ["conv" + "2d"], F)(i, f)\n',
        "import inspect\nimport torch.nn.functional as F\n_members = dict(inspect.getmembers(F))\n",
        "from inspect import getmembers\n",
        'import pydoc\nc = pydoc.locate("torch.nn.functional." + "conv2d")\n',
        'from operator import attrgetter\nc = attrgetter("conv2d")\n',
        'import operator\nc = operator.methodcaller("conv2d", 1, 2)\n',
        'import torch\nc = torch.ops.aten.__getattr__("con" + "volution")\n',
        'import torch.nn.functional as F\nc = F.__getattribute__("conv" + "2d")\n',
        "import torch\nc = torch.__class__\n",
        "f = lambda: 0\ng = f.__globals__\n",
        "from builtins import getattr as look\n",
        "l = locals()\n",
        "lookups = [getattr, hasattr]\n",
        "import worker.harness.student as s\n",
    ],
)
def test_obfuscated_lookups_of_the_attack_files_are_found(source):
    assert obfuscated_lookups(cells(source))


def test_written_getattr_and_itemgetter_stay_allowed():
    source = (
        "import operator\nimport torch\nout = getattr(torch, 'einsum')\n"
        "first = operator.itemgetter('name')\nok = hasattr(torch, 'einsum')\n"
    )
    assert obfuscated_lookups(cells(source)) == []


def test_findings_name_the_cell_and_line():
    found = obfuscated_lookups(cells("import torch\n", "x = 1\ny = eval('x')\n"))
    assert [(f.cell, f.line, f.where()) for f in found] == [("cell 2", 2, "cell 2, line 2")]
    found = forbidden_uses(
        cells("import torch\n\nimport torch.nn.functional as F\nF.conv2d\n"), conv
    )
    assert [(f.line, f.where()) for f in found] == [(4, "line 4")]


def test_a_cell_that_does_not_parse_is_skipped():
    """It never runs either: what it would refuse is not there."""
    assert forbidden_uses(cells("F.conv2d(", "import torch\n"), conv) == []


def test_own_function_is_found():
    source = (
        "import torch\nfrom torch.autograd import Function\n"
        "class A(torch.autograd.Function):\n    pass\nclass B(Function):\n    pass\n"
        "class C(torch.nn.Module):\n    pass\n"
    )
    assert [f.name for f in own_functions(cells(source))] == ["`class A`", "`class B`"]


SILU = """
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

"""


@pytest.mark.parametrize(
    "tail, applied, to_expression",
    [
        ("def silu(x):\n    return SiLU.apply(x)\n", True, False),
        (
            'def silu(t: torch.Tensor) -> torch.Tensor:\n    """SiLU."""\n    return SiLU.apply(t)\n',
            True,
            False,
        ),
        # the body is that one return, or what runs is not what was read
        (
            "def silu(t: torch.Tensor) -> torch.Tensor:\n    y = SiLU.apply(t)\n    return y\n",
            False,
            False,
        ),
        ("silu = SiLU.apply\n", True, False),
        ("def silu(x):\n    return x * torch.sigmoid(x)\n", False, False),
        ("def silu(x):\n    return SiLU.apply(x * torch.sigmoid(x))\n", False, True),
        ("def silu(x):\n    x = x * torch.sigmoid(x)\n    return SiLU.apply(x)\n", False, True),
        # rebound after its definition, or its Function changed: what runs is not what was read
        (
            "def silu(x):\n    return SiLU.apply(x)\nsilu = lambda x: x * torch.sigmoid(x)\n",
            False,
            False,
        ),
        (
            "def silu(x):\n    return SiLU.apply(x)\nSiLU.apply = staticmethod(torch.sigmoid)\n",
            False,
            False,
        ),
        ("def silu(x):\n    return SiLU.apply(x)\nclass SiLU:\n    pass\n", False, False),
        (
            "def wrap(f):\n    return lambda x: x\n@wrap\ndef silu(x):\n    return SiLU.apply(x)\n",
            False,
            False,
        ),
        (
            "def silu(x):\n    return SiLU.apply(x)\ndef later():\n    global silu\n    silu = None\n",
            False,
            False,
        ),
    ],
)
def test_applies_own_function(tail, applied, to_expression):
    found = applies_own_function(cells(SILU + tail), "silu")
    assert (found.applied, found.to_expression) == (applied, to_expression)


def test_applies_own_function_in_a_notebook_reads_the_last_definition():
    first = "def silu(x):\n    return x * torch.sigmoid(x)\n"
    second = "def silu(x):\n    return SiLU.apply(x)\n"
    assert applies_own_function(cells(SILU, first, second), "silu").applied
    assert not applies_own_function(cells(SILU, second, first), "silu").applied


@pytest.mark.parametrize(
    "tail",
    [
        # the call runs, its result dropped: autograd differentiates what is returned
        "def silu(x):\n    SiLU.apply(x)\n    return x * torch.sigmoid(x)\n",
        # the call never runs
        "def silu(x):\n    if False:\n        return SiLU.apply(x)\n    return x * torch.sigmoid(x)\n",
        "def silu(x):\n    if x.sum() > 1e9:\n        return SiLU.apply(x)\n    return x * torch.sigmoid(x)\n",
        "def silu(x):\n    return SiLU.apply(x) if False else x * torch.sigmoid(x)\n",
        "def silu(x):\n    try:\n        return SiLU.apply(x)\n    finally:\n        return x * torch.sigmoid(x)\n",
        "def silu(x, *rest):\n    return SiLU.apply(x, *rest)\n",
    ],
)
def test_a_call_that_is_not_what_silu_returns_is_not_counted(tail):
    assert not applies_own_function(cells(SILU + tail), "silu").applied


def test_the_dropped_call_of_the_attack_file_is_not_counted():
    """/tmp/attacks/silu_dropped_apply.py and silu_if_false.py, in short."""
    for body in (
        "    SiLU.apply(x)\n    return x * torch.sigmoid(x)\n",
        "    if False:\n        return SiLU.apply(x)\n    return x * torch.sigmoid(x)\n",
    ):
        assert not applies_own_function(cells(SILU + "def silu(x):\n" + body), "silu").applied


FAKE_BASE = """
import torch


class Function:  # not torch.autograd.Function: only its name is read
    @classmethod
    def apply(cls, x):
        return x * torch.sigmoid(x)


class SiLU(Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


def silu(x):
    return SiLU.apply(x)
"""


@pytest.mark.parametrize(
    "header, base, applied",
    [
        ("import torch\n", "torch.autograd.Function", True),
        ("import torch\n", "torch.autograd.function.Function", True),
        ("import torch as t\n", "t.autograd.Function", True),
        ("from torch.autograd import Function\n", "Function", True),
        ("from torch import autograd\n", "autograd.Function", True),
        ("import torch\nfrom torch.autograd import Function as Base\n", "Base", True),
        # a `Function` of the file's own, or torch's rebound: not torch's Function
        (
            "import torch\nclass Function:\n    apply = classmethod(lambda cls, x: x)\n",
            "Function",
            False,
        ),
        (
            "import torch\nfrom torch.autograd import Function\nFunction = object\n",
            "Function",
            False,
        ),
        (
            "import torch\nfrom torch.autograd import Function\ndef f(Function):\n    pass\n",
            "Function",
            False,
        ),
        ("import torch\nfrom torch.nn import Module as Function\n", "Function", False),
        ("import torch\nclass torch:\n    pass\n", "torch.autograd.Function", False),
        ("import torch\nfrom fake import autograd\n", "autograd.Function", False),
        ("from torch.autograd import *\n", "Function", False),
        ("import torch\nBase = torch.autograd.Function\n", "Base", False),
    ],
)
def test_the_function_base_is_torchs_own(header, base, applied):
    source = (
        header
        + SILU.split("\n", 2)[2]
        .replace("torch.autograd.Function", base)
        .replace("import torch\n", "")
        + "def silu(x):\n    return SiLU.apply(x)\n"
    )
    if "torch" not in header:
        source = "import torch\n" + source if "torch.sigmoid" in source else source
    assert applies_own_function(cells(source), "silu").applied is applied, source
    assert own_function(cells(source), "SiLU") is applied


def test_the_fake_function_base_of_the_attack_file_is_refused():
    assert not applies_own_function(cells(FAKE_BASE), "silu").applied
    assert not own_function(cells(FAKE_BASE), "SiLU")
    assert own_functions(cells(FAKE_BASE))  # the broad rule (conv2d-einsum's) still refuses it


@pytest.mark.parametrize(
    "tail",
    [
        "torch.autograd.Function.apply = classmethod(lambda cls, x: x * torch.sigmoid(x))\n",
        "setattr(torch.autograd.Function, 'apply', None)\n",
        "del SiLU.backward\n",
    ],
)
def test_a_patched_function_is_not_ones_own(tail):
    source = SILU + "def silu(x):\n    return SiLU.apply(x)\n" + tail
    assert not own_function(cells(source), "SiLU")
    assert not applies_own_function(cells(source), "silu").applied


@pytest.mark.parametrize(
    "member",
    [
        "    @classmethod\n    def apply(cls, x):\n        return x * torch.sigmoid(x)\n",
        "    def __new__(cls):\n        return object()\n",
        "    __class__ = property(lambda self: None)\n",
    ],
)
def test_a_function_that_changes_what_apply_runs_is_not_ones_own(member):
    assert own_function(cells(SILU + member), "SiLU") is False
    assert own_function(cells(SILU), "SiLU")


def test_a_class_without_backward_is_not_a_function_of_ones_own():
    source = (
        "import torch\nclass SiLU(torch.autograd.Function):\n    @staticmethod\n"
        "    def forward(ctx, x):\n        return x\n"
        "def silu(x):\n    return SiLU.apply(x)\n"
    )
    assert not applies_own_function(cells(source), "silu").applied


def _conv2d_einsum_rule():
    """conv2d-einsum's predicate for the names its reading refuses."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "exercises" / "conv2d-einsum" / "checks.py"
    spec = importlib.util.spec_from_file_location("conv2d_einsum_checks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._built_in


@pytest.mark.parametrize(
    "source",
    [
        # /tmp/attacks/conv_thnn.py: a differentiable built-in the old list did not name
        "import torch\ndef conv2d(i, f):\n    return torch._C._nn.thnn_conv2d(i, f, (3, 3))\n",
        "import torch\ndef conv2d(i, f):\n    return torch.ops.aten.slow_conv2d_forward(i, f, (3, 3), None, 1, 0)\n",
        "import torch\ndef conv2d(i, f):\n    return torch.ops.aten._convolution.default(i, f)\n",
        "import torch\ndef conv2d(i, f):\n    return torch.mkldnn_convolution(i, f, None, 0, 1, 1, 1)\n",
        "import torch\ndef conv2d(i, f):\n    return torch.cudnn_convolution(i, f, 0, 1, 1, 1, 0, 0, 0)\n",
        "import torch\ndef conv2d(i, f):\n    return torch.conv_tbc(i, f, None)\n",
        "import torch.nn.functional as F\ndef conv2d(i, f):\n    return F.conv_transpose2d(i, f)\n",
        "from torch import convolution as c\n",
        "from torch._C._nn import thnn_conv2d\n",
        "import scipy.signal\ndef conv2d(i, f):\n    return scipy.signal.correlate(i, f, 'valid')\n",
        "import numpy as np\ndef conv2d(i, f):\n    return np.convolve(i, f)\n",
        "from scipy.signal import correlate2d\n",
        "from torch.nn.modules.conv import _ConvNd\n",
        "from torch.nn.functional import *\ndef conv2d(i, f):\n    return conv_tbc(i, f, None)\n",
    ],
)
def test_conv2d_einsum_refuses_every_built_in_convolution(source):
    assert forbidden_uses(cells(source), _conv2d_einsum_rule())


def test_conv2d_einsum_leaves_the_files_own_names_alone():
    """Its own `def conv2d`, variables named after convolutions, a class of its own with a
    `conv2d` method: reached on its own definitions, nothing built in."""
    source = HONEST_CONV + (
        "\n\ndef conv2d_batched(input, filters):\n    convolved = [conv2d(input, f) for f in filters]\n"
        "    return torch.stack(convolved)\n\n\nclass Convolutions:\n"
        "    @staticmethod\n    def conv2d(input, filter):\n        return conv2d(input, filter)\n\n\n"
        "out_conv = Convolutions.conv2d(torch.ones(1, 1, 3, 3), torch.ones(1, 1, 2, 2))\n"
    )
    assert forbidden_uses(cells(source), _conv2d_einsum_rule()) == []


def test_a_source_is_parsed_once_whatever_the_rules_and_cases_that_read_it(monkeypatch):
    import ast

    calls = []
    parse = ast.parse
    monkeypatch.setattr(ast, "parse", lambda *a, **k: calls.append(1) or parse(*a, **k))
    source = cells(HONEST_CONV + "\n# read once\n")
    for _ in range(3):  # as each value case of a check asks again
        assert forbidden_uses(source, conv) == []
        assert obfuscated_lookups(source) == [] and own_functions(source) == []
        assert not own_function(source, "conv2d")
    assert len(calls) == 1


def test_a_finding_handed_out_is_a_copy():
    source = cells("import torch.nn.functional as F\ny = F.conv2d\n")
    forbidden_uses(source, conv).clear()
    assert len(forbidden_uses(source, conv)) == 1


@pytest.mark.parametrize(
    "source,found",
    [
        ("def f(x, v):\n    x.grad = 4 * v\n", "`x.grad = …`"),
        ("def f(x, v):\n    x.grad += v\n", "`x.grad …= …`"),
        ("def f(x, v):\n    x.grad[0] = 1.0\n", "`x.grad[0] = …`"),
        ("def f(x, v):\n    x.grad.data = v\n", "`x.grad.data = …`"),
        ("def f(x, v):\n    x.grad.copy_(v)\n", "`x.grad.copy_(…)`"),
        ("def f(x, v):\n    setattr(x, 'grad', v)\n", '`setattr(…, "grad", …)`'),
    ],
)
def test_gradients_written_by_hand_are_found(source, found):
    assert [f.name for f in hand_written_grads(cells(source))] == [found]


def test_clearing_a_gradient_or_reading_it_is_not_writing_it():
    source = (
        "def f(x, v):\n    x.grad = None\n    x.grad.zero_()\n    y = x.grad * 2\n"
        "    (x * v).sum().backward()\n    return x.grad.clone()\n"
    )
    assert hand_written_grads(cells(source)) == []

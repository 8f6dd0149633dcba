"""The grader's own reading of a submission's source, for the checks that rest on it.

Everything the student's process reports about itself (flags, graph names, class names) is the
submission's to rewrite. Its source is not: the grader holds the file it was given, and reads it
here with `ast`, without running anything. A check may rest on this reading where no value can
show the property (which built-ins computed a result, whether a Function of one's own is used).

The reading is conservative where the source could hide what it does: a lookup by a computed
name (`getattr(F, "conv" + "2d")`), `__import__`, `importlib`, `eval`/`exec`/`compile`,
`globals()`/`vars()`, `__dict__`, `__builtins__`, `sys.modules`, is an *obfuscated lookup*, which
fails a check that rests on the source: honest code has no need of them.

Cells that do not parse are skipped: they never run either.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import gc
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, TypeVar

Result = TypeVar("Result")
Cells = tuple[tuple[str, str], ...]

# calls whose second argument names an attribute: called with a written name, they are plain
# lookups; passed around as values (`look = getattr`, `functools.reduce(getattr, …)`) they are not
NAMED_LOOKUPS = frozenset({"getattr", "setattr", "delattr", "hasattr"})
# names whose mere use lets code reach what the source does not name
DYNAMIC_NAMES = frozenset(
    {
        "__import__",
        "eval",
        "exec",
        "compile",
        "globals",
        "locals",
        "vars",
        "__builtins__",
        "__loader__",
        "__spec__",
    }
)
DYNAMIC_ATTRIBUTES = frozenset(
    {
        "__dict__",
        "__builtins__",
        "__globals__",
        "__getattr__",
        "__getattribute__",
        "__setattr__",
        "__delattr__",
        "__class__",
        "__mro__",
        "__bases__",
        "__base__",
        "__subclasses__",
        "__self__",
        "__func__",
        "__wrapped__",
        "__code__",
        "__closure__",
        "__import__",
        "__reduce__",
        "__reduce_ex__",
        "__loader__",
        "__spec__",
        "f_globals",
        "f_locals",
        "f_builtins",
        "f_back",
        "tb_frame",
        "gi_frame",
        "cr_frame",
        # string.Formatter's own lookups by a name in a string: `get_field("0.conv2d", [F], {})`
        "get_field",
        "get_value",
    }
)
# modules that reach objects by names computed at run time: `importlib`, `inspect.getmembers`,
# `pydoc.locate`; `submission` is the student's own module as its process names it (through it,
# code can rebind what the file defines), `worker` the harness that answers the grader
DYNAMIC_MODULES = frozenset(
    {"importlib", "builtins", "ctypes", "inspect", "pydoc", "submission", "worker"}
)
# operator's lookups by name: `attrgetter` and `methodcaller` are refused however called;
# `itemgetter` only with a computed key
NAME_BUILDERS = frozenset({"attrgetter", "methodcaller", "itemgetter"})
ATTRIBUTE_BUILDERS = frozenset({"attrgetter", "methodcaller"})


@dataclass(frozen=True)
class Finding:
    """What the reading found: `kind` is "forbidden" (a name the check refuses), "own-function"
    (a torch.autograd.Function subclass) or "obfuscated" (a lookup the reading cannot follow)."""

    kind: str
    name: str
    cell: str
    line: int

    def where(self) -> str:
        return (
            f"line {self.line}"
            if self.cell == "submission.py"
            else f"{self.cell}, line {self.line}"
        )


def _key(cells: Iterable[tuple[str, str]]) -> Cells:
    return tuple((label, code) for label, code in cells)


# A grade reads one source, rule after rule and check case after check case: each reading is
# made once (a 1 MiB file took about 1.5 s to parse and 20 s for the rules of one case, which
# spent the student's budget on the grader's work)
@contextlib.contextmanager
def _no_collection() -> Iterator[None]:
    """A megabyte's tree is a few million objects, all alive until the reading ends: the cyclic
    collector, woken by their numbers, would walk them again and again (0.8 s of 1 s)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@functools.lru_cache(maxsize=4)
def _parsed(cells: Cells) -> tuple[tuple[str, ast.Module], ...]:
    trees = []
    with _no_collection():
        for label, code in cells:
            try:
                trees.append((label, ast.parse(code, filename=label)))
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
    return tuple(trees)


def parsed(cells: Iterable[tuple[str, str]]) -> list[tuple[str, ast.Module]]:
    """The cells that parse, in order, with their labels (trees shared between callers: read
    them, never change them)."""
    return list(_parsed(_key(cells)))


@functools.lru_cache(maxsize=4)
def _nodes(cells: Cells) -> tuple[tuple[str, ast.AST], ...]:
    trees = _parsed(cells)
    with _no_collection():
        return tuple((label, node) for label, tree in trees for node in ast.walk(tree))


def _walk(cells: Iterable[tuple[str, str]]) -> tuple[tuple[str, ast.AST], ...]:
    return _nodes(_key(cells))


def once_per_source(rule: Callable[..., Result]) -> Callable[..., Result]:
    """A rule read once per source and arguments; a list it finds is handed out as a copy."""
    cached = functools.lru_cache(maxsize=16)(rule)

    @functools.wraps(rule)
    def read(cells: Iterable[tuple[str, str]], *arguments):
        found = cached(_key(cells), *arguments)
        return list(found) if isinstance(found, list) else found

    return read


def _dotted(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # noqa: BLE001 - only words for a message
        return "?"


def called_name(node: ast.AST) -> str | None:
    """The name a call calls: `getattr` for `getattr(...)`, `attrgetter` for
    `operator.attrgetter(...)`; None for anything else."""
    if not isinstance(node, ast.Call):
        return None
    return (
        node.func.id
        if isinstance(node.func, ast.Name)
        else node.func.attr
        if isinstance(node.func, ast.Attribute)
        else None
    )


@once_per_source
def names_used(cells: Iterable[tuple[str, str]], within: str | None = None) -> frozenset[str]:
    """Every name the source uses: variables, attributes (`torch.zeros` gives `torch` and
    `zeros`), keyword arguments and what it imports; `within`: only in the top-level function
    or class of that name."""
    found: set[str] = set()
    nodes = (
        _walk(cells)
        if within is None
        else [
            (label, node)
            for label, tree in _parsed(_key(cells))
            for top in tree.body
            if isinstance(top, (ast.FunctionDef, ast.ClassDef)) and top.name == within
            for node in ast.walk(top)
        ]
    )
    for _, node in nodes:
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.keyword) and node.arg:
            found.add(node.arg)
        elif isinstance(node, ast.alias):
            found.update(node.name.split("."))
    return frozenset(found)


def said_of(program: dict, cells: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The words for code whose values are a known wrong program's (exercise.toml): `says`
    where the source uses every name of `if_source.has` and none of `if_source.lacks` (the fact
    the words state about the code), in the function `if_source.in` where it names one, or where
    they state none; `may`, a possibility, otherwise."""
    if "says" not in program:  # a job written before `if_source`: its words alone
        return program
    condition = program.get("if_source")
    if condition is None:
        return program["says"]
    used = names_used(cells, condition.get("in"))
    shown = all(name in used for name in condition["has"]) and not any(
        name in used for name in condition["lacks"]
    )
    return program["says"] if shown else program["may"]


def obfuscated_lookups(cells: Iterable[tuple[str, str]]) -> list[Finding]:
    """Every place the source reaches something by a name it does not write out."""
    cells = list(cells)
    nodes = list(_walk(cells))
    # `getattr(…)` called: judged as a call below (a written name or a computed one); any other
    # mention of it passes it around as a value
    called_names = {id(node.func) for _, node in nodes if isinstance(node, ast.Call)}
    found = []
    for label, node in nodes:
        line = getattr(node, "lineno", 0)
        called = called_name(node)
        if called in NAMED_LOOKUPS and not (
            len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            found.append(Finding("obfuscated", f"`{called}()` with a computed name", label, line))
        elif called in NAME_BUILDERS - ATTRIBUTE_BUILDERS and not all(
            isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args
        ):
            found.append(Finding("obfuscated", f"`{called}()` with a computed name", label, line))
        if isinstance(node, ast.Name) and node.id in DYNAMIC_NAMES:
            found.append(Finding("obfuscated", f"`{node.id}`", label, line))
        elif (
            isinstance(node, ast.Name) and node.id in NAMED_LOOKUPS and id(node) not in called_names
        ):
            found.append(Finding("obfuscated", f"`{node.id}` used as a value", label, line))
        elif (
            isinstance(node, ast.Name)
            and node.id in ATTRIBUTE_BUILDERS
            or isinstance(node, ast.Attribute)
            and node.attr in ATTRIBUTE_BUILDERS
        ):
            found.append(Finding("obfuscated", f"`{_dotted(node)}`", label, line))
        elif isinstance(node, ast.Attribute) and (
            node.attr in DYNAMIC_ATTRIBUTES
            or node.attr == "modules"
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
        ):
            found.append(Finding("obfuscated", f"`{_dotted(node)}`", label, line))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in DYNAMIC_MODULES:
                    found.append(Finding("obfuscated", f"`import {alias.name}`", label, line))
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.split(".")[0] in DYNAMIC_MODULES
        ):
            found.append(Finding("obfuscated", f"`from {node.module} import …`", label, line))
        elif isinstance(node, ast.ImportFrom) and any(
            alias.name in ATTRIBUTE_BUILDERS | NAMED_LOOKUPS | DYNAMIC_NAMES
            or alias.name == "*"
            and node.module in ("operator", "builtins")
            for alias in node.names
        ):
            found.append(Finding("obfuscated", f"`from {node.module} import …`", label, line))
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module == "sys"
            and any(alias.name == "modules" for alias in node.names)
        ):
            found.append(Finding("obfuscated", "`from sys import modules`", label, line))
    return found


DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _defined(cells: Iterable[tuple[str, str]]) -> set[str]:
    """The names the submission defines itself with `def` or `class`, at any level, and binds
    no other way: `def F(): …` then `F = torch.nn.functional` is torch's module, not its own."""
    defined, rebound = set(), set()
    name, store, imports = ast.Name, ast.Store, (ast.Import, ast.ImportFrom)
    for _, node in _walk(cells):
        kind = type(node)
        if kind in DEFINITIONS:
            defined.add(node.name)
        elif kind is name and type(node.ctx) is store:
            rebound.add(node.id)
        elif kind in imports:
            rebound.update((alias.asname or alias.name).partition(".")[0] for alias in node.names)
        elif kind is ast.arg:
            rebound.add(node.arg)
    return defined - rebound


def _bound_by_code(cells: Iterable[tuple[str, str]]) -> set[str]:
    """The names the submission binds other than by an import: `def`, `class`, an assignment,
    a `for` or `with` target, an argument, an `except … as`: its own variables."""
    names = set()
    name, arg, handler, store = ast.Name, ast.arg, ast.ExceptHandler, ast.Store
    for _, node in _walk(cells):  # by exact type: a megabyte holds a quarter million nodes
        kind = type(node)
        if kind is name:
            if type(node.ctx) is store:
                names.add(node.id)
        elif kind is arg:
            names.add(node.arg)
        elif kind in DEFINITIONS or kind is handler and node.name:
            names.add(node.name)
    return names


def _root(node: ast.AST) -> ast.AST:
    """`torch` for `torch.nn.functional.conv2d`, `F` for `F.conv2d(…).sum`."""
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


@once_per_source
def forbidden_uses(
    cells: Iterable[tuple[str, str]], forbidden: Callable[[str], bool]
) -> list[Finding]:
    """Every mention of a name `forbidden` refuses: an attribute (`F.conv2d`, `nn.Conv2d`,
    `torch.ops.aten.convolution`) unless it is reached on a `def` or `class` of the file's own,
    an import of it, a bare name the submission does not bind itself (one a star import
    brought), or a string that is exactly such a name written into a lookup
    (`getattr(F, "conv2d")`, not `__all__ = ["conv2d"]` nor `print("convolution")`; any other
    way of turning a string into a name is an obfuscated lookup)."""
    cells = list(cells)
    own = _defined(cells)
    variables = _bound_by_code(cells)
    nodes = list(_walk(cells))  # one parse: the nodes below are these
    # names written into a lookup (`getattr(F, "conv2d")`, `attrgetter("conv2d")`): refused even
    # where the submission defines a function of that name
    looked_up = {
        id(arg)
        for _, node in nodes
        if isinstance(node, ast.Call) and called_name(node) in NAMED_LOOKUPS | NAME_BUILDERS
        for arg in node.args
        if isinstance(arg, ast.Constant)
    }
    found = []
    refused = functools.lru_cache(maxsize=None)(forbidden)  # names repeat: each asked once
    # by exact type (a megabyte holds a quarter million nodes), the common ones first
    name, attribute, constant = ast.Name, ast.Attribute, ast.Constant
    imports = (ast.Import, ast.ImportFrom)
    for label, node in nodes:
        kind = type(node)
        if kind is name:
            if node.id not in variables and refused(node.id):
                found.append(Finding("forbidden", f"`{node.id}`", label, node.lineno))
            continue
        if kind is constant:
            if (
                id(node) in looked_up
                and isinstance(node.value, str)
                and node.value.isidentifier()
                and refused(node.value)
            ):
                found.append(Finding("forbidden", repr(node.value), label, node.lineno))
            continue
        if kind is not attribute and kind not in imports:
            continue
        line = node.lineno
        if kind is attribute and refused(node.attr):
            root = _root(node.value)
            if not (isinstance(root, ast.Name) and root.id in own):
                found.append(Finding("forbidden", f"`{_dotted(node)}`", label, line))
        elif kind is ast.ImportFrom:
            for alias in node.names:
                if refused(alias.name) or any(
                    refused(part) for part in (node.module or "").split(".")
                ):
                    found.append(
                        Finding(
                            "forbidden", f"`from {node.module} import {alias.name}`", label, line
                        )
                    )
        elif kind is ast.Import:
            for alias in node.names:
                if any(refused(part) for part in alias.name.split(".")):
                    found.append(Finding("forbidden", f"`import {alias.name}`", label, line))
    return found


def _is_grad(node: ast.AST) -> bool:
    """`x.grad`, `x.grad.data`, `x.grad[i]`: a tensor's gradient or a part of it."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute) and node.attr == "grad":
            return True
        node = node.value
    return False


@once_per_source
def hand_written_grads(cells: Iterable[tuple[str, str]]) -> list[Finding]:
    """Every place the source writes a gradient itself: `x.grad = …` (but `= None`), `x.grad +=
    …`, `x.grad[…] = …`, `x.grad.data = …`, `setattr(x, "grad", …)`, an in-place method of
    `x.grad` (`copy_`, `add_`; not `zero_`, which clears it). Where a point says the gradient
    comes from backward(), a gradient written by hand has not."""
    found = []
    for label, node in _walk(cells):
        kind = type(node)
        if kind is ast.Assign or kind is ast.AnnAssign:
            targets = node.targets if kind is ast.Assign else [node.target]
            value_is_none = isinstance(node.value, ast.Constant) and node.value.value is None
            for target in targets:
                if _is_grad(target) and not (
                    isinstance(target, ast.Attribute) and target.attr == "grad" and value_is_none
                ):
                    found.append(Finding("grad", f"`{_dotted(target)} = …`", label, node.lineno))
        elif kind is ast.AugAssign and _is_grad(node.target):
            found.append(Finding("grad", f"`{_dotted(node.target)} …= …`", label, node.lineno))
        elif kind is ast.Call and isinstance(node.func, ast.Attribute):
            method, owner = node.func.attr, node.func.value
            if method.endswith("_") and method != "zero_" and _is_grad(owner):
                found.append(Finding("grad", f"`{_dotted(node.func)}(…)`", label, node.lineno))
        elif (
            kind is ast.Call
            and called_name(node) == "setattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value == "grad"
        ):
            found.append(Finding("grad", '`setattr(…, "grad", …)`', label, node.lineno))
    return found


def _is_function_base(base: ast.AST) -> bool:
    """Any base named `Function` or `InplaceFunction` (`torch.autograd.Function`,
    `autograd.Function`, `Function`): broad, for a rule that refuses such classes."""
    name = (
        base.attr
        if isinstance(base, ast.Attribute)
        else base.id
        if isinstance(base, ast.Name)
        else None
    )
    return name in ("Function", "InplaceFunction")


TORCH_FUNCTIONS = frozenset(
    {
        "torch.autograd.Function",
        "torch.autograd.function.Function",
        "torch.autograd.function.InplaceFunction",
    }
)


def _imported_as(cells: list[tuple[str, str]], name: str) -> str | None:
    """The module or object `name` stands for where the file binds it only by imports, all of
    the same thing (`import torch`, `from torch.autograd import Function`,
    `import torch.nn as nn`); None where any other code binds it (an assignment, a `def`, a
    `class`, an argument, `global`…) or imports of different things do."""
    meanings = set()
    for _, node in _walk(cells):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname == name:
                    meanings.add(alias.name)
                elif alias.asname is None and alias.name.split(".")[0] == name:
                    meanings.add(name)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*" and node.level == 0 and node.module:
                    meanings.add(f"{node.module}.*")
                elif (alias.asname or alias.name) == name:
                    meanings.add(f"{'.' * node.level}{node.module or ''}.{alias.name}")
        elif isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            return None
    if name in _bound_by_code(cells) or len(meanings) != 1:
        return None
    meaning = meanings.pop()
    return None if meaning.endswith(".*") else meaning


def _is_torch_function_base(cells: list[tuple[str, str]], base: ast.AST) -> bool:
    """`base` is torch's own autograd Function: `torch.autograd.Function` with `torch` bound by
    `import torch` alone, or `Function` imported from torch.autograd and bound nowhere else."""
    parts = []
    while isinstance(base, ast.Attribute):
        parts.append(base.attr)
        base = base.value
    if not isinstance(base, ast.Name):
        return False
    meaning = _imported_as(cells, base.id)
    return meaning is not None and ".".join([meaning, *reversed(parts)]) in TORCH_FUNCTIONS


@once_per_source
def own_functions(cells: Iterable[tuple[str, str]]) -> list[Finding]:
    """Every class the submission derives from `torch.autograd.Function`."""
    return [
        Finding("own-function", f"`class {node.name}`", label, node.lineno)
        for label, node in _walk(cells)
        if isinstance(node, ast.ClassDef) and any(_is_function_base(b) for b in node.bases)
    ]


def _module_bindings(cells: Iterable[tuple[str, str]], name: str) -> list[ast.AST]:
    """The statements at the top level of the cells (in order) that bind `name`."""
    found = []
    for _, tree in parsed(cells):
        for statement in tree.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if statement.name == name:
                    found.append(statement)
                continue
            for node in ast.walk(statement):
                bound = (
                    (
                        isinstance(node, ast.Name)
                        and isinstance(node.ctx, (ast.Store, ast.Del))
                        and node.id == name
                    )
                    or (
                        isinstance(node, (ast.Import, ast.ImportFrom))
                        and any(
                            (alias.asname or alias.name.split(".")[0]) == name
                            for alias in node.names
                        )
                    )
                    or (isinstance(node, ast.Global) and name in node.names)
                )
                if bound:
                    found.append(statement)
                    break
    return found


def _changed_elsewhere(cells: list[tuple[str, str]], name: str) -> bool:
    """Whether code may rebind `name`, or change its attributes, other than by its definition:
    `global name` in a function, `name.attr = …`, `del name.attr`, `setattr(name, …)`."""
    for _, node in _walk(cells):
        if isinstance(node, ast.Global) and name in node.names:
            return True
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, (ast.Store, ast.Del))
            and isinstance(node.value, ast.Name)
            and node.value.id == name
        ):
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("setattr", "delattr")
            and node.args
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == name
        ):
            return True
    return False


# what a Function of one's own may not define or be given: each changes what `C.apply(x)` or
# `C().__class__` runs, out of the reading's sight
REBOUND_IN_CLASS = frozenset(
    {
        "apply",
        "__new__",
        "__init__",
        "__init_subclass__",
        "__call__",
        "__getattr__",
        "__getattribute__",
        "__class__",
        "__class_getitem__",
        "__set_name__",
        "_backward_cls",
        "__prepare__",
    }
)
# attributes no honest submission assigns: they change what any Function's `apply` runs
PATCHED_ATTRIBUTES = frozenset(
    {
        "apply",
        "forward",
        "backward",
        "setup_context",
        "Function",
        "FunctionMeta",
        "_backward_cls",
        "_forward_cls",
        "_C",
    }
)


def _patches_functions(cells: list[tuple[str, str]]) -> bool:
    """Whether the file assigns or deletes an attribute that decides what a Function's `apply`
    runs (`torch.autograd.Function.apply = …`, `setattr(x, "backward", …)`)."""
    for _, node in _walk(cells):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, (ast.Store, ast.Del))
            and node.attr in PATCHED_ATTRIBUTES
        ):
            return True
        if (
            isinstance(node, ast.Call)
            and called_name(node) in ("setattr", "delattr")
            and (
                len(node.args) < 2
                or not isinstance(node.args[1], ast.Constant)
                or node.args[1].value in PATCHED_ATTRIBUTES
            )
        ):
            return True
    return False


def _function_class(cells: list[tuple[str, str]], name: str) -> ast.ClassDef | None:
    """The class `name` as the file leaves it: a subclass of torch's own autograd Function with
    forward and backward, not decorated (a decorator may return anything), without a metaclass
    or a method that changes what `apply` runs, nor changed elsewhere."""
    bindings = _module_bindings(cells, name)
    last = bindings[-1] if bindings else None
    if (
        not isinstance(last, ast.ClassDef)
        or last.decorator_list
        or last.keywords
        or len(last.bases) != 1
        or not _is_torch_function_base(cells, last.bases[0])
        or _changed_elsewhere(cells, name)
        or _patches_functions(cells)
    ):
        return None
    defined = set()
    for statement in last.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(statement.name)
        else:
            defined |= {
                node.id
                for node in ast.walk(statement)
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
            }
    if defined & REBOUND_IN_CLASS:
        return None
    return last if {"forward", "backward"} <= defined else None


@once_per_source
def own_function(cells: Iterable[tuple[str, str]], name: str) -> bool:
    """Whether the file leaves `name` bound to a Function of its own, as `_function_class`
    reads it: a check may then call `name.apply` and measure that Function's backward."""
    return _function_class(list(cells), name) is not None


@dataclass(frozen=True)
class Applied:
    """How `function` uses a Function of the submission's own, as read in the source."""

    applied: bool  # `function(x)` is `return C.apply(x)` on its own argument (or `C.apply`)
    to_expression: bool  # it calls `C.apply(...)`, but on something else than its argument
    returned: str | None  # what `function` returns, as written (for a message)


def _is_apply(cells: list[tuple[str, str]], node: ast.AST) -> bool:
    """`C.apply`, where C is a Function of the file's own."""
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "apply"
        and isinstance(node.value, ast.Name)
        and _function_class(cells, node.value.id) is not None
    )


@once_per_source
def applies_own_function(cells: Iterable[tuple[str, str]], function: str) -> Applied:
    """Whether `function`, as the file leaves it bound, returns a torch.autograd.Function of
    the submission's own (a class with forward and backward) applied to its first argument,
    unchanged: its whole body (a docstring aside) is `return SiLU.apply(x)`, or the module binds
    `silu = SiLU.apply`. A call whose result is dropped, or returned on one path of several,
    is not counted: what runs then is not what was read."""
    cells = list(cells)
    bindings = _module_bindings(cells, function)
    last = bindings[-1] if bindings else None
    if last is None or _changed_elsewhere(cells, function):
        return Applied(False, False, None)
    if (
        isinstance(last, ast.Assign)
        and len(last.targets) == 1
        and isinstance(last.targets[0], ast.Name)
    ):
        return Applied(_is_apply(cells, last.value), False, _dotted(last.value))
    if not isinstance(last, ast.FunctionDef) or not last.args.args or last.decorator_list:
        return Applied(False, False, None)
    argument = last.args.args[0].arg
    body = last.body
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]  # the docstring
    returns = [
        node.value
        for statement in last.body
        for node in ast.walk(statement)
        if isinstance(node, ast.Return) and node.value is not None
    ]
    returned = _dotted(returns[-1]) if returns else None
    single = body[0].value if len(body) == 1 and isinstance(body[0], ast.Return) else None
    if (
        isinstance(single, ast.Call)
        and _is_apply(cells, single.func)
        and not single.keywords
        and len(single.args) == 1
        and isinstance(single.args[0], ast.Name)
        and single.args[0].id == argument
    ):
        return Applied(True, False, returned)
    # `C.apply(x * torch.sigmoid(x))`, or `x` rebound first: applied to what autograd already
    # differentiates (for the diagnostic's words)
    rebound = any(
        isinstance(node, ast.Name)
        and isinstance(node.ctx, (ast.Store, ast.Del))
        and node.id == argument
        for statement in body
        for node in ast.walk(statement)
    )
    to_expression = any(
        isinstance(node, ast.Call)
        and _is_apply(cells, node.func)
        and (
            rebound
            or node.keywords
            or len(node.args) != 1
            or not (isinstance(node.args[0], ast.Name) and node.args[0].id == argument)
        )
        for statement in body
        for node in ast.walk(statement)
    )
    return Applied(False, to_expression, returned)

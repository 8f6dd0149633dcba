"""Programs of one exercise (autograd-saved-hooks) to compare for code alike: its reference, the
reference with its names, comments and spacing changed, and two solutions written apart."""

import re
from pathlib import Path

from server.core.catalogue import load_exercise_info

EXERCISE = load_exercise_info(Path(__file__).parents[1] / "exercises" / "autograd-saved-hooks")
REFERENCE = (EXERCISE.path / "reference.py").read_text()
# the reference with every name of its own changed, its comments and spacing too
RENAMED = (
    re.sub(
        r"(?<!\.)\b(tensor|temp_file|packed|fn|x|y|grad|SelfDeletingTempFile)\b",
        lambda name: {"SelfDeletingTempFile": "Scratch"}.get(name[0], f"my_{name[0]}_v2"),
        REFERENCE,
    )
    .replace("    ", "  ")
    .replace(
        '"""A new file name in tempfile.gettempdir(); the file is deleted with this object."""',
        "# mine",
    )
)
# two solutions written apart from each other and from the reference
APART = (
    """import os
import tempfile
import uuid

import torch

SAVE_ON_DISK_THRESHOLD = 1000


class Offloaded:
    def __init__(self, path):
        self.path = path

    def __del__(self):
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def pack_hook(tensor):
    if tensor.numel() >= SAVE_ON_DISK_THRESHOLD:
        path = f"{tempfile.gettempdir()}/{uuid.uuid4().hex}.pt"
        torch.save(tensor, path)
        return Offloaded(path)
    return tensor


def unpack_hook(packed):
    return torch.load(packed.path) if isinstance(packed, Offloaded) else packed


def grad_with_offload(fn, x):
    hooks = torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook)
    with hooks:
        out = fn(x).sum()
    return torch.autograd.grad(out, x)[0]
""",
    """import os
import tempfile
import uuid

import torch

SAVE_ON_DISK_THRESHOLD = 1000
files = {}


def pack_hook(t: torch.Tensor):
    small = t.numel() < SAVE_ON_DISK_THRESHOLD
    if small:
        return ("memory", t)
    name = os.path.join(tempfile.gettempdir(), "hooks-" + str(uuid.uuid4()))
    torch.save(t, name)
    return ("disk", name)


def unpack_hook(packed) -> torch.Tensor:
    where, what = packed
    if where == "memory":
        return what
    loaded = torch.load(what)
    os.remove(what)
    return loaded


def grad_with_offload(fn, x: torch.Tensor) -> torch.Tensor:
    x = x.detach().requires_grad_(x.requires_grad)
    with torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
        total = fn(x).sum()
    total.backward()
    return x.grad
""",
)

"""What the grader runs in your process for `grad_with_offload`.

`fresh_tempdir()` points `tempfile` at a new, empty directory and returns its path: your
`pack_hook` must write its files there, so build their paths from `tempfile.gettempdir()` each
time it runs. `OffloadProbe` is the `fn` the grader passes to `grad_with_offload`: it computes
`offload_example(x)` and writes down whether saved-tensor hooks were active while it ran and how
many files the directory held when the backward pass reached its output, before any saved
tensor was unpacked. `count_files` counts them once your function has returned.

Try it yourself:

    directory = fresh_tempdir()
    probe = OffloadProbe(directory)
    grad_with_offload(probe, torch.randn(1500, requires_grad=True))
    probe.hooks_active, probe.files_during_backward, count_files(directory)  # [True], [3], 0
"""
import gc
import os
import tempfile

import torch

# Your process may start with the directory of the process it was forked from cached here, from
# before $TMPDIR named your scratch directory: forget it, so that tempfile reads $TMPDIR again.
tempfile.tempdir = None


def fresh_tempdir() -> str:
    """Make a new, empty directory inside $TMPDIR the one `tempfile` uses; return its path."""
    tempfile.tempdir = None  # look $TMPDIR up again, not inside the previous fresh directory
    tempfile.tempdir = tempfile.mkdtemp(prefix="offload-")
    return tempfile.tempdir


def count_files(directory: str) -> int:
    """Entries left in `directory` once objects nothing refers to any more are freed."""
    gc.collect()
    return len(os.listdir(directory))


def offload_example(x: torch.Tensor) -> torch.Tensor:
    """Saves three tensors of x's size (x twice, sin(x)) and two of 16 elements."""
    return torch.cat([torch.sin(x) * x, torch.exp(x[:16]) ** 2])


def _hooks_active() -> bool:
    return torch._C._autograd._top_saved_tensors_default_hooks(False) is not None


class OffloadProbe:
    def __init__(self, directory: str):
        self.directory = directory
        self.hooks_active: list[bool] = []
        self.files_during_backward: list[int] = []

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.hooks_active.append(_hooks_active())
        y = offload_example(x)
        if y.requires_grad:
            # runs when the backward pass reaches y: before any node of fn unpacks what it saved
            y.register_hook(self._count_files)
        return y

    def _count_files(self, _grad: torch.Tensor) -> None:
        self.files_during_backward.append(len(os.listdir(self.directory)))

"""A hostile submission: it never deletes its files, and rewrites in its own process whatever
could count them (support.py's helpers, os.listdir, os.scandir) to say that there are none."""
import contextlib
import os
import tempfile
import uuid

import exercise_support
import torch

SAVE_ON_DISK_THRESHOLD = 1000


def _no_entries(*_args, **_kwargs):
    return contextlib.nullcontext(iter(()))


exercise_support.collect_garbage = lambda *_args, **_kwargs: None
os.listdir = lambda *_args, **_kwargs: []
os.scandir = _no_entries


def pack_hook(tensor):
    if tensor.numel() < SAVE_ON_DISK_THRESHOLD:
        return tensor
    name = os.path.join(tempfile.gettempdir(), str(uuid.uuid4()))
    torch.save(tensor, name)
    return name


def unpack_hook(packed):
    if isinstance(packed, torch.Tensor):
        return packed
    return torch.load(packed)  # the file stays behind


def grad_with_offload(fn, x):
    with torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
        y = fn(x)
    (grad,) = torch.autograd.grad(y.sum(), x)
    return grad

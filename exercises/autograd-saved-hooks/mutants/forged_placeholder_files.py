"""A hostile submission: kept_in_memory plus an empty file for each large saved tensor, made as
it is packed and deleted with it, so that every count the grader makes of the files is right
while the tensors never leave memory."""
import os
import tempfile
import uuid

import torch

SAVE_ON_DISK_THRESHOLD = 1000


class Placeholder:
    def __init__(self, tensor: torch.Tensor):
        self.tensor = tensor
        self.name = os.path.join(tempfile.gettempdir(), str(uuid.uuid4()))
        open(self.name, "wb").close()

    def __del__(self):
        os.remove(self.name)


def pack_hook(tensor: torch.Tensor):
    if tensor.numel() < SAVE_ON_DISK_THRESHOLD:
        return tensor
    return Placeholder(tensor)


def unpack_hook(packed) -> torch.Tensor:
    return packed if isinstance(packed, torch.Tensor) else packed.tensor


def grad_with_offload(fn, x: torch.Tensor) -> torch.Tensor:
    with torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
        y = fn(x)
    (grad,) = torch.autograd.grad(y.sum(), x)
    return grad

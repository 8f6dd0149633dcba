import os
import tempfile

import torch

SAVE_ON_DISK_THRESHOLD = 1000


def pack_hook(tensor):
    if tensor.numel() < SAVE_ON_DISK_THRESHOLD:
        return tensor
    name = os.path.join(tempfile.gettempdir(), "saved_tensor.pt")  # the same name for every tensor
    torch.save(tensor, name)
    return name


def unpack_hook(packed):
    if isinstance(packed, torch.Tensor):
        return packed
    return torch.load(packed)


def grad_with_offload(fn, x):
    with torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
        y = fn(x)
    (grad,) = torch.autograd.grad(y.sum(), x)
    return grad

import torch

SAVE_ON_DISK_THRESHOLD = 1000


def pack_hook(tensor: torch.Tensor):
    return tensor  # never offloaded: every saved tensor stays in memory


def unpack_hook(packed) -> torch.Tensor:
    return packed


def grad_with_offload(fn, x: torch.Tensor) -> torch.Tensor:
    with torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
        y = fn(x)
    (grad,) = torch.autograd.grad(y.sum(), x)
    return grad

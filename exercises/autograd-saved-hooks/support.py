"""Public code of autograd-saved-hooks: the `fn` the grader passes to `grad_with_offload`.

`OffloadExample()` computes two branches of x's size. It returns
`torch.cat([torch.cos(x) * x, torch.exp(x[:16]) ** 2])`, which saves three tensors of x's size
(x twice, cos(x)) and two of 16 elements, and it keeps `torch.sin(x) * x` on the object: the
backward pass does not go through that branch, so its three saved tensors (x twice, sin(x)) stay
packed, their files on disk, as long as the object lives. Once `grad_with_offload` has returned,
the files of the kept branch, and no other, must be there.

The grader counts your files itself, from its own process, in your process's temporary
directory (`tempfile.gettempdir()`): nothing your process says about them is used. Try it:

    fn = OffloadExample()
    grad_with_offload(fn, torch.randn(1500, requires_grad=True))
    len(os.listdir(tempfile.gettempdir()))  # 3 more than before, until `del fn`
"""

import gc

import torch


class OffloadExample:
    def __init__(self):
        self.kept = None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.kept = torch.sin(x) * x
        return torch.cat([torch.cos(x) * x, torch.exp(x[:16]) ** 2])


def collect_garbage() -> None:
    """Frees the objects nothing refers to any more (the grader asks before counting files)."""
    gc.collect()

import torch


def leaf_grads(x1: torch.Tensor, x2: torch.Tensor, x3: torch.Tensor, x4: torch.Tensor) -> dict:
    # f = x1·x2 + x3·x4 with z1 = x1·x2 and z2 = x3·x4. Return the gradients of f with respect to
    # x1..x4, z1 and z2 as {"x1": ..., "x2": ..., "x3": ..., "x4": ..., "z1": ..., "z2": ...}.
    raise NotImplementedError


def is_leaf_report(a: torch.Tensor, b: torch.Tensor) -> dict:
    # For c = a + b: {"a": a.is_leaf, "b": b.is_leaf, "c": c.is_leaf, "c_requires_grad": ...}
    raise NotImplementedError

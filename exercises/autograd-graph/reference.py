import torch


def leaf_grads(x1: torch.Tensor, x2: torch.Tensor, x3: torch.Tensor, x4: torch.Tensor) -> dict:
    z1 = x1 * x2
    z2 = x3 * x4
    z1.retain_grad()
    z2.retain_grad()
    f = z1 + z2
    f.backward()
    return {
        "x1": x1.grad,
        "x2": x2.grad,
        "x3": x3.grad,
        "x4": x4.grad,
        "z1": z1.grad,
        "z2": z2.grad,
    }


def is_leaf_report(a: torch.Tensor, b: torch.Tensor) -> dict:
    c = a + b
    return {"a": a.is_leaf, "b": b.is_leaf, "c": c.is_leaf, "c_requires_grad": c.requires_grad}

"""Hostile (a review): vjp_formula_by_hand, whose hand-derived result is also written into
`x.grad`, where the grader reads that it came from backward()."""
import torch


def vjp(x, v):
    # still derived by hand, autograd never runs; x.grad is just assigned
    g = 4 * (x.detach() + 2) * v
    x.grad = g
    return g


def softmax_jacobian(x):
    rows = []
    for e in torch.eye(x.shape[0], dtype=x.dtype, device=x.device):
        x.grad = None
        torch.softmax(x, dim=0).backward(gradient=e)
        rows.append(x.grad)
    return torch.stack(rows)

import torch


def leaf_grads(x1, x2, x3, x4):
    z1 = x1 * x2
    z2 = x3 * x4
    z1.retain_grad()
    z2.retain_grad()
    f = z1 + z2
    f.backward()
    grads = {"x1": x1.grad, "x2": x2.grad, "x3": x3.grad, "x4": x4.grad, "z1": z1.grad, "z2": z2.grad}
    # plain numbers are easier to read
    return {k: g.item() for k, g in grads.items()}


def is_leaf_report(a, b):
    c = a + b
    return {"a": a.is_leaf, "b": b.is_leaf, "c": c.is_leaf, "c_requires_grad": c.requires_grad}

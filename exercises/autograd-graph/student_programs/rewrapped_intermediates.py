import torch


def leaf_grads(x1, x2, x3, x4):
    # make z1, z2 tensors that keep their gradient
    z1 = torch.tensor(x1 * x2, requires_grad=True)
    z2 = torch.tensor(x3 * x4, requires_grad=True)
    f = z1 + z2
    f.backward()
    return {"x1": x1.grad, "x2": x2.grad, "x3": x3.grad, "x4": x4.grad, "z1": z1.grad, "z2": z2.grad}


def is_leaf_report(a, b):
    c = a + b
    return {"a": a.is_leaf, "b": b.is_leaf, "c": c.is_leaf, "c_requires_grad": c.requires_grad}

import torch


def vjp(x, v):
    z = 2 * (x + 2) ** 2
    z.backward()
    return x.grad


def softmax_jacobian(x):
    rows = []
    for e in torch.eye(x.shape[0], dtype=x.dtype, device=x.device):
        x.grad = None
        torch.softmax(x, dim=0).backward(gradient=e)
        rows.append(x.grad)
    return torch.stack(rows)

import torch


def vjp(x, v):
    z = 2 * (x + 2) ** 2
    z.backward(gradient=v)
    return x.grad


def softmax_jacobian(x):
    rows = []
    for e in torch.eye(x.shape[0], dtype=x.dtype, device=x.device):
        if x.grad is not None:
            x.grad.zero_()
        torch.softmax(x, dim=0).backward(gradient=e)
        rows.append(x.grad)  # the same tensor every time, overwritten by the next rows
    return torch.stack(rows)

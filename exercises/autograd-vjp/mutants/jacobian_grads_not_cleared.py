import torch


def vjp(x, v):
    z = 2 * (x + 2) ** 2
    z.backward(gradient=v)
    return x.grad


def softmax_jacobian(x):
    rows = []
    for e in torch.eye(x.shape[0], dtype=x.dtype, device=x.device):
        torch.softmax(x, dim=0).backward(gradient=e)  # x.grad keeps the earlier rows
        rows.append(x.grad.clone())
    return torch.stack(rows)

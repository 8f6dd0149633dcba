import torch


def vjp(x, v):
    z = 2 * (x + 2) ** 2
    z.backward(gradient=v)
    return x.grad


def softmax_jacobian(x):
    rows = []
    for e in torch.eye(x.shape[0], dtype=x.dtype, device=x.device):
        x.grad = None
        y = torch.exp(x) / torch.exp(x).sum()  # overflows for large x: inf / inf
        y.backward(gradient=e)
        rows.append(x.grad)
    return torch.stack(rows)

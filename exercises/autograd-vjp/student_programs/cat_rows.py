import torch


def vjp(x, v):
    z = 2 * (x + 2) ** 2
    z.backward(gradient=v)
    return x.grad


def softmax_jacobian(x):
    n = x.shape[0]
    rows = []
    for i in range(n):
        y = torch.softmax(x, dim=0)
        e = torch.zeros_like(y)
        e[i] = 1.0
        x.grad = None
        y.backward(gradient=e)
        rows.append(x.grad)
    return torch.cat(rows)

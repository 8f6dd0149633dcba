import torch


def vjp(x, v):
    z = 2 * (x + 2) ** 2
    z.backward(gradient=v)
    return x.grad


def softmax_jacobian(x):
    rows = []
    for _ in range(x.shape[0]):
        x.grad = None
        y = torch.softmax(x, dim=0)
        y.backward(gradient=torch.ones_like(y))  # the same cotangent for every row
        rows.append(x.grad)
    return torch.stack(rows)

import torch


def vjp(x, v):
    z = 2 * (x + 2) ** 2
    z.backward(gradient=v)
    return x.grad


def softmax_jacobian(x):
    y = torch.softmax(x, dim=0)  # one forward pass for all rows: the first backward frees it
    rows = []
    for e in torch.eye(x.shape[0], dtype=x.dtype, device=x.device):
        x.grad = None
        y.backward(gradient=e)
        rows.append(x.grad)
    return torch.stack(rows)

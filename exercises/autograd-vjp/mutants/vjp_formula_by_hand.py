import torch


def vjp(x, v):
    # the right numbers, derived by hand: autograd never runs, x.grad stays None
    return 4 * (x.detach() + 2) * v


def softmax_jacobian(x):
    rows = []
    for e in torch.eye(x.shape[0], dtype=x.dtype, device=x.device):
        x.grad = None
        torch.softmax(x, dim=0).backward(gradient=e)
        rows.append(x.grad)
    return torch.stack(rows)

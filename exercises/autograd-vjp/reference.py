import torch


def vjp(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    z = 2 * (x + 2) ** 2
    z.backward(gradient=v)
    return x.grad


def softmax_jacobian(x: torch.Tensor) -> torch.Tensor:
    one_hot = torch.eye(x.shape[0], dtype=x.dtype, device=x.device)
    rows = []
    for e in one_hot:
        x.grad = None
        torch.softmax(x, dim=0).backward(gradient=e)
        rows.append(x.grad)
    return torch.stack(rows)

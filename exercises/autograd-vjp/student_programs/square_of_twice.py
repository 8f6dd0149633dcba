import torch


def vjp(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    inner = 2 * (x + 2)
    z = inner ** 2
    z.backward(gradient=v)
    return x.grad


def softmax_jacobian(x: torch.Tensor) -> torch.Tensor:
    n = x.numel()
    eye = torch.eye(n, dtype=x.dtype, device=x.device)
    rows = []
    for i in range(n):
        if x.grad is not None:
            x.grad.zero_()
        torch.softmax(x, dim=0).backward(eye[i])
        rows.append(x.grad.clone())
    return torch.stack(rows)

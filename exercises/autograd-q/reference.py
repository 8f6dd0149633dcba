import torch


def q_grads(a: torch.Tensor, b: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    Q = 3 * a**3 - b**2
    Q.backward(gradient=v)
    return a.grad, b.grad

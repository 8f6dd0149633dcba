import torch


def q_grads(a: torch.Tensor, b: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # Q = 3a³ − b²; backward with gradient=v; return (a.grad, b.grad)
    raise NotImplementedError

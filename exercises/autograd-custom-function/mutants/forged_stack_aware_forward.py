"""Hostile (a review): negated_backward, whose forward tells silu's call from the grader's own
`SiLU.apply` by its stack, giving silu's right values and the grader a forward its negated
backward agrees with."""
import torch
import traceback


class SiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        s = torch.sigmoid(x)
        ctx.save_for_backward(x, s)
        via_silu = any(f.name == "silu" for f in traceback.extract_stack())
        return x * s if via_silu else -(x * s)   # grader's own SiLU.apply sees -silu

    @staticmethod
    def backward(ctx, grad_output):          # negated backward (the mutant's mistake)
        x, s = ctx.saved_tensors
        return -grad_output * s * (1 + x * (1 - s))


def silu(x):
    return SiLU.apply(x)

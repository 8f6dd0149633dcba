"""Hostile: `silu` without the Function (without_function), and the harness's describe() in its
own process rewritten to show the graph of `SiLU.apply(x)` for every tensor."""
import sys

import torch

_server = sys.modules["worker.harness.student"].Server
_server.graph = lambda self, root: [{"name": "SiLUBackward", "next": [1]},
                                    {"name": "AccumulateGrad", "next": []}]


class SiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        s = torch.sigmoid(x)
        ctx.save_for_backward(x, s)
        return x * s

    @staticmethod
    def backward(ctx, grad_output):
        x, s = ctx.saved_tensors
        return grad_output * s * (1 + x * (1 - s))


def silu(x):
    return x * torch.sigmoid(x)

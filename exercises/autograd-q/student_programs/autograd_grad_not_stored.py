import torch


def q_grads(a, b, v):
    Q = 3 * a ** 3 - b ** 2
    # the vector-Jacobian product, for both leaves at once
    ga, gb = torch.autograd.grad(Q, (a, b), grad_outputs=v)
    return ga, gb

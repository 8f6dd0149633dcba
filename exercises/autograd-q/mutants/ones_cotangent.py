import torch


def q_grads(a, b, v):
    Q = 3 * a**3 - b**2
    Q.backward(gradient=torch.ones_like(Q))  # the same as Q.sum().backward(): v is ignored
    return a.grad, b.grad

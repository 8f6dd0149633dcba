import torch


def q_grads(a, b, v):
    Q = 3 * a ** 3 - b ** 2
    Q.backward(gradient=v)
    # v · dQ/da
    return v * a.grad, v * b.grad

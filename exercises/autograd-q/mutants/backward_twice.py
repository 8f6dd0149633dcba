import torch


def q_grads(a, b, v):
    Q = 3 * a**3 - b**2
    Q.backward(gradient=v)  # for a.grad
    Q.backward(gradient=v)  # "and again for b.grad": the graph was freed by the first call
    return a.grad, b.grad

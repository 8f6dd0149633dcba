import torch


def q_grads(a, b, v):
    Q = 3 * a**3 - b**2
    Q.backward(gradient=v, retain_graph=True)  # for a.grad
    Q.backward(gradient=v)  # "and again for b.grad": adds to both gradients
    return a.grad, b.grad

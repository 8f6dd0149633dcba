"""Hostile (a review): formula_without_backward, whose hand-derived gradients are also written
into a.grad and b.grad, where the grader reads that they came from backward()."""
import torch


def q_grads(a, b, v):
    a.grad = 9 * a.detach() ** 2 * v
    b.grad = -2 * b.detach() * v
    return a.grad, b.grad

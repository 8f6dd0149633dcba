def q_grads(a, b, v):
    Q = 3 * a**3 - b**2
    Q.backward(gradient=v)
    return a.grad, b.grad

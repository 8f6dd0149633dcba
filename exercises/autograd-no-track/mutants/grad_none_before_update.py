import torch


def frozen_copy(x):
    return x.detach()


def sgd_update_(w, lr):
    w.grad = None  # cleared first: the update below finds no gradient
    with torch.no_grad():
        w -= lr * w.grad


def predict(model, x):
    model.eval()
    with torch.no_grad():
        return model(x)

import torch


def frozen_copy(x):
    return x.detach()


def sgd_update_(w, lr):
    # a new tensor bound to the local name w: the caller's w never changes
    w = w - lr * w.grad
    w.grad = None


def predict(model, x):
    model.eval()
    with torch.no_grad():
        return model(x)

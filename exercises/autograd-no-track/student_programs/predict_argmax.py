import torch


def frozen_copy(x):
    return x.detach()


def sgd_update_(w, lr):
    with torch.no_grad():
        w -= lr * w.grad
    w.grad = None


def predict(model, x):
    model.eval()
    with torch.no_grad():
        scores = model(x)
    # the predicted class of each row
    return scores.argmax(dim=1)

import torch


def train_step(model, data, labels, optimizer) -> float:
    optimizer.zero_grad()
    prediction = model(data)
    loss = (prediction - labels).sum(dim=0)     # one sum per output
    loss.backward()
    optimizer.step()
    return loss.item()

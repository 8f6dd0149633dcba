import torch


def train_accumulated(model, optimizer, batches, accumulation_steps):
    for i, x in enumerate(batches):
        loss = ((model(x) - 2 * x) ** 2).mean() / accumulation_steps
        loss.backward()
        if (i + 1) % accumulation_steps == 0:
            # a new optimizer each window: the one given (and its learning rate) is never used
            step_optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
            step_optimizer.step()
            step_optimizer.zero_grad()
    return model.weight

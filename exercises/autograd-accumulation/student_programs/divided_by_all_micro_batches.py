import torch


def train_accumulated(model, optimizer, batches: list[torch.Tensor], accumulation_steps: int) -> torch.Tensor:
    # averages over every micro-batch of the training, not over those of a window
    for i, x in enumerate(batches):
        loss = ((model(x) - 2 * x) ** 2).mean() / len(batches)
        loss.backward()
        if (i + 1) % accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    return model.weight

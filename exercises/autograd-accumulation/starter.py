import torch


def train_accumulated(model, optimizer, batches: list[torch.Tensor], accumulation_steps: int) -> torch.Tensor:
    # For each micro-batch: MSE loss of model(x) against 2x, divided by accumulation_steps, then
    # backward(). Every accumulation_steps micro-batches: optimizer.step(), optimizer.zero_grad().
    # Return the final weight, model.weight.
    raise NotImplementedError

def train_accumulated(model, optimizer, batches, accumulation_steps):
    for i, x in enumerate(batches):
        loss = ((model(x) - 2 * x) ** 2).mean() / accumulation_steps
        if (i + 1) % accumulation_steps == 0:
            optimizer.step()  # before this micro-batch's backward(): its gradient is missing
            optimizer.zero_grad()
        loss.backward()
    return model.weight

def train_step(model, data, labels, optimizer):
    optimizer.zero_grad()
    prediction = model(data)
    loss = (prediction - labels).sum()
    loss.backward()
    return loss.item()

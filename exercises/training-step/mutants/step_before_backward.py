def train_step(model, data, labels, optimizer):
    optimizer.zero_grad()
    prediction = model(data)
    loss = (prediction - labels).sum()
    optimizer.step()
    loss.backward()
    return loss.item()

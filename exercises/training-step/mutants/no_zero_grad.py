def train_step(model, data, labels, optimizer):
    prediction = model(data)
    loss = (prediction - labels).sum()
    loss.backward()  # adds to the .grad the previous call left
    optimizer.step()
    return loss.item()

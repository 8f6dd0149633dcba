import torch
import torch.nn.functional as F


def one_hot(indices: torch.Tensor, vocab_size: int) -> torch.Tensor:
    return F.one_hot(indices, num_classes=vocab_size).float()


def embed_batch(sentences, word_to_ix, embeddings):
    longest = max(len(sentence) for sentence in sentences)
    out = torch.zeros(longest, len(sentences), embeddings.shape[1])  # float32, on the CPU
    for b, sentence in enumerate(sentences):
        for t, word in enumerate(sentence):
            out[t, b] = embeddings[word_to_ix[word]]
    return out

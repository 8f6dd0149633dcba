import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence


def one_hot(indices: torch.Tensor, vocab_size: int) -> torch.Tensor:
    out = torch.zeros(len(indices), vocab_size)
    out[torch.arange(len(indices)), indices] = 1
    return out


def embed_batch(sentences: list[list[str]], word_to_ix: dict, embeddings: torch.Tensor) -> torch.Tensor:
    T = len(sentences[0])
    B = len(sentences)
    D = embeddings.shape[1]
    out = torch.zeros(T, B, D, dtype=embeddings.dtype, device=embeddings.device)
    for b, sentence in enumerate(sentences):
        for t, word in enumerate(sentence):
            out[t, b] = embeddings[word_to_ix[word]]
    return out

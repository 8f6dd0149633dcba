import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence


def one_hot(indices: torch.Tensor, vocab_size: int) -> torch.Tensor:
    return F.one_hot(indices, vocab_size).float()


def embed_batch(sentences: list[list[str]], word_to_ix: dict, embeddings: torch.Tensor) -> torch.Tensor:
    vocab_size = embeddings.shape[0]
    vectors = []
    for s in sentences:
        ix = torch.tensor([word_to_ix[w] for w in s], device=embeddings.device)
        vectors.append(one_hot(ix, vocab_size) @ embeddings)  # one_hot @ embeddings
    return pad_sequence(vectors)

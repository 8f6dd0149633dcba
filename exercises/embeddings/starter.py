import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence


def one_hot(indices: torch.Tensor, vocab_size: int) -> torch.Tensor:
    # (n,) word indices -> (n, vocab_size) float one-hot rows
    raise NotImplementedError


def embed_batch(sentences: list[list[str]], word_to_ix: dict, embeddings: torch.Tensor) -> torch.Tensor:
    # each word -> its row of embeddings (vocab_size, D); the sentences padded with zeros
    # into one (T, B, D) tensor, T = the longest sentence's length, B = len(sentences)
    raise NotImplementedError

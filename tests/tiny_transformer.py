"""A tiny random BERT with its WordPiece tokenizer, written to a test's tmp_path.

The BERT-family tests need a real Hugging Face model directory (config, weights, tokenizer
files) but no download: this builds one of a few thousand parameters in well under a second.
"""

from __future__ import annotations

import string
from pathlib import Path

import torch

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def write_tiny_bert(
    directory: Path,
    words: list[str],
    hidden: int = 16,
    layers: int = 1,
    max_positions: int = 64,
    cased: bool = True,
    seed: int = 0,
    zero_positions: bool = False,
) -> Path:
    """Save a random BERT whose vocabulary holds ``words``, single characters and ``##`` pieces.

    ``zero_positions`` zeroes (and so removes) the position embeddings; with ``layers=0`` the
    encoder then maps each sub-token to a vector independent of its context and position.
    """
    from transformers import BertConfig, BertModel, BertTokenizer

    pieces = sorted(set(string.ascii_letters + string.digits + string.punctuation))
    vocab = list(dict.fromkeys(SPECIALS + sorted(set(words)) + pieces + [f"##{p}" for p in pieces]))
    tokenizer = BertTokenizer(
        vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=not cased, model_max_length=max_positions
    )
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=max_positions,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    torch.manual_seed(seed)
    model = BertModel(config)
    if zero_positions:
        with torch.no_grad():
            model.embeddings.position_embeddings.weight.zero_()
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory

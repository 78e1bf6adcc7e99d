"""Incremental training: continue a saved tagger on new data that may bring new symbols.

New characters, labels and categorical feature values are appended to the vocabularies
(:meth:`Vocabulary.extend` never moves an existing index), and every layer whose size follows a
vocabulary grows to match: character and feature embeddings gain rows, the output layer gains
one row per new label and the CRF transition matrices a row and a column. The old weights are
copied into the leading block of each grown tensor and the new rows start from the builder's
usual initialisation; everything not tied to a vocabulary (the BiLSTM, a transformer encoder) is
copied as it is. So new characters or feature values alone change no prediction on data the old
model could read (their rows are only looked up by new symbols), while a new label takes part in
decoding at once and is learnt by the training that follows.
"""

from __future__ import annotations

import logging
from collections import Counter

import torch

from textorch.data.corpus import TokenSequence
from textorch.data.vocab import Vocabulary
from textorch.errors import ModelFormatError
from textorch.tagging.labeler import SequenceLabeler
from textorch.tagging.network import build_network

logger = logging.getLogger(__name__)


def _add_by_frequency(vocab: Vocabulary, counts: Counter) -> int:
    """Append unseen items, most frequent first (ties alphabetical), so the result is reproducible."""
    before = len(vocab)
    vocab.extend(item for item, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return len(vocab) - before


def extend_vocabularies(labeler: SequenceLabeler, sequences: list[TokenSequence]) -> dict[str, int]:
    """Append the characters, labels and feature values of ``sequences`` the model lacks.

    Returns how many items each vocabulary gained (``chars``, ``labels``, ``features``).
    """
    encoder = labeler.encoder
    chars, labels = Counter(), Counter()
    values: list[Counter] = [Counter() for _ in encoder.feature_columns]
    for sequence in sequences:
        for token in sequence.tokens:
            chars.update(token[: encoder.max_char_length])
        labels.update(sequence.labels or ())
        for token_features in sequence.features or ():
            for slot, column in enumerate(encoder.feature_columns):
                values[slot][token_features[column]] += 1
    added = {"chars": _add_by_frequency(encoder.chars, chars), "labels": _add_by_frequency(encoder.labels, labels)}
    added["features"] = sum(_add_by_frequency(vocab, counts) for vocab, counts in zip(encoder.features, values))
    return added


def _grown(new: torch.Tensor, old: torch.Tensor, key: str) -> torch.Tensor:
    """``new`` (freshly initialised, larger or equal) with ``old`` copied into its leading block."""
    if new.shape == old.shape:
        return old.clone()
    if new.dim() != old.dim() or any(n < o for n, o in zip(new.shape, old.shape)):
        raise ModelFormatError(f"cannot grow weight {key} from {tuple(old.shape)} to {tuple(new.shape)}")
    out = new.clone()
    out[tuple(slice(0, n) for n in old.shape)] = old.to(out.dtype)
    return out


def grow_network(labeler: SequenceLabeler, seed: int = 42) -> list[str]:
    """Rebuild the network for the (extended) vocabularies and copy the old weights in.

    Returns the names of the weights that grew. The network is rebuilt with the same builder
    call as at training and loading time, so a grown model saves and loads like any other.
    """
    old = labeler.model
    word_dim = labeler.embeddings.dim if labeler.embeddings is not None else 0
    # A transformer encoder is not tied to a vocabulary: the new network takes the module itself.
    shell = old.embedders[0].encoder if labeler.transformer is not None else None
    torch.manual_seed(seed)
    new = build_network(labeler.model_config, labeler.encoder, word_dim, labeler.transformer, shell)
    new_state, old_state = new.state_dict(), old.state_dict()
    missing = sorted(set(new_state) ^ set(old_state))
    if missing:
        raise ModelFormatError(f"the rebuilt network does not match the saved one (weights {missing[:3]})")
    grown = [key for key in new_state if new_state[key].shape != old_state[key].shape]
    new.load_state_dict({key: _grown(new_state[key], old_state[key].detach().cpu(), key) for key in new_state})
    new.to(labeler.device)
    new.eval()
    labeler.model = new
    return grown


def prepare_incremental(labeler: SequenceLabeler, sequences: list[TokenSequence], seed: int = 42) -> dict[str, int]:
    """Extend the vocabularies with ``sequences`` and grow the network when anything was added."""
    added = extend_vocabularies(labeler, sequences)
    if any(added.values()):
        grown = grow_network(labeler, seed)
        logger.info("incremental: %d new characters, %d new labels, %d new feature values; grown: %s",
                    added["chars"], added["labels"], added["features"], ", ".join(grown) or "none")
    else:
        logger.info("incremental: no new characters, labels or feature values")
    return added

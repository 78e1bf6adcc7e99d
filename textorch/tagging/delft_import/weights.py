"""DeLFT 1.x state dicts to textorch's parameter names, shapes and orders.

Both are PyTorch networks, so LSTM and GRU gate orders and the CRF's ``transitions[from, to]``
with separate start and end scores are the same on both sides; what changes is where each
tensor lives, the order of the labels (textorch puts ``O`` first), the order of the casing
classes, and the feature embedding, one table shared by all columns in DeLFT, one per column
in textorch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from textorch.errors import ModelFormatError

DELFT_CASING = ("<PAD>", "numeric", "allLower", "allUpper", "initialUpper", "other", "mainly_numeric", "contains_digit")
"""DeLFT's casing classes in index order (``delft.utilities.preprocess.case_index``)."""
CASING_FROM_DELFT = [0, 1, 6, 2, 3, 4, 7, 5]
"""For each of textorch's casing classes (``textorch.data.encoding.CASING_CLASSES``), the row
of DeLFT's casing embedding with the same rule: numeric, mostly numeric, lower, upper,
initial upper, has digit, other."""


@dataclass(frozen=True)
class Layout:
    """What the textorch network of an imported model is made of."""

    word_dim: int
    char_encoder: str  # "lstm" | "cnn"
    casing: bool
    features: bool
    recurrent: list[str]
    """DeLFT prefixes of the stacked word-level layers (``bilstm``, or ``bigru1`` and ``bigru2``)."""
    dense: str | None
    output: str


def crf_parameters(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Start, transition and end scores, held by pytorch-crf's layer (``crf.crf.*``) when DeLFT
    had it installed, else by DeLFT's fallback (``crf.*``)."""
    for prefix in ("crf.crf.", "crf."):
        if f"{prefix}transitions" in state:
            return {k: state[f"{prefix}{k}"] for k in ("transitions", "start_transitions", "end_transitions")}
    raise ModelFormatError("the DeLFT weights have no CRF transitions (crf.crf.transitions)")


def label_order(delft_tags: list[str]) -> list[int]:
    """DeLFT label indices in textorch's order: ``O`` first (textorch's neutral label 0), then
    the others as DeLFT numbered them, ``<PAD>`` included, since DeLFT may predict it."""
    first = [i for i, tag in enumerate(delft_tags) if tag == "O"]
    return first + [i for i, tag in enumerate(delft_tags) if tag != "O"]


def _copy_rnn(out: dict, target: str, state: dict, source: str, layer: int = 0) -> None:
    for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
        for suffix in ("", "_reverse"):
            out[f"{target}.{kind}_l{layer}{suffix}"] = state[f"{source}.{kind}_l0{suffix}"]


def _rows(tensor: torch.Tensor, order: list[int]) -> torch.Tensor:
    return tensor.index_select(0, torch.tensor(order, dtype=torch.long))


def map_state(
    state: dict[str, torch.Tensor],
    layout: Layout,
    labels: list[int],
    feature_rows: list[list[int]] | None = None,
) -> dict[str, torch.Tensor]:
    """textorch's state dict for DeLFT's ``state``; ``labels`` from :func:`label_order`,
    ``feature_rows`` the rows of DeLFT's shared feature table for each column's vocabulary."""
    out: dict[str, torch.Tensor] = {}
    slot = 1 if layout.word_dim else 0  # the word-vector embedder has no parameters
    chars = f"embedders.{slot}"
    out[f"{chars}.embedding.weight"] = state["char_encoder.char_embeddings.weight"]
    if layout.char_encoder == "cnn":
        out[f"{chars}.conv.weight"] = state["char_encoder.conv.weight"]
        out[f"{chars}.conv.bias"] = state["char_encoder.conv.bias"]
    else:
        _copy_rnn(out, f"{chars}.lstm", state, "char_encoder.bilstm")
    if layout.casing:
        slot += 1
        out[f"embedders.{slot}.embedding.weight"] = _rows(state["casing_embedding.weight"], CASING_FROM_DELFT)
    if layout.features:
        slot += 1
        table = state["features_embedding.weight"]
        for column, rows in enumerate(feature_rows or []):
            out[f"embedders.{slot}.embeddings.{column}.weight"] = _rows(table, rows)
        _copy_rnn(out, f"embedders.{slot}.lstm", state, "features_lstm")
    for layer, prefix in enumerate(layout.recurrent):
        _copy_rnn(out, "encoder.rnn", state, prefix, layer)
    if layout.dense is not None:
        out["head.emissions.0.weight"] = state[f"{layout.dense}.weight"]
        out["head.emissions.0.bias"] = state[f"{layout.dense}.bias"]
        last = "head.emissions.2"
    else:
        last = "head.emissions"
    out[f"{last}.weight"] = _rows(state[f"{layout.output}.weight"], labels)
    out[f"{last}.bias"] = _rows(state[f"{layout.output}.bias"], labels)
    if layout.output != "classifier":
        crf = crf_parameters(state)
        order = torch.tensor(labels, dtype=torch.long)
        out["head.crf.transitions"] = crf["transitions"][order][:, order]
        out["head.crf.start_transitions"] = crf["start_transitions"][order]
        out["head.crf.end_transitions"] = crf["end_transitions"][order]
    return {k: v.detach().to(torch.float32).contiguous() for k, v in out.items()}


def map_bert_state(state: dict[str, torch.Tensor], labels: list[int]) -> dict[str, torch.Tensor]:
    """textorch's state dict for DeLFT's BERT_CRF: the encoder under the transformer embedder
    (without its pooler, which tagging never reads and textorch drops), the linear layer as the
    emissions, the CRF as for the recurrent family."""
    out = {f"embedders.0.encoder.{k[len('transformer.'):]}": v for k, v in state.items()
           if k.startswith("transformer.") and not k.startswith("transformer.pooler.")}
    out["head.emissions.weight"] = _rows(state["linear.weight"], labels)
    out["head.emissions.bias"] = _rows(state["linear.bias"], labels)
    order = torch.tensor(labels, dtype=torch.long)
    crf = crf_parameters(state)
    out["head.crf.transitions"] = crf["transitions"][order][:, order]
    out["head.crf.start_transitions"] = crf["start_transitions"][order]
    out["head.crf.end_transitions"] = crf["end_transitions"][order]
    return {k: v.detach().to(torch.float32).contiguous() for k, v in out.items()}

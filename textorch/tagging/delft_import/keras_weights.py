"""Weights of DeLFT's TensorFlow line (<= 0.3, what GROBID ships as ``model_weights.hdf5``) as
the state dict a DeLFT 1.x network of the same architecture would hold.

The file comes from Keras' ``save_weights``: one HDF5 group per layer, layer names numbered by
Keras in creation order (``dense_1``, ``lstm_cell_5``...), so tensors are found by their role
and shape, not by name. What differs from PyTorch's layout:

* LSTM: ``kernel`` (in, 4u) and ``recurrent_kernel`` (u, 4u) are the transposes of
  ``weight_ih``/``weight_hh``; the gates come in the same order (input, forget, cell, output);
  Keras has one bias, so ``bias_hh`` is zero. The recurrent activation is Keras' default for the
  Keras versions DeLFT used (sigmoid), as in PyTorch.
* Dense: ``kernel`` (in, out) is the transpose of ``weight``.
* CRF (TensorFlow Addons): ``chain_kernel[i, j]`` scores tag ``i`` followed by ``j``, as
  ``transitions`` does; ``left_boundary``/``right_boundary`` are added to the first and last
  real positions, which is what start and end scores do.

h5py is an optional dependency (``pip install textorch[keras]``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from textorch.errors import ConfigError, ModelFormatError

SUPPORTED = ("BidLSTM_CRF", "BidLSTM_CRF_FEATURES")


def _datasets(path: Path) -> dict[str, np.ndarray]:
    try:
        import h5py
    except ImportError:
        raise ConfigError("reading a TensorFlow DeLFT model (model_weights.hdf5) needs h5py: "
                          "pip install 'textorch[keras]'") from None
    found: dict[str, np.ndarray] = {}
    with h5py.File(path, "r") as file:
        file.visititems(lambda name, obj: found.__setitem__(name, np.asarray(obj)) if isinstance(obj, h5py.Dataset) else None)
    return found


def _leaf(name: str) -> str:
    return name.rsplit("/", 1)[-1].split(":")[0]


def _bidirectional_lstms(tensors: dict[str, np.ndarray]) -> dict[str, dict[str, dict[str, np.ndarray]]]:
    """Keras Bidirectional LSTMs by their layer group: {group: {"forward"|"backward": {leaf: array}}}."""
    layers: dict[str, dict[str, dict[str, np.ndarray]]] = {}
    for name, array in tensors.items():
        parts = name.split("/")
        direction = next((p for p in parts if p.startswith(("forward_", "backward_"))), None)
        if direction is None:
            continue
        group = "/".join(parts[: parts.index(direction)])
        side = "forward" if direction.startswith("forward_") else "backward"
        layers.setdefault(group, {}).setdefault(side, {})[_leaf(name)] = array
    return layers


def _lstm_state(layer: dict[str, dict[str, np.ndarray]], prefix: str) -> dict[str, torch.Tensor]:
    out = {}
    for side, suffix in (("forward", ""), ("backward", "_reverse")):
        cell = layer[side]
        out[f"{prefix}.weight_ih_l0{suffix}"] = torch.from_numpy(cell["kernel"].T.copy())
        out[f"{prefix}.weight_hh_l0{suffix}"] = torch.from_numpy(cell["recurrent_kernel"].T.copy())
        out[f"{prefix}.bias_ih_l0{suffix}"] = torch.from_numpy(cell["bias"].copy())
        out[f"{prefix}.bias_hh_l0{suffix}"] = torch.zeros_like(out[f"{prefix}.bias_ih_l0{suffix}"])
    return out


def _one(candidates: list[str], what: str) -> str:
    if len(candidates) != 1:
        raise ModelFormatError(f"model_weights.hdf5: expected one {what}, found {len(candidates)}: {candidates}")
    return candidates[0]


def read_keras_state(path: Path, config: dict) -> dict[str, torch.Tensor]:
    """DeLFT 1.x tensor names -> tensors, for the Keras weights of a ``BidLSTM_CRF`` or
    ``BidLSTM_CRF_FEATURES`` model; other architectures of the TensorFlow line are refused."""
    architecture = str(config.get("architecture"))
    if architecture not in SUPPORTED:
        raise ConfigError(f"cannot import DeLFT TensorFlow architecture {architecture!r} (model_weights.hdf5): "
                          f"importable from that line: {', '.join(SUPPORTED)}")
    tensors = _datasets(path)
    crf = {_leaf(n): a for n, a in tensors.items() if n.startswith("crf/")}
    base = {n: a for n, a in tensors.items() if not n.startswith("crf/")}
    lstms = _bidirectional_lstms(base)
    features = [g for g in lstms if "features" in g]
    words = _one([g for g in lstms if g.rsplit("/", 1)[-1].startswith("bidirectional")], "word-level BiLSTM")
    chars = _one([g for g in lstms if g not in features and g != words], "character BiLSTM")
    embeddings = [n for n in base if _leaf(n) == "embeddings"]
    feature_tables = [n for n in embeddings if "features" in n]
    char_table = _one([n for n in embeddings if n not in feature_tables], "character embedding")
    dense = _one(sorted({n.rsplit("/", 1)[0] for n in base if n.split("/")[-2].startswith("dense")}), "dense layer")
    state = {"char_encoder.char_embeddings.weight": torch.from_numpy(base[char_table].copy())}
    state.update(_lstm_state(lstms[chars], "char_encoder.bilstm"))
    state.update(_lstm_state(lstms[words], "bilstm"))
    state["dense.weight"] = torch.from_numpy(base[f"{dense}/kernel:0"].T.copy())
    state["dense.bias"] = torch.from_numpy(base[f"{dense}/bias:0"].copy())
    output = "linear"
    if architecture == "BidLSTM_CRF_FEATURES":
        state["features_embedding.weight"] = torch.from_numpy(base[_one(feature_tables, "feature embedding")].copy())
        state.update(_lstm_state(lstms[_one(features, "feature BiLSTM")], "features_lstm"))
        output = "dense2"
    missing = {"kernel", "bias", "chain_kernel", "left_boundary", "right_boundary"} - set(crf)
    if missing:
        raise ModelFormatError(f"model_weights.hdf5: the CRF layer lacks {sorted(missing)}")
    state[f"{output}.weight"] = torch.from_numpy(crf["kernel"].T.copy())
    state[f"{output}.bias"] = torch.from_numpy(crf["bias"].copy())
    state["crf.crf.transitions"] = torch.from_numpy(crf["chain_kernel"].copy())
    state["crf.crf.start_transitions"] = torch.from_numpy(crf["left_boundary"].copy())
    state["crf.crf.end_transitions"] = torch.from_numpy(crf["right_boundary"].copy())
    return state

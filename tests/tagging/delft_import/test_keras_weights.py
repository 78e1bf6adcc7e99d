"""DeLFT TensorFlow-line weights (``model_weights.hdf5``, Keras layout as GROBID ships them) read
into textorch: the 1.2.0 fixtures written in Keras' layout import to the same labels.

What Keras itself computes with such a file is checked by ``benchmarks/parity/verify_keras_import.py``
(it needs TensorFlow); here the layout is: names, transposes, single biases, CRF boundaries."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from test_importer import (
    EXPECTED,
    FIXTURES,
    assert_refused_by_name,
    delft_state,
    labels_of,
)
from textorch.tagging.delft_import.importer import convert_delft_model
from textorch.tagging.labeler import SequenceLabeler

h5py = pytest.importorskip("h5py")


def write_keras_lstm(file, group: str, state: dict, prefix: str, cells: tuple[int, int]) -> None:
    for side, suffix, cell in (("forward_lstm", "", cells[0]), ("backward_lstm", "_reverse", cells[1])):
        where = f"{group}/{side}_{cell}/lstm_cell_{cell}"
        file[f"{where}/kernel:0"] = state[f"{prefix}.weight_ih_l0{suffix}"].T.numpy()
        file[f"{where}/recurrent_kernel:0"] = state[f"{prefix}.weight_hh_l0{suffix}"].T.numpy()
        file[f"{where}/bias:0"] = (state[f"{prefix}.bias_ih_l0{suffix}"] + state[f"{prefix}.bias_hh_l0{suffix}"]).numpy()


def keras_dir(tmp_path, architecture: str):
    """The fixture as DeLFT 0.3 would have saved it: config, preprocessor, model_weights.hdf5."""
    target = tmp_path / f"keras-{architecture}"
    target.mkdir()
    for name in ("config.json", "preprocessor.json"):
        shutil.copy(FIXTURES / architecture / name, target / name)
    state = delft_state(architecture)
    output = "dense2" if architecture.endswith("FEATURES") else "linear"
    with h5py.File(target / "model_weights.hdf5", "w") as file:
        file.attrs["layer_names"] = [b"crf", b"model"]
        file["model/time_distributed/embeddings:0"] = state["char_encoder.char_embeddings.weight"].numpy()
        write_keras_lstm(file, "model/time_distributed_1", state, "char_encoder.bilstm", (1, 2))
        write_keras_lstm(file, "model/bidirectional_1", state, "bilstm", (7, 8))
        if output == "dense2":
            file["model/features_embedding_td/embeddings:0"] = state["features_embedding.weight"].numpy()
            write_keras_lstm(file, "model/features_embedding_td_2", state, "features_lstm", (4, 5))
        file["model/dense/kernel:0"] = state["dense.weight"].T.numpy()
        file["model/dense/bias:0"] = state["dense.bias"].numpy()
        file["crf/crf/dense_1/kernel:0"] = state[f"{output}.weight"].T.numpy()
        file["crf/crf/dense_1/bias:0"] = state[f"{output}.bias"].numpy()
        file["crf/chain_kernel:0"] = state["crf.crf.transitions"].numpy()
        file["crf/left_boundary:0"] = state["crf.crf.start_transitions"].numpy()
        file["crf/right_boundary:0"] = state["crf.crf.end_transitions"].numpy()
    return target


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTORCH_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("architecture", ["BidLSTM_CRF", "BidLSTM_CRF_FEATURES"])
def test_keras_weights_import_to_delft_labels(tmp_path, architecture):
    out = convert_delft_model(keras_dir(tmp_path, architecture), tmp_path / "imported", FIXTURES / "vectors.txt")
    assert labels_of(SequenceLabeler.load(out)) == EXPECTED["labels"][architecture]


def test_keras_bias_is_read_as_one_bias(tmp_path):
    from textorch.tagging.delft_import.keras_weights import read_keras_state

    source = keras_dir(tmp_path, "BidLSTM_CRF")
    state = read_keras_state(source / "model_weights.hdf5", json.loads((source / "config.json").read_text()))
    assert torch.count_nonzero(state["bilstm.bias_hh_l0"]) == 0
    assert state["crf.crf.start_transitions"].shape == state["crf.crf.end_transitions"].shape


def test_other_keras_architectures_are_refused_by_name(tmp_path):
    assert_refused_by_name(keras_dir(tmp_path, "BidLSTM_CRF"), "BidGRU_CRF", tmp_path / "imported")

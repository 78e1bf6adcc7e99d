"""Every embedder of every architecture answers the export and one-sequence routes itself
(models/embedders.Embedder).

Neither the ONNX export nor the one-sequence route asks an embedder's type: they call its
``export_form`` and ``one_sequence_vectors``. These tests hold each built embedder to that: it
is an ``Embedder``; where it has an export form, that form computes ``forward``'s output from its
graph inputs; where it serves one-sequence calls, its vectors are ``forward``'s exactly.
"""

from __future__ import annotations

import pytest
import torch

from test_architectures import DELFT_NAMES, SMALL
from textorch.data.corpus import Corpus
from textorch.errors import ConfigError
from textorch.models.architecture_table import get_architecture
from textorch.models.embedders import Embedder, rows_encoder
from textorch.tagging.config import DataConfig, ModelConfig
from textorch.tagging.labeler import SequenceLabeler

RECURRENT = [name for name in DELFT_NAMES if not get_architecture(name).uses_transformer]


@pytest.mark.parametrize("name", RECURRENT)
def test_each_embedder_has_its_export_form_or_refuses_by_name(name: str, corpus: Corpus) -> None:
    labeler = SequenceLabeler.build(corpus, ModelConfig(architecture=name, **SMALL), DataConfig(), seed=1)
    labeler.model.eval()
    sequence = corpus.sequences[0]
    data = labeler.encode([sequence])
    batch = data.batch([0])
    with torch.inference_mode():
        for embedder in labeler.model.embedders:
            assert isinstance(embedder, Embedder), type(embedder).__name__
            expected = embedder(batch)[0]  # (T, D) of the batch of one
            try:
                form = embedder.export_form()
            except ConfigError:
                continue
            inputs = [_graph_input(batch, name) for name in embedder.graph_inputs]
            assert torch.allclose(form(*inputs)[0], expected, atol=1e-6), type(embedder).__name__


@pytest.mark.parametrize("name", RECURRENT)
def test_each_one_sequence_form_gives_forwards_output_exactly(name: str, corpus: Corpus) -> None:
    labeler = SequenceLabeler.build(corpus, ModelConfig(architecture=name, **SMALL), DataConfig(), seed=1)
    labeler.model.eval()
    data = labeler.encode([corpus.sequences[0]])
    with torch.inference_mode():
        token_vectors = data.token_vectors(rows_encoder(labeler.model), "cpu")
        batch = data.batch([0], token_vectors)
        for embedder in labeler.model.embedders:
            vectors = embedder.one_sequence_vectors(data.encoded[0], data.word_table, token_vectors)
            assert (vectors is not None) == embedder.serves_one_sequence, type(embedder).__name__
            if vectors is not None:
                assert torch.equal(vectors, embedder(batch)[0]), type(embedder).__name__


def _graph_input(batch, name: str) -> torch.Tensor:
    """The batch tensor an ONNX graph input of that name is fed from."""
    return {"word_vectors": batch.word_vectors, "char_ids": batch.char_ids, "casing_ids": batch.casing_ids,
            "feature_ids": batch.feature_ids}[name]


def test_an_embedder_without_an_export_form_is_refused_by_name() -> None:
    class Unknown(Embedder):
        pass

    with pytest.raises(ConfigError, match="does not know the embedder Unknown"):
        Unknown().export_form()


def test_delfts_feature_bilstm_has_its_export_form(corpus: Corpus) -> None:
    """``feature_encoder="lstm"`` (DeLFT's feature channel, kept by imported _FEATURES models)."""
    config = ModelConfig(architecture="BidLSTM_CRF_FEATURES", feature_encoder="lstm", **SMALL)
    labeler = SequenceLabeler.build(corpus, config, DataConfig(), seed=1)
    labeler.model.eval()
    batch = labeler.encode(corpus.sequences[:3]).batch([0, 1, 2])
    embedder = labeler.model.embedders[-1]
    assert type(embedder).__name__ == "FeatureLSTMEmbedder"
    with torch.inference_mode():
        form = embedder.export_form()
        assert torch.allclose(form(batch.feature_ids), embedder(batch), atol=1e-6)

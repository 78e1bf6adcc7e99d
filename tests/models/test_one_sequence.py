"""One-sequence calls through ``OneSequenceTagger``: bit for bit the batch route's labels and
scores on every BiLSTM-CRF family architecture, and the batch path wherever the shortcut has
any doubt (other architectures, autocast, empty input)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from textorch.tagging.config import DataConfig, ModelConfig
from textorch.data.corpus import Corpus, TokenSequence
from textorch.embeddings import open_embeddings
from textorch.tagging.labeler import Prediction, SequenceLabeler
from textorch.models.embedders import WordVectorEmbedder, rows_encoder
from textorch.models.encoders import IdentityEncoder
from textorch.models.heads import CRFHead
from textorch.models import padded_rnn
from textorch.models.cpu_routes import FAST
from textorch.models.one_sequence import OneSequenceTagger, time_major_layers
from textorch.models.onednn_lstm import laid_out_lstm_available
from textorch.models.tagger import SequenceTagger

SMALL = dict(char_dim=8, char_hidden=8, word_hidden=16, feature_dim=3, feature_output_dim=8, dense_hidden=12)
SERVED = ["BidLSTM_CRF", "BidLSTM_CNN_CRF", "BidLSTM_CRF_CASING", "BidLSTM_CRF_FEATURES"]


@pytest.fixture(scope="module")
def vectors(tmp_path_factory: pytest.TempPathFactory, corpus: Corpus) -> str:
    """Vectors for half the corpus's words: the other half take the unknown word's row."""
    words = sorted({t for s in corpus.sequences for t in s.tokens})[::2]
    rng = np.random.default_rng(3)
    path = tmp_path_factory.mktemp("vectors") / "vectors.txt"
    path.write_text("".join(f"{w} " + " ".join(f"{v:.4f}" for v in rng.normal(size=6)) + "\n" for w in words))
    return str(path)


def _labeler(name: str, corpus: Corpus, vectors: str, tmp_path: Path) -> SequenceLabeler:
    embeddings = open_embeddings(vectors, cache_dir=str(tmp_path / "cache"))
    return SequenceLabeler.build(corpus, ModelConfig(architecture=name, **SMALL), DataConfig(embeddings=vectors),
                                 embeddings, seed=1)


def _sequences(corpus: Corpus) -> list[TokenSequence]:
    """The corpus's sequences with their feature columns, then new tokens and a one-token one."""
    extra = [TokenSequence(["Jan", "1999", "☃", "never-seen"]), TokenSequence(["7"])]
    if corpus.sequences[0].features is not None:
        width = len(corpus.sequences[0].features[0])
        extra = [TokenSequence(s.tokens, features=[["x"] * width for _ in s.tokens]) for s in extra]
    return list(corpus.sequences) + extra


def _count_served(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each call's ``OneSequenceTagger.decode`` gave an answer (else the batch path ran)."""
    served: list[bool] = []
    decode = OneSequenceTagger.decode

    def counted(self, *args, **kwargs):
        result = decode(self, *args, **kwargs)
        served.append(result is not None)
        return result

    monkeypatch.setattr(OneSequenceTagger, "decode", counted)
    return served


def _one_by_one(labeler: SequenceLabeler, sequences: list[TokenSequence], with_scores: bool = True) -> list[Prediction]:
    labeler.token_vector_cache.clear()  # new tokens first, then tokens seen before
    return [labeler.predict([s], batch_size=1, with_scores=with_scores)[0] for s in sequences + sequences[:3]]


def _through_batch_path(labeler: SequenceLabeler, sequences: list[TokenSequence], monkeypatch: pytest.MonkeyPatch,
                        with_scores: bool = True) -> list[Prediction]:
    """The same calls with the route switched off (``CpuRoutes.one_sequence``): the batch route."""
    served = _count_served(monkeypatch)
    labeler.routes = FAST.without("one_sequence")
    try:
        return _one_by_one(labeler, sequences, with_scores)
    finally:
        labeler.routes = FAST
        assert served == []


@pytest.mark.parametrize("name", SERVED)
def test_one_sequence_calls_equal_the_batch_path_bit_for_bit(
    name: str, corpus: Corpus, vectors: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    labeler = _labeler(name, corpus, vectors, tmp_path)
    sequences = _sequences(corpus)
    served = _count_served(monkeypatch)
    for with_scores in (True, False):
        served.clear()
        fast = _one_by_one(labeler, sequences, with_scores)
        assert served == [True] * (len(sequences) + 3)
        batch = _through_batch_path(labeler, sequences, monkeypatch, with_scores)
        assert [p.labels for p in fast] == [p.labels for p in batch]
        assert [p.scores for p in fast] == [p.scores for p in batch]  # exactly: the same operators on the same values
        assert len({tuple(p.labels) for p in fast}) > 1  # not one constant answer
        assert all(p.scores is None for p in fast) is (not with_scores)


def test_weights_changed_in_place_are_the_ones_used(
    corpus: Corpus, vectors: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The LSTM's laid-out weights are made again after a change (as on the batch path)."""
    labeler = _labeler("BidLSTM_CRF", corpus, vectors, tmp_path)
    sequences = _sequences(corpus)
    before = _one_by_one(labeler, sequences)
    with torch.no_grad():
        labeler.model.encoder.rnn.weight_hh_l0_reverse.mul_(-3.0)
        labeler.model.head.crf.transitions.add_(torch.randn(labeler.model.head.crf.transitions.shape))
    after = _one_by_one(labeler, sequences)
    assert [p.scores for p in after] != [p.scores for p in before]
    assert [p.scores for p in after] == [p.scores for p in _through_batch_path(labeler, sequences, monkeypatch)]


@pytest.mark.parametrize("name", ["BidGRU_CRF", "BidLSTM", "BidLSTM_CNN"])
def test_other_architectures_keep_the_batch_path(name: str, corpus: Corpus, vectors: str, tmp_path: Path) -> None:
    model = _labeler(name, corpus, vectors, tmp_path).model
    assert OneSequenceTagger.of(model, rows_encoder(model)) is None


def test_a_transformer_tagger_keeps_the_batch_path() -> None:
    model = SequenceTagger(nn.ModuleList([WordVectorEmbedder(4)]), IdentityEncoder(4), CRFHead(4, 3), 0.0)
    assert OneSequenceTagger.of(model, None) is None


def test_calls_under_autocast_and_empty_ones_take_the_batch_path(
    corpus: Corpus, vectors: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    labeler = _labeler("BidLSTM_CRF", corpus, vectors, tmp_path)
    sequences = _sequences(corpus)[:4]
    served = _count_served(monkeypatch)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # a caller's own autocast: the LSTM would not run in fp32
        inside = _one_by_one(labeler, sequences)
        assert served and not any(served)
        assert [p.labels for p in inside] == [p.labels for p in _through_batch_path(labeler, sequences, monkeypatch)]
    served.clear()
    assert labeler.predict([TokenSequence([])]) == [Prediction([], [])]
    assert served == []


def test_a_features_model_tags_text_without_feature_columns_as_the_batch_path_does(
    corpus: Corpus, vectors: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Plain text given to a ``_FEATURES`` model (no columns: the feature vocabularies' unknown
    ids) takes the one-sequence path and answers as the batch path."""
    labeler = _labeler("BidLSTM_CRF_FEATURES", corpus, vectors, tmp_path)
    plain = [TokenSequence(s.tokens) for s in corpus.sequences[:5]] + [TokenSequence(["Jan", "1999"])]
    served = _count_served(monkeypatch)
    fast = _one_by_one(labeler, plain)
    assert served == [True] * (len(plain) + 3)
    batch = _through_batch_path(labeler, plain, monkeypatch)
    assert [(p.labels, p.scores) for p in fast] == [(p.labels, p.scores) for p in batch]


@pytest.mark.skipif(not laid_out_lstm_available(), reason="this torch build cannot lay out LSTM weights")
@pytest.mark.parametrize("layers", [1, 2])
def test_time_major_layers_equal_the_batch_first_outputs_of_one_row(layers: int) -> None:
    """The route's BiLSTM (no padding: the backward direction by a flip), one or two layers."""
    torch.manual_seed(3)
    rnn = nn.LSTM(6, 5, num_layers=layers, batch_first=True, bidirectional=True).eval()
    x = torch.randn(1, 9, 6, generator=torch.Generator().manual_seed(layers))
    with torch.inference_mode():
        got = time_major_layers(rnn, x.transpose(0, 1))
        expected = padded_rnn.rnn_outputs(rnn, x, torch.tensor([9]))
    assert got.shape == (9, 1, 10)
    assert torch.equal(got.transpose(0, 1), expected)

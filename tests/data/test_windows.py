"""Sub-token alignment and overlapping encoder windows: planning, merging, long sequences.

The merging test uses a sequence of more than three times the encoder's limit. Equality with
tagging in one large window is asserted for an encoder that is position-agnostic and context-free
(no attention layer, zero position embeddings), the only case where it must hold exactly; for
an attentive encoder the test checks instead that each word's vector is the one its chosen
window produces when encoded on its own.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import write_tiny_grobid
from tiny_transformer import write_tiny_bert
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig
from textorch.data.corpus import Corpus, TokenSequence
from textorch.data.readers import read_labelled
from textorch.data.subwords import SpecialTokens, WindowedBatch, align_words, plan_windows, window_starts
from textorch.errors import ConfigError
from textorch.tagging.labeler import SequenceLabeler

LIMIT = 16


def test_window_starts_examples() -> None:
    assert window_starts(5, 6, 3) == [0]
    assert window_starts(12, 6, 3) == [0, 3, 6]
    assert window_starts(13, 6, 4) == [0, 4, 7]  # the last window is flush with the end


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 150), content=st.integers(1, 30), data=st.data())
def test_windows_cover_every_subtoken_within_the_limit(n: int, content: int, data: st.DataObject) -> None:
    stride = data.draw(st.integers(1, content))
    starts = window_starts(n, content, stride)
    assert starts == sorted(set(starts)) and starts[0] == 0
    covered: set[int] = set()
    for start in starts:
        end = min(start + content, n)
        assert 0 < end - start <= content
        covered.update(range(start, end))
    assert covered == set(range(n))


def test_plan_example_picks_the_most_central_window() -> None:
    plan = plan_windows(12, np.arange(12), content=6, stride=3)
    assert plan.starts.tolist() == [0, 3, 6]
    assert plan.word_window.tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2]
    assert plan.word_offset.tolist() == [0, 1, 2, 3, 4, 2, 3, 4, 2, 3, 4, 5]


@settings(max_examples=200, deadline=None)
@given(pieces=st.lists(st.integers(1, 4), min_size=1, max_size=60), content=st.integers(1, 20), data=st.data())
def test_every_word_gets_exactly_one_window_with_the_most_context(
    pieces: list[int], content: int, data: st.DataObject
) -> None:
    stride = data.draw(st.integers(1, content))
    word_starts = np.concatenate([[0], np.cumsum(pieces)[:-1]])
    n = int(sum(pieces))
    plan = plan_windows(n, word_starts, content, stride)
    assert plan.word_window.shape == (len(pieces),)
    for word, p in enumerate(word_starts.tolist()):
        contexts = []
        for start, end in zip(plan.starts.tolist(), plan.ends.tolist()):
            if start <= p < end:
                left = p - start if start > 0 else n
                right = end - 1 - p if end < n else n
                contexts.append(min(left, right))
            else:
                contexts.append(-1)
        chosen = int(plan.word_window[word])
        assert contexts[chosen] == max(contexts) >= 0
        assert chosen == contexts.index(max(contexts))  # earliest window on ties
        assert plan.word_offset[word] == p - plan.starts[chosen]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    return read_labelled(write_tiny_grobid(tmp_path_factory.mktemp("data") / "date.train", n=20))


def _words(corpus: Corpus) -> list[str]:
    return [t for s in corpus.sequences for t in s.tokens] + ["John", "john"]


def test_alignment_keeps_the_tokenizers_own_casing(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    cased = AutoTokenizer.from_pretrained(write_tiny_bert(tmp_path / "cased", ["John", "john"], cased=True))
    uncased = AutoTokenizer.from_pretrained(write_tiny_bert(tmp_path / "uncased", ["john"], cased=False))
    words = ["John", "john", "Johnx", "\u200b"]
    (c,) = align_words(cased, [words], SpecialTokens.of(cased).unk_id)
    (u,) = align_words(uncased, [words], SpecialTokens.of(uncased).unk_id)
    as_tokens = cased.convert_ids_to_tokens(c.ids.tolist())
    assert as_tokens == ["John", "john", "John", "##x", "[UNK]"]  # zero-width space: no piece, so [UNK]
    assert c.word_starts.tolist() == [0, 1, 2, 4]
    assert uncased.convert_ids_to_tokens(u.ids[:2].tolist()) == ["john", "john"]


def test_window_option_that_leaves_no_text_is_an_error(corpus: Corpus, tmp_path: Path) -> None:
    bert = write_tiny_bert(tmp_path / "bert", _words(corpus), max_positions=LIMIT)
    config = ModelConfig(architecture="BERT_CRF", transformer=str(bert), transformer_window=2)
    with pytest.raises(ConfigError, match="no room for text"):
        SequenceLabeler.build(corpus, config, DataConfig())
    config = replace(config, transformer_window=8, transformer_stride=7)
    with pytest.raises(ConfigError, match="between 1 and 6"):
        SequenceLabeler.build(corpus, config, DataConfig())


def _long(corpus: Corpus, n: int, first: int = 0) -> TokenSequence:
    """Consecutive training sequences glued into one, labels and features included."""
    parts = corpus.sequences[first : first + n]
    return TokenSequence(
        tokens=[t for s in parts for t in s.tokens],
        labels=[t for s in parts for t in s.labels],
        features=[f for s in parts for f in s.features],
    )


def test_train_and_tag_sequences_three_times_longer_than_the_encoder(corpus: Corpus, tmp_path: Path) -> None:
    bert = write_tiny_bert(tmp_path / "bert", _words(corpus), max_positions=LIMIT)
    long_train = [_long(corpus, 16), _long(corpus, 15, first=5)]
    train = replace(corpus, sequences=long_train + corpus.sequences)
    labeler = SequenceLabeler.build(train, ModelConfig(architecture="BERT_CRF", transformer=str(bert)), DataConfig(), seed=2)
    assert (labeler.transformer.window, labeler.transformer.stride) == (LIMIT, 7)
    data = labeler.encode(long_train)
    assert all(len(sub) >= 3 * LIMIT for sub in data.windows.subwords)
    batch = data.batch([0, 1])
    assert isinstance(batch, WindowedBatch)
    assert batch.window_ids.shape[1] <= LIMIT and batch.window_ids.shape[0] >= 2 * 4
    # Position embeddings have LIMIT rows: a longer window would fail with an index error.
    result = labeler.fit(train, None, TrainConfig(max_epoch=3, batch_size=4, learning_rate=0.01,
                                                  transformer_learning_rate=0.001, early_stop=False, seed=2))
    assert result.history[-1].loss < result.history[0].loss
    long_test = _long(corpus, 16)
    (prediction,) = labeler.predict([long_test])
    assert len(prediction.labels) == len(prediction.scores) == len(long_test)
    assert all(0.0 < s <= 1.0 for s in prediction.scores)


def test_each_word_vector_comes_from_its_chosen_window_alone(corpus: Corpus, tmp_path: Path) -> None:
    bert = write_tiny_bert(tmp_path / "bert", _words(corpus), max_positions=LIMIT, layers=2, seed=3)
    labeler = SequenceLabeler.build(corpus, ModelConfig(architecture="BERT", transformer=str(bert)), DataConfig())
    labeler.model.eval()
    sequences = [_long(corpus, 14), corpus.sequences[7]]  # two lengths: windows are padded
    data = labeler.encode(sequences)
    batch = data.batch([0, 1])
    embedder = labeler.model.embedders[0]
    with torch.no_grad():
        merged = embedder(batch)  # (B, L, H)
        width = batch.window_ids.shape[1]
        for row in range(2):
            for word in range(len(sequences[row])):
                window, position = divmod(int(batch.word_index[row, word]), width)
                ids = batch.window_ids[window][batch.window_mask[window].bool()]
                alone = embedder.encoder(input_ids=ids[None]).last_hidden_state[0, position]
                assert torch.allclose(merged[row, word], alone, atol=1e-5)
                sub = data.windows.subwords[row]
                assert ids[position] == sub.ids[sub.word_starts[word]]  # the word's first sub-token


def test_windows_equal_one_large_window_for_a_position_agnostic_encoder(corpus: Corpus, tmp_path: Path) -> None:
    bert = write_tiny_bert(tmp_path / "bert", _words(corpus), max_positions=256, layers=0, zero_positions=True)
    config = ModelConfig(architecture="BERT_CRF_FEATURES", transformer=str(bert), transformer_window=LIMIT,
                         feature_dim=3, feature_output_dim=8)
    labeler = SequenceLabeler.build(corpus, config, DataConfig(), seed=4)
    positions = labeler.model.embedders[0].encoder.embeddings.position_embeddings.weight
    positions.requires_grad_(False)  # fine-tuning must not make the encoder position-aware
    labeler.fit(corpus, None, TrainConfig(max_epoch=2, batch_size=4, learning_rate=0.01,
                                          transformer_learning_rate=0.01, early_stop=False, seed=4))
    assert not positions.any()
    long_test = [_long(corpus, 16), _long(corpus, 18)]
    windowed = labeler.predict(long_test)
    assert labeler.encode(long_test).batch([0]).window_ids.shape[0] >= 4
    labeler.transformer = replace(labeler.transformer, window=256, stride=127)
    assert labeler.encode(long_test).batch([0]).window_ids.shape[0] == 1
    whole = labeler.predict(long_test)
    assert [p.labels for p in windowed] == [p.labels for p in whole]
    assert np.allclose([s for p in windowed for s in p.scores], [s for p in whole for s in p.scores], atol=1e-6)


def test_position_embeddings_make_windows_differ(corpus: Corpus, tmp_path: Path) -> None:
    """The control for the equality above: with positions, windowed vectors do change."""
    bert = write_tiny_bert(tmp_path / "bert", _words(corpus), max_positions=256, layers=0)
    config = ModelConfig(architecture="BERT", transformer=str(bert), transformer_window=LIMIT)
    labeler = SequenceLabeler.build(corpus, config, DataConfig())
    labeler.model.eval()
    long_test = [_long(corpus, 16)]
    with torch.no_grad():
        windowed = labeler.model.embedders[0](labeler.encode(long_test).batch([0]))
        labeler.transformer = replace(labeler.transformer, window=256, stride=127)
        whole = labeler.model.embedders[0](labeler.encode(long_test).batch([0]))
    assert windowed.shape == whole.shape
    assert not torch.allclose(windowed, whole, atol=1e-3)


def test_windows_of_similar_length_run_together_with_the_same_outputs(corpus: Corpus, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """At inference the encoder runs groups of windows of similar length, each cut to its own
    longest (``TransformerEmbedder.windows``); every real position must get what the one padded
    call gives. Training keeps the one call."""
    from textorch.models import costs
    from textorch.models.costs import GroupCosts

    bert = write_tiny_bert(tmp_path / "bert", _words(corpus), max_positions=LIMIT, layers=2, seed=5)
    labeler = SequenceLabeler.build(corpus, ModelConfig(architecture="BERT", transformer=str(bert)), DataConfig())
    labeler.model.eval()
    sequences = [_long(corpus, 14), corpus.sequences[7], corpus.sequences[3], _long(corpus, 3)]
    batch = labeler.encode(sequences).batch([0, 1, 2, 3])
    embedder = labeler.model.embedders[0]
    lengths = batch.window_mask.sum(dim=1)
    assert int(lengths.min()) < int(lengths.max())  # something to group
    calls: list[tuple[int, int]] = []
    encoder_forward = embedder.encoder.forward

    def counted(*args, **kwargs):
        calls.append(tuple(kwargs["input_ids"].shape))
        return encoder_forward(*args, **kwargs)

    monkeypatch.setattr(embedder.encoder, "forward", counted)
    with torch.no_grad():
        monkeypatch.setattr(costs, "WINDOW_GROUP_COSTS", GroupCosts(1.0, 1.0, max_groups=1))
        one_call = embedder.windows(batch.window_ids, batch.window_mask)
        assert calls == [tuple(batch.window_ids.shape)]
        monkeypatch.setattr(costs, "WINDOW_GROUP_COSTS", GroupCosts(0.0, 0.0, max_groups=4))
        grouped = embedder.windows(batch.window_ids, batch.window_mask)
    assert len(calls) > 2 and max(width for _, width in calls[1:]) == batch.window_ids.shape[1]
    assert min(width for _, width in calls[1:]) < batch.window_ids.shape[1]  # shorter groups, shorter calls
    real = batch.window_mask.bool()
    assert grouped.shape == one_call.shape
    assert torch.allclose(grouped[real], one_call[real], atol=1e-5)
    calls.clear()
    embedder.windows(batch.window_ids, batch.window_mask).sum().backward()  # with gradients: one call
    assert calls == [tuple(batch.window_ids.shape)]

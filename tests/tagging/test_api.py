"""The Python API that mirrors the CLI: train, evaluate, tag, save, load (tiny models)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from textorch import SequenceLabeler, train_sequence_labeler
from textorch.data.readers import read_labelled
from textorch.errors import ConfigError, DataError

from conftest import write_tiny_conll, write_tiny_grobid

SMALL = dict(char_dim=8, char_hidden=8, word_hidden=16, feature_dim=3, feature_output_dim=8, dropout=0.1)
FAST = dict(max_epoch=8, batch_size=8, learning_rate=0.01, seed=1, early_stop=False, **SMALL)

DATE_TOKENS = [["June", "june", "LINESTART", "INITCAP", "NOPUNCT"], ["12", "12", "LINEIN", "NOCAPS", "NOPUNCT"],
               [",", ",", "LINEIN", "ALLCAP", "COMMA"], ["2005", "2005", "LINEEND", "NOCAPS", "NOPUNCT"]]



@pytest.fixture(scope="module")
def ner(tmp_path_factory: pytest.TempPathFactory) -> tuple[SequenceLabeler, Path, Path]:
    """A tiny NER model trained from a file path and saved, as ``seq train`` would."""
    root = tmp_path_factory.mktemp("api-ner")
    data = write_tiny_conll(root / "tiny.conll")
    labeler = train_sequence_labeler(str(data), output=root / "model", **FAST)
    return labeler, data, root / "model"


@pytest.fixture(scope="module")
def dates(tmp_path_factory: pytest.TempPathFactory) -> SequenceLabeler:
    """A tiny GROBID model with a feature channel, trained from an in-memory corpus."""
    root = tmp_path_factory.mktemp("api-date")
    corpus = read_labelled(write_tiny_grobid(root / "date.train"))
    return train_sequence_labeler(corpus, architecture="BidLSTM_CRF_FEATURES", **FAST)


def test_train_from_path_saves_and_load_tags_the_same(ner: tuple[SequenceLabeler, Path, Path]) -> None:
    labeler, data, model_dir = ner
    assert sorted(p.name for p in model_dir.iterdir()) == ["config.json", "history.csv", "history.json", "learning-curves.png", "model.safetensors", "vocab.json"]
    assert len(labeler.training_result.history) == 8
    loaded = SequenceLabeler.load(model_dir)
    texts = ["Mary lives in Rome.", "Peter lives in Berlin .", ""]
    first, second = labeler.tag(texts, model_name="ner"), loaded.tag(texts, model_name="ner")
    assert first["texts"] == second["texts"]
    assert first["model"] == "ner" and set(first) == {"software", "version", "model", "date", "runtime", "texts"}


def test_evaluate_accepts_a_path_or_a_corpus(ner: tuple[SequenceLabeler, Path, Path]) -> None:
    labeler, data, _ = ner
    from_path = labeler.evaluate(data)
    assert from_path == labeler.evaluate(str(data)) == labeler.evaluate(read_labelled(data))
    assert from_path["f1"] > 0.9 and set(from_path["per_label"]) == {"PER", "LOC"}


def test_tag_texts_gives_character_offsets(ner: tuple[SequenceLabeler, Path, Path]) -> None:
    labeler, _, _ = ner
    text = "Anna lives in Madrid ."
    (record,) = labeler.tag([text])["texts"]
    assert record["text"] == text
    found = {(e["class"], e["text"]) for e in record["entities"]}
    assert found == {("PER", "Anna"), ("LOC", "Madrid")}
    for entity in record["entities"]:
        assert text[entity["beginOffset"]:entity["endOffset"]] == entity["text"]
        assert 0.0 < entity["score"] <= 1.0
    assert "labels" not in record


def test_tag_token_lists_gives_token_offsets_and_labels(ner: tuple[SequenceLabeler, Path, Path]) -> None:
    labeler, _, _ = ner
    (record,) = labeler.tag([["John", "lives", "in", "Rome", "."]])["texts"]
    assert record["labels"] == ["B-PER", "O", "O", "B-LOC", "O"]
    assert [(e["class"], e["beginToken"], e["endToken"]) for e in record["entities"]] == [("PER", 0, 1), ("LOC", 3, 4)]
    # a token may also come as a one-element list when the model has no feature columns
    assert labeler.tag([[["John"], "lives", "in", "Rome", "."]])["texts"][0]["labels"] == record["labels"]
    assert labeler.tag([])["texts"] == []


def test_tag_with_features_answers_grobid_labels(dates: SequenceLabeler) -> None:
    assert dates.n_features == 4 and dates.encoder.feature_columns == [1, 2, 3]
    (record,) = dates.tag([DATE_TOKENS])["texts"]
    assert record["text"] == "June 12 , 2005"
    assert record["labels"] == ["I-<month>", "I-<day>", "I-<other>", "I-<year>"]
    # <other> is GROBID's outside label: no entity
    assert [e["class"] for e in record["entities"]] == ["<month>", "<day>", "<year>"]


@pytest.mark.parametrize(
    ("texts", "message"),
    [
        ("June 12", "texts: expected a list"),
        ([["June", "12"]], r"texts\[0\]\[0\]: the model needs 4 features per token"),
        ([[["June", "june", "LINESTART"]]], r"texts\[0\]\[0\]: expected the token and 4 features, found 2"),
        ([DATE_TOKENS, "June 12"], r"texts\[1\]: expected a list of tokens"),
        ([[[]]], r"texts\[0\]\[0\]: a token is a string or a non-empty list"),
        ([[["June", 1, "a", "b", "c"]]], r"texts\[0\]\[0\]: token and features must be strings"),
    ],
)
def test_bad_tag_input_is_a_located_data_error(dates: SequenceLabeler, texts: object, message: str) -> None:
    with pytest.raises(DataError, match=message):
        dates.tag(texts)  # type: ignore[arg-type]


def test_features_sent_to_a_model_without_features_are_refused(ner: tuple[SequenceLabeler, Path, Path]) -> None:
    with pytest.raises(DataError, match="takes no features"):
        ner[0].tag([[["John", "NNP"]]])


def test_unknown_training_option_names_the_valid_ones(tiny_conll: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown training option\(s\) epochs; valid options: .*max_epoch"):
        train_sequence_labeler(str(tiny_conll), epochs=3)


def test_train_from_corpus_holds_out_validation_for_early_stopping(tiny_conll: Path, tmp_path: Path) -> None:
    corpus = read_labelled(tiny_conll)
    labeler = train_sequence_labeler(corpus, output=tmp_path / "m", **{**FAST, "early_stop": True, "max_epoch": 2})
    assert len(labeler.training_result.history) == 2
    assert (tmp_path / "m" / "config.json").exists()
    # the validation share was taken from the corpus: F1 was measured each epoch
    assert all(epoch.valid_score is not None for epoch in labeler.training_result.history)


def test_import_textorch_does_not_load_torch() -> None:
    code = "import sys, textorch; assert 'torch' not in sys.modules; print(textorch.__version__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr

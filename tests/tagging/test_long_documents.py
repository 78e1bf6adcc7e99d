"""GROBID's big models: one whole document per sequence, GROBID's files as its trainers write them.

A document of 20,000 tokens trains (in pieces that keep every token) and is tagged whole; a field
that opens with its continuation label (GROBID's alignment dropped its first token) is read as the
field's start by every reader that trains: ``grobid MODEL train``, n-fold, and the DeLFT bridge.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from textorch.cli.main import main
from textorch.data.corpus import TokenSequence
from textorch.data.tags import grobid_to_iob2, normalize_to_iob2
from textorch.tagging.labeler import SequenceLabeler

LONG = 20_000


def _document(n_tokens: int, start: int = 0) -> list[tuple[str, str]]:
    """A bibliography-like document: a numbered label opens each reference, then its text; every
    ninth reference loses its ``I-<reference>`` opener as GROBID's alignment sometimes drops it."""
    rows: list[tuple[str, str]] = []
    number = start
    while len(rows) < n_tokens:
        number += 1
        rows.append((f"[{number}]", "I-<label>"))
        opener = "<reference>" if number % 9 == 0 else "I-<reference>"
        words = ["Smith", "J.", "Title", "of", "paper", "Journal", str(1990 + number % 30), "."]
        rows.extend((word, opener if k == 0 else "<reference>") for k, word in enumerate(words))
    return rows[:n_tokens]


def _line(token: str, label: str | None) -> str:
    shape = "NUMBRACKET" if token.startswith("[") else ("INITCAP" if token[:1].isupper() else "NOCAPS")
    digit = "CONTAINSDIGITS" if any(c.isdigit() for c in token) else "NODIGIT"
    fields = [token, token.lower(), token[:1], shape, digit, "LINEIN"]
    return " ".join(fields + ([label] if label else []))


def _write(path: Path, documents: list[list[tuple[str, str]]], labelled: bool = True) -> Path:
    blocks = ["\n".join(_line(t, label if labelled else None) for t, label in doc) for doc in documents]
    path.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    return path


def _opened_by_continuation(documents: list[list[tuple[str, str]]]) -> int:
    return sum(1 for doc in documents for (_, before), (_, label) in zip(doc, doc[1:])
               if label == "<reference>" and before != "<reference>" and before != "I-<reference>")


@pytest.fixture(scope="module")
def documents() -> list[list[tuple[str, str]]]:
    return [_document(LONG), _document(300, 5000), _document(250, 6000), _document(280, 7000)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, documents: list[list[tuple[str, str]]]) -> tuple[Path, Path, str]:
    """(training file, model directory, training log): trained as GROBID trains through the bridge,
    ``grobidTagger.py bibliography-like train --input FILE --output MODELS``."""
    import contextlib
    import io

    from textorch.tagging.delft.grobid_tagger import textorch_arguments

    folder = tmp_path_factory.mktemp("long-documents")
    train = _write(folder / "bibliography-like.train", documents)
    argv = textorch_arguments(["bibliography-like", "train", "--input", str(train), "--output", str(folder / "models"),
                               "--max-epoch", "4", "--max-sequence-length", "3000"])
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main([*argv, "--learning-rate", "0.01", "--quiet"]) == 0
    model = next((folder / "models").iterdir())
    return train, model, err.getvalue()


def test_a_20000_token_document_trains_in_pieces_and_is_tagged_whole(
        trained: tuple[Path, Path, str], documents: list[list[tuple[str, str]]]) -> None:
    train, model, log = trained
    # GROBID's own files train as written: one warning with the count and the first places, no error
    assert f"{_opened_by_continuation(documents)} fields open with a continuation label, no I- label before " \
           f"({train}:74, {train}:155, " in log
    # the long document is said once, not warned about: pieces keep every token
    assert "1 training sequence longer than 3,000 tokens (longest 20,000) read as 7 consecutive pieces" in log
    assert "every token kept; tagging reads whole sequences" in log
    assert "error" not in log.lower()

    labeler = SequenceLabeler.load(str(model))
    (prediction,) = labeler.predict([_sequence(documents[0])], with_scores=False)
    assert len(prediction.labels) == LONG  # whole: nothing cut, nothing dropped
    # every field in its place, those opened by a continuation label too (as a CRF reads them)
    assert prediction.labels == _gold(documents[0])


@pytest.mark.parametrize("runtime_length", [0, 3000])
def test_grobid_serves_the_bridge_trained_model_on_whole_documents_and_in_its_runtime_pieces(
        trained: tuple[Path, Path, str], documents: list[list[tuple[str, str]]], runtime_length: int) -> None:
    """GROBID's ``DeLFTModel``: ``Sequence(name).load(models)``, ``max_sequence_length`` from its
    grobid.yaml (3,000, or 0 for whole documents), then ``tag(tokens, None, features=...)``."""
    from textorch.tagging.delft.facade import Sequence

    _, model, _ = trained
    facade = Sequence(model.name)
    facade.load(str(model.parent))
    facade.model_config.max_sequence_length = runtime_length
    texts = [[t for t, _ in doc] for doc in documents]
    features = [[_line(t, None).split()[1:] for t in text] for text in texts]
    answered = facade.tag(texts, None, features=features)
    labeler = SequenceLabeler.load(str(model))
    for doc, answer in zip(documents, answered):
        assert [token for token, _ in answer] == [t for t, _ in doc]
        labels = [label for _, label in answer]
        # what textorch's own tagging gives: the whole document, or each runtime piece alone
        pieces = [doc] if not runtime_length else [doc[i:i + runtime_length] for i in range(0, len(doc), runtime_length)]
        own = [label for piece in pieces for label in labeler.predict([_sequence(piece)], with_scores=False)[0].labels]
        assert labels == own
        if not runtime_length:
            assert labels == _gold(doc)


def _sequence(doc: list[tuple[str, str]]) -> TokenSequence:
    tokens = [t for t, _ in doc]
    return TokenSequence(tokens, features=[_line(t, None).split()[1:] for t in tokens])


def _gold(doc: list[tuple[str, str]]) -> list[str]:
    return normalize_to_iob2(grobid_to_iob2([label for _, label in doc]))


@pytest.mark.parametrize("door", ["n-fold", "bridge"])
def test_n_fold_and_the_bridge_train_on_fields_opened_by_a_continuation(
        tmp_path: Path, documents: list[list[tuple[str, str]]], capsys: pytest.CaptureFixture, door: str) -> None:
    from textorch.tagging.delft.grobid_tagger import textorch_arguments

    short = documents[1:] + [_document(260, 8000), _document(240, 9000)]
    train = _write(tmp_path / "bibliography-like.train", short)
    if door == "n-fold":
        argv = ["grobid", "bibliography-like", "train", "--input", str(train), "--output", str(tmp_path / "m"),
                "--fold-count", "2", "--max-epoch", "1", "--quiet"]
    else:  # what GROBID runs: grobidTagger.py MODEL train --input FILE --output MODELS
        argv = textorch_arguments(["bibliography-like", "train", "--input", str(train), "--output", str(tmp_path),
                                   "--max-epoch", "1"]) + ["--quiet"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert f"{_opened_by_continuation(short)} fields open with a continuation label, no I- label before" in err
    assert "error" not in err.lower()

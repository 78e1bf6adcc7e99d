"""Several threads tagging with one loaded model get exactly what calls one after another get.

The calls share what the labeler keeps across calls: the word-vector table (new words are added
to it), character vectors of tokens, LSTM weights laid out once. Each round starts with these
emptied and gives every thread words no other thread meets, so that threads add to them at
the same time; a barrier makes the calls start together.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from textorch.tagging import word_table_calls
from textorch.data.corpus import TokenSequence
from textorch.models import onednn_lstm
from textorch.tagging.labeler import SequenceLabeler
from textorch.tagging.training import train_sequence_labeler

THREADS = 4
ROUNDS = 10


def _vectors_file(tmp_path: Path) -> str:
    words = ["John", "Mary", "lives", "in", "Paris", "Rome", "."]
    words += [f"Town{thread}x{i}" for thread in range(THREADS) for i in range(0, 60, 2)]
    rng = np.random.default_rng(1)
    path = tmp_path / "vectors.txt"
    path.write_text("\n".join(f"{w} " + " ".join(f"{v:.3f}" for v in rng.normal(size=5)) for w in words) + "\n",
                    encoding="utf-8")
    return str(path)


def _texts(thread: int, round_: int) -> list[TokenSequence]:
    """Words of this thread and round only (new to the word table and the token vectors),
    with words every thread shares."""
    towns = [f"Town{thread}x{round_ * 10 + i}" for i in range(10)]
    texts = [["John", "lives", "in", town, "."] for town in towns[:6]]
    texts += [[town, "Mary", f"{thread}-{round_}", town[::-1]] for town in towns[6:]]
    texts.append(["Rome"])
    return [TokenSequence(tokens) for tokens in texts]


def _tag(labeler: SequenceLabeler, texts: list[TokenSequence]) -> list[tuple[list[str], list[float]]]:
    """One-sequence calls, then one call of several batches."""
    predictions = [labeler.predict([text])[0] for text in texts[:3]] + labeler.predict(texts, batch_size=3)
    return [(p.labels, p.scores) for p in predictions]


def _forget(labeler: SequenceLabeler) -> None:
    labeler.token_vector_cache.clear()
    onednn_lstm._laid_out.clear()
    labeler.word_table.reset_if_larger(0)


@pytest.mark.parametrize("table_bytes", [None, 64])
def test_four_threads_tagging_with_one_model_answer_as_sequential_calls(
    tiny_conll: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table_bytes: int | None
) -> None:
    """``table_bytes``: a word table bound that every call exceeds, so that calls wait for the
    others to finish before starting it anew."""
    if table_bytes is not None:
        monkeypatch.setattr(word_table_calls, "WORD_TABLE_MAX_BYTES", table_bytes)
    labeler = train_sequence_labeler(tiny_conll, embeddings=_vectors_file(tmp_path), cache_dir=str(tmp_path / "cache"),
                                     max_epoch=1, seed=3, word_hidden=8, char_hidden=4)
    assert isinstance(labeler.model, torch.nn.Module)
    expected = {}
    for round_ in range(ROUNDS):
        _forget(labeler)
        for thread in range(THREADS):
            expected[thread, round_] = _tag(labeler, _texts(thread, round_))
    barrier = threading.Barrier(THREADS)
    got: dict[tuple[int, int], list] = {}
    errors: list[Exception] = []

    def run(thread: int) -> None:
        try:
            for round_ in range(ROUNDS):
                if barrier.wait() == 0:  # one thread empties what is kept, then all start together
                    _forget(labeler)
                barrier.wait()
                got[thread, round_] = _tag(labeler, _texts(thread, round_))
        except Exception as error:  # reported below, and the barrier released for the others
            errors.append(error)
            barrier.abort()

    workers = [threading.Thread(target=run, args=(thread,)) for thread in range(THREADS)]
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns between a few bytecodes, not every 5 ms
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=300)
    finally:
        sys.setswitchinterval(switch_interval)
    assert not errors, errors
    assert got.keys() == expected.keys()
    for key, answers in expected.items():
        assert got[key] == answers, key
    if table_bytes is not None:
        assert len(labeler.word_table) < 60  # started anew again and again: one call's words at most

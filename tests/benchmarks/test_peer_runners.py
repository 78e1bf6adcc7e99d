"""What the twin runners share and measure (benchmarks/peers/runner_common.py, textorch_runner.py):
every timed pass starts from the state it says, the clock holds the call alone, and both runners
read the same call texts. Timings are never asserted here: the clock is faked or not looked at.
"""

from __future__ import annotations

import json

import pytest

from conftest import write_tiny_grobid

from benchmarks.peers import runner_common
from benchmarks.peers import textorch_runner

from textorch.data.readers import read_grobid
from textorch.embeddings import open_embeddings
from textorch.tagging.config import DataConfig, ModelConfig
from textorch.tagging.delft.reader import load_data_crf_string
from textorch.tagging.labeler import SequenceLabeler


def test_tagging_rows_start_every_new_tokens_pass_fresh_but_not_the_seen_stream():
    events = []
    tag = lambda data, batch_size: events.append(("tag", len(data), batch_size))  # noqa: E731
    rows = runner_common.tagging_rows(tag, ["a b", "c", "d e f"], [2, 1, 3], [32], small_limit=2, repeats=2,
                                      min_seconds=0.0, fresh=lambda: events.append(("fresh",)))
    assert set(rows) == {"batch32", "stream", "stream_seen"}
    assert rows["stream"]["n_tokens"] == 3 and rows["batch32"]["n_tokens"] == 6
    assert all(len(row["repeats_s"]) == 2 for row in rows.values())
    batch_part = events[: 2 * 3]  # warm-up + 2 repeats, each from a fresh state
    assert batch_part == [("fresh",), ("tag", 3, 32)] * 3
    stream_part = events[6:15]
    assert stream_part == [("fresh",), ("tag", 1, 1), ("tag", 1, 1)] * 3
    assert ("fresh",) not in events[15:] and len(events[15:]) == 2 * 3
    peer = runner_common.tagging_rows(tag, ["a b"], [2], [32], small_limit=1, repeats=1, min_seconds=0.0,
                                      seen_rows=False)
    assert set(peer) == {"batch32", "stream"}  # DeLFT: no memory of tokens, no seen row


def test_building_the_fresh_state_is_outside_the_clock_and_every_looped_call_gets_one(monkeypatch):
    clock = {"now": 0.0}
    monkeypatch.setattr(runner_common.time, "perf_counter", lambda: clock["now"])
    prepared = []

    def call() -> None:  # one second of work on the fake clock
        clock["now"] += 1.0

    def fresh() -> None:  # a hundred seconds of rebuilding state
        prepared.append(1)
        clock["now"] += 100.0

    times, loops = runner_common.repeat_seconds(call, repeats=2, min_seconds=2.5, prepare=fresh)
    assert loops == 3 and len(prepared) == 1 + 2 * loops  # the warm-up's, then one per timed call
    assert times == [1.0, 1.0]  # none of the rebuilding is timed


def test_repeat_seconds_loops_short_calls_and_rows_keep_every_repeat():
    calls = []
    times, loops = runner_common.repeat_seconds(lambda: calls.append(1), repeats=3, min_seconds=0.01)
    assert loops > 1 and len(calls) == 1 + 3 * loops and len(times) == 3 and max(times) < 0.01
    row = runner_common.timing_row([0.3, 0.1, 0.2], loops=2, n_sequences=5, tokens=40)
    assert row["tag_s"] == 0.2 and row["tokens_per_s"] == 200 and row["repeats_s"] == [0.3, 0.1, 0.2]


def test_training_measures_share_one_definition_and_short_predictions_are_completed(tmp_path):
    speeds = runner_common.training_speeds([3, 5], [1.0, 3.0], 8.0)
    assert speeds["n_train_tokens"] == 8 and speeds["epochs"] == 2 and speeds["epochs_s"] == 4.0
    assert speeds["train_tokens_per_s"] == pytest.approx(4.0) and speeds["whole_tokens_per_s"] == pytest.approx(2.0)
    path = tmp_path / "p.json"
    runner_common.write_predictions(str(path), [["B-X", "O", "O"]], [["B-X"]])
    assert json.loads(path.read_text())["pred"] == [["B-X", "O", "O"]]
    with pytest.raises(ValueError, match="1 gold sequences but 0 predicted"):
        runner_common.write_predictions(str(path), [["O"]], [])
    runner_common.write_predictions(None, [["O"]], [])  # no file asked for: nothing written, nothing checked


def test_a_fresh_token_state_forgets_every_token_and_tags_the_same(tmp_path):
    corpus = read_grobid(write_tiny_grobid(tmp_path / "tiny.train", n=12))
    words = sorted({t for s in corpus.sequences for t in s.tokens})
    vectors = tmp_path / "vectors.txt"
    vectors.write_text("".join(f"{w} " + " ".join(f"{(i * 7 + k) % 5 / 10:.1f}" for k in range(4)) + "\n"
                               for i, w in enumerate(words)))
    cache = str(tmp_path / "cache")
    embeddings = open_embeddings(str(vectors), cache_dir=cache)
    labeler = SequenceLabeler.build(corpus, ModelConfig(architecture="BidLSTM_CRF"), DataConfig(embeddings=str(vectors)),
                                    embeddings, seed=1)
    labeler.model.eval()
    before = [p.labels for p in labeler.predict(corpus.sequences[:4], batch_size=2)]
    for sequence in corpus.sequences[4:8]:
        labeler.predict([sequence], batch_size=1)
    memories = lambda: (len(labeler.word_table), len(labeler.embeddings._memo), len(labeler.encoder._shapes),  # noqa: E731
                        len(labeler.token_vector_cache))
    assert all(size > 1 for size in memories())
    old = labeler.embeddings
    textorch_runner.fresh_token_state(labeler, cache)
    assert memories() == (1, 0, 0, 0) and labeler.embeddings is not old  # the padding row alone
    assert [p.labels for p in labeler.predict(corpus.sequences[:4], batch_size=2)] == before


def test_grobid_call_texts_are_feature_lines_without_labels_cut_into_calls():
    blocks = [[f"w{i}{j} f{i}{j} X I-<a>" for j in range(i + 1)] for i in range(5)]
    texts = runner_common.grobid_call_texts(blocks, per_call=2)
    assert len(texts) == 3  # 2 + 2 + the 1 left
    assert texts[0] == "w00 f00 X\n\nw10 f10 X\nw11 f11 X\n"  # a blank line after each sequence but the last
    assert "I-<a>" not in "".join(texts)
    tokens, features = [], []
    for text in texts:
        x, f = load_data_crf_string(text)
        tokens += x
        features += f
    assert tokens == [[line.split()[0] for line in block] for block in blocks]
    assert features == [[line.split()[1:3] for line in block] for block in blocks]
    with pytest.raises(ValueError):
        runner_common.grobid_call_texts(blocks, per_call=0)


def test_the_call_texts_file_is_what_both_runners_read(tmp_path):
    blocks = [["a x L"], ["b y L", "c z L"], ["d w L"]]
    path = tmp_path / "calls.json"
    runner_common.write_calls(str(path), blocks, per_call=2)
    texts, n_sequences, tokens, per_call = runner_common.read_calls(str(path))
    assert texts == runner_common.grobid_call_texts(blocks, 2)
    assert (n_sequences, tokens, per_call) == (3, 4, 2)


def test_grobid_call_passes_start_fresh_after_one_untimed_pass_and_the_seen_passes_do_not():
    events = []
    rows = runner_common.grobid_call_rows(lambda text: events.append(("call", text)), ["t1", "t2"], 3, 7, repeats=2,
                                          min_seconds=0.0, fresh=lambda: events.append(("fresh",)))
    assert set(rows) == {"grobid_calls", "grobid_calls_seen"}
    assert rows["grobid_calls"]["n_tokens"] == 7 and rows["grobid_calls"]["n_sequences"] == 3
    one_pass = [("call", "t1"), ("call", "t2")]
    # the extra untimed pass, repeat_seconds' warm-up, then 2 repeats: each from a fresh state
    assert events[:12] == [("fresh",), *one_pass] * 4
    assert events[12:] == one_pass * 3  # seen: warm-up and 2 repeats, no reset
    peer = runner_common.grobid_call_rows(lambda text: None, ["t"], 1, 1, repeats=1, min_seconds=0.0,
                                          name="x", seen_rows=False)
    assert set(peer) == {"x"}

"""ONNX export of transformer taggers: same labels as PyTorch, scores within 1e-4, and an export
directory from which another program (no textorch) tags exactly as textorch does."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from conftest import trained_once, viterbi_from_crf_json, write_tiny_grobid  # noqa: E402
from tiny_transformer import write_tiny_bert  # noqa: E402
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig  # noqa: E402
from textorch.data.corpus import Corpus  # noqa: E402
from textorch.tagging.labeler import SequenceLabeler  # noqa: E402
from textorch.onnx.engine import attach_onnx  # noqa: E402
from textorch.onnx.export import export_labeler  # noqa: E402

SMALL = dict(char_dim=8, char_hidden=8, feature_dim=3, feature_output_dim=8)
# Windows of 8 sub-tokens (6 without [CLS]/[SEP]), 3 apart: most test sequences need several.
WINDOWS = dict(transformer_window=8, transformer_stride=3)


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory: pytest.TempPathFactory, corpus: Corpus) -> Path:
    # Only every third word is in the vocabulary: the others split into several sub-tokens.
    words = sorted({t for s in corpus.sequences for t in s.tokens})[::3]
    return write_tiny_bert(tmp_path_factory.mktemp("bert") / "tiny-bert", words, max_positions=16, layers=2)


_TRAINED: dict[str, SequenceLabeler] = {}


def _trained(architecture: str, corpus: Corpus, bert_dir: Path) -> SequenceLabeler:
    def train() -> SequenceLabeler:
        config = ModelConfig(architecture=architecture, transformer=str(bert_dir), **WINDOWS, **SMALL)
        labeler = SequenceLabeler.build(corpus, config, DataConfig(), seed=1)
        labeler.fit(corpus, None, TrainConfig(max_epoch=2, batch_size=8, learning_rate=0.01, early_stop=False, seed=1))
        return labeler

    return trained_once(_TRAINED, architecture, train)


def _max_score_difference(expected, got) -> float:
    assert [p.labels for p in got] == [p.labels for p in expected]
    return max(abs(a - b) for x, y in zip(expected, got) for a, b in zip(x.scores, y.scores))


@pytest.mark.parametrize("architecture", ["BERT_CRF", "BERT", "BERT_CRF_CHAR_FEATURES"])
def test_transformer_tagger_onnx_equals_pytorch(architecture: str, corpus: Corpus, bert_dir: Path, tmp_path: Path) -> None:
    labeler = _trained(architecture, corpus, bert_dir)
    sequences = corpus.sequences
    batch = labeler.encode(sequences).batch(list(range(len(sequences))))
    assert batch.window_ids.shape[0] > len(sequences)  # several windows per sequence somewhere
    expected = labeler.predict(sequences, batch_size=5)  # mixed lengths and window counts per batch
    export_labeler(labeler, tmp_path / "onnx")
    attach_onnx(labeler, tmp_path, tmp_path / "onnx")
    got = labeler.predict(sequences, batch_size=5)
    assert _max_score_difference(expected, got) < 1e-4
    onnx_f1 = labeler.evaluate(corpus)["f1"]
    labeler.runner = None
    assert onnx_f1 == pytest.approx(labeler.evaluate(corpus)["f1"])


def _most_central_windows(n: int, starts_of_words: list[int], content: int, stride: int) -> tuple[list[tuple[int, int]], list[int]]:
    """docs/onnx.md's window rule, written out again here from the documentation."""
    if n <= content:
        starts = [0]
    else:
        starts = list(range(0, n - content + 1, stride))
        if starts[-1] + content < n:
            starts.append(n - content)
    windows = [(s, min(s + content, n)) for s in starts]
    chosen = []
    for p in starts_of_words:
        best, best_context = 0, -1
        for k, (s, e) in enumerate(windows):
            if s <= p < e:
                context = min(p - s if s > 0 else n + 1, e - 1 - p if e < n else n + 1)
                if context > best_context:
                    best, best_context = k, context
        chosen.append(best)
    return windows, chosen


def test_another_program_tags_from_the_export_directory_alone(corpus: Corpus, bert_dir: Path, tmp_path: Path) -> None:
    """What a Java/C++ program does: tokenizer.json + onnx-model.json windows + ONNX Runtime + crf.json."""
    import onnxruntime
    from tokenizers import Tokenizer

    labeler = _trained("BERT_CRF", corpus, bert_dir)
    out = export_labeler(labeler, tmp_path / "export")
    assert sorted(p.name for p in out.iterdir()) == [
        "crf.json", "labels.json", "model.onnx", "onnx-model.json", "tokenizer.json", "vocab.json"]
    description = json.loads((out / "onnx-model.json").read_text())
    assert [i["name"] for i in description["inputs"]] == ["input_ids", "attention_mask", "word_index", "mask"]
    layout = description["tokenizer"]
    assert (layout["window"], layout["stride"], layout["window_content"]) == (8, 3, 6)
    tokenizer = Tokenizer.from_file(str(out / layout["file"]))
    labels = json.loads((out / "labels.json").read_text())
    crf = json.loads((out / "crf.json").read_text())
    session = onnxruntime.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    expected = labeler.predict(corpus.sequences)
    several = 0
    for sequence, prediction in zip(corpus.sequences, expected):
        encoding = tokenizer.encode(sequence.tokens, is_pretokenized=True, add_special_tokens=False)
        ids, word_starts = [], []
        for w in range(len(sequence.tokens)):
            pieces = [i for i, word in zip(encoding.ids, encoding.word_ids) if word == w] or [layout["empty_word_id"]]
            word_starts.append(len(ids))
            ids += pieces
        windows, chosen = _most_central_windows(len(ids), word_starts, layout["window_content"], layout["stride"])
        several += len(windows) > 1
        rows = [layout["prefix_ids"] + ids[s:e] + layout["suffix_ids"] for s, e in windows]
        width = max(len(r) for r in rows)
        input_ids = np.full((len(rows), width), layout["pad_id"], dtype=np.int64)
        attention = np.zeros((len(rows), width), dtype=np.int64)
        for i, row in enumerate(rows):
            input_ids[i, : len(row)], attention[i, : len(row)] = row, 1
        prefix = len(layout["prefix_ids"])
        word_index = np.array([[k * width + prefix + p - windows[k][0] for k, p in zip(chosen, word_starts)]], dtype=np.int64)
        feed = {"input_ids": input_ids, "attention_mask": attention, "word_index": word_index,
                "mask": np.ones((1, len(sequence.tokens)), dtype=np.int64)}
        emissions = session.run(["emissions"], feed)[0][0]
        assert [labels[k] for k in viterbi_from_crf_json(emissions, crf)] == prediction.labels
    assert several > 0


def test_quantized_transformer_tagger(corpus: Corpus, bert_dir: Path, tmp_path: Path) -> None:
    labeler = _trained("BERT_CRF", corpus, bert_dir)
    out = export_labeler(labeler, tmp_path / "onnx", quantize=True)
    assert json.loads((out / "onnx-model.json").read_text())["quantized_model_file"] == "model.int8.onnx"
    expected = labeler.predict(corpus.sequences)
    attach_onnx(labeler, tmp_path, out, quantized=True)
    got = labeler.predict(corpus.sequences)
    assert [len(p.labels) for p in got] == [len(s) for s in corpus.sequences]
    agree = np.mean([a == b for x, y in zip(expected, got) for a, b in zip(x.labels, y.labels)])
    assert agree > 0.8


def test_cli_exports_a_saved_transformer_tagger_and_tags_with_onnx(corpus: Corpus, bert_dir: Path, tmp_path: Path) -> None:
    from textorch.cli.main import main

    model = _trained("BERT_CRF", corpus, bert_dir).save(tmp_path / "model")
    data = write_tiny_grobid(tmp_path / "date.txt", n=8)
    outputs = {}
    for engine in ("torch", "onnx"):  # onnx exports into MODEL/onnx first
        out = tmp_path / f"{engine}.txt"
        assert main(["seq", "tag", "--model", str(model), "--input", str(data), "--input-format", "grobid",
                     "--output", str(out), "--engine", engine]) == 0
        outputs[engine] = out.read_text()
    assert outputs["onnx"] == outputs["torch"]
    description = json.loads((model / "onnx" / "onnx-model.json").read_text())
    assert description["source_weights_sha256"] == json.loads((model / "config.json").read_text())["weights_sha256"]
    assert main(["export", "onnx", "--model", str(model), "--output", str(tmp_path / "x"), "--quantize"]) == 0
    assert (tmp_path / "x" / "tokenizer.json").is_file() and (tmp_path / "x" / "model.int8.onnx").is_file()

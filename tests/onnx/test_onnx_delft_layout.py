"""``textorch export onnx --layout delft``: DeLFT 1.2's files, read the way DeLFT's Java runner
(kermitt2/delft ``java/delft-onnx``) reads them.

:class:`JavaRunner` below is written here after that runner's source: ``WordEmbeddings``
(digits to "0", then the exact form, else zeros), ``Preprocessor`` (one character id per UTF-16
unit of the first ``maxCharLength``, ``<UNK>`` for an unknown one, 0 pads; feature values
through ``featuresMapToIndex`` of their column, 0 when unknown), ``DeLFTModel`` (a batch of one
padded to ``maxSeqLength``) and ``CRFDecoder`` (Viterbi over ``crf_params.json``, ``tagIndex``).
It uses onnxruntime and numpy only.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import numpy as np
import pytest
import torch

ort = pytest.importorskip("onnxruntime")

from textorch.cli.main import main  # noqa: E402
from textorch.data.corpus import TokenSequence  # noqa: E402
from textorch.data.readers import read_labelled  # noqa: E402
from textorch.embeddings import open_embeddings  # noqa: E402
from textorch.errors import ConfigError  # noqa: E402
from textorch.onnx.delft_layout import export_delft_layout  # noqa: E402
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig  # noqa: E402
from textorch.tagging.labeler import SequenceLabeler  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "delft-1.2"
SMALL = dict(char_dim=8, char_hidden=8, word_hidden=12, feature_dim=3, feature_output_dim=8, dropout=0.1)
LAYOUT = {"encoder.onnx", "crf_params.json", "vocab.json", "config.json"}


def utf16_units(word: str) -> list[str]:
    """Java's ``String.charAt`` sequence: one item per UTF-16 code unit (surrogates apart)."""
    data = word.encode("utf-16-le", "surrogatepass")
    return [data[i:i + 2].decode("utf-16-le", "surrogatepass") for i in range(0, len(data), 2)]


def read_vectors(path: Path) -> dict[str, np.ndarray]:
    """A word2vec/GloVe text file as the runner's LMDB holds it: word -> float32 vector."""
    vectors = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.rstrip().split(" ")
        if len(parts) > 2:
            vectors[parts[0]] = np.asarray(parts[1:], dtype=np.float32)
    return vectors


class JavaRunner:
    """DeLFT's Java runner, line for line where it matters, over an export directory."""

    def __init__(self, directory: Path, vectors: dict[str, np.ndarray], max_seq_length: int) -> None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        self.session = ort.InferenceSession(str(directory / "encoder.onnx"), options, providers=["CPUExecutionProvider"])
        self.has_features = "features_input" in [i.name for i in self.session.get_inputs()]
        vocab = json.loads((directory / "vocab.json").read_text(encoding="utf-8"))
        crf = json.loads((directory / "crf_params.json").read_text(encoding="utf-8"))
        self.char_vocab = vocab["charVocab"]
        self.unk = self.char_vocab.get("<UNK>", 1)
        self.tag_index = {int(k): v for k, v in vocab["tagIndex"].items()}
        self.max_char = int(vocab["maxCharLength"])
        self.features_indices = vocab.get("featuresIndices")
        self.features_map = {int(k): v for k, v in (vocab.get("featuresMapToIndex") or {}).items()}
        self.transitions = np.asarray(crf["transitions"], dtype=np.float32)
        self.start = np.asarray(crf["startTransitions"], dtype=np.float32)
        self.end = np.asarray(crf["endTransitions"], dtype=np.float32)
        self.vectors = vectors
        self.dim = len(next(iter(vectors.values())))
        self.max_seq_length = max_seq_length

    def vector(self, word: str) -> np.ndarray:
        normalized = "".join("0" if unicodedata.category(u) == "Nd" else u for u in utf16_units(word))
        return self.vectors.get(normalized, np.zeros(self.dim, dtype=np.float32))

    def emissions(self, tokens: list[str], features: list[list[str]] | None = None) -> np.ndarray:
        """``(maxSeqLength, n_labels)`` emissions of one sequence (features: its full feature rows)."""
        n, length = min(len(tokens), self.max_seq_length), self.max_seq_length
        words = np.zeros((1, length, self.dim), dtype=np.float32)
        chars = np.zeros((1, length, self.max_char), dtype=np.int64)
        for i, token in enumerate(tokens[:n]):
            words[0, i] = self.vector(token)
            for j, unit in enumerate(utf16_units(token)[: self.max_char]):
                chars[0, i, j] = self.char_vocab.get(unit, self.unk)
        feed = {"word_input": words, "char_input": chars}
        if self.has_features and features is not None:
            ids = np.zeros((1, length, len(self.features_indices)), dtype=np.int64)
            for i, row in enumerate(features[:n]):
                for slot, column in enumerate(self.features_indices):
                    ids[0, i, slot] = self.features_map.get(column, {}).get(row[column], 0)
            feed["features_input"] = ids
        return self.session.run(["emissions"], feed)[0][0]

    def viterbi(self, emissions: np.ndarray) -> list[int]:
        score, back = self.start + emissions[0], []
        for t in range(1, len(emissions)):
            total = score[:, None] + self.transitions + emissions[t][None, :]
            back.append(total.argmax(axis=0))
            score = total.max(axis=0)
        path = [int((score + self.end).argmax())]
        for pointers in reversed(back):
            path.append(int(pointers[path[-1]]))
        return path[::-1]

    def labels(self, tokens: list[str], features: list[list[str]] | None = None) -> list[str]:
        n = min(len(tokens), self.max_seq_length)
        path = self.viterbi(self.emissions(tokens, features)[:n])
        return [self.tag_index.get(i, "O") for i in path]


# --- models imported from DeLFT: DeLFT's own labels, ids and values --------------------------


def _delft_fixture(tmp_path: Path, architecture: str) -> tuple[Path, dict]:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tagging" / "delft_import"))
    from test_importer import EXPECTED, delft_dir

    return delft_dir(tmp_path, architecture), EXPECTED


@pytest.mark.parametrize("architecture", ["BidLSTM_CRF", "BidLSTM_CRF_FEATURES"])
def test_imported_delft_model_gives_delfts_labels_through_the_java_runner(tmp_path, monkeypatch, architecture):
    monkeypatch.setenv("TEXTORCH_CACHE_DIR", str(tmp_path / "cache"))
    source, expected = _delft_fixture(tmp_path, architecture)
    imported, export = tmp_path / "imported", tmp_path / "export"
    assert main(["import-delft", str(source), str(imported), "--embeddings", str(FIXTURES / "vectors.txt")]) == 0
    assert main(["export", "onnx", "--layout", "delft", "--model", str(imported), "--output", str(export)]) == 0
    assert {p.name for p in export.iterdir()} == LAYOUT

    delft_config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    preprocessor = json.loads((source / "preprocessor.json").read_text(encoding="utf-8"))
    record = json.loads((imported / "delft-source.json").read_text(encoding="utf-8"))
    assert (record["config"], record["preprocessor"]) == (delft_config, preprocessor)
    runner = JavaRunner(export, read_vectors(FIXTURES / "vectors.txt"), delft_config["max_sequence_length"])
    with_features = architecture.endswith("FEATURES")
    labels = [runner.labels(tokens, features if with_features else None)
              for tokens, features in zip(expected["tokens"], expected["features"])]
    assert labels == expected["labels"][architecture]

    # DeLFT's values, whatever textorch calls them inside (it puts "O" first, renames <PAD>, <UNK>)
    vocab = json.loads((export / "vocab.json").read_text(encoding="utf-8"))
    assert vocab["tagVocab"] == preprocessor["vocab_tag"]
    assert vocab["tagIndex"] == {str(i): t for t, i in preprocessor["vocab_tag"].items()}
    assert vocab["charVocab"] == preprocessor["vocab_char"]
    config = json.loads((export / "config.json").read_text(encoding="utf-8"))
    assert (config["modelName"], config["embeddingsName"]) == (delft_config["model_name"], delft_config["embeddings_name"])
    if with_features:
        features = preprocessor["feature_preprocessor"]
        assert vocab["featuresMapToIndex"] == features["features_map_to_index"]
        assert config["featuresIndices"] == delft_config["features_indices"]
    weights = json.loads((FIXTURES / architecture / "weights.json").read_text(encoding="utf-8"))
    crf = json.loads((export / "crf_params.json").read_text(encoding="utf-8"))
    for mine, theirs in (("transitions", "transitions"), ("startTransitions", "start_transitions"),
                         ("endTransitions", "end_transitions")):
        tensor = weights.get(f"crf.crf.{theirs}") or weights[f"crf.{theirs}"]
        np.testing.assert_allclose(np.asarray(crf[mine]).reshape(-1), tensor["values"], atol=1e-6)

    # the DeLFT directory itself, given as --model, exports the same files
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps({"embeddings": [{"name": delft_config["embeddings_name"],
                                                    "path": str(FIXTURES / "vectors.txt")}]}), encoding="utf-8")
    monkeypatch.setenv("TEXTORCH_EMBEDDINGS_REGISTRY", str(registry))
    direct = tmp_path / "direct"
    assert main(["export", "onnx", "--layout", "delft", "--model", str(source), "--output", str(direct)]) == 0
    for name in ("vocab.json", "config.json", "crf_params.json"):
        assert (direct / name).read_text(encoding="utf-8") == (export / name).read_text(encoding="utf-8")


def test_a_model_imported_before_the_record_exports_its_own_consistent_ids(tmp_path, monkeypatch):
    """An imported directory without delft-source.json (an earlier textorch): textorch's ids and
    label order, still DeLFT's labels through the runner."""
    monkeypatch.setenv("TEXTORCH_CACHE_DIR", str(tmp_path / "cache"))
    source, expected = _delft_fixture(tmp_path, "BidLSTM_CRF_FEATURES")
    imported, export = tmp_path / "imported", tmp_path / "export"
    assert main(["import-delft", str(source), str(imported), "--embeddings", str(FIXTURES / "vectors.txt")]) == 0
    (imported / "delft-source.json").unlink()
    assert main(["export", "onnx", "--layout", "delft", "--model", str(imported), "--output", str(export)]) == 0
    vocab = json.loads((export / "vocab.json").read_text(encoding="utf-8"))
    assert vocab["tagIndex"]["0"] == "O"  # textorch's order, not DeLFT's
    runner = JavaRunner(export, read_vectors(FIXTURES / "vectors.txt"), 50)
    labels = [runner.labels(tokens, features) for tokens, features in zip(expected["tokens"], expected["features"])]
    assert labels == expected["labels"]["BidLSTM_CRF_FEATURES"]


# --- textorch-trained models: textorch's labels and emissions -------------------------------


def _vectors_file(tmp_path: Path, corpus) -> Path:
    words = sorted({t for s in corpus.sequences for t in s.tokens})[::2] + ["0000", "00"]
    rng = np.random.default_rng(0)
    lines = [f"{w} " + " ".join(f"{v:.4f}" for v in rng.normal(size=6)) for w in words]
    path = tmp_path / "vectors.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _trained(tmp_path: Path, data: Path, architecture: str, word_lookup: str = "delft"):
    corpus = read_labelled(data)
    path = _vectors_file(tmp_path, corpus)
    vectors = open_embeddings(str(path), cache_dir=tmp_path / "cache")
    labeler = SequenceLabeler.build(corpus, ModelConfig(architecture=architecture, **SMALL),
                                    DataConfig(word_lookup=word_lookup), embeddings=vectors, seed=1)
    labeler.fit(corpus, None, TrainConfig(max_epoch=2, batch_size=8, learning_rate=0.02, early_stop=False, seed=1))
    return labeler, corpus, path


def _hard_sequences(corpus) -> list[TokenSequence]:
    """The training sequences plus what the runner encodes in its own way: an unknown character,
    unseen feature values, capitalised and lower-cased forms, digits."""
    out = list(corpus.sequences)
    for k, sequence in enumerate(corpus.sequences[:8]):
        tokens = [t.upper() if k % 2 else t.lower() for t in sequence.tokens] + ["§4"]
        features = None
        if sequence.features:
            features = [list(row) for row in sequence.features] + [list(sequence.features[-1])]
            for row in features[::2]:
                row[1 + k % (len(row) - 1)] = "NEVER-SEEN"
        out.append(TokenSequence(tokens, None, features=features))
    return out


@pytest.mark.parametrize("architecture", ["BidLSTM_CRF", "BidLSTM_CRF_FEATURES"])
def test_the_java_runner_gets_textorchs_emissions_and_labels(tmp_path, tiny_grobid, architecture):
    labeler, corpus, vectors_path = _trained(tmp_path, tiny_grobid, architecture)
    export = export_delft_layout(labeler, tmp_path / "export", model_name="date")
    runner = JavaRunner(export, read_vectors(vectors_path), 16)
    sequences = _hard_sequences(corpus)
    predicted = labeler.predict(sequences, with_scores=False)
    model = labeler.model.eval()
    for sequence, prediction in zip(sequences, predicted):
        n = len(sequence.tokens)
        emissions = runner.emissions(sequence.tokens, sequence.features)
        batch = labeler.encode([sequence]).batch([0])
        with torch.inference_mode():
            expected = model.head.emissions(model.encode(batch))[0, :n].numpy()
        np.testing.assert_allclose(emissions[:n], expected, atol=1e-4)
        assert runner.labels(sequence.tokens, sequence.features) == prediction.labels
    config = json.loads((export / "config.json").read_text(encoding="utf-8"))
    assert config["modelName"] == "date" and config["wordEmbeddingSize"] == 6
    if architecture.endswith("FEATURES"):
        assert config["featuresIndices"] == labeler.encoder.feature_columns


def test_the_graph_reads_the_layouts_shapes_and_dtypes(tmp_path, tiny_grobid):
    onnx = pytest.importorskip("onnx")
    labeler, _, _ = _trained(tmp_path, tiny_grobid, "BidLSTM_CRF_FEATURES")
    export = export_delft_layout(labeler, tmp_path / "export")
    graph = onnx.load(str(export / "encoder.onnx")).graph

    def described(value) -> tuple:
        kind = value.type.tensor_type
        return value.name, kind.elem_type, [d.dim_param or d.dim_value for d in kind.shape.dim]

    vocab = json.loads((export / "vocab.json").read_text(encoding="utf-8"))
    floats, longs = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64
    assert [described(v) for v in graph.input] == [
        ("word_input", floats, ["batch_size", "seq_length", 6]),
        ("char_input", longs, ["batch_size", "seq_length", vocab["maxCharLength"]]),
        ("features_input", longs, ["batch_size", "seq_length", len(vocab["featuresIndices"])]),
    ]
    assert [described(v) for v in graph.output] == [
        ("emissions", floats, ["batch_size", "seq_length", len(vocab["tagVocab"])])]
    assert set(json.loads((export / "config.json").read_text(encoding="utf-8"))) == {
        "modelName", "architecture", "wordEmbeddingSize", "charEmbeddingSize", "numCharLstmUnits",
        "numWordLstmUnits", "maxSequenceLength", "embeddingsName", "featuresIndices", "featuresEmbeddingSize",
        "featuresLstmUnits", "featuresVocabularySize"}
    assert set(vocab) == {"charVocab", "tagVocab", "tagIndex", "maxCharLength", "featuresIndices",
                          "featuresVocabularySize", "featuresMapToIndex"}
    assert (vocab["charVocab"]["<PAD>"], vocab["charVocab"]["<UNK>"]) == (0, 1)


# --- what the layout cannot carry ---------------------------------------------------------


def _untrained(corpus, architecture: str, embeddings=None, word_lookup: str = "delft") -> SequenceLabeler:
    return SequenceLabeler.build(corpus, ModelConfig(architecture=architecture, **SMALL),
                                 DataConfig(word_lookup=word_lookup), embeddings=embeddings, seed=1)


@pytest.mark.parametrize("architecture", ["BidLSTM_CRF_CASING", "BidLSTM_CNN_CRF", "BidGRU_CRF", "BidLSTM"])
def test_other_architectures_are_refused_by_name(tmp_path, tiny_grobid, architecture):
    corpus = read_labelled(tiny_grobid)
    vectors = open_embeddings(str(_vectors_file(tmp_path, corpus)), cache_dir=tmp_path / "cache")
    with pytest.raises(ConfigError, match=f"BidLSTM_CRF, BidLSTM_CRF_FEATURES, .*not {architecture};"):
        export_delft_layout(_untrained(corpus, architecture, vectors), tmp_path / "export")
    assert not (tmp_path / "export").exists()


def test_textorchs_own_word_lookup_is_refused_with_the_difference_named(tmp_path, tiny_grobid):
    corpus = read_labelled(tiny_grobid)
    vectors = open_embeddings(str(_vectors_file(tmp_path, corpus)), cache_dir=tmp_path / "cache")
    with pytest.raises(ConfigError, match="'exact_or_lower'.*replaces digits by 0.*--word-lookup delft"):
        export_delft_layout(_untrained(corpus, "BidLSTM_CRF", vectors, "exact_or_lower"), tmp_path / "export")


def test_a_model_without_word_vectors_is_refused(tmp_path, tiny_grobid):
    with pytest.raises(ConfigError, match="no word vectors.*embeddings database"):
        export_delft_layout(_untrained(read_labelled(tiny_grobid), "BidLSTM_CRF"), tmp_path / "export")


def test_cli_refusals_are_one_line_errors(tmp_path, tiny_grobid, capsys):
    model = tmp_path / "model"
    assert main(["seq", "train", "--train", str(tiny_grobid), "--output", str(model), "--max-epoch", "1",
                 "--architecture", "BidLSTM_CRF_CASING"]) == 0
    capsys.readouterr()
    assert main(["export", "onnx", "--layout", "delft", "--model", str(model), "--output", str(tmp_path / "x")]) == 2
    assert "not BidLSTM_CRF_CASING" in capsys.readouterr().err
    assert main(["export", "onnx", "--layout", "delft", "--model", str(model), "--output", str(tmp_path / "x"),
                 "--quantize"]) == 2
    assert "--quantize is not part of DeLFT's layout" in capsys.readouterr().err


def test_word_lookup_delft_is_a_training_option_kept_by_the_model(tmp_path, tiny_grobid):
    model = tmp_path / "model"
    assert main(["seq", "train", "--train", str(tiny_grobid), "--output", str(model), "--max-epoch", "1",
                 "--embeddings", str(_vectors_file(tmp_path, read_labelled(tiny_grobid))), "--word-lookup", "delft"]) == 0
    assert SequenceLabeler.load(model).data_config.word_lookup == "delft"
    assert main(["export", "onnx", "--layout", "delft", "--model", str(model), "--output", str(tmp_path / "x")]) == 0
    assert {p.name for p in (tmp_path / "x").iterdir()} == LAYOUT


def test_a_foreign_directory_is_never_replaced(tmp_path, tiny_grobid):
    labeler, _, _ = _trained(tmp_path, tiny_grobid, "BidLSTM_CRF")
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(ConfigError, match="not a DeLFT-layout ONNX export"):
        export_delft_layout(labeler, foreign)
    assert (foreign / "notes.txt").read_text(encoding="utf-8") == "keep me"
    export_delft_layout(labeler, tmp_path / "again")
    export_delft_layout(labeler, tmp_path / "again")  # an earlier export is replaced
    assert {p.name for p in (tmp_path / "again").iterdir()} == LAYOUT

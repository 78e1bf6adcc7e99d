"""``textorch import-delft`` and ``textorch seq tag --model DELFT_DIR``, on the DeLFT 1.2.0 fixtures."""

from __future__ import annotations

import json

from test_importer import EXPECTED, FIXTURES, delft_dir
from textorch.cli.main import main


def write_grobid(path, with_features: bool) -> None:
    lines = []
    for tokens, features in zip(EXPECTED["tokens"], EXPECTED["features"]):
        lines += [" ".join([token, *(row if with_features else [])]) for token, row in zip(tokens, features)]
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def tagged_labels(path) -> list[list[str]]:
    blocks = [b for b in path.read_text(encoding="utf-8").split("\n\n") if b.strip()]
    return [[line.split()[-1] for line in block.splitlines()] for block in blocks]


def test_import_delft_then_tag(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTORCH_CACHE_DIR", str(tmp_path / "cache"))
    source, out = delft_dir(tmp_path, "BidLSTM_CRF_FEATURES"), tmp_path / "imported"
    n_features = len(EXPECTED["features"][0][0])
    assert main(["import-delft", str(source), str(out), "--embeddings", str(FIXTURES / "vectors.txt"),
                 "--n-features", str(n_features)]) == 0
    assert json.loads((out / "config.json").read_text())["task"] == "sequence_labelling"
    data, tagged = tmp_path / "input.grobid", tmp_path / "tagged.grobid"
    write_grobid(data, with_features=True)
    assert main(["seq", "tag", "--model", str(out), "--input", str(data), "--input-format", "grobid",
                 "--output", str(tagged)]) == 0
    assert len(tagged_labels(tagged)) == len(EXPECTED["tokens"])


def test_seq_tag_takes_a_delft_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTORCH_CACHE_DIR", str(tmp_path / "cache"))
    registry = tmp_path / "registry.json"
    config = json.loads((FIXTURES / "BidLSTM_CRF" / "config.json").read_text())
    registry.write_text(json.dumps({"embeddings": [{"name": config["embeddings_name"],
                                                    "path": str(FIXTURES / "vectors.txt")}]}))
    monkeypatch.setenv("TEXTORCH_EMBEDDINGS_REGISTRY", str(registry))
    source = delft_dir(tmp_path, "BidLSTM_CRF")
    data, tagged = tmp_path / "input.conll", tmp_path / "tagged.conll"
    data.write_text("\n\n".join("\n".join(tokens) for tokens in EXPECTED["tokens"]) + "\n", encoding="utf-8")
    assert main(["seq", "tag", "--model", str(source), "--input", str(data), "--input-format", "conll",
                 "--output", str(tagged)]) == 0
    assert tagged_labels(tagged) == EXPECTED["labels"]["BidLSTM_CRF"]


def test_onnx_export_refuses_networks_it_would_get_wrong(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TEXTORCH_CACHE_DIR", str(tmp_path / "cache"))
    from textorch.tagging.delft_import.importer import convert_delft_model

    for architecture, reason in (("BidLSTM_CNN_CRF", "character CNN"), ("BERT_CRF", "SubtokenCRFTagger")):
        out = convert_delft_model(delft_dir(tmp_path, architecture), tmp_path / architecture, FIXTURES / "vectors.txt")
        assert main(["export", "onnx", "--model", str(out), "--output", str(tmp_path / "onnx")]) == 2
        assert reason in capsys.readouterr().err

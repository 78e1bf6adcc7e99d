"""The CRF over the template features alone (``template_only``) and the template table's L1
penalty: GROBID's CRF inside the same network, chosen from the data where a few long sequences
without validation are all there is."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from textorch.data.readers import read_labelled
from textorch.errors import ConfigError
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig
from textorch.tagging.labeler import SequenceLabeler
from textorch.tagging.training_data import TEMPLATE_ONLY_L1, fitted_to_data

SMALL = dict(char_dim=8, char_hidden=8, word_hidden=12, feature_dim=3, feature_output_dim=8, dropout=0.1)
RULE = TrainConfig(template_only_from_tokens=100)


@pytest.mark.parametrize("lengths, has_valid, chosen", [
    ([150] * 23, False, True),     # figure's captions merged: a few dozen long sequences, nothing validates
    ([2500] * 60, False, True),    # long documents read in pieces of 1,000 tokens: pieces of 833 on average
    ([52] * 67, False, False),     # figure's captions: short, the network keeps its recurrent part
    ([150] * 23, True, False),     # validation picks the epoch: the network
])
def test_few_long_sequences_without_validation_train_the_template_crf_alone(lengths: list[int], has_valid: bool,
                                                                             chosen: bool) -> None:
    fitted = fitted_to_data(TrainConfig(max_sequence_length=1000, template_only_from_tokens=100), lengths, has_valid)
    assert fitted.template_only is chosen
    assert fitted.template_l1 == (TEMPLATE_ONLY_L1 if chosen else 0.0)
    assert fitted_to_data(TrainConfig(max_sequence_length=1000), lengths, has_valid).template_only is False  # rule off


def test_a_given_penalty_is_kept_and_template_only_asked_for_gets_grobids() -> None:
    assert fitted_to_data(TrainConfig(template_only_from_tokens=100, template_l1=2.0), [150] * 23, False).template_l1 == 2.0
    asked = fitted_to_data(TrainConfig(template_only=True), [10] * 5, True)
    assert asked.template_only and asked.template_l1 == TEMPLATE_ONLY_L1


def _fit(tiny_grobid: Path, config: TrainConfig) -> tuple[SequenceLabeler, dict[str, torch.Tensor]]:
    corpus = read_labelled(tiny_grobid)
    labeler = SequenceLabeler.build(corpus, ModelConfig(architecture="BidLSTM_CRF_FEATURES_TEMPLATE", **SMALL),
                                    DataConfig(), seed=1)
    before = {name: p.detach().clone() for name, p in labeler.model.named_parameters()}
    labeler.fit(corpus, None, config)
    return labeler, before


def test_template_only_training_leaves_the_recurrent_part_silent(tiny_grobid: Path) -> None:
    config = TrainConfig(max_epoch=3, batch_size=8, learning_rate=0.01, early_stop=False, seed=1, template_only=True,
                         template_l1=0.5)
    labeler, before = _fit(tiny_grobid, config)
    model = labeler.model
    assert all(float(p.abs().max()) == 0 for p in model.head.emissions.parameters())
    for name, p in model.named_parameters():
        moved = not torch.equal(before[name], p.detach())
        if name.startswith("template_emissions") or name.startswith("head.crf"):
            assert moved, name
        elif not name.startswith("head.emissions"):
            assert not moved, name  # frozen: no step was spent on it
    # the labels are those of the CRF over the template features alone
    sequences = read_labelled(tiny_grobid).sequences[:6]
    batch = labeler.encode(sequences).batch(list(range(6)))
    with torch.no_grad():
        ids, _ = model.head.crf.decode(model.template_emissions(batch.template_rows).float(), batch.mask)
    labels = [[labeler.encoder.labels.item(i) for i in row[:len(s)].tolist()] for row, s in zip(ids, sequences)]
    assert [p.labels for p in labeler.predict(sequences)] == labels
    scores = labeler.evaluate(read_labelled(tiny_grobid))
    assert scores["f1"] > 0.5  # the template CRF alone learns the fixture's dates


def test_the_l1_penalty_shrinks_the_template_table(tiny_grobid: Path) -> None:
    norms = {}
    for penalty in (0.0, 5.0):
        config = TrainConfig(max_epoch=3, batch_size=8, learning_rate=0.01, early_stop=False, seed=1, template_l1=penalty)
        labeler, _ = _fit(tiny_grobid, config)
        norms[penalty] = float(labeler.model.template_emissions.weight.detach().abs().sum())
    assert norms[5.0] < 0.8 * norms[0.0]


def test_template_only_needs_template_features(tiny_grobid: Path) -> None:
    corpus = read_labelled(tiny_grobid)
    labeler = SequenceLabeler.build(corpus, ModelConfig(architecture="BidLSTM_CRF_FEATURES", **SMALL), DataConfig(), seed=1)
    with pytest.raises(ConfigError, match="--template-only"):
        labeler.fit(corpus, None, TrainConfig(max_epoch=1, early_stop=False, template_only=True))


def test_a_saved_network_trained_further_stays_a_network(tiny_grobid: Path, tmp_path: Path) -> None:
    """The rule chooses for a new model only: with --incremental it would zero a trained network's
    emission layer."""
    from textorch.cli.main import main

    blocks, block = [], []
    for line in tiny_grobid.read_text(encoding="utf-8").splitlines() + [""]:
        if line.strip():
            block.append(line)
        elif block:
            blocks.append("\n".join(block))
            block = []
    merged = tmp_path / "merged.train"  # the same dates, eight to a sequence: long pieces, no validation
    merged.write_text("".join("\n".join(blocks[i:i + 8]) + "\n\n" for i in range(0, len(blocks), 8)), encoding="utf-8")
    common = ["--architecture", "BidLSTM_CRF_FEATURES_TEMPLATE", "--format", "grobid", "--early-stop", "false",
              "--max-epoch", "1", "--seed", "1", "--template-only-from-tokens", "20"]
    assert main(["seq", "train", "--train", str(tiny_grobid), "--output", str(tmp_path / "base"), *common]) == 0
    assert main(["seq", "train", "--train", str(merged), "--output", str(tmp_path / "fresh"), *common]) == 0
    assert main(["seq", "train", "--train", str(merged), "--output", str(tmp_path / "grown"), "--incremental",
                 "--input-model", str(tmp_path / "base"), *common]) == 0

    def silent(model: str) -> bool:
        head = SequenceLabeler.load(tmp_path / model).model.head
        return all(float(p.detach().abs().max()) == 0 for p in head.emissions.parameters())

    assert not silent("base") and silent("fresh") and not silent("grown")

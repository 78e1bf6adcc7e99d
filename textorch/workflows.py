"""Library functions behind the ``seq`` commands: read and check data first, then do the slow work.

Each function takes plain values (paths, configs) and returns results; the CLI only parses
arguments and prints.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from textorch.config import DataConfig, ModelConfig, TrainConfig
from textorch.data.corpus import Corpus
from textorch.data.readers import read_conll, read_grobid, read_labelled, read_text
from textorch.data.splits import holdout
from textorch.errors import ConfigError
from textorch.eval.report import format_report
from textorch.labeler import Prediction, SequenceLabeler
from textorch.model_dir import check_writable

logger = logging.getLogger(__name__)

INPUT_FORMATS = ("text", "conll", "grobid")


@dataclass
class TrainOutcome:
    labeler: SequenceLabeler
    test_scores: dict | None = None
    splits: dict = field(default_factory=dict)


def _open_embeddings(spec: str, cache_dir: str | None):
    if spec in ("", "none"):
        return None
    from textorch.embeddings import open_embeddings

    return open_embeddings(spec, cache_dir=cache_dir)


def train_tagger(
    train_path: str,
    output: str | None,
    model_config: ModelConfig,
    train_config: TrainConfig,
    data_config: DataConfig,
    valid_path: str | None = None,
    test_path: str | None = None,
    hold_out_test: bool = False,
    device: str = "cpu",
    cache_dir: str | None = None,
) -> TrainOutcome:
    """``seq train`` and ``seq train-eval``: split, train with early stopping, score, save.

    Splits (all seeded by ``train_config.seed``): with ``hold_out_test`` and no test file, 10 %
    of the training data becomes the test set; early stopping uses ``valid_path`` when given,
    else a further 10 % of what remains; without early stopping no validation data is taken.
    """
    if output is not None:
        check_writable(output)
    train = read_labelled(train_path, data_config.format)
    fmt = train.format
    valid = read_labelled(valid_path, fmt) if valid_path else None
    test = read_labelled(test_path, fmt) if test_path else None
    sequences = train.sequences
    splits: dict = {}
    if hold_out_test and test is None:
        sequences, held = holdout(sequences, 0.1, train_config.seed)
        test = replace(train, sequences=held, path=f"{train_path} (10% held out)")
    if train_config.early_stop and valid is None:
        sequences, held = holdout(sequences, train_config.valid_fraction, train_config.seed + 1)
        valid = replace(train, sequences=held, path=f"{train_path} ({train_config.valid_fraction:.0%} held out)")
    train = replace(train, sequences=sequences)
    if not train.sequences:
        raise ConfigError(f"{train_path}: no training sequences left after splitting")
    splits = {"train": len(train), "valid": len(valid) if valid else 0, "test": len(test) if test else 0}
    logger.info("data: %s (%s) — %d train, %d valid, %d test sequences", train_path, fmt, *splits.values())

    embeddings = _open_embeddings(data_config.embeddings, cache_dir)
    labeler = SequenceLabeler.build(train, model_config, data_config, embeddings, device, seed=train_config.seed)
    result = labeler.fit(train, valid if train_config.early_stop else None, train_config)
    if labeler.word_table is not None:
        logger.info("word vectors found for %.1f%% of distinct words", 100 * labeler.word_table.coverage())
    logger.info(
        "trained %d epochs in %.1fs (%.0f tokens/s), best epoch %d",
        len(result.history), result.train_seconds, result.tokens_per_s, result.best_epoch,
    )
    outcome = TrainOutcome(labeler, splits=splits)
    if test is not None:
        outcome.test_scores = labeler.evaluate(test)
    if output is not None:
        labeler.save(output)
        logger.info("model saved to %s", output)
    return outcome


def read_for_tagging(path: str, input_format: str, labeler: SequenceLabeler) -> Corpus:
    """Read input to tag; a gold label column in CoNLL/GROBID input is recognised and ignored."""
    if input_format not in INPUT_FORMATS:
        raise ConfigError(f"unknown --input-format {input_format!r}; choose one of: {', '.join(INPUT_FORMATS)}")
    if input_format == "text":
        return read_text(path)
    if input_format == "grobid":
        return read_grobid(path, labelled=False, n_features=labeler.n_features)
    return read_conll(path, labelled=False)


def tag_corpus(labeler: SequenceLabeler, corpus: Corpus, batch_size: int) -> tuple[list[Prediction], float]:
    """Predictions and the time of the tagging itself (sequences in memory to labels)."""
    started = time.perf_counter()
    predictions = labeler.predict(corpus.sequences, batch_size=batch_size)
    return predictions, time.perf_counter() - started


def write_metrics(scores: dict, path: str | None) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(scores, indent=2) + "\n", encoding="utf-8")


def report(scores: dict) -> str:
    return format_report(scores)


def stats(corpus: Corpus, load_s: float, tag_s: float) -> dict:
    n_tokens = sum(len(s) for s in corpus.sequences)
    return {
        "n_sequences": len(corpus.sequences),
        "n_tokens": n_tokens,
        "load_s": round(load_s, 6),
        "tag_s": round(tag_s, 6),
        "tokens_per_s": round(n_tokens / tag_s, 1) if tag_s > 0 else None,
    }


def set_threads(threads: int | None) -> None:
    if threads:
        torch.set_num_threads(threads)

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

from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig, to_dict
from textorch.data.corpus import Corpus
from textorch.data.readers import read_conll, read_grobid, read_text
from textorch.data.splits import holdout
from textorch.data.checked_read import read_validated
from textorch.errors import ConfigError
from textorch.eval.entity_report import format_report
from textorch.tagging.labeler import TASK, Prediction, SequenceLabeler
from textorch.model_dir import check_writable
from textorch.train.dist import DistContext
from textorch.train.resume import COMPLETE, CheckpointOptions, RunCheckpoints, describe_run, prepare_run
from textorch.train.history import record_final_scores

logger = logging.getLogger(__name__)

INPUT_FORMATS = ("text", "conll", "grobid")


@dataclass
class TrainOutcome:
    labeler: SequenceLabeler | None
    """None only when ``--resume`` found a finished run without ``--output``."""
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
    device: str | torch.device = "cpu",
    cache_dir: str | None = None,
    ctx: DistContext | None = None,
    skip_bad_sequences: bool = False,
    checkpoints: CheckpointOptions | None = None,
) -> TrainOutcome:
    """``seq train`` and ``seq train-eval``: split, train with early stopping, score, save.

    With ``checkpoints`` (and a place for them: ``output`` or ``checkpoints.directory``) the
    training state is saved as it goes, and ``checkpoints.resume`` continues an interrupted
    run, or reports a finished one (:mod:`textorch.train.resume`).

    The data is validated first (data/checked_read.py): errors stop the run before any training,
    all listed, unless ``skip_bad_sequences`` leaves out the sequences concerned.

    In a multi-process run (``ctx`` from :func:`textorch.train.dist.session`) every process
    calls this with the same arguments: all read the data and split it identically, train
    their shards, score the test set together; only rank 0 writes the model.

    Splits (all seeded by ``train_config.seed``): with ``hold_out_test`` and no test file, 10 %
    of the training data becomes the test set; early stopping uses ``valid_path`` when given,
    else a further 10 % of what remains; without early stopping no validation data is taken.
    """
    if output is not None:
        check_writable(output)
    ctx = ctx or DistContext()
    run = prepare_run(checkpoints, output, lambda: describe_run(
        TASK, {"model": to_dict(model_config), "train": to_dict(train_config), "data": to_dict(data_config)},
        {"train": train_path, "valid": valid_path, "test": test_path},
        {"hold_out_test": hold_out_test, "skip_bad_sequences": skip_bad_sequences}, ctx.world_size), ctx)
    train, valid, test = read_validated(train_path, valid_path, test_path, data_config.format,
                                        train_config.max_sequence_length, skip_bad_sequences)
    fmt = train.format
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
    if run is not None and run.status == COMPLETE:
        return _already_trained(run, test, splits, device, cache_dir, ctx)

    with ctx.local_main_first():  # one process per machine builds the embeddings cache
        embeddings = _open_embeddings(data_config.embeddings, cache_dir)
    labeler = SequenceLabeler.build(train, model_config, data_config, embeddings, device, seed=train_config.seed)
    result = labeler.fit(train, valid if train_config.early_stop else None, train_config, ctx=ctx,
                         checkpoints=run.checkpointer() if run is not None else None)
    if labeler.word_table is not None:
        logger.info("word vectors found for %.1f%% of distinct words", 100 * labeler.word_table.coverage())
    logger.info(
        "trained %d epochs in %.1fs (%.0f tokens/s), best epoch %d",
        len(result.history), result.train_seconds, result.tokens_per_s, result.best_epoch,
    )
    outcome = TrainOutcome(labeler, splits=splits)
    if test is not None:
        outcome.test_scores = labeler.evaluate(test, ctx=ctx)
        record_final_scores(labeler.history, outcome.test_scores, str(test.path))
    if output is not None:
        if run is not None:
            run.before_save(ctx)
        if ctx.is_main:
            labeler.save(output, run.model_record() if run is not None else None)
            logger.info("model saved to %s", output)
        ctx.barrier()  # nobody may read the model directory before rank 0 has written it
    if run is not None:
        run.finish(ctx, outcome.test_scores)
    return outcome


def _already_trained(run: RunCheckpoints, test: Corpus | None, splits: dict, device: str | torch.device,
                     cache_dir: str | None, ctx: DistContext) -> TrainOutcome:
    """``--resume`` of a run that had finished: its model (scored again on the test data when it
    was saved) or, without ``--output``, the test scores it recorded."""
    if run.output is None:
        logger.info("training had already finished (%s)", run.root / "complete.json")
        return TrainOutcome(None, run.record.get("test_scores"), splits)
    logger.info("training had already finished: the model is in %s", run.output)
    labeler = SequenceLabeler.load(run.output, device=device, cache_dir=cache_dir)
    scores = labeler.evaluate(test, ctx=ctx) if test is not None else None
    return TrainOutcome(labeler, scores, splits)


def read_for_tagging(path: str, input_format: str, labeler: SequenceLabeler) -> Corpus:
    """Read input to tag; a gold label column in CoNLL/GROBID input is recognised and ignored."""
    if input_format not in INPUT_FORMATS:
        raise ConfigError(f"unknown --input-format {input_format!r}; choose one of: {', '.join(INPUT_FORMATS)}")
    if input_format == "text":
        return read_text(path)
    if input_format == "grobid":
        return read_grobid(path, labelled=False, n_features=labeler.n_features)
    return read_conll(path, labelled=False)


def tag_corpus(
    labeler: SequenceLabeler, corpus: Corpus, batch_size: int, ctx: DistContext | None = None,
    with_scores: bool = True,
) -> tuple[list[Prediction], float]:
    """Predictions and the time of the tagging itself (sequences in memory to labels).

    ``batch_size`` is per process; with several processes each tags its share and every
    process receives all predictions in input order. ``with_scores=False`` when nothing will
    read the confidences (CoNLL and GROBID output): a CRF then skips its forward-backward pass.
    """
    started = time.perf_counter()
    predictions = labeler.predict(corpus.sequences, batch_size=batch_size, ctx=ctx, with_scores=with_scores)
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

"""``textorch demo``: the whole life cycle on a generated corpus, with no external file."""

from __future__ import annotations

import argparse
import json
import logging
import time

from textorch.cli.commands import group_help
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig
from textorch.data.corpus import Corpus
from textorch.data.demo_corpus import generate_date_corpus, sample_texts
from textorch.data.corpus import TokenSequence
from textorch.data.tokenize import tokenize
from textorch.eval.entity_report import format_report
from textorch.tagging.labeler import SequenceLabeler
from textorch.tagging.answer import tagging_document

logger = logging.getLogger(__name__)


def run_demo(output: str, n_sequences: int, max_epoch: int, seed: int) -> dict:
    """Generate dates, train a BiLSTM-CRF, evaluate, save, reload and tag new lines."""
    corpus = generate_date_corpus(n_sequences, seed=seed)
    n_test = n_valid = max(1, n_sequences // 10)
    test = Corpus(corpus.sequences[:n_test], "text", path="demo test")
    valid = Corpus(corpus.sequences[n_test : n_test + n_valid], "text", path="demo valid")
    train = Corpus(corpus.sequences[n_test + n_valid :], "text", path="demo train")
    logger.info("demo: %d generated date lines (%d train, %d valid, %d test)", n_sequences, len(train), len(valid), len(test))
    train_config = TrainConfig(max_epoch=max_epoch, patience=3, seed=seed)
    labeler = SequenceLabeler.build(train, ModelConfig(), DataConfig(), seed=seed)
    labeler.fit(train, valid, train_config)
    scores = labeler.evaluate(test)
    print(format_report(scores))
    labeler.save(output)
    logger.info("model saved to %s", output)

    reloaded = SequenceLabeler.load(output)
    texts = sample_texts(5, seed=seed + 1)
    sequences = []
    for text in texts:
        tokens, offsets = tokenize(text)
        sequences.append(TokenSequence(tokens, offsets=offsets, text=text))
    started = time.perf_counter()
    predictions = reloaded.predict(sequences)
    document = tagging_document(output, sequences, predictions, time.perf_counter() - started)
    print(json.dumps(document, ensure_ascii=False, indent=2))
    return scores


def register(groups: argparse._SubParsersAction) -> None:
    p = groups.add_parser("demo", help=group_help("demo"))
    p.add_argument("--output", default="textorch-demo-model", help="where to save the model (default: ./textorch-demo-model)")
    p.add_argument("--sequences", type=int, default=2500, help="generated lines (default: 2500)")
    p.add_argument("--max-epoch", type=int, default=15, help="maximum epochs (default: 15)")
    p.add_argument("--seed", type=int, default=7, help="random seed (default: 7)")
    p.set_defaults(run=lambda a: run_demo(a.output, a.sequences, a.max_epoch, a.seed) and 0)

"""``textorch seq ...``: sequence labelling commands, each a few lines over ``workflows``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import fields
from pathlib import Path

from textorch.config import DataConfig, ModelConfig, TrainConfig
from textorch.data.writers import write_conll, write_grobid
from textorch.models.architectures import ARCHITECTURES
from textorch.output import tagging_document
from textorch import workflows

_TRAIN_DEFAULTS = {f.name: f.default for f in fields(TrainConfig)}


def _bool(value: str) -> bool:
    lowered = value.lower()
    if lowered in ("true", "yes", "1"):
        return True
    if lowered in ("false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"], help="compute device (default: cpu)")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for torch (default: torch's choice)")
    parser.add_argument("--cache-dir", default=None, help="embeddings cache directory (default: $TEXTORCH_CACHE_DIR or ~/.cache/textorch)")


def _add_training_options(parser: argparse.ArgumentParser) -> None:
    d = _TRAIN_DEFAULTS
    parser.add_argument("--format", choices=["conll", "grobid"], default=None, help="input format (default: detected)")
    parser.add_argument("--architecture", default="BidLSTM_CRF", choices=list(ARCHITECTURES), metavar="NAME",
                        help="model architecture (default: BidLSTM_CRF; see 'textorch seq architectures')")
    parser.add_argument("--embeddings", default="none", help="registry name, path to a GloVe/word2vec/fastText file, or none (default)")
    parser.add_argument("--feature-columns", default=None, help="GROBID feature columns for *_FEATURES models, e.g. 9-15 (default: chosen from the data)")
    parser.add_argument("--max-epoch", type=int, default=d["max_epoch"], help=f"maximum epochs (default: {d['max_epoch']})")
    parser.add_argument("--batch-size", type=int, default=d["batch_size"], help=f"global batch size (default: {d['batch_size']})")
    parser.add_argument("--learning-rate", type=float, default=d["learning_rate"], help=f"Adam learning rate (default: {d['learning_rate']})")
    parser.add_argument("--patience", type=int, default=d["patience"], help=f"early-stopping patience in epochs (default: {d['patience']})")
    parser.add_argument("--early-stop", type=_bool, default=d["early_stop"], metavar="true|false", help="stop on validation F1 (default: true)")
    parser.add_argument("--max-sequence-length", type=int, default=d["max_sequence_length"], help="cut longer training sequences into pieces (default: 0, no limit)")
    parser.add_argument("--clip-grad", type=float, default=d["clip_grad"], help=f"gradient norm clipping (default: {d['clip_grad']})")
    parser.add_argument("--dropout", type=float, default=ModelConfig.dropout, help=f"dropout (default: {ModelConfig.dropout})")
    parser.add_argument("--seed", type=int, default=d["seed"], help=f"random seed for splits, initialisation and batches (default: {d['seed']})")
    _add_common(parser)


def _configs(args: argparse.Namespace) -> tuple[ModelConfig, TrainConfig, DataConfig]:
    model = ModelConfig(architecture=args.architecture, dropout=args.dropout)
    train = TrainConfig(
        batch_size=args.batch_size, learning_rate=args.learning_rate, max_epoch=args.max_epoch,
        patience=args.patience, early_stop=args.early_stop, clip_grad=args.clip_grad,
        max_sequence_length=args.max_sequence_length, seed=args.seed,
    )
    data = DataConfig(format=args.format, embeddings=args.embeddings, feature_columns=args.feature_columns)
    return model, train, data


def _train(args: argparse.Namespace, evaluate: bool) -> int:
    workflows.set_threads(args.threads)
    model, train, data = _configs(args)
    outcome = workflows.train_tagger(
        args.train, args.output, model, train, data,
        valid_path=args.valid, test_path=getattr(args, "test", None), hold_out_test=evaluate,
        device=args.device, cache_dir=args.cache_dir,
    )
    if outcome.test_scores is not None:
        print(workflows.report(outcome.test_scores))
        workflows.write_metrics(outcome.test_scores, getattr(args, "metrics_json", None))
    return 0


def _eval(args: argparse.Namespace) -> int:
    workflows.set_threads(args.threads)
    labeler = workflows.SequenceLabeler.load(args.model, device=_device(args), cache_dir=args.cache_dir)
    corpus = workflows.read_labelled(args.test, labeler.input_format if labeler.input_format != "text" else None)
    scores = labeler.evaluate(corpus, batch_size=args.batch_size)
    print(workflows.report(scores))
    workflows.write_metrics(scores, args.metrics_json)
    return 0


def _device(args: argparse.Namespace):
    from textorch.train.dist import DistContext, resolve_device

    return resolve_device(args.device, DistContext())


def _tag(args: argparse.Namespace) -> int:
    workflows.set_threads(args.threads)
    started = time.perf_counter()
    labeler = workflows.SequenceLabeler.load(args.model, device=_device(args), cache_dir=args.cache_dir)
    load_s = time.perf_counter() - started
    corpus = workflows.read_for_tagging(args.input, args.input_format, labeler)
    predictions, tag_s = workflows.tag_corpus(labeler, corpus, args.batch_size)
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    try:
        if args.input_format == "text":
            document = tagging_document(Path(args.model).name, corpus.sequences, predictions, tag_s)
            out.write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")
        elif args.input_format == "grobid":
            write_grobid(corpus, [p.labels for p in predictions], out)
        else:
            write_conll(corpus, [p.labels for p in predictions], out)
    finally:
        if out is not sys.stdout:
            out.close()
    if args.stats_json:
        Path(args.stats_json).write_text(json.dumps(workflows.stats(corpus, load_s, tag_s), indent=2) + "\n")
    return 0


def _architectures(args: argparse.Namespace) -> int:
    width = max(len(name) for name in ARCHITECTURES)
    for name, arch in ARCHITECTURES.items():
        print(f"{name:<{width}}  {arch.description}")
    return 0


def register(groups: argparse._SubParsersAction) -> None:
    seq = groups.add_parser("seq", help="sequence labelling: train, evaluate, tag")
    commands = seq.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = commands.add_parser("train", help="train a tagger and save it")
    p.add_argument("--train", required=True, help="labelled training file (CoNLL or GROBID)")
    p.add_argument("--valid", help="validation file for early stopping (default: 10%% of --train)")
    p.add_argument("--output", required=True, help="model directory to write")
    _add_training_options(p)
    p.set_defaults(run=lambda a: _train(a, evaluate=False))

    p = commands.add_parser("train-eval", help="train, then evaluate on --test (default: 10%% held out)")
    p.add_argument("--train", required=True, help="labelled training file (CoNLL or GROBID)")
    p.add_argument("--valid", help="validation file for early stopping")
    p.add_argument("--test", help="test file (default: 10%% of --train, held out by seed)")
    p.add_argument("--output", help="model directory to write (optional)")
    p.add_argument("--metrics-json", help="write the test scores as JSON here")
    _add_training_options(p)
    p.set_defaults(run=lambda a: _train(a, evaluate=True))

    p = commands.add_parser("eval", help="evaluate a saved model on a labelled file")
    p.add_argument("--model", required=True, help="model directory")
    p.add_argument("--test", required=True, help="labelled test file")
    p.add_argument("--metrics-json", help="write the scores as JSON here")
    p.add_argument("--batch-size", type=int, default=64, help="sequences per batch, per device (default: 64)")
    _add_common(p)
    p.set_defaults(run=_eval)

    p = commands.add_parser("tag", help="tag text, CoNLL or GROBID input with a saved model")
    p.add_argument("--model", required=True, help="model directory")
    p.add_argument("--input", required=True, help="file to tag")
    p.add_argument("--output", help="output file (default: stdout)")
    p.add_argument("--input-format", default="text", choices=list(workflows.INPUT_FORMATS), help="text (one text per line; JSON output), conll or grobid (same layout back with the predicted label)")
    p.add_argument("--batch-size", type=int, default=32, help="sequences per batch, per device (default: 32)")
    p.add_argument("--stats-json", help="write n_sequences, n_tokens, load_s, tag_s, tokens_per_s here")
    _add_common(p)
    p.set_defaults(run=_tag)

    p = commands.add_parser("architectures", help="list the available architectures")
    p.set_defaults(run=_architectures)

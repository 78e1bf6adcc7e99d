"""``textorch cls ...``: text classification commands, each a few lines over ``classification.training``
and ``classification.classify_files``."""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path

from textorch.cli.commands import group_help
from textorch.classification import classify_files, training
from textorch.classification.classifier import ClsDataConfig, ClsModelConfig, TextClassifier
from textorch.cli.export import add_engine_options, apply_engine_options
from textorch.cli.run_options import (
    add_run_options,
    true_or_false,
    add_fold_parallel_option,
    add_tensorboard_option,
    add_train_commands,
    fold_parallel_option,
    print_architectures,
)
from textorch.tagging.config import TrainConfig
from textorch.data.cls_readers import CLS_FORMATS, INPUT_FORMATS
from textorch.eval.cls_metrics import format_cls_report
from textorch.models.classifiers import CLS_ARCHITECTURES
from textorch.train.dist import session
from textorch.train.checkpoint_options import checkpoint_options
from textorch.data.json_stream import JsonListWriter
from textorch.data.staged_output import staged_output
from textorch.data.writers import answer_header
from textorch.runtime.progress import TaggingProgress

_TRAIN = {f.name: f.default for f in fields(TrainConfig)}
_MODEL = {f.name: f.default for f in fields(ClsModelConfig)}


def _add_reading(parser: argparse.ArgumentParser, defaults_from_model: bool = False) -> None:
    note = " (default: as the model was trained)" if defaults_from_model else ""
    parser.add_argument("--format", choices=CLS_FORMATS, default=None, help="input format (default: from the file name)")
    parser.add_argument("--text-column", default=None, help=f"column (name or 0-based index) or JSON field of the text (default: text){note}")
    parser.add_argument("--label-column", action="append", default=None, metavar="COLUMN",
                        help=f"label column; repeat for multi-label 0/1 columns (default: label; licenses: license){note}")
    parser.add_argument("--no-header", dest="header", action="store_false", default=None if defaults_from_model else True,
                        help="CSV/TSV files have no header row (columns are then 0-based indices)")


def _add_training(parser: argparse.ArgumentParser) -> None:
    t, m = _TRAIN, _MODEL
    _add_reading(parser)
    parser.add_argument("--architecture", default=None, choices=list(CLS_ARCHITECTURES), metavar="NAME",
                        help=f"model architecture (default: {m['architecture']}, or bert with --transformer; see 'textorch cls architectures')")
    parser.add_argument("--embeddings", default="none", help="registry name, path to a GloVe/word2vec/fastText file, or none (learned word embeddings)")
    parser.add_argument("--transformer", default=None, help="bert: local Hugging Face model directory or transformers-registry name")
    parser.add_argument("--fold-count", type=int, default=m["fold_count"], help="train an ensemble of N models by N-fold cross-validation (default: 1)")
    add_fold_parallel_option(parser)
    parser.add_argument("--class-weights", default=None, metavar="balanced|none|C=W,...",
                        help="loss weights per class (default: balanced for single-label, none for multi-label)")
    parser.add_argument("--max-length", type=int, default=m["max_length"], help=f"tokens of a text the model reads (default: {m['max_length']})")
    parser.add_argument("--hidden", type=int, default=m["hidden"], help=f"recurrent units / convolution filters (default: {m['hidden']})")
    parser.add_argument("--dense-size", type=int, default=m["dense_size"], help=f"dense layer size (default: {m['dense_size']})")
    parser.add_argument("--word-dim", type=int, default=m["word_dim"], help=f"learned word embedding size without --embeddings (default: {m['word_dim']})")
    parser.add_argument("--dropout", type=float, default=m["dropout"], help=f"dropout (default: {m['dropout']})")
    parser.add_argument("--max-epoch", type=int, default=t["max_epoch"], help=f"maximum epochs (default: {t['max_epoch']})")
    parser.add_argument("--batch-size", type=int, default=t["batch_size"], help=f"global batch size (default: {t['batch_size']})")
    parser.add_argument("--learning-rate", type=float, default=t["learning_rate"], help=f"Adam learning rate; for bert, of the output layer (default: {t['learning_rate']})")
    parser.add_argument("--transformer-learning-rate", type=float, default=t["transformer_learning_rate"],
                        help=f"bert: AdamW rate of the encoder (default: {t['transformer_learning_rate']})")
    parser.add_argument("--patience", type=int, default=t["patience"], help=f"early-stopping patience in epochs (default: {t['patience']})")
    parser.add_argument("--early-stop", type=true_or_false, default=t["early_stop"], metavar="true|false", help="stop on validation macro-F1 (default: true)")
    parser.add_argument("--clip-grad", type=float, default=t["clip_grad"], help=f"gradient norm clipping (default: {t['clip_grad']})")
    parser.add_argument("--lr-decay", type=float, default=t["lr_decay"], metavar="FACTOR",
                        help=f"multiply the learning rate by this when validation F1 has not improved for more than --lr-decay-patience epochs (1: constant; default: {t['lr_decay']})")
    parser.add_argument("--lr-decay-patience", type=int, default=t["lr_decay_patience"], metavar="EPOCHS",
                        help=f"epochs without gain tolerated before a cut (default: {t['lr_decay_patience']})")
    parser.add_argument("--bucket-batches", type=int, default=t["bucket_batches"], help=f"batches per length bucket: more is faster, fewer gives more random batches (default: {t['bucket_batches']})")
    parser.add_argument("--seed", type=int, default=t["seed"], help=f"random seed for splits, initialisation and batches (default: {t['seed']})")
    parser.add_argument("--grad-accum", type=int, default=t["grad_accum"], metavar="K",
                        help="process each global batch in K micro-batches (same result, less memory; default: 1)")
    parser.add_argument("--precision", default=t["precision"], choices=["fp32", "bf16", "fp16"],
                        help="fp32, bf16 autocast (CPU or GPU) or fp16 autocast with gradient scaling (GPU) (default: fp32)")
    add_tensorboard_option(parser)
    add_run_options(parser)


def _configs(args: argparse.Namespace) -> tuple[ClsModelConfig, TrainConfig, ClsDataConfig]:
    architecture = args.architecture or ("bert" if args.transformer else _MODEL["architecture"])
    model = ClsModelConfig(
        architecture=architecture, hidden=args.hidden, dense_size=args.dense_size, dropout=args.dropout,
        max_length=args.max_length, word_dim=args.word_dim, transformer=args.transformer, fold_count=args.fold_count,
    )
    train = TrainConfig(
        batch_size=args.batch_size, learning_rate=args.learning_rate, max_epoch=args.max_epoch, patience=args.patience,
        early_stop=args.early_stop, clip_grad=args.clip_grad, lr_decay=args.lr_decay, lr_decay_patience=args.lr_decay_patience,
        bucket_batches=args.bucket_batches, seed=args.seed,
        transformer_learning_rate=args.transformer_learning_rate, grad_accum=args.grad_accum, precision=args.precision,
        tensorboard_dir=args.tensorboard,
    )
    data = ClsDataConfig(format=args.format, text_column=args.text_column, label_columns=tuple(args.label_column or ()),
                         header=args.header, embeddings=args.embeddings, class_weights=args.class_weights)
    return model, train, data


def _print_folds(outcome: training.ClsTrainOutcome) -> None:
    from textorch.eval.cls_metrics import summarize_folds

    if len(outcome.fold_scores) < 2:
        return
    print(f"per-fold scores (on the {outcome.fold_scores_on}):")
    print(f"{'fold':>6}  {'accuracy':>9}  {'macro-F1':>9}  {'micro-F1':>9}")
    for i, s in enumerate(outcome.fold_scores):
        print(f"{i:>6}  {s['accuracy']:>9.4f}  {s['macro']['f1']:>9.4f}  {s['micro']['f1']:>9.4f}")
    summary = summarize_folds(outcome.fold_scores)
    mean, sd = summary["mean"], summary["sd"]
    print(f"{'mean':>6}  {mean['accuracy']:>9.4f}  {mean['macro_f1']:>9.4f}  {mean['micro_f1']:>9.4f}")
    print(f"{'sd':>6}  {sd['accuracy']:>9.4f}  {sd['macro_f1']:>9.4f}  {sd['micro_f1']:>9.4f}")
    print()


def _train(args: argparse.Namespace, evaluate: bool) -> int:
    model, train, data = _configs(args)
    fold_parallel = fold_parallel_option(args)
    with session(args.device, args.threads) as (ctx, device):
        outcome = training.train_classifier(
            args.train, args.output, model, train, data, valid_path=args.valid, test_path=getattr(args, "test", None),
            hold_out_test=evaluate, device=device, cache_dir=args.cache_dir, ctx=ctx, checkpoints=checkpoint_options(args),
            fold_parallel=fold_parallel,
        )
    if not ctx.is_main:
        return 0
    _print_folds(outcome)
    if outcome.test_scores is not None:
        if len(outcome.fold_scores) > 1:
            print("ensemble of the folds' models:")
        print(format_cls_report(outcome.test_scores))
        classify_files.write_json(outcome.metrics(), getattr(args, "metrics_json", None))
    return 0


def _eval(args: argparse.Namespace) -> int:
    with session(args.device, args.threads) as (ctx, device):
        classifier = TextClassifier.load(args.model, device=device, cache_dir=args.cache_dir)
        apply_engine_options(args, classifier)
        overrides = {"format": args.format, "text_column": args.text_column, "header": args.header,
                     "label_columns": tuple(args.label_column or ())}
        with TaggingProgress("evaluating", ctx.shows_progress and not args.quiet) as progress:
            scores = classify_files.evaluate_streamed(classifier, args.test, overrides, ctx, args.batch_size, args.chunk_size,
                                                      progress)
    if not ctx.is_main:
        return 0
    print(format_cls_report(scores))
    classify_files.write_json(scores, args.metrics_json)
    return 0


def _classify(args: argparse.Namespace) -> int:
    with session(args.device, args.threads) as (ctx, device):
        classifier = TextClassifier.load(args.model, device=device, cache_dir=args.cache_dir)
        apply_engine_options(args, classifier)
        examples = classify_files.stream_for_classification(args.input, args.input_format, classifier)
        progress = TaggingProgress("classifying", ctx.shows_progress and not args.quiet)
        with progress, staged_output(args.output, write=ctx.is_main) as staged:
            run = classify_files.ClassificationRun(classifier, examples, args.batch_size, ctx, args.chunk_size, progress)
            writer = None
            if staged is not None:  # one process writes; every one holds all predictions
                header = {**answer_header(Path(args.model).name, 0.0), "classes": classifier.classes,
                          "multi_label": classifier.multi_label}
                writer = JsonListWriter(staged.out, "classifications", header if staged.target is None else None)
                writer.header = header
                staged.head, staged.tail, staged.unit = writer.head, writer.tail, "texts"
            for chunk, predictions in run:
                if writer is not None and staged is not None:
                    for example, prediction in zip(chunk, predictions):
                        writer.add(classify_files.classification_record(example, prediction))
                    staged.items += len(chunk)
            if writer is not None:
                writer.header["runtime"] = round(run.seconds, 3)
    return 0


def _add_streaming(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument("--chunk-size", type=int, default=4096, metavar="N",
                        help=f"read and {verb} the input N texts at a time: memory does not grow with the input (default: 4096)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar (there is none when stderr is not a terminal)")


def _architectures(args: argparse.Namespace) -> int:
    return print_architectures(CLS_ARCHITECTURES)


def register(groups: argparse._SubParsersAction) -> None:
    cls = groups.add_parser("cls", help=group_help("cls"))
    commands = cls.add_subparsers(dest="command", metavar="COMMAND", required=True)

    add_train_commands(commands, lambda a, evaluate: _train(a, evaluate=evaluate), _add_training,
                       "a classifier (or an n-fold ensemble)", "labelled training file", "stratified, held out by seed")

    p = commands.add_parser("eval", help="evaluate a saved classifier on a labelled file")
    p.add_argument("--model", required=True, help="model directory")
    p.add_argument("--test", required=True, help="labelled test file")
    p.add_argument("--metrics-json", help="write the scores as JSON here")
    p.add_argument("--batch-size", type=int, default=64, help="texts per batch (default: 64)")
    _add_streaming(p, "evaluate")
    _add_reading(p, defaults_from_model=True)
    add_run_options(p)
    add_engine_options(p)
    p.set_defaults(run=_eval)

    p = commands.add_parser("classify", help="class scores of each text of a file, as JSON")
    p.add_argument("--model", required=True, help="model directory")
    p.add_argument("--input", required=True, help="texts: one per line (.txt), or a CSV/TSV/JSONL file with the model's text column")
    p.add_argument("--output", help="output JSON file (default: stdout)")
    p.add_argument("--input-format", default=None, choices=INPUT_FORMATS, help="default: from the file name (.txt: one text per line)")
    p.add_argument("--batch-size", type=int, default=64, help="texts per batch (default: 64)")
    _add_streaming(p, "classify")
    add_run_options(p)
    add_engine_options(p)
    p.set_defaults(run=_classify)

    p = commands.add_parser("architectures", help="list the available architectures")
    p.set_defaults(run=_architectures)

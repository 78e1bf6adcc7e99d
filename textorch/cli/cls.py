"""``textorch cls ...``: text classification commands, each a few lines over ``classification.training``
and ``classification.classify_files``."""

from __future__ import annotations

import argparse
from pathlib import Path

from textorch.cli.commands import group_help
from textorch.cli.config_options import add_config_options, config_from_args
from textorch.classification import answer, classify_files, training
from textorch.classification.classifier import ClsDataConfig, ClsModelConfig
from textorch.cli.export import add_engine_options, opened_classifier
from textorch.cli.streaming_options import add_streaming_options, chunk_size
from textorch.cli.run_options import (
    add_run_options,
    add_fold_parallel_option,
    add_tensorboard_option,
    add_train_commands,
    check_at_least_one,
    fold_parallel_option,
    print_architectures,
    refuse_output_over_input,
)
from textorch.tagging.config import TrainConfig
from textorch.data.cls_readers import INPUT_FORMATS
from textorch.eval.cls_metrics import format_cls_report
from textorch.models.classifiers import CLS_ARCHITECTURES
from textorch.train.dist import session
from textorch.train.checkpoint_options import checkpoint_options
from textorch.data.json_stream import JsonListWriter
from textorch.data.staged_output import staged_output
from textorch.data.writers import answer_header
from textorch.runtime.progress import TaggingProgress

COLUMNS = ("text_column", "label_columns", "header")
"""Where a labelled file's texts and labels are: saved with a model, and its default at evaluation."""
TRAIN_FIELDS = ("max_epoch", "batch_size", "learning_rate", "transformer_learning_rate", "patience", "early_stop",
                "clip_grad", "lr_decay", "lr_decay_patience", "bucket_batches", "seed", "grad_accum", "precision")
"""The optimisation fields (shared with tagging) a classifier's training takes from the command line."""
TRAIN_HELPS = {
    "learning_rate": "Adam learning rate; for bert, of the output layer",
    "transformer_learning_rate": "bert: AdamW rate of the encoder",
    "early_stop": "stop on validation macro-F1",
}
"""Where a shared field means something narrower for a classifier than its tagging help says."""


def _add_reading(parser: argparse.ArgumentParser, defaults_from_model: bool = False) -> None:
    """How a labelled file is read; at evaluation the columns default to the model's (the format
    always goes by the file name first)."""
    add_config_options(parser, ClsDataConfig, only=("format",))
    add_config_options(parser, ClsDataConfig, only=COLUMNS, defaults_from_model=defaults_from_model)


def _add_training(parser: argparse.ArgumentParser) -> None:
    """The options of ``cls train`` and ``train-eval``: the config fields' own (help, default, type,
    choices: :mod:`textorch.cli.config_options`), and how and where the run goes."""
    _add_reading(parser)
    add_config_options(parser, ClsModelConfig, ClsDataConfig,
                       only=("architecture", "embeddings", "transformer", "fold_count"))
    add_fold_parallel_option(parser)
    add_config_options(parser, ClsModelConfig, ClsDataConfig,
                       only=("class_weights", "max_length", "hidden", "dense_size", "word_dim", "dropout"))
    add_config_options(parser, TrainConfig, only=TRAIN_FIELDS, helps=TRAIN_HELPS, grouped=False)
    add_tensorboard_option(parser)
    add_run_options(parser)


def _configs(args: argparse.Namespace) -> tuple[ClsModelConfig, TrainConfig, ClsDataConfig]:
    bert = not args.architecture and bool(args.transformer)  # --transformer alone: the bert architecture
    model = config_from_args(ClsModelConfig, args, **({"architecture": "bert"} if bert else {}))
    train = config_from_args(TrainConfig, args, tensorboard_dir=args.tensorboard)
    return model, train, config_from_args(ClsDataConfig, args)


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
    check_at_least_one(args, "batch_size")
    chunk = chunk_size(args)
    with opened_classifier(args) as (ctx, classifier):
        overrides = {"format": args.format, "text_column": args.text_column, "header": args.header,
                     "label_columns": tuple(args.label_columns or ())}
        with TaggingProgress("evaluating", ctx.shows_progress and not args.quiet) as progress:
            scores = classify_files.evaluate_streamed(classifier, args.test, overrides, ctx, args.batch_size, chunk, progress)
    if not ctx.is_main:
        return 0
    print(format_cls_report(scores))
    classify_files.write_json(scores, args.metrics_json)
    return 0


def _classify(args: argparse.Namespace) -> int:
    check_at_least_one(args, "batch_size")
    refuse_output_over_input(args.input, args.output)
    chunk = chunk_size(args)
    with opened_classifier(args) as (ctx, classifier):
        examples = classify_files.stream_for_classification(args.input, args.input_format, classifier)
        progress = TaggingProgress("classifying", ctx.shows_progress and not args.quiet)
        with progress, staged_output(args.output, write=ctx.is_main) as staged:
            run = classify_files.ClassificationRun(classifier, examples, args.batch_size, ctx, chunk, progress)
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
                        writer.add(answer.classification_record(example, prediction))
                    staged.wrote(len(chunk))
            if writer is not None:
                writer.header["runtime"] = round(run.tag_s, 3)
    return 0


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
    add_streaming_options(p, "texts", "evaluate", with_chunk_size_alias=True)
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
    add_streaming_options(p, "texts", "classify", with_chunk_size_alias=True)
    add_run_options(p)
    add_engine_options(p)
    p.set_defaults(run=_classify)

    p = commands.add_parser("architectures", help="list the available architectures")
    p.set_defaults(run=_architectures)

"""``textorch seq ...``: sequence labelling commands, each a few lines over ``tagging.training`` and ``tagging.tag_files``."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import fields
from pathlib import Path

from textorch.cli.commands import group_help
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig
from textorch.eval.entity_report import format_report
from textorch.models.architectures import ARCHITECTURES
from textorch.data.staged_output import staged_output
from textorch.runtime.progress import TaggingProgress
from textorch.train.dist import DistContext, session
from textorch.train.resume import checkpoint_options, refuse_checkpoint_options
from textorch.data.streams import stream_labelled
from textorch.tagging import tag_files, training
from textorch.tagging.labeler import SequenceLabeler
from textorch.cli.run_options import (
    add_run_options,
    true_or_false,
    add_seq_run_options,
    add_train_commands,
    fold_parallel_option,
    incremental_input,
    print_architectures,
)
from textorch.cli.export import add_engine_options, apply_engine_options

_TRAIN_DEFAULTS = {f.name: f.default for f in fields(TrainConfig)}


def add_training_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``seq train``; the ``grobid`` and ``ner`` commands take the same ones."""
    d = _TRAIN_DEFAULTS
    parser.add_argument("--format", choices=["conll", "grobid"], default=None, help="input format (default: detected)")
    parser.add_argument("--architecture", default="BidLSTM_CRF", choices=list(ARCHITECTURES), metavar="NAME",
                        help="model architecture (default: BidLSTM_CRF; see 'textorch seq architectures')")
    parser.add_argument("--embeddings", default="none", help="registry name, path to a GloVe/word2vec/fastText file, or none (default)")
    parser.add_argument("--word-lookup", default=DataConfig.word_lookup, choices=["exact_or_lower", "delft"],
                        help="how a token finds its word vector: exact_or_lower (the token, else its lower case; "
                             "default) or delft (digits to 0, then the exact form only: DeLFT's rule, which "
                             "'export onnx --layout delft' needs, since DeLFT's Java runner looks words up so)")
    parser.add_argument("--feature-columns", "--features-indices", default=None, help="GROBID feature columns for *_FEATURES models, e.g. 9-15 (default: chosen from the data)")
    parser.add_argument("--crf-template", default=None, metavar="FILE",
                        help="*_TEMPLATE models: a CRF++ template (GROBID's MODEL.crf-template) whose features feed the emissions (default: generated from the data's columns)")
    parser.add_argument("--feature-vocabulary-size", "--features-vocabulary-size", type=int, default=DataConfig.feature_vocabulary_size, metavar="N",
                        help=f"when choosing feature columns from the data: the most distinct values of a feature column (default: {DataConfig.feature_vocabulary_size})")
    parser.add_argument("--max-epoch", type=int, default=d["max_epoch"], help=f"maximum epochs (default: {d['max_epoch']})")
    parser.add_argument("--batch-size", type=int, default=d["batch_size"], help=f"global batch size (default: {d['batch_size']})")
    parser.add_argument("--learning-rate", type=float, default=d["learning_rate"], help=f"Adam learning rate; for BERT* the rate of the layers above the transformer (default: {d['learning_rate']})")
    parser.add_argument("--patience", type=int, default=d["patience"], help=f"early-stopping patience in epochs (default: {d['patience']})")
    parser.add_argument("--early-stop", type=true_or_false, default=d["early_stop"], metavar="true|false", help="stop on validation F1 (default: true)")
    parser.add_argument("--max-sequence-length", type=int, default=d["max_sequence_length"], help="cut longer training sequences into pieces (default: 0, no limit)")
    parser.add_argument("--clip-grad", type=float, default=d["clip_grad"], help=f"gradient norm clipping (default: {d['clip_grad']})")
    parser.add_argument("--lr-decay", type=float, default=d["lr_decay"], metavar="FACTOR",
                        help=f"multiply the learning rate by this when validation F1 has not improved for more than --lr-decay-patience epochs (1: constant; default: {d['lr_decay']})")
    parser.add_argument("--lr-decay-patience", type=int, default=d["lr_decay_patience"], metavar="EPOCHS",
                        help=f"epochs without gain tolerated before a cut (default: {d['lr_decay_patience']})")
    parser.add_argument("--min-validation-sequences", type=int, default=d["min_validation_sequences"], metavar="N",
                        help="validation data smaller than this joins the training data, which then trains for --max-epoch epochs without early stopping (default: 0, off)")
    parser.add_argument("--min-steps-per-epoch", type=int, default=d["min_steps_per_epoch"], metavar="N",
                        help="lower the batch size where needed so that an epoch has at least N steps (default: 0, off)")
    parser.add_argument("--steps-without-validation", type=int, default=d["steps_without_validation"], metavar="N",
                        help="without validation data, train for about N optimizer steps (whole epochs, at most --max-epoch) (default: 0, --max-epoch epochs)")
    parser.add_argument("--lr-schedule", default=d["lr_schedule"], choices=["constant", "linear"],
                        help="constant, or linear: the learning rate falls to zero over the run, for runs without validation whose last epoch is the model (default: constant)")
    parser.add_argument("--bucket-batches", type=int, default=d["bucket_batches"], help=f"batches per length bucket: more is faster, fewer gives more random batches (default: {d['bucket_batches']})")
    parser.add_argument("--dropout", type=float, default=ModelConfig.dropout, help=f"dropout (default: {ModelConfig.dropout})")
    parser.add_argument("--seed", type=int, default=d["seed"], help=f"random seed for splits, initialisation and batches (default: {d['seed']})")
    parser.add_argument("--grad-accum", type=int, default=d["grad_accum"], metavar="K",
                        help="process each global batch in K micro-batches (same result, less memory; default: 1)")
    parser.add_argument("--precision", default=d["precision"], choices=["fp32", "bf16", "fp16"],
                        help="fp32, bf16 autocast (CPU or GPU) or fp16 autocast with gradient scaling (GPU) (default: fp32)")
    parser.add_argument("--skip-bad-sequences", action="store_true",
                        help="train without the sequences that have data errors instead of refusing the data (see 'textorch seq validate')")
    _add_transformer_options(parser)
    add_seq_run_options(parser)
    add_run_options(parser)


def _add_transformer_options(parser: argparse.ArgumentParser) -> None:
    d = _TRAIN_DEFAULTS
    group = parser.add_argument_group("BERT architectures")
    group.add_argument("--transformer", default=None, metavar="PATH",
                       help="Hugging Face model directory, transformers-registry name or hub name (required by BERT*)")
    group.add_argument("--transformer-window", type=int, default=ModelConfig.transformer_window, metavar="N",
                       help="sub-tokens per encoder window, special tokens included (default: 0, the encoder's limit)")
    group.add_argument("--transformer-stride", type=int, default=ModelConfig.transformer_stride, metavar="N",
                       help="sub-tokens between the starts of overlapping windows (default: 0, half a window)")
    group.add_argument("--transformer-learning-rate", type=float, default=d["transformer_learning_rate"],
                       help=f"AdamW rate of the transformer; --learning-rate drives the layers on top (default: {d['transformer_learning_rate']})")
    group.add_argument("--warmup-fraction", type=float, default=d["warmup_fraction"],
                       help=f"share of steps with rising rate before linear decay (default: {d['warmup_fraction']})")
    group.add_argument("--transformer-dropout", type=float, default=ModelConfig.transformer_dropout,
                       help=f"dropout on the word vectors of BERT* models (default: {ModelConfig.transformer_dropout})")


def configs_from_args(args: argparse.Namespace) -> tuple[ModelConfig, TrainConfig, DataConfig]:
    """The three configs from :func:`add_training_options`' values (``seq``, ``grobid`` and ``ner`` alike)."""
    model = ModelConfig(
        architecture=args.architecture, dropout=args.dropout, transformer=args.transformer,
        transformer_window=args.transformer_window, transformer_stride=args.transformer_stride,
        transformer_dropout=args.transformer_dropout, crf_template=args.crf_template,
    )
    train = TrainConfig(
        batch_size=args.batch_size, learning_rate=args.learning_rate, max_epoch=args.max_epoch,
        patience=args.patience, early_stop=args.early_stop, clip_grad=args.clip_grad, lr_decay=args.lr_decay, lr_decay_patience=args.lr_decay_patience,
        bucket_batches=args.bucket_batches, min_validation_sequences=args.min_validation_sequences,
        min_steps_per_epoch=args.min_steps_per_epoch, steps_without_validation=args.steps_without_validation,
        lr_schedule=args.lr_schedule,
        max_sequence_length=args.max_sequence_length, seed=args.seed,
        grad_accum=args.grad_accum, precision=args.precision,
        transformer_learning_rate=args.transformer_learning_rate, warmup_fraction=args.warmup_fraction,
        tensorboard_dir=args.tensorboard,
    )
    data = DataConfig(format=args.format, embeddings=args.embeddings, feature_columns=args.feature_columns,
                      feature_vocabulary_size=args.feature_vocabulary_size,
                      word_lookup=getattr(args, "word_lookup", DataConfig.word_lookup))
    return model, train, data


def _train(args: argparse.Namespace, evaluate: bool) -> int:
    model, train, data = configs_from_args(args)
    fold_parallel = fold_parallel_option(args)
    with session(args.device, args.threads) as (ctx, device):
        checkpoints = checkpoint_options(args)
        if args.fold_count != 1 or args.incremental or args.input_model:
            refuse_checkpoint_options(args, "--fold-count/--incremental")
            checkpoints = None
        outcome = training.train_tagger(
            args.train, args.output, model, train, data,
            valid_path=args.valid, test_path=getattr(args, "test", None), hold_out_test=evaluate,
            device=device, cache_dir=args.cache_dir, ctx=ctx, skip_bad_sequences=args.skip_bad_sequences,
            checkpoints=checkpoints, fold_count=args.fold_count, input_model=incremental_input(args),
            fold_parallel=fold_parallel,
        )
    if ctx.is_main:
        training.print_outcome(outcome, getattr(args, "metrics_json", None))
    return 0


def _eval(args: argparse.Namespace) -> int:
    with session(args.device, args.threads) as (ctx, device):
        labeler = SequenceLabeler.load(args.model, device=device, cache_dir=args.cache_dir)
        apply_engine_options(args, labeler)
        _, sequences = stream_labelled(args.test, labeler.input_format if labeler.input_format != "text" else None)
        chunk = tag_files.ChunkSize(args.chunk_sequences, args.chunk_tokens)
        with TaggingProgress("evaluating", ctx.shows_progress and not args.quiet) as progress:
            scores = tag_files.evaluate_stream(labeler, sequences, args.batch_size, ctx, chunk, progress)
    if ctx.is_main:
        print(format_report(scores))
        training.write_metrics(scores, args.metrics_json)
    return 0


def _tag(args: argparse.Namespace) -> int:
    with session(args.device, args.threads) as (ctx, device):
        started = time.perf_counter()
        labeler = SequenceLabeler.load(args.model, device=device, cache_dir=args.cache_dir)
        apply_engine_options(args, labeler)
        load_s = time.perf_counter() - started
        output_format = "json" if args.input_format == "text" else args.input_format
        run = tag_streamed(args, ctx, labeler, args.input_format, output_format, args.output, Path(args.model).name,
                           args.batch_size, with_scores=args.input_format == "text")
    if ctx.is_main and args.stats_json:
        Path(args.stats_json).write_text(json.dumps(run.stats(load_s), indent=2) + "\n")
    return 0


def tag_streamed(args: argparse.Namespace, ctx: DistContext, labeler: SequenceLabeler, input_format: str, output_format: str,
                 output: str | None, model_name: str, batch_size: int, with_scores: bool,
                 labels_as: str | None = None) -> tag_files.TaggingRun:
    """Read, tag and write chunk by chunk (``seq tag``, ``grobid MODEL tag``): the output appears
    complete or, after a failure, as ``OUTPUT.partial`` (see :mod:`textorch.data.staged_output`).
    Only the CoNLL and GROBID outputs go without confidences: a CRF then skips its
    forward-backward pass."""
    sequences = tag_files.stream_for_tagging(args.input, input_format, labeler)
    chunk = tag_files.ChunkSize(args.chunk_sequences, args.chunk_tokens)
    progress = TaggingProgress("tagging", ctx.shows_progress and not args.quiet)
    with progress, staged_output(output, write=ctx.is_main) as staged:
        writer = tag_files.TaggedWriter(staged, output_format, model_name, labels_as) if staged is not None else None
        run = tag_files.TaggingRun(labeler, sequences, batch_size, ctx, with_scores, chunk, progress)
        for tagged, predictions in run:
            if writer is not None:
                writer.add(tagged, predictions)
        if writer is not None:
            writer.set_runtime(run.tag_s)
    return run


def add_streaming_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """Chunk size and progress bar of the commands that stream their input (tag, eval)."""
    default = tag_files.ChunkSize()
    parser.add_argument("--chunk-sequences", type=int, default=default.sequences, metavar="N",
                        help=f"read and tag the input in chunks of at most N sequences (default: {default.sequences})")
    parser.add_argument("--chunk-tokens", type=int, default=default.tokens, metavar="N",
                        help=f"... or of about N tokens, whichever comes first: memory does not grow with the "
                             f"input (default: {default.tokens})")
    parser.add_argument("--quiet", action="store_true", help="no progress bar (there is none when stderr is not a terminal)")


def _validate(args: argparse.Namespace) -> int:
    from textorch.data.validate import validate_data
    from textorch.data.checked_read import format_report

    report = validate_data(args.train, args.valid, args.test, args.format, args.max_sequence_length)
    print(format_report(report, args.max_problems))
    if args.json:
        Path(args.json).write_text(json.dumps(report.to_dict(), ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return 2 if report.errors else 0


def _architectures(args: argparse.Namespace) -> int:
    return print_architectures(ARCHITECTURES)


def register(groups: argparse._SubParsersAction) -> None:
    seq = groups.add_parser("seq", help=group_help("seq"))
    commands = seq.add_subparsers(dest="command", metavar="COMMAND", required=True)

    add_train_commands(commands, lambda a, evaluate: _train(a, evaluate=evaluate), add_training_options,
                       "a tagger", "labelled training file (CoNLL or GROBID)", "held out by seed")

    p = commands.add_parser("eval", help="evaluate a saved model on a labelled file",
                            description="Evaluate a saved model on a labelled file.")
    p.add_argument("--model", required=True, help="model directory")
    p.add_argument("--test", required=True, help="labelled test file")
    p.add_argument("--metrics-json", help="write the scores as JSON here")
    p.add_argument("--batch-size", type=int, default=64, help="sequences per batch, per device (default: 64)")
    add_streaming_options(p)
    add_run_options(p)
    add_engine_options(p)
    p.set_defaults(run=_eval)

    p = commands.add_parser("tag", help="tag text, CoNLL or GROBID input with a saved model",
                            description="Tag text, CoNLL or GROBID input with a saved model.")
    p.add_argument("--model", required=True, help="model directory")
    p.add_argument("--input", required=True, help="file to tag")
    p.add_argument("--output", help="output file (default: stdout)")
    p.add_argument("--input-format", default="text", choices=list(tag_files.INPUT_FORMATS), help="text (one text per line; JSON output), conll or grobid (same layout back with the predicted label)")
    p.add_argument("--batch-size", type=int, default=32, help="sequences per batch, per device (default: 32)")
    p.add_argument("--stats-json", help="write n_sequences, n_tokens, load_s, tag_s, tokens_per_s here")
    add_streaming_options(p)
    add_run_options(p)
    add_engine_options(p)
    p.set_defaults(run=_tag)

    p = commands.add_parser("validate", help="check labelled data before training: every problem at file:line, and a summary")
    p.add_argument("--train", required=True, help="labelled training file (CoNLL or GROBID)")
    p.add_argument("--valid", help="validation file (read in the training file's format)")
    p.add_argument("--test", help="test file (read in the training file's format)")
    p.add_argument("--format", choices=["conll", "grobid"], default=None, help="input format (default: detected)")
    p.add_argument("--max-sequence-length", type=int, default=0, help="warn about longer sequences (default: 0, no limit)")
    p.add_argument("--max-problems", type=int, default=50, help="problems to list (default: 50; 0 lists all)")
    p.add_argument("--json", help="write the summary and every problem as JSON here")
    p.set_defaults(run=_validate)

    p = commands.add_parser("architectures", help="list the available architectures")
    p.set_defaults(run=_architectures)

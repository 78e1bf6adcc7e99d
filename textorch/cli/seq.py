"""``textorch seq ...``: sequence labelling commands, each a few lines over ``tagging.training`` and ``tagging.tag_files``."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from typing import TYPE_CHECKING

from textorch.cli.commands import group_help
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig
from textorch.eval.entity_report import format_report
from textorch.models.architecture_table import ARCHITECTURES
from textorch.data.staged_output import staged_output
from textorch.runtime.progress import TaggingProgress
from textorch.runtime.write_errors import write_report
from textorch.train.dist import DistContext, session
from textorch.data.streams import ChunkSize, stream_labelled
from textorch.tagging import tag_files

if TYPE_CHECKING:
    from textorch.tagging.labeler import SequenceLabeler
    from textorch.tagging.onnx_tagger import OnnxTagger
    from textorch.tagging.row_tagging import RowTaggingRun
from textorch.cli.run_options import (
    add_run_options,
    add_seq_run_options,
    add_train_commands,
    check_at_least_one,
    fold_parallel_option,
    incremental_input,
    print_architectures,
    refuse_output_over_input,
)
from textorch.cli.config_options import add_config_options, config_from_args
from textorch.cli.streaming_options import add_streaming_options, chunk_size
from textorch.cli.export import add_engine_options, opened_tagger
from textorch.cli.training_output import print_outcome, write_metrics


def add_training_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``seq train``; the ``grobid`` and ``ner`` commands take the same ones.

    The config options come from the fields of the three configs (help, default, type and
    choices: :mod:`textorch.cli.config_options`); the rest say how and where the run goes.
    """
    add_config_options(parser, DataConfig, ModelConfig, TrainConfig)
    parser.add_argument("--skip-bad-sequences", action="store_true",
                        help="train without the sequences that have data errors instead of refusing the data (see 'textorch seq validate')")
    add_seq_run_options(parser)
    add_run_options(parser)


def configs_from_args(args: argparse.Namespace) -> tuple[ModelConfig, TrainConfig, DataConfig]:
    """The three configs from :func:`add_training_options`' values (``seq``, ``grobid`` and ``ner`` alike)."""
    return (config_from_args(ModelConfig, args), config_from_args(TrainConfig, args, tensorboard_dir=args.tensorboard),
            config_from_args(DataConfig, args))


def _train(args: argparse.Namespace, evaluate: bool) -> int:
    from textorch.tagging import training
    from textorch.train.checkpoint_options import checkpoint_options, refuse_checkpoint_options

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
        print_outcome(outcome, getattr(args, "metrics_json", None))
    return 0


def _eval(args: argparse.Namespace) -> int:
    check_at_least_one(args, "batch_size")
    chunk = chunk_size(args)
    with opened_tagger(args, args.model, predict_only=False) as (ctx, labeler):
        _, sequences = stream_labelled(args.test, labeler.input_format if labeler.input_format != "text" else None)
        with TaggingProgress("evaluating", ctx.shows_progress and not args.quiet) as progress:
            scores = tag_files.evaluate_stream(labeler, sequences, args.batch_size, ctx, chunk, progress)
    if ctx.is_main:
        print(format_report(scores))
        write_metrics(scores, args.metrics_json)
    return 0


def _tag(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    check_at_least_one(args, "batch_size")
    refuse_output_over_input(args.input, args.output)
    chunk = chunk_size(args)
    with opened_tagger(args, args.model, predict_only=True) as (ctx, labeler):
        load_s = time.perf_counter() - started
        output_format = "json" if args.input_format == "text" else args.input_format
        run = tag_streamed(args, chunk, ctx, labeler, args.input_format, output_format, args.output, Path(args.model).name,
                           args.batch_size, with_scores=args.input_format == "text")
    if ctx.is_main and args.stats_json:
        write_report(args.stats_json, json.dumps(run.stats(load_s), indent=2) + "\n", "--stats-json")
    return 0


def tag_streamed(args: argparse.Namespace, chunk: ChunkSize, ctx: DistContext, labeler: SequenceLabeler | OnnxTagger, input_format: str, output_format: str,
                 output: str | None, model_name: str, batch_size: int, with_scores: bool,
                 labels_as: str | None = None) -> tag_files.TaggingRun | RowTaggingRun:
    """Read, tag and write chunk by chunk (``seq tag``, ``grobid MODEL tag``): the output appears
    complete or, after a failure, as ``OUTPUT.partial`` (see :mod:`textorch.data.staged_output`).
    Only the CoNLL and GROBID outputs go without confidences: a CRF then skips its
    forward-backward pass. GROBID rows in and out with the ONNX Runtime tagger go as rows
    (:mod:`textorch.tagging.row_tagging`: the same bytes, no object per sequence)."""
    progress = TaggingProgress("tagging", ctx.shows_progress and not args.quiet)
    if _tags_rows(labeler, input_format, output_format, with_scores, ctx):
        from textorch.tagging.row_tagging import RowTaggingRun

        n_features = tag_files.grobid_width(args.input, labeler)  # type: ignore[arg-type]
        with progress, staged_output(output, write=ctx.is_main) as staged:
            rows = RowTaggingRun(labeler, args.input, n_features, batch_size, chunk, progress)  # type: ignore[arg-type]
            for text, n_sequences in rows:
                if staged is not None:
                    staged.out.write(text)
                    staged.wrote(n_sequences)
        return rows
    sequences = tag_files.stream_for_tagging(args.input, input_format, labeler)
    with progress, staged_output(output, write=ctx.is_main) as staged:
        writer = tag_files.TaggedWriter(staged, output_format, model_name, labels_as) if staged is not None else None
        run = tag_files.TaggingRun(labeler, sequences, batch_size, ctx, with_scores, chunk, progress)
        for tagged, predictions in run:
            if writer is not None:
                writer.add(tagged, predictions)
        if writer is not None:
            writer.set_runtime(run.tag_s)
    return run


def _tags_rows(labeler: object, input_format: str, output_format: str, with_scores: bool, ctx: DistContext) -> bool:
    """Whether the run takes the row path (:mod:`textorch.tagging.row_tagging`): GROBID in and
    out, no confidences, one process, the ONNX Runtime tagger (which encodes columns)."""
    return (input_format == output_format == "grobid" and not with_scores and ctx.world_size == 1
            and hasattr(labeler, "tag_columns"))


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
    add_streaming_options(p, verb="evaluate")
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
    add_config_options(p, DataConfig, only=("format",))
    add_config_options(p, TrainConfig, only=("max_sequence_length",),
                       helps={"max_sequence_length": "warn about longer sequences (default: {default}, no limit)"})
    p.add_argument("--max-problems", type=int, default=50, help="problems to list (default: 50; 0 lists all)")
    p.add_argument("--json", help="write the summary and every problem as JSON here")
    p.set_defaults(run=_validate)

    p = commands.add_parser("architectures", help="list the available architectures")
    p.set_defaults(run=_architectures)

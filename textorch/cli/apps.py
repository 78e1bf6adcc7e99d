"""``textorch grobid`` and ``textorch ner``: DeLFT's grobidTagger and nerTagger, as commands.

Each action is a few lines over :mod:`textorch.tagging.presets` (defaults, data layout) and
:mod:`textorch.tagging.training` (training); every training option of ``seq train`` is accepted, and
the ones an application sets per model default to the application's value instead of the
library's.
"""

from __future__ import annotations

import argparse
import logging
import re
from collections.abc import Callable
from pathlib import Path

from textorch.cli.commands import group_help
from textorch.tagging import presets as apps
from textorch.cli import seq
from textorch.cli.export import add_engine_options, opened_tagger
from textorch.cli.training_output import print_outcome, write_metrics
from textorch.cli.run_options import fold_parallel_option, incremental_input, refuse_output_over_input
from textorch.cli.streaming_options import add_streaming_options, chunk_size
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig, named_feature_columns
from textorch.data.corpus import Corpus
from textorch.errors import ConfigError
from textorch.train.dist import session

logger = logging.getLogger(__name__)

_APP_DEFAULTED = apps.APP_OPTIONS
_ACTIONS = ("train", "train-eval", "eval", "tag")


def _training_options(parser: argparse.ArgumentParser, note: str) -> None:
    """``seq train``'s options, with the per-model ones defaulting to None (= the application's value)."""
    seq.add_training_options(parser)
    # argparse has no public way to change an option once added; the actions list is stable API in practice.
    for action in parser._actions:
        if action.dest in _APP_DEFAULTED:
            action.default = None
            action.help = re.sub(r"\(default: [^)]*\)", f"(default: {note})", action.help or "")
        elif action.dest == "format":
            action.help = argparse.SUPPRESS  # the application knows its format


def _default_architecture(parser: argparse.ArgumentParser, name: str, why: str) -> None:
    """Make ``name`` the default of ``--architecture`` (``seq``'s default is DeLFT's BidLSTM_CRF)."""
    for action in parser._actions:
        if action.dest == "architecture":
            action.default = name
            action.help = f"model architecture (default: {name}: {why}; see 'textorch seq architectures')"


def _resolve(args: argparse.Namespace, defaults: apps.AppDefaults) -> tuple[ModelConfig, TrainConfig, DataConfig]:
    """The three configs: command-line values, else the application's, else the library's."""
    chosen = apps.resolve_options(defaults, vars(args))
    vars(args).update(chosen)
    logger.info("settings: %s", ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in chosen.items()))
    model, train, data = seq.configs_from_args(args)
    return apps.with_model_defaults(defaults, model), train, data


def _evaluate(model_dir: str, path: str, input_format: str, args: argparse.Namespace) -> int:
    """``grobid MODEL eval`` and ``ner eval``: the labelled file read in chunks, as ``seq eval``
    reads it, so that only the entity counts are kept whatever the file's size."""
    from itertools import islice

    from textorch.data.streams import stream_labelled
    from textorch.eval.entity_report import format_report
    from textorch.runtime.progress import TaggingProgress
    from textorch.tagging import tag_files

    chunk = chunk_size(args)
    with opened_tagger(args, model_dir, predict_only=False) as (ctx, labeler):
        _, sequences = stream_labelled(path, input_format)
        if args.max_sequences > 0:
            sequences = islice(sequences, args.max_sequences)
        with TaggingProgress("evaluating", ctx.shows_progress and not args.quiet) as progress:
            scores = tag_files.evaluate_stream(labeler, sequences, 64, ctx, chunk, progress)
    if ctx.is_main:
        print(format_report(scores))
        write_metrics(scores, args.metrics_json)
    return 0


def _train(args: argparse.Namespace, configs: tuple[ModelConfig, TrainConfig, DataConfig], model_dir: str,
           read: Callable[[TrainConfig], tuple[Corpus | None, ...]], **split: bool) -> int:
    """Read (inside the session: every process reads), train, report.

    ``read(train_config)`` gives the train corpus, then optionally validation and test corpora.
    """
    from textorch.tagging import training

    model, train, data = configs
    input_model = incremental_input(args)  # option errors before any reading
    fold_parallel = fold_parallel_option(args)
    with session(args.device, args.threads) as (ctx, device):
        corpora = read(train)
        outcome = training.train_corpora(
            corpora[0], model_dir, model, train, data, *corpora[1:], fold_count=args.fold_count,
            input_model=input_model, device=device, cache_dir=args.cache_dir, ctx=ctx, fold_parallel=fold_parallel, **split,
        )
    if ctx.is_main:
        print_outcome(outcome, args.metrics_json)
    return 0


# --------------------------------------------------------------------------------- grobid
def _grobid(args: argparse.Namespace) -> int:
    model_dir = args.output or str(Path("models") / apps.grobid_model_name(args.model, args.architecture))
    if not args.input:
        raise ConfigError(f"grobid {args.action} needs --input (a GROBID file, or a folder holding {args.model}-YYMMDD.train)")
    if args.action in ("train", "train-eval"):
        configs = _resolve(args, apps.grobid_defaults(args.model, args.architecture))
        named = named_feature_columns(configs[0], configs[2])

        def read(train: TrainConfig) -> tuple[Corpus]:
            return (apps.read_grobid_data(args.input, args.model, train.max_sequence_length, args.skip_bad_sequences,
                                          args.max_sequences, named),)

        return _train(args, configs, model_dir, read, hold_out_test=args.action == "train-eval")
    if args.action == "eval":
        return _evaluate(model_dir, apps.resolve_grobid_input(args.input, args.model), "grobid", args)
    return _grobid_tag(args, model_dir)


def _grobid_tag(args: argparse.Namespace, model_dir: str) -> int:
    refuse_output_over_input(args.input, args.tag_output, "--tag-output")
    chunk = chunk_size(args)
    with opened_tagger(args, model_dir, predict_only=True) as (ctx, labeler):
        labels_as = labeler.input_format if args.input_format != "text" else None  # token input: per-token labels too
        seq.tag_streamed(args, chunk, ctx, labeler, args.input_format, "json", args.tag_output, Path(model_dir).name, 32,
                         with_scores=True, labels_as=labels_as)
    return 0


# ------------------------------------------------------------------------------------ ner
def _ner(args: argparse.Namespace) -> int:
    model_dir = args.output or str(Path("models") / apps.ner_model_name(args.dataset, args.architecture))
    if args.action == "eval":
        return _evaluate(model_dir, apps.ner_files(args.dataset, args.data_dir)[2], "conll", args)
    if args.train_with_validation_set:
        if args.action != "train-eval":
            raise ConfigError("--train-with-validation-set is for train-eval (train already uses every file)")
        args.early_stop = False  # the validation data is training data now: nothing left to stop on
    configs = _resolve(args, apps.ner_defaults(args.architecture))

    def read(train: TrainConfig) -> tuple[Corpus | None, ...]:
        files = apps.read_ner_data(args.dataset, args.data_dir, train.max_sequence_length, args.skip_bad_sequences,
                                   args.max_sequences)
        if args.action == "train":  # DeLFT: all three files, then a random 90/10 train/validation split
            return (apps.concatenated(*files),)
        if args.train_with_validation_set:
            return apps.concatenated(files[0], files[1]), None, files[2]
        return files

    return _train(args, configs, model_dir, read)


def _grobid_bridge(args: argparse.Namespace) -> int:
    from textorch.tagging.delft.bridge import write_bridge

    written = write_bridge(args.directory)
    print(f"wrote {len(written)} files in {args.directory}: name it as delft.install in grobid.yaml (docs/grobid.md)")
    return 0


def register(groups: argparse._SubParsersAction) -> None:
    p = groups.add_parser("grobid-bridge", help=group_help("grobid-bridge"),
                          description="Write a 'delft' package that forwards DeLFT's names (Sequence, the readers, "
                                      "grobidTagger.py) to textorch, so that GROBID runs its deep-learning models with "
                                      "textorch. See docs/grobid.md.")
    p.add_argument("directory", metavar="DIR", help="the bridge directory (created if needed)")
    p.set_defaults(run=_grobid_bridge)

    p = groups.add_parser("grobid", help=group_help("grobid"),
                          description="DeLFT's grobidTagger: GROBID models (date, name-header, affiliation-address...) "
                                      "with the batch size, maximum sequence length, epochs and feature columns DeLFT "
                                      "uses for each. Models are named grobid-MODEL-ARCHITECTURE.")
    p.add_argument("model", metavar="MODEL", help=f"GROBID model name: {', '.join(apps.GROBID_MODELS)} (others get generic settings)")
    p.add_argument("action", choices=_ACTIONS, help="train (90/10 train/validation split), train-eval (10%% held out for "
                   "testing, then 10%% for validation), eval (score a saved model on --input), tag (DeLFT's JSON)")
    p.add_argument("--input", metavar="PATH", help="GROBID training file, or a folder: its newest MODEL-YYMMDD.train is "
                   "taken; for tag, the file to tag")
    p.add_argument("--output", metavar="DIR", help="model directory, written by train/train-eval and read by eval/tag "
                   "(default: models/grobid-MODEL-ARCHITECTURE)")
    p.add_argument("--input-format", default="grobid", choices=["grobid", "text"],
                   help="tag: GROBID feature lines (default) or plain text, one text per line (models without features)")
    p.add_argument("--tag-output", metavar="FILE", help="tag: write the JSON here (default: stdout)")
    p.add_argument("--metrics-json", metavar="FILE", help="train-eval, eval: write the scores as JSON here")
    p.add_argument("--max-sequences", type=int, default=0, metavar="N", help="read only the first N sequences (quick trials; default: all)")
    _training_options(p, "DeLFT's value for the model, see docs/applications.md")
    _default_architecture(p, apps.GROBID_DEFAULT_ARCHITECTURE,
                          "GROBID's CRF features inside the BiLSTM-CRF, with rules that follow the data's size; "
                          "a DeLFT name trains with DeLFT's settings")
    add_streaming_options(p.add_argument_group("tag and eval"))
    add_engine_options(p, with_precision=False)  # --precision is training's option, read by tag and eval too
    p.set_defaults(run=_grobid, format="grobid")

    p = groups.add_parser("ner", help=group_help("ner"),
                          description="DeLFT's nerTagger for CoNLL-2003 (English): the IOB1 files eng.train, eng.testa "
                                      "and eng.testb read as they are. Models are named ner-en-DATASET-ARCHITECTURE.")
    p.add_argument("action", choices=_ACTIONS[:3], help="train (all three files, random 90/10 train/validation split), "
                   "train-eval (train on eng.train, early stopping on eng.testa, test on eng.testb), eval (on eng.testb)")
    p.add_argument("--dataset", default="conll2003", choices=list(apps.NER_DATASETS), help="dataset (default: conll2003)")
    p.add_argument("--data-dir", required=True, metavar="DIR", help="folder holding eng.train, eng.testa and eng.testb")
    p.add_argument("--output", metavar="DIR", help="model directory (default: models/ner-en-DATASET-ARCHITECTURE)")
    p.add_argument("--train-with-validation-set", action="store_true",
                   help="train-eval: train on eng.train + eng.testa, without early stopping (as DeLFT's option)")
    p.add_argument("--metrics-json", metavar="FILE", help="train-eval, eval: write the scores as JSON here")
    p.add_argument("--max-sequences", type=int, default=0, metavar="N", help="read only the first N sentences of each file (quick trials; default: all)")
    _training_options(p, "DeLFT's value for the architecture, see docs/applications.md")
    add_streaming_options(p.add_argument_group("eval"), verb="evaluate")
    add_engine_options(p, with_precision=False)  # --precision is training's option, read by eval too
    p.set_defaults(run=_ner, format="conll")

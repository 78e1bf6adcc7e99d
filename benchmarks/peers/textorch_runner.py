"""Benchmark commands for textorch, the twin of delft_runner.py (same commands, same measures).

Run with textorch's venv python by bench_vs_delft.py, one fresh process per command, so that
peak memory and cold-start times belong to that command alone. Prints one line
``BENCH_JSON {...}`` on stdout.

Commands:
    warm     build textorch's LMDB cache of the word vectors and Numba's of the CRF kernel (outside any timing)
    train    build and fit a ``SequenceLabeler`` on given train/valid/test files (fixed epochs, or --preset)
    tag      load a model, then time ``SequenceLabeler.predict`` on sequences held in memory
    calls    GROBID-sized calls through the DeLFT facade (``load_data_crf_string`` + ``Sequence.tag``
             per document), and the same calls through ``SequenceLabeler.predict`` alone
    load     cold start: import textorch and load a model in a fresh process
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import os  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

# Started by path (``python benchmarks/peers/textorch_runner.py``, one fresh process per command): its
# own directory is then first on sys.path. Imported as ``benchmarks.peers.textorch_runner`` by
# fast_path_ab.py and the tests.
if __package__:
    from .runner_common import emit as _emit, peak_rss_mb, tagging_rows, training_speeds, write_predictions
    from .runner_common import add_calls_command, grobid_call_rows, read_calls
else:
    from runner_common import emit as _emit, peak_rss_mb, tagging_rows, training_speeds, write_predictions
    from runner_common import add_calls_command, grobid_call_rows, read_calls

from textorch.onnx.trained_export import export_after_training  # noqa: E402
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig  # noqa: E402
from textorch.tagging.labeler import SequenceLabeler  # noqa: E402
from textorch.tagging.tag_files import read_for_tagging  # noqa: E402
from textorch.tagging.training_data import fitted_to_data, split_for_training  # noqa: E402
from textorch.train.dist import DistContext  # noqa: E402

_IMPORT_S = time.perf_counter() - _T0


def emit(payload: dict) -> None:
    _emit(payload, torch.get_num_threads())


def supports(architecture: str) -> str | None:
    """None when textorch can train ``architecture`` with a transformer, else the reason why not."""
    from textorch.models.architecture_table import ARCHITECTURES

    if architecture not in ARCHITECTURES:
        return f"textorch has no architecture {architecture!r} yet"
    holders = [c for c in (ModelConfig, DataConfig) if "transformer" in {f.name for f in dataclasses.fields(c)}]
    if not holders:
        return "textorch's configs have no 'transformer' field yet"
    return None


def _configs(args: argparse.Namespace) -> tuple[ModelConfig, DataConfig]:
    model_kwargs: dict = {"architecture": args.architecture}
    data_kwargs: dict = {"embeddings": args.embeddings if args.transformer is None else "none"}
    if args.transformer is not None:
        reason = supports(args.architecture)
        if reason:
            raise SystemExit(reason)
        target = model_kwargs if "transformer" in {f.name for f in dataclasses.fields(ModelConfig)} else data_kwargs
        target["transformer"] = args.transformer
    return ModelConfig(**model_kwargs), DataConfig(**data_kwargs)


def cmd_warm(args: argparse.Namespace) -> None:
    import compileall
    from pathlib import Path

    import textorch
    from textorch.embeddings import open_embeddings
    from textorch.models.cpu_decoder import preload

    started = time.perf_counter()
    # textorch runs from its source tree (an editable install, or PYTHONPATH), whose modules no
    # install step compiled, while pip compiled DeLFT's; with PYTHONDONTWRITEBYTECODE set
    # nothing ever caches them, and every cold start compiled textorch from source again
    # (import 1.09-1.25 -> 0.97-1.00 s, model load 25-31 -> 12-14 ms once compiled).
    compiled_bytecode = compileall.compile_dir(Path(textorch.__file__).parent, quiet=1)
    embeddings = open_embeddings(args.embeddings, cache_dir=args.cache_dir)
    dim = embeddings.dim
    embeddings.close()
    # Numba compiles the CRF kernel once per install (about 1.5 s and more memory than loading
    # it from its cache later): like the embeddings cache, done before anything is measured.
    compiled_crf = preload()
    emit({"warm_s": time.perf_counter() - started, "dim": dim, "compiled_crf": compiled_crf,
          "compiled_bytecode": bool(compiled_bytecode)})


def cmd_supports(args: argparse.Namespace) -> None:
    emit({"architecture": args.architecture, "unsupported": supports(args.architecture)})


def _train_settings(args: argparse.Namespace) -> tuple[ModelConfig, TrainConfig, DataConfig]:
    """The three configs of a training run: the benchmark's fixed settings, or with
    ``--preset`` those ``textorch grobid`` / ``textorch ner`` choose (DeLFT's application
    defaults, patience 5, early stopping on)."""
    model_config, data_config = _configs(args)
    if args.preset is None:
        if None in (args.epochs, args.patience, args.batch_size):
            raise SystemExit("train: give --epochs, --patience and --batch-size, or --preset")
        return model_config, TrainConfig(seed=args.seed, max_epoch=args.epochs, batch_size=args.batch_size,
                                         early_stop=True, patience=args.patience, precision=args.precision), data_config
    from textorch.tagging import presets

    app, _, model = args.preset.partition(":")
    defaults = presets.ner_defaults(args.architecture) if app == "ner" else presets.grobid_defaults(model, args.architecture)
    chosen = presets.resolve_options(defaults, {})
    train_fields = {f.name for f in dataclasses.fields(TrainConfig)}
    train_config = TrainConfig(seed=args.seed, precision=args.precision,
                               **{name: value for name, value in chosen.items() if name in train_fields})
    data_config = dataclasses.replace(data_config, feature_columns=defaults.feature_columns)
    return presets.with_model_defaults(defaults, model_config), train_config, data_config


def _with_train_options(config: TrainConfig, options: list[str]) -> TrainConfig:
    """``config`` with ``FIELD=VALUE`` overrides, each value read as the field's current type
    (``true``/``false`` for flags, text for a field that is unset)."""
    changes: dict[str, object] = {}
    for option in options:
        name, _, value = option.partition("=")
        if name not in {f.name for f in dataclasses.fields(TrainConfig)}:
            raise SystemExit(f"--train-option {option!r}: TrainConfig has no field {name!r}")
        current = getattr(config, name)
        try:
            if isinstance(current, bool):
                changes[name] = {"true": True, "false": False}[value.lower()]
            else:
                changes[name] = value if current is None else type(current)(value)
        except (KeyError, ValueError):
            raise SystemExit(f"--train-option {option!r}: not a {type(current).__name__} value") from None
    return dataclasses.replace(config, **changes)


def cmd_train(args: argparse.Namespace) -> None:
    """Train, timed at the boundaries delft_runner.py uses (see benchmarks/README.md, Method).

    The data is read (and validated) before any clock starts, as DeLFT's runner reads its
    files before ``Sequence``. ``whole_s`` is then everything until the best epoch's weights
    are back in the model: opening the embeddings, vocabularies and network, encoding (the
    gathering of word vectors), the optimizer, every epoch with its validation.
    ``epoch_s`` is each epoch's loop over its training batches alone (the trainer's own
    per-epoch clock), validation left out. Scoring the test set and saving come after both.
    """
    from textorch.data.checked_read import read_validated
    from textorch.embeddings import open_embeddings
    from textorch.runtime.malloc_tuning import bound_heap_growth

    bound_heap_growth()  # as every training command of textorch's command line does
    model_config, train_config, data_config = _train_settings(args)
    train_config = _with_train_options(train_config, args.train_option)
    train, valid, test = read_validated(args.train, args.valid, args.test, args.format,
                                        train_config.max_sequence_length)
    # The rules every training command applies to the data it is given (textorch's own GROBID
    # default: validation data too small to pick an epoch joins the training data, batch sizes
    # that give enough steps); a no-op for DeLFT's settings.
    train, valid, _ = split_for_training(train, valid, test, False, train_config)
    train_config = fitted_to_data(train_config, [len(s) for s in train.sequences], valid is not None)
    started = time.perf_counter()
    embeddings = open_embeddings(data_config.embeddings, cache_dir=args.cache_dir) \
        if data_config.embeddings != "none" else None
    labeler = SequenceLabeler.build(train, model_config, data_config, embeddings, seed=train_config.seed)
    result = labeler.fit(train, valid if train_config.early_stop else None, train_config)
    whole_s = time.perf_counter() - started
    predictions = labeler.predict(test.sequences, batch_size=64, with_scores=False)
    write_predictions(args.predictions, [s.labels for s in test.sequences], [p.labels for p in predictions])
    f1 = float(labeler.evaluate(test)["f1"])
    if args.output:  # saved and exported (with its int8 check) as `textorch grobid MODEL train` leaves it
        labeler.save(args.output)
        export_after_training(labeler, args.output, DistContext(), valid, train, train_config.seed)
    epoch_s = [r.seconds for r in result.history]
    emit({
        "system": "textorch", "precision": args.precision, "task": args.task, "architecture": args.architecture,
        "seed": args.seed, "preset": args.preset, "max_epoch": train_config.max_epoch,
        "batch_size": train_config.batch_size, "patience": train_config.patience, "best_epoch": result.best_epoch,
        "train_options": args.train_option, "valid_scores": [r.valid_score for r in result.history],
        **training_speeds([len(s) for s in train.sequences], epoch_s, whole_s),
        "f1": f1, "model_dir": args.output,
    })


def _load(model_dir: str, cache_dir: str | None) -> SequenceLabeler:
    return SequenceLabeler.load(model_dir, cache_dir=cache_dir, engine="torch")


def fresh_token_state(labeler: SequenceLabeler, cache_dir: str | None) -> None:
    """Give ``labeler`` the memory of tokens of a model loaded a moment ago: none.

    A loaded labeler remembers the tokens of earlier calls in four places: the word table
    (vectors gathered from the LMDB store), the embeddings' in-process memo, the encoder's
    character ids and casing per token string, and the character-encoder outputs per token
    (``token_vector_cache``). DeLFT keeps none of these: it reads its store for every token
    of every call. Each is replaced here by a new, empty one built with public constructors
    (the library has no call that empties them all), so that a "new tokens" pass pays every
    per-token cost, while what belongs to the model object (weights laid out for the CPU
    kernels, the one-sequence path found for it, the compiled CRF) stays warm, as it does
    in a server. The embeddings are reopened before the old handle is closed: the LMDB
    environment stays mapped, as DeLFT's does.
    """
    from textorch.data.encoding import SequenceEncoder
    from textorch.data.word_table import WordTable
    from textorch.embeddings import open_embeddings
    from textorch.models.token_vector_cache import TokenVectorCache

    labeler.encoder = SequenceEncoder.from_json(labeler.encoder.to_json())
    labeler.token_vector_cache = TokenVectorCache()
    old = labeler.embeddings
    if old is not None:
        labeler.embeddings = open_embeddings(str(old.path), cache_dir=cache_dir)
        labeler.word_table = WordTable(labeler.embeddings)
        old.close()


def cmd_tag(args: argparse.Namespace) -> None:
    from textorch.onnx.opening import EngineOptions, run_loaded

    options = EngineOptions(args.engine, "cpu", args.precision, args.quantized, args.onnx_dir, torch.get_num_threads())
    options.check()  # --quantized alone would be ignored
    started = time.perf_counter()
    labeler = _load(args.model, args.cache_dir)
    load_s = time.perf_counter() - started
    # Any export is made once, outside the timing: ONNX into --onnx-dir (the work dir), auto into
    # MODEL/onnx as `textorch serve` does.
    used = run_loaded(labeler, args.model, options)
    if args.engine == "auto" and used != "auto":  # the rows would time PyTorch under another name
        raise SystemExit("--engine auto found no ONNX model to use (see the log)")
    # Steady state, as in a long tagging job or a server: the compiled CRF decoder is loaded
    # before the timing, as `textorch serve` does (otherwise the first call would load it).
    labeler.preload_crf_decoder()
    rss_loaded = peak_rss_mb()
    sequences = read_for_tagging(args.input, args.format, labeler).sequences
    lengths = [len(s) for s in sequences]
    with_scores = not args.labels_only
    rows = tagging_rows(lambda data, b: labeler.predict(data, batch_size=b, with_scores=with_scores), sequences, lengths,
                        args.batch_sizes, args.small_limit, args.repeats, args.min_seconds,
                        fresh=lambda: fresh_token_state(labeler, args.cache_dir))
    # Entity F1 of these very predictions on the (labelled) input, after the timing: what a
    # precision or an engine changes in the answers.
    f1 = float(labeler.evaluate(args.input)["f1"]) if args.f1 else None
    emit({"system": "textorch", "engine": args.engine, "precision": args.precision, "labels_only": args.labels_only,
          "quantized": args.quantized, "load_s": load_s, "rss_after_load_mb": rss_loaded, "tagging": rows,
          "n_sequences": len(sequences), "n_tokens": sum(lengths), "f1": f1})


def cmd_calls(args: argparse.Namespace) -> None:
    """GROBID's use of the DeLFT facade, timed per document, as delft_runner.py times DeLFT.

    One facade ``Sequence`` loaded once (through ``$TEXTORCH_CACHE_DIR``, the runner's cache,
    as a GROBID process would be configured), ``model_config.batch_size`` and
    ``max_sequence_length`` set after ``load``, then per document the facade's
    ``load_data_crf_string(text)`` and ``tag(x, None[, features=f])``. Rows:

    - ``grobid_calls`` / ``_seen``: that whole call, new tokens (fresh state before every
      pass) and tokens seen before: the rows compared with DeLFT.
    - ``grobid_calls_tag``: the facade's ``tag`` alone, the text parsed before the clock.
    - ``grobid_calls_predict`` / ``_seen``: ``SequenceLabeler.predict`` alone on the same
      calls' sequences, built before the clock: textorch's plain path, without the facade,
      so that the facade's cost (reading the text, building the sequences, the answer's
      pairs) is the difference between these rows and the first ones.
    """
    if args.cache_dir:
        os.environ["TEXTORCH_CACHE_DIR"] = args.cache_dir
    from pathlib import Path

    from textorch.tagging.delft.facade import Sequence
    from textorch.tagging.delft.reader import load_data_crf_string

    texts, n_sequences, tokens, per_call = read_calls(args.calls)
    started = time.perf_counter()
    model = Sequence(Path(args.model).name)
    model.load(args.model)
    load_s = time.perf_counter() - started
    model.model_config.batch_size = per_call
    model.model_config.max_sequence_length = args.max_sequence_length
    labeler = model.labeler
    labeler.preload_crf_decoder()  # as cmd_tag: the steady state of a long-lived process
    uses_features = bool(model.model_config.features_indices)

    def call(text: str) -> list:
        x, f = load_data_crf_string(text)
        return model.tag(x, None, features=f) if uses_features else model.tag(x, None)

    def fresh() -> None:
        fresh_token_state(labeler, args.cache_dir)

    parsed = [load_data_crf_string(text) for text in texts]
    documents = [Sequence._sequences(x, f if uses_features else None, labeler)[0] for x, f in parsed]
    common = (n_sequences, tokens, args.repeats, args.min_seconds)
    rows = grobid_call_rows(call, texts, *common, fresh=fresh)
    rows |= grobid_call_rows(lambda xf: model.tag(xf[0], None, features=xf[1]) if uses_features
                             else model.tag(xf[0], None), parsed, *common, fresh=fresh,
                             name="grobid_calls_tag", seen_rows=False)
    rows |= grobid_call_rows(lambda document: labeler.predict(document, batch_size=per_call, with_scores=False),
                             documents, *common, fresh=fresh, name="grobid_calls_predict")
    emit({"system": "textorch", "interface": "delft facade", "load_s": load_s, "tagging": rows, "per_call": per_call,
          "n_calls": len(texts), "n_sequences": n_sequences, "n_tokens": tokens, "features": uses_features})


def cmd_load(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    _load(args.model, args.cache_dir)
    emit({"system": "textorch", "import_s": _IMPORT_S, "load_s": time.perf_counter() - started})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache-dir", default=None, help="textorch embeddings cache")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("warm")
    p.add_argument("--embeddings", required=True)
    p.set_defaults(run=cmd_warm)

    p = commands.add_parser("supports")
    p.add_argument("--architecture", required=True)
    p.set_defaults(run=cmd_supports)

    p = commands.add_parser("train")
    p.add_argument("--task", required=True)
    p.add_argument("--format", choices=["conll", "grobid"], required=True)
    p.add_argument("--train", required=True)
    p.add_argument("--valid", required=True)
    p.add_argument("--test", required=True)
    p.add_argument("--embeddings", default="none")
    p.add_argument("--architecture", default="BidLSTM_CRF")
    p.add_argument("--transformer", default=None)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--epochs", type=int, help="fixed settings (all three, or --preset)")
    p.add_argument("--patience", type=int)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--output", default=None, help="model directory to write")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="training precision (autocast)")
    p.add_argument("--train-option", action="append", default=[], metavar="FIELD=VALUE",
                   help="override one TrainConfig field (ablations: lr_decay=0.5, clip_grad=1, bucket_batches=1)")
    p.add_argument("--preset", default=None, metavar="grobid:MODEL|ner",
                   help="textorch's application defaults instead of --epochs/--patience/--batch-size")
    p.add_argument("--predictions", default=None, help="write the test set's gold and predicted labels here (JSON)")
    p.set_defaults(run=cmd_train)

    p = commands.add_parser("tag")
    p.add_argument("--model", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--format", choices=["conll", "grobid"], required=True)
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32, 256])
    p.add_argument("--small-limit", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--min-seconds", type=float, default=0.5, help="loop short calls to last at least this long")
    p.add_argument("--engine", choices=["torch", "onnx", "auto"], default="torch")
    p.add_argument("--onnx-dir", default=None, help="where the ONNX export is written (with --engine onnx)")
    p.add_argument("--quantized", action="store_true", help="with --engine onnx: the dynamic int8 model")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="with --engine torch")
    p.add_argument("--f1", action="store_true", help="also score the predictions against the input's labels")
    p.add_argument("--labels-only", action="store_true",
                   help="tag without per-token confidences (DeLFT's tag gives CRF labels only)")
    p.set_defaults(run=cmd_tag)

    add_calls_command(commands, cmd_calls)

    p = commands.add_parser("load")
    p.add_argument("--model", required=True)
    p.set_defaults(run=cmd_load)

    args = parser.parse_args()
    # glibc's allocator is set by the suite (suite_runner.allocator_env) for both systems' processes
    # alike (the environment it starts them with): nothing is tuned here.
    if args.threads:
        torch.set_num_threads(args.threads)
    args.run(args)


if __name__ == "__main__":
    main()

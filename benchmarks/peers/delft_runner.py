"""Benchmark commands for DeLFT, run INSIDE DeLFT's own venv (see delft_env.py), never textorch's.

Started by bench_vs_delft.py with the working directory set to the bench work dir, because
DeLFT writes its checkpoints under ``data/models/sequenceLabelling/`` relative to it. Each
command prints its measures as one line ``BENCH_JSON {...}`` on stdout; DeLFT's own chatter
is sent to stderr so it cannot be mistaken for results.

Commands (the same as textorch_runner.py's, so the two are timed the same way):
    warm     build DeLFT's LMDB cache of the word vectors (outside any timing)
    train    train with ``Sequence.train`` on given train/valid files, score the test file
    tag      load a model, then time ``Sequence.tag`` on sequences held in memory
    calls    load a model, then time GROBID-sized calls: ``load_data_crf_string`` + ``Sequence.tag`` per document
    load     cold start: import DeLFT and load a model in a fresh process
    tagfile  read a file, tag it, write it back (timed from outside as a whole process)
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()  # before the heavy imports: the cold-start import time is measured from here

import argparse  # noqa: E402
import contextlib  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

# Started by path (``python benchmarks/peers/delft_runner.py``) with DeLFT's own venv python, where the
# ``benchmarks`` package is not importable: its own directory is then first on sys.path.
if __package__:
    from .runner_common import emit as _emit, peak_rss_mb, tagging_rows, training_speeds, write_predictions
    from .runner_common import add_calls_command, grobid_call_rows, read_calls
else:
    from runner_common import emit as _emit, peak_rss_mb, tagging_rows, training_speeds, write_predictions
    from runner_common import add_calls_command, grobid_call_rows, read_calls

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

with contextlib.redirect_stdout(sys.stderr):
    import torch  # noqa: E402
    from delft.sequenceLabelling.reader import (  # noqa: E402
        load_data_and_labels_conll,
        load_data_and_labels_crf_file,
        load_data_crf_string,
    )
    from delft.sequenceLabelling.wrapper import Sequence  # noqa: E402
    from delft.utilities.Utilities import set_random_seed  # noqa: E402
_IMPORT_S = time.perf_counter() - _T0

EMBEDDINGS = "w2v-conll-grobid-100d"
# Settings of DeLFT's own applications (nerTagger.configure / grobidTagger.configure) for
# the recurrent models; epochs and batch size are fixed by the benchmark for both systems
# (with --defaults, configure() itself gives every setting).
MAX_SEQUENCE_LENGTH = {"conll": 300, "date": 50, "name-header": 3000}
BERT_MAX_SEQUENCE_LENGTH = {"date": 30}


def emit(payload: dict) -> None:
    _emit(payload, torch.get_num_threads())


def read(path: str, fmt: str):
    """Token lists, label lists and feature lists (None for CoNLL) of a labelled file."""
    if fmt == "conll":
        x, y = load_data_and_labels_conll(path)
        return x, y, None
    return load_data_and_labels_crf_file(path)


def n_tokens(x) -> int:
    return int(sum(len(s) for s in x))


def cmd_warm(args: argparse.Namespace) -> None:
    from delft.utilities.Embeddings import Embeddings, load_resource_registry
    from delft import DELFT_PROJECT_DIR

    started = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):
        registry = load_resource_registry(os.path.join(DELFT_PROJECT_DIR, "resources-registry.json"))
        embeddings = Embeddings(EMBEDDINGS, resource_registry=registry)
    emit({"warm_s": time.perf_counter() - started, "dim": embeddings.embed_size})


def _clock_epochs() -> list[float]:
    """Clock each epoch's loop over its training batches inside DeLFT's own trainer.

    ``Trainer._run_epochs`` wraps the training loader in ``tqdm`` (the only use of the name in
    ``delft.sequenceLabelling.trainer``) and loops over it: zero_grad, forward, backward,
    clipping, the optimizer step; validation follows the loop. Replacing that module's
    ``tqdm`` with a bar that times its own iteration, from the first batch asked for to the
    loader's end (after the last step), gives the boundary textorch's trainer clocks
    (``EpochRecord.seconds``). DeLFT's loader gathers word vectors from LMDB batch by batch
    inside this loop; textorch gathers them once before training: that difference is the
    systems', and the whole-call time holds both.
    """
    import delft.sequenceLabelling.trainer as trainer_module

    spent: list[float] = []
    bar = trainer_module.tqdm

    class TimedBar:
        def __init__(self, iterable, *args, **kwargs) -> None:
            self._bar = bar(iterable, *args, **kwargs)

        def __iter__(self):
            started = time.perf_counter()
            yield from self._bar
            spent.append(time.perf_counter() - started)

        def __getattr__(self, name: str):
            return getattr(self._bar, name)

    trainer_module.tqdm = TimedBar
    return spent


def _settings(args: argparse.Namespace) -> dict:
    """``Sequence`` keyword arguments: the benchmark's fixed settings, or with ``--defaults``
    those DeLFT's own applications choose (``grobidTagger.configure`` / ``nerTagger.configure``,
    patience 5), whatever this version of them says."""
    bert = args.transformer is not None
    if args.defaults is None:
        if None in (args.epochs, args.patience, args.batch_size):
            raise SystemExit("train: give --epochs, --patience and --batch-size, or --defaults")
        max_length = (BERT_MAX_SEQUENCE_LENGTH if bert else MAX_SEQUENCE_LENGTH).get(args.task, 300)
        return {"max_sequence_length": max_length, "recurrent_dropout": 0.5, "word_lstm_units": 100,
                "batch_size": args.batch_size, "max_epoch": args.epochs, "early_stop": True, "patience": args.patience}
    app, _, model = args.defaults.partition(":")
    with contextlib.redirect_stdout(sys.stderr):
        if app == "ner":
            from delft.applications.nerTagger import configure

            (batch_size, max_length, patience, dropout, early_stop, max_epoch, _, units,
             multiprocessing) = configure(args.architecture, "conll2003", "en", EMBEDDINGS)
            return {"max_sequence_length": max_length, "recurrent_dropout": dropout, "word_lstm_units": units,
                    "batch_size": batch_size, "max_epoch": max_epoch, "early_stop": early_stop, "patience": patience,
                    "multiprocessing": multiprocessing}
        from delft.applications.grobidTagger import configure

        batch_size, max_length, _, _, max_epoch, multiprocessing, early_stop, patience = configure(
            model, args.architecture, embeddings_name=EMBEDDINGS)
    return {"max_sequence_length": max_length, "recurrent_dropout": 0.5, "batch_size": batch_size,
            "max_epoch": max_epoch, "early_stop": early_stop, "patience": patience, "multiprocessing": multiprocessing}


def cmd_train(args: argparse.Namespace) -> None:
    """Train, timed at the boundaries textorch_runner.py uses (see benchmarks/README.md, Method).

    The files are read before any clock starts. ``whole_s`` is ``Sequence(...)`` (it opens the
    embeddings) and its whole ``train``: vocabularies, network, loaders, optimizer, every
    epoch with its validation and best-weights checkpoint, the best weights read back.
    ``epoch_s``: :func:`_clock_epochs`. Scoring the test set and saving come after both.
    """
    x_train, y_train, f_train = read(args.train, args.format)
    x_valid, y_valid, f_valid = read(args.valid, args.format)
    x_test, y_test, f_test = read(args.test, args.format)
    set_random_seed(args.seed)
    bert = args.transformer is not None
    settings = _settings(args)
    epoch_s = _clock_epochs()
    with contextlib.redirect_stdout(sys.stderr):
        started = time.perf_counter()
        model = Sequence(args.model_name, architecture=args.architecture, embeddings_name=None if bert else EMBEDDINGS,
                         transformer_name=args.transformer, **settings)
        model.train(x_train, y_train, f_train=f_train, x_valid=x_valid, y_valid=y_valid, f_valid=f_valid)
        whole_s = time.perf_counter() - started
        scores = model.eval(x_test, y_test, features=f_test)
        tagged = model.tag([list(s) for s in x_test], None, features=f_test)
        if args.output:
            model.save(args.output)
    write_predictions(args.predictions, [list(y) for y in y_test], [[label for _, label in s] for s in tagged])
    emit({
        "system": "delft", "task": args.task, "architecture": args.architecture, "seed": args.seed,
        "defaults": args.defaults, **{k: settings[k] for k in ("max_epoch", "batch_size", "patience")},
        **training_speeds([len(s) for s in x_train], epoch_s, whole_s),
        "f1": float(scores["eval_f1"]),
        "model_dir": os.path.join(args.output, args.model_name) if args.output else None,
        "workers": model.nb_workers,
    })


def _load(model_dir: str) -> Sequence:
    with contextlib.redirect_stdout(sys.stderr):
        model = Sequence(os.path.basename(model_dir.rstrip("/")), nb_workers=0)
        model.load(dir_path=model_dir)
    return model


def _tag(model: Sequence, x, batch_size: int):
    with contextlib.redirect_stdout(sys.stderr):
        return model.tag(x, None, batch_size=batch_size)


def cmd_tag(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    model = _load(args.model)
    load_s = time.perf_counter() - started
    rss_loaded = peak_rss_mb()
    x, _, _ = read(args.input, args.format)
    x = [list(s) for s in x]
    lengths = [len(s) for s in x]
    # DeLFT keeps no memory of tokens across calls: its fresh state is the one it has.
    rows = tagging_rows(lambda data, b: _tag(model, data, b), x, lengths, args.batch_sizes,
                        args.small_limit, args.repeats, args.min_seconds, seen_rows=False)
    emit({"system": "delft", "load_s": load_s, "rss_after_load_mb": rss_loaded, "tagging": rows,
          "n_sequences": len(x), "n_tokens": sum(lengths)})


def cmd_calls(args: argparse.Namespace) -> None:
    """GROBID's own use of DeLFT, timed per document (benchmarks/README.md, "GROBID-sized calls").

    As GROBID's ``DeLFTModel`` does: one ``Sequence`` loaded once, ``model_config.batch_size``
    and ``max_sequence_length`` set after ``load``, then for each document the reader's
    ``load_data_crf_string(text)`` and ``tag(x, None)`` (with ``features=`` when the model reads
    feature columns). DeLFT keeps nothing across calls, so it has one row (new tokens).
    """
    texts, n_sequences, tokens, per_call = read_calls(args.calls)
    started = time.perf_counter()
    model = _load(args.model)
    load_s = time.perf_counter() - started
    model.model_config.batch_size = per_call
    model.model_config.max_sequence_length = args.max_sequence_length
    uses_features = bool(model.model_config.features_indices)

    def call(text: str):
        x, f = load_data_crf_string(text)
        with contextlib.redirect_stdout(sys.stderr):
            return model.tag(x, None, features=f) if uses_features else model.tag(x, None)

    rows = grobid_call_rows(call, texts, n_sequences, tokens, args.repeats, args.min_seconds, seen_rows=False)
    emit({"system": "delft", "interface": "delft", "load_s": load_s, "tagging": rows, "per_call": per_call,
          "n_calls": len(texts), "n_sequences": n_sequences, "n_tokens": tokens, "features": uses_features})


def cmd_load(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    _load(args.model)
    emit({"system": "delft", "import_s": _IMPORT_S, "load_s": time.perf_counter() - started})


def cmd_tagfile(args: argparse.Namespace) -> None:
    model = _load(args.model)
    x, _, features = read(args.input, args.format)
    tagged = _tag(model, [list(s) for s in x], args.batch_size)
    with open(args.output, "w", encoding="utf-8") as out:
        for sequence in tagged:
            out.writelines(f"{token}\t{label}\n" for token, label in sequence)
            out.write("\n")
    emit({"system": "delft", "n_sequences": len(x)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: DeLFT's choice)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("warm").set_defaults(run=cmd_warm)

    p = commands.add_parser("train")
    p.add_argument("--task", required=True)
    p.add_argument("--format", choices=["conll", "grobid"], required=True)
    p.add_argument("--train", required=True)
    p.add_argument("--valid", required=True)
    p.add_argument("--test", required=True)
    p.add_argument("--architecture", default="BidLSTM_CRF")
    p.add_argument("--transformer", default=None)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--epochs", type=int, help="fixed settings (all three, or --defaults)")
    p.add_argument("--patience", type=int)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--model-name", required=True)
    p.add_argument("--output", default=None, help="models directory; the model goes to OUTPUT/MODEL_NAME")
    p.add_argument("--defaults", default=None, metavar="grobid:MODEL|ner",
                   help="DeLFT's application defaults (configure()) instead of --epochs/--patience/--batch-size")
    p.add_argument("--predictions", default=None, help="write the test set's gold and predicted labels here (JSON)")
    p.set_defaults(run=cmd_train)

    p = commands.add_parser("tag")
    p.add_argument("--model", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--format", choices=["conll", "grobid"], required=True)
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32, 256])
    p.add_argument("--small-limit", type=int, default=1000, help="sequences used for batch 1 and the stream")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--min-seconds", type=float, default=0.5, help="loop short calls to last at least this long")
    p.set_defaults(run=cmd_tag)

    add_calls_command(commands, cmd_calls)

    p = commands.add_parser("load")
    p.add_argument("--model", required=True)
    p.set_defaults(run=cmd_load)

    p = commands.add_parser("tagfile")
    p.add_argument("--model", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--format", choices=["conll", "grobid"], required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--batch-size", type=int, default=32)
    p.set_defaults(run=cmd_tagfile)

    args = parser.parse_args()
    # glibc's allocator is set by the suite (suite_runner.allocator_env) for both systems' processes
    # alike (the environment it starts them with): nothing is tuned here.
    if args.threads:
        torch.set_num_threads(args.threads)
    args.run(args)


if __name__ == "__main__":
    main()

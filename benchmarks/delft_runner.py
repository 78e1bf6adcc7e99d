"""Benchmark commands for DeLFT, run INSIDE DeLFT's own venv (see delft_env.py), never textorch's.

Started by bench_vs_delft.py with the working directory set to the bench work dir, because
DeLFT writes its checkpoints under ``data/models/sequenceLabelling/`` relative to it. Each
command prints its measures as one line ``BENCH_JSON {...}`` on stdout; DeLFT's own chatter
is sent to stderr so it cannot be mistaken for results.

Commands (the same as textorch_runner.py's, so the two are timed the same way):
    warm     build DeLFT's LMDB cache of the word vectors (outside any timing)
    train    train with ``Sequence.train`` on given train/valid files, score the test file
    tag      load a model, then time ``Sequence.tag`` on sequences held in memory
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

from runner_common import emit as _emit, peak_rss_mb, tagging_rows  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

with contextlib.redirect_stdout(sys.stderr):
    import torch  # noqa: E402
    from delft.sequenceLabelling.reader import load_data_and_labels_conll, load_data_and_labels_crf_file  # noqa: E402
    from delft.sequenceLabelling.trainer import Trainer  # noqa: E402
    from delft.sequenceLabelling.wrapper import Sequence  # noqa: E402
    from delft.utilities.Utilities import set_random_seed  # noqa: E402
_IMPORT_S = time.perf_counter() - _T0

EMBEDDINGS = "w2v-conll-grobid-100d"
# Settings of DeLFT's own applications (nerTagger.configure / grobidTagger.configure) for
# the recurrent models; epochs and batch size are fixed by the benchmark for both systems.
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


def _timed_evaluate():
    """Wrap DeLFT's per-epoch validation so its time can be told apart from training."""
    spent = {"valid_s": 0.0}
    original = Trainer.evaluate

    def evaluate(self, data_loader):
        started = time.perf_counter()
        try:
            return original(self, data_loader)
        finally:
            spent["valid_s"] += time.perf_counter() - started

    Trainer.evaluate = evaluate
    return spent


def cmd_train(args: argparse.Namespace) -> None:
    x_train, y_train, f_train = read(args.train, args.format)
    x_valid, y_valid, f_valid = read(args.valid, args.format)
    x_test, y_test, f_test = read(args.test, args.format)
    set_random_seed(args.seed)
    bert = args.transformer is not None
    max_length = (BERT_MAX_SEQUENCE_LENGTH if bert else MAX_SEQUENCE_LENGTH).get(args.task, 300)
    epochs_seen: list[int] = []
    spent = _timed_evaluate()
    with contextlib.redirect_stdout(sys.stderr):
        model = Sequence(
            args.model_name,
            architecture=args.architecture,
            embeddings_name=None if bert else EMBEDDINGS,
            transformer_name=args.transformer,
            max_sequence_length=max_length,
            recurrent_dropout=0.5,
            word_lstm_units=100,
            batch_size=args.batch_size,
            max_epoch=args.epochs,
            early_stop=True,
            patience=args.patience,
        )
        started = time.perf_counter()
        model.train(x_train, y_train, f_train=f_train, x_valid=x_valid, y_valid=y_valid, f_valid=f_valid,
                    callbacks=[lambda epoch, logs: epochs_seen.append(epoch)])
        fit_s = time.perf_counter() - started
        scores = model.eval(x_test, y_test, features=f_test)
        if args.output:
            model.save(args.output)
    epochs = len(epochs_seen)
    tokens = n_tokens(x_train)
    emit({
        "system": "delft", "task": args.task, "architecture": args.architecture, "seed": args.seed,
        "epochs": epochs, "n_train_sequences": len(x_train), "n_train_tokens": tokens,
        "fit_s": fit_s, "valid_s": spent["valid_s"],
        "train_tokens_per_s": tokens * epochs / max(fit_s - spent["valid_s"], 1e-9),
        "fit_tokens_per_s": tokens * epochs / fit_s,
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
    rows = tagging_rows(lambda data, b: _tag(model, data, b), x, lengths, args.batch_sizes,
                        args.small_limit, args.repeats, args.min_seconds)
    emit({"system": "delft", "load_s": load_s, "rss_after_load_mb": rss_loaded, "tagging": rows,
          "n_sequences": len(x), "n_tokens": sum(lengths)})


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
    p.add_argument("--epochs", type=int, required=True)
    p.add_argument("--patience", type=int, required=True)
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--model-name", required=True)
    p.add_argument("--output", default=None, help="models directory; the model goes to OUTPUT/MODEL_NAME")
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
    if args.threads:
        torch.set_num_threads(args.threads)
    args.run(args)


if __name__ == "__main__":
    main()

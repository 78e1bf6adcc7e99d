"""Data for the side-by-side benchmark: the same files, the same splits, for both systems.

Everything is written under the bench work dir (never into ../shared):

- ``data/sequenceLabelling/CoNLL-2003/eng.{train,testa,testb}``: the shared CoNLL-2003 files
  converted to what DeLFT's ``nerTagger`` reads (two tab-separated columns, IOB2), at the
  path it expects relative to its working directory. textorch reads the original files.
- ``data/sequenceLabelling/grobid/<task>/seed<S>/{train,valid,test}.txt``: the GROBID file cut
  into test (10 %), then validation (10 % of the rest) with textorch's seeded ``holdout`` —
  the split ``textorch seq train-eval`` makes — and handed as files to both systems, so that
  they train, validate and are scored on exactly the same sequences. Lines are copied as they
  are; each sequence ends with one empty line. A corpus of the user's own (``--corpus
  NAME=TRAIN[,TEMPLATE]``, :class:`OwnCorpus`) is split the same way under its own name.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from benchmarks.peers.runner_common import read_blocks
from textorch.data.splits import holdout

REPO = Path(__file__).resolve().parents[2]
GROBID_FILES = {
    "date": "grobid/date/date-220311.train",
    "name-header": "grobid/name-header/name-header-251225.train",
    "name-citation": "grobid/name-citation/name-citation-251225.train",
    "affiliation-address": "grobid/affiliation-address/affiliation-address-251225.train",
    "figure": "grobid/figure/figure-251225.train",
    "header": "grobid/header/header-251202.train.gz",
    "segmentation": "grobid/segmentation/segmentation-251202.train.gz",
    "reference-segmenter": "grobid/reference-segmenter/reference-segmenter-251202.train.gz",
    "fulltext": "grobid/fulltext/fulltext-251202.train.gz",
}
DOCUMENT_TASKS = ("header", "segmentation", "reference-segmenter", "fulltext")
"""GROBID's big models: one whole document per sequence (the cascade)."""
CONLL = "conll2003"


@dataclass(frozen=True)
class TaskFiles:
    """Where each system reads a task's data (paths differ only for CoNLL's converted copy)."""

    task: str
    format: str  # conll | grobid
    textorch: dict  # train / valid / test paths
    delft: dict
    template: str | None = None  # Wapiti's CRF++ template of an own corpus; None: the shared task's


@dataclass(frozen=True)
class OwnCorpus:
    """A GROBID training file that is none of the suite's named tasks, run under its own name.

    The suite's tasks are corpora a preset may know by name; a corpus under a name nothing
    knows (a new layout model, another GROBID version's file, a corpus reshaped for a test)
    shows what a user's own data gets. It is split per seed as the named tasks are; Wapiti
    trains with ``template`` (a CRF++ file), which it needs.
    """

    name: str
    train: Path
    template: Path | None = None

    def to_json(self) -> dict:
        return {"train": str(self.train), "template": str(self.template) if self.template else None}

    @classmethod
    def from_json(cls, name: str, data: dict) -> "OwnCorpus":
        return cls(name, Path(data["train"]), Path(data["template"]) if data.get("template") else None)


_CORPUS_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def parse_corpus(text: str, taken: set[str] | frozenset[str] = frozenset()) -> OwnCorpus:
    """``NAME=TRAIN[,TEMPLATE]`` read and checked: a name none of ``taken`` (the suite's tasks,
    the corpora before it) has, a training file and template that exist."""
    name, _, rest = text.partition("=")
    train, _, template = rest.partition(",")
    if not _CORPUS_NAME.fullmatch(name) or not train:
        raise SystemExit(f"--corpus {text!r}: expected NAME=TRAINFILE[,TEMPLATE]")
    if name in taken:
        raise SystemExit(f"--corpus {text!r}: {name!r} is taken (a task of the suite, or another corpus); give the corpus another name")
    for path in filter(None, (train, template)):
        if not Path(path).is_file():
            raise SystemExit(f"--corpus {text!r}: {path} not found")
    return OwnCorpus(name, Path(train).resolve(), Path(template).resolve() if template else None)


def shared_data(relative: str) -> Path:
    path = Path(os.environ.get("TEXTORCH_SHARED_DATA", REPO.parent / "shared" / "data")) / relative
    if not path.exists():
        raise SystemExit(f"{path} not found: pass the data folder with TEXTORCH_SHARED_DATA")
    return path


def iob1_to_iob2(tags: list[str]) -> list[str]:
    """An ``I-X`` that does not continue an ``X`` entity opens one: it becomes ``B-X``."""
    out = []
    previous = "O"
    for tag in tags:
        if tag.startswith("I-") and (previous == "O" or previous[2:] != tag[2:]):
            tag = "B-" + tag[2:]
        out.append(tag)
        previous = tag
    return out


def convert_conll(source: Path, target: Path) -> None:
    """4-column space-separated IOB1 -> ``word<TAB>tag`` IOB2; -DOCSTART- and blank lines kept."""
    out: list[str] = []
    words: list[str] = []
    tags: list[str] = []

    def flush() -> None:
        out.extend(f"{w}\t{t}" for w, t in zip(words, iob1_to_iob2(tags)))
        words.clear()
        tags.clear()

    for line in source.read_text(encoding="utf-8").splitlines():
        fields = line.split()
        if not fields or fields[0] == "-DOCSTART-":
            flush()
            out.append(line.strip() and "-DOCSTART-\tO")
            continue
        words.append(fields[0])
        tags.append(fields[-1])
    flush()
    _write_if_changed(target, "\n".join(out) + "\n")


def _write_if_changed(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def _write_blocks(path: Path, blocks: list[list[str]]) -> None:
    _write_if_changed(path, "".join("\n".join(block) + "\n\n" for block in blocks))


def prepare(work: Path, tasks: list[str], seeds: list[int],
            corpora: dict[str, OwnCorpus] | None = None) -> dict[tuple[str, int], TaskFiles]:
    """Write the converted copies and splits; return the files of every (task, seed). A task
    named in ``corpora`` reads that corpus's file instead of a shared one."""
    corpora = corpora or {}
    root = work / "data" / "sequenceLabelling"
    files: dict[tuple[str, int], TaskFiles] = {}
    for task in tasks:
        if task == "conll":
            original = {role: shared_data(f"{CONLL}/eng.{name}") for role, name in
                        (("train", "train"), ("valid", "testa"), ("test", "testb"))}
            converted = {}
            for role, source in original.items():
                target = root / "CoNLL-2003" / source.name
                convert_conll(source, target)
                converted[role] = str(target)
            for seed in seeds:
                files[(task, seed)] = TaskFiles(task, "conll", {k: str(v) for k, v in original.items()}, converted)
            continue
        own = corpora.get(task)
        blocks = read_blocks(own.train if own else shared_data(GROBID_FILES[task]))
        template = str(own.template) if own and own.template else None
        for seed in seeds:
            rest, test = holdout(blocks, 0.1, seed)
            train, valid = holdout(rest, 0.1, seed + 1)
            paths = {}
            for role, part in (("train", train), ("valid", valid), ("test", test)):
                target = root / "grobid" / task / f"seed{seed}" / f"{role}.txt"
                _write_blocks(target, part)
                paths[role] = str(target)
            files[(task, seed)] = TaskFiles(task, "grobid", paths, paths, template)
    return files

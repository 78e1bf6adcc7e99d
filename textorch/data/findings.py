"""What validation finds: problems at ``file:line`` and the per-file record of a check.

Kept apart from the walk over the lines (validate.py) so that code reporting findings (the
training commands, ``seq validate``) needs only these small types.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from textorch.data.corpus import Corpus
from textorch.data.tags import OUTSIDE

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding, at ``path:line`` (``line`` is None for a whole-file problem)."""

    path: str
    line: int | None
    message: str
    severity: str = ERROR

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.severity}: {self.message}"


@dataclass
class FileCheck:
    """What validation found in one file, and the corpus of its sequences without errors."""

    path: str
    role: str
    format: str | None = None
    scheme: str | None = None
    problems: list[Problem] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    """Token count of every sequence, in file order (bad sequences included)."""
    long_lines: list[int] = field(default_factory=list)
    """First lines of the sequences longer than the maximum sequence length (none when it is 0)."""
    max_length: int = 0
    """The maximum sequence length the file was checked against (0: none)."""
    bad_sequences: set[int] = field(default_factory=set)
    """Indexes (in file order) of the sequences that contain an error."""
    corpus: Corpus | None = None
    """The sequences without errors, read by the reader; None when the file is unusable."""

    def add(self, line: int | None, message: str, severity: str = ERROR) -> None:
        self.problems.append(Problem(self.path, line, message, severity))

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == ERROR]

    @property
    def fatal(self) -> bool:
        """A problem no skipping can cure: unreadable file, no token line, unknown format."""
        return any(p.severity == ERROR and p.line is None for p in self.problems)

    def summary(self) -> dict:
        """Counts, label inventory (of the sequences without errors) and length distribution."""
        lengths = sorted(self.lengths)
        out: dict = {
            "path": self.path, "role": self.role, "format": self.format, "scheme": self.scheme,
            "n_sequences": len(lengths), "n_tokens": sum(lengths),
            "n_bad_sequences": len(self.bad_sequences),
            "n_errors": len(self.errors), "n_warnings": len(self.problems) - len(self.errors),
        }
        if lengths:
            out["length"] = {
                "min": lengths[0], "mean": round(sum(lengths) / len(lengths), 2),
                "p95": lengths[min(len(lengths) - 1, int(0.95 * len(lengths)))], "max": lengths[-1],
            }
        if self.max_length:
            out["n_longer_than_max"] = len(self.long_lines)
        if self.corpus is not None:
            out["labels"] = label_counts(self.corpus)
        return out

    def long_sequences_note(self) -> str | None:
        """One line on the sequences longer than the maximum length, or None when there are none."""
        if not self.long_lines:
            return None
        count = len(self.long_lines)
        return (f"{self.path}: {plural(count, 'sequence')} longer than {self.max_length:,} tokens (longest "
                f"{max(self.lengths):,}; {places(self.path, self.long_lines)}): training reads "
                f"{'it' if count == 1 else 'them'} in consecutive pieces of at most {self.max_length:,} tokens, "
                "every token kept; tagging reads whole sequences")


@dataclass
class ValidationReport:
    """The checks of the train, validation and test files of one run."""

    files: list[FileCheck]

    @property
    def problems(self) -> list[Problem]:
        return [p for check in self.files for p in check.problems]

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == ERROR]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == WARNING]

    def file(self, role: str) -> FileCheck | None:
        return next((check for check in self.files if check.role == role), None)

    def to_dict(self) -> dict:
        return {"files": [check.summary() for check in self.files],
                "problems": [{"path": p.path, "line": p.line, "severity": p.severity, "message": p.message}
                             for p in self.problems]}


def label_counts(corpus: Corpus) -> dict[str, dict[str, int]]:
    """Per IOB2 type, entity mentions and tokens; ``O`` counts outside tokens."""
    counts: dict[str, dict[str, int]] = {}
    for sequence in corpus.sequences:
        for tag in sequence.labels or ():
            typ = OUTSIDE if tag == OUTSIDE else tag[2:]
            entry = counts.setdefault(typ, {"entities": 0, "tokens": 0})
            entry["tokens"] += 1
            if tag[0] == "B":
                entry["entities"] += 1
    return dict(sorted(counts.items()))


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def places(path: str, lines: list[int], shown: int = 3) -> str:
    """``file:line`` of the first few lines, and how many more."""
    places = ", ".join(f"{path}:{line}" for line in lines[:shown])
    return places + (f" and {len(lines) - shown} more" if len(lines) > shown else "")


def grobid_departures(path: str, expected: int, other_widths: list[tuple[int, int]],
                      open_continuations: list[int]) -> list[tuple[int, str]]:
    """The warnings (line, message) for what GROBID's own files do and Wapiti and DeLFT train on:
    sequences whose field count differs from the file's (``(line, fields)`` each), and fields
    opened by their continuation label (their lines). One warning per kind, with a count."""
    found = []
    if other_widths:
        widths = ", ".join(str(w) for w in sorted({w for _, w in other_widths}))
        message = (f"{plural(len(other_widths), 'sequence')} with {widths} fields where most have {expected} "
                   f"({places(path, [n for n, _ in other_widths])}); read as they are: a model with features takes "
                   "its columns by index from the left")
        found.append((other_widths[0][0], message))
    if open_continuations:
        lines = open_continuations
        verb = "opens" if len(lines) == 1 else "open"
        message = (f"{plural(len(lines), 'field')} {verb} with a continuation label, no I- label before "
                   f"({places(path, lines)}); each read as the start of its field, as a CRF reads it")
        found.append((lines[0], message))
    return found

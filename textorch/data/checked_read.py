"""Reading training data through validation: show the findings, refuse bad data, or skip it.

validate.py finds the problems; this module decides what a run does with them. Training calls
read_validated: errors stop it with every problem listed (capped), unless the user asked to
skip the sequences concerned, in which case it says how many it left out.
"""

from __future__ import annotations

import logging
from pathlib import Path

from textorch.data.corpus import Corpus
from textorch.data.tags import OUTSIDE
from textorch.data.findings import Problem, ValidationReport
from textorch.data.validate import validate_data
from textorch.errors import DataError, TextorchError

logger = logging.getLogger(__name__)

MAX_LISTED = 50
"""Problems printed before the rest are summarised as a count."""
MAX_LOGGED_WARNINGS = 10


class DataValidationError(TextorchError):
    """Training data with errors: the message lists them (up to a limit) at ``file:line``."""

    def __init__(self, report: ValidationReport, limit: int = MAX_LISTED) -> None:
        errors = report.errors
        bad = sum(len(check.bad_sequences) for check in report.files)
        fatal = any(check.fatal for check in report.files)
        head = f"{_count(len(errors), 'error')} in the data"
        if not fatal:
            head += (f" (in {_count(bad, 'sequence')}); fix them, or pass "
                     "--skip-bad-sequences to train without those sequences")
        lines = [head + ":", *_listing(errors, limit)]
        super().__init__("\n".join(lines))
        self.report = report


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _listing(problems: list[Problem], limit: int) -> list[str]:
    shown = problems if limit <= 0 else problems[:limit]
    lines = [f"  {problem}" for problem in shown]
    if len(problems) > len(shown):
        lines.append(f"  ... and {len(problems) - len(shown)} more")
    return lines


def format_report(report: ValidationReport, limit: int = MAX_LISTED) -> str:
    """Human-readable report: one summary block per file, then the problems (errors first)."""
    out = []
    for check in report.files:
        summary = check.summary()
        scheme = f" ({summary['scheme']})" if summary["scheme"] else ""
        out.append(f"{check.role}: {check.path}: {summary['format'] or 'unknown format'}{scheme}, "
                   f"{_count(summary['n_sequences'], 'sequence')}, {_count(summary['n_tokens'], 'token')}, "
                   f"{_count(summary['n_errors'], 'error')} in {_count(summary['n_bad_sequences'], 'sequence')}, "
                   f"{_count(summary['n_warnings'], 'warning')}")
        if "length" in summary:
            length = summary["length"]
            out.append(f"  sequence length: min {length['min']}, mean {length['mean']}, "
                       f"p95 {length['p95']}, max {length['max']}")
        if note := check.long_sequences_note():
            out.append(f"  {note.removeprefix(check.path + ': ')}")
        labels = summary.get("labels") or {}
        if labels:
            where = " (of the sequences without errors)" if summary["n_bad_sequences"] else ""
            listed = ", ".join(f"{typ} {c['entities']} ({c['tokens']} tokens)" if typ != OUTSIDE
                               else f"O ({c['tokens']} tokens)" for typ, c in labels.items())
            out.append(f"  labels{where}: {listed}")
    problems = report.errors + report.warnings
    if problems:
        out.append("")
        out.extend(line[2:] for line in _listing(problems, limit))
        if limit > 0 and len(problems) > limit:
            out[-1] += " (use --max-problems 0 to list all)"
    errors, warnings = len(report.errors), len(report.warnings)
    out.append("")
    out.append(f"{'FAILED' if errors else 'OK'}: {_count(errors, 'error')}, {_count(warnings, 'warning')}")
    return "\n".join(out)


def read_validated(train: str | Path, valid: str | Path | None, test: str | Path | None,
                   format: str | None, max_sequence_length: int = 0, skip_bad_sequences: bool = False,
                   ) -> tuple[Corpus, Corpus | None, Corpus | None]:
    """Validate a run's files, then return their corpora; how training reads its data.

    Errors raise DataValidationError listing them all, unless ``skip_bad_sequences``: the
    sequences with errors are then left out and their number logged. A whole-file error (an
    unreadable file, an unknown format) cannot be skipped. Warnings are logged (the first few).
    """
    report = validate_data(train, valid, test, format, max_sequence_length)
    warnings = report.warnings
    for problem in warnings[:MAX_LOGGED_WARNINGS]:
        logger.warning("%s", problem)
    if len(warnings) > MAX_LOGGED_WARNINGS:
        logger.warning("... and %d more warnings ('textorch seq validate' lists them all)",
                       len(warnings) - MAX_LOGGED_WARNINGS)
    errors = report.errors
    if len(errors) == 1 and errors[0].line is None:  # a missing file, say: one line, as the readers say it
        raise DataError(errors[0].path, None, errors[0].message)
    if errors:
        if not skip_bad_sequences or any(check.fatal for check in report.files):
            raise DataValidationError(report)
        for check in report.files:
            if check.bad_sequences:
                logger.warning("%s: skipped %d of %d sequences with errors (--skip-bad-sequences)",
                               check.path, len(check.bad_sequences), len(check.lengths))
    corpora = {check.role: check.corpus for check in report.files}
    return corpora["train"], corpora.get("valid"), corpora.get("test")  # type: ignore[return-value]

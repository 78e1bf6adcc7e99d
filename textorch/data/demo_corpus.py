"""Seeded generator of a labelled date corpus for ``textorch demo``.

The demo must train a real BiLSTM-CRF in about a minute without any file on disk, so the data
is synthesised here. It imitates GROBID's ``date`` model (fields day, month, year, other) because
that is a small, well-known task whose difficulty comes from context: whether ``06`` is a day or
a month depends on the surrounding format, and ``2005`` in ``12/06/2005`` and in ``Summer 2005``
has the same label while ``Summer`` does not. Labels are already in the internal IOB2 scheme that
DeLFT's reader produces from GROBID files (``B-<day>``, ``I-<day>``, ..., ``O``), so a demo model
looks like one trained on GROBID data.

A line is built as a list of *segments* (a piece of text, its field or ``None``, and what
separates it from the previous piece), then tokenised and labelled from the segments' spans
(:mod:`textorch.data.segment_labels`).
"""

from __future__ import annotations

import datetime
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass

from textorch.data.corpus import Corpus
from textorch.data.segment_labels import labelled_sequence, render
from textorch.errors import ConfigError

logger = logging.getLogger(__name__)

__all__ = ["DEMO_LABELS", "generate_date_corpus", "sample_texts"]

DEMO_LABELS: tuple[str, ...] = (
    "O", "B-<day>", "I-<day>", "B-<month>", "I-<month>", "B-<year>", "I-<year>",
)
"""Every label the generator can emit, in a stable order (handy for building a label vocabulary)."""

_FIRST_DAY = datetime.date(1950, 1, 1).toordinal()
_LAST_DAY = datetime.date(2024, 12, 31).toordinal()
# English names spelled out: ``calendar.month_name`` follows the process locale, which would
# make the corpus depend on the machine.
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTH_ABBR = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_SEASONS = ("Spring", "Summer", "Autumn", "Fall", "Winter")


@dataclass(frozen=True)
class _Seg:
    """A piece of a line; ``field`` is ``day``/``month``/``year`` or ``None`` for other."""

    text: str
    field: str | None = None
    sep: str = " "


def _other(text: str, sep: str = " ") -> _Seg:
    return _Seg(text, None, sep)


# --------------------------------------------------------------------------- field renderings


def _ordinal(day: int) -> str:
    if day in (11, 12, 13):
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


def _day(rng: random.Random, day: int, sep: str = " ", ordinal: float = 0.0) -> _Seg:
    """A day in running text: ``3``, ``03``, ``3rd``, or ``3 rd`` as PDF extraction splits it."""
    if rng.random() < ordinal:
        # A detached suffix (a superscript extracted on its own) is what makes a day span tokens.
        gap = " " if rng.random() < 0.3 else ""
        return _Seg(f"{day}{gap}{_ordinal(day)}", "day", sep)
    text = f"{day:02d}" if day < 10 and rng.random() < 0.15 else str(day)
    return _Seg(text, "day", sep)


def _month(rng: random.Random, month: int, sep: str = " ") -> _Seg:
    """A month name, full or abbreviated; the abbreviation's dot belongs to the month."""
    full = _MONTHS[month - 1]
    if rng.random() < 0.6:
        text = full
    else:
        text = "Sept" if month == 9 and rng.random() < 0.3 else _MONTH_ABBR[month - 1]
        if text != "May" and rng.random() < 0.5:
            text += "."
    case = rng.random()
    if case < 0.1:
        text = text.lower()
    elif case < 0.13:
        text = text.upper()
    return _Seg(text, "month", sep)


def _year(rng: random.Random, year: int, sep: str = " ") -> _Seg:
    """A four-digit year, now and then broken by a stray space as in extracted PDF text."""
    text = str(year)
    if rng.random() < 0.04:
        cut = rng.randint(1, 3)
        text = f"{text[:cut]} {text[cut:]}"
    return _Seg(text, "year", sep)


# --------------------------------------------------------------------------- date formats

_Format = Callable[[random.Random, datetime.date, str], list[_Seg]]


def _fmt_day_month_year(rng: random.Random, d: datetime.date, sep: str) -> list[_Seg]:
    """``12 June 2005``, ``12th Jun. 2005``, ``3 March, 2021``."""
    segs = [_day(rng, d.day, sep, ordinal=0.2), _month(rng, d.month)]
    if rng.random() < 0.12:
        segs.append(_other(",", ""))
    return [*segs, _year(rng, d.year)]


def _fmt_month_day_year(rng: random.Random, d: datetime.date, sep: str) -> list[_Seg]:
    """``June 12, 2005``, ``Jun. 12th, 2005``, ``June 12 2005``."""
    segs = [_month(rng, d.month, sep), _day(rng, d.day, ordinal=0.2)]
    if rng.random() < 0.85:
        segs.append(_other(",", ""))
    return [*segs, _year(rng, d.year)]


@dataclass(frozen=True)
class _NumericStyle:
    """How an all-digit date is written; fixed once per range so both ends look alike."""

    order: str
    mark: str
    pad: bool
    short_year: bool


def _numeric_style(rng: random.Random) -> _NumericStyle:
    """Day first, month first or ISO, each with the separators that go with it."""
    order = rng.choices(("dmy", "mdy", "ymd"), weights=(0.45, 0.25, 0.3))[0]
    if order == "ymd":
        mark = rng.choices(("-", "/", "."), weights=(0.8, 0.15, 0.05))[0]
        return _NumericStyle(order, mark, pad=True, short_year=False)
    mark = rng.choice(("/", ".", "-") if order == "dmy" else ("/", "-"))
    return _NumericStyle(order, mark, pad=rng.random() < 0.6, short_year=rng.random() < 0.1)


def _numeric(d: datetime.date, sep: str, style: _NumericStyle) -> list[_Seg]:
    """``12/06/2005`` (dmy), ``06/12/2005`` (mdy) or ``2005-06-12`` (ymd).

    The orders share their digits, so only the order (and the separator, which leans towards
    one order) tells a day from a month: the ambiguity a date model has to learn.
    """
    values = {
        "d": (f"{d.day:02d}" if style.pad else str(d.day), "day"),
        "m": (f"{d.month:02d}" if style.pad else str(d.month), "month"),
        "y": (f"{d.year % 100:02d}" if style.short_year else str(d.year), "year"),
    }
    segs: list[_Seg] = []
    for i, key in enumerate(style.order):
        text, field = values[key]
        if i:
            segs.append(_other(style.mark, ""))
        segs.append(_Seg(text, field, sep if i == 0 else ""))
    return segs


def _fmt_numeric(rng: random.Random, d: datetime.date, sep: str) -> list[_Seg]:
    """An all-digit date in a style drawn afresh."""
    return _numeric(d, sep, _numeric_style(rng))


def _fixed_numeric(style: _NumericStyle) -> _Format:
    """A numeric format bound to one style, for the two ends of a range."""

    def render(_rng: random.Random, d: datetime.date, sep: str) -> list[_Seg]:
        return _numeric(d, sep, style)

    return render


def _fmt_dashed_abbr(rng: random.Random, d: datetime.date, sep: str) -> list[_Seg]:
    """``12-Jun-2005``, the style of database dumps and log files."""
    abbr = _MONTH_ABBR[d.month - 1]
    day = f"{d.day:02d}" if rng.random() < 0.5 else str(d.day)
    return [_Seg(day, "day", sep), _other("-", ""),
            _Seg(abbr.upper() if rng.random() < 0.3 else abbr, "month", ""),
            _other("-", ""), _Seg(str(d.year), "year", "")]


def _fmt_month_year(rng: random.Random, d: datetime.date, sep: str) -> list[_Seg]:
    """``June 2005``, ``Jun. 2005``, ``June, 2005``."""
    segs = [_month(rng, d.month, sep)]
    if rng.random() < 0.15:
        segs.append(_other(",", ""))
    return [*segs, _year(rng, d.year)]


def _fmt_season_year(rng: random.Random, d: datetime.date, sep: str) -> list[_Seg]:
    """``Summer 1998``: the season is not a month and stays ``O``."""
    season = rng.choice(_SEASONS)
    return [_other(season.lower() if rng.random() < 0.15 else season, sep), _year(rng, d.year)]


def _fmt_ordinal_of(rng: random.Random, d: datetime.date, sep: str) -> list[_Seg]:
    """``12th of June 2005``, ``the 1st of March, 2010``."""
    segs = [_other("the", sep)] if rng.random() < 0.35 else []
    segs += [_Seg(f"{d.day}{_ordinal(d.day)}", "day", " " if segs else sep), _other("of"),
             _month(rng, d.month)]
    if rng.random() < 0.3:
        segs.append(_other(",", ""))
    return [*segs, _year(rng, d.year)]


def _fmt_year_only(rng: random.Random, d: datetime.date, sep: str) -> list[_Seg]:
    """``1998``, the commonest date in a bibliography."""
    return [_year(rng, d.year, sep)]


def _fmt_month_day(rng: random.Random, d: datetime.date, sep: str) -> list[_Seg]:
    """``June 12``: a date without its year, as in a conference programme."""
    return [_month(rng, d.month, sep), _day(rng, d.day, ordinal=0.1)]


def _fmt_weekday(rng: random.Random, d: datetime.date, sep: str) -> list[_Seg]:
    """``Thursday, 15 September 2011``: the weekday is context, not a field."""
    name = _WEEKDAYS[d.weekday()]
    if rng.random() < 0.3:
        name = name[:3]
    rest = _fmt_day_month_year if rng.random() < 0.6 else _fmt_month_day_year
    return [_other(name, sep), _other(",", ""), *rest(rng, d, " ")]


def _fmt_year_month_day(rng: random.Random, d: datetime.date, sep: str) -> list[_Seg]:
    """``2004 May 8``, the order of some catalogues."""
    return [_Seg(str(d.year), "year", sep), _month(rng, d.month), _day(rng, d.day)]


def _fmt_vague_year(rng: random.Random, d: datetime.date, sep: str) -> list[_Seg]:
    """``mid-2005``, ``early 1998``, ``late 2010``."""
    word = rng.choice(("mid", "early", "late", "Early", "Late", "Mid"))
    if word.lower() == "mid" and rng.random() < 0.7:
        return [_other(word, sep), _other("-", ""), _Seg(str(d.year), "year", "")]
    return [_other(word, sep), _year(rng, d.year)]


_FORMATS: tuple[tuple[_Format, float], ...] = (
    (_fmt_day_month_year, 0.22),
    (_fmt_month_day_year, 0.18),
    (_fmt_numeric, 0.18),
    (_fmt_month_year, 0.1),
    (_fmt_year_only, 0.07),
    (_fmt_ordinal_of, 0.05),
    (_fmt_season_year, 0.04),
    (_fmt_dashed_abbr, 0.04),
    (_fmt_weekday, 0.04),
    (_fmt_month_day, 0.03),
    (_fmt_year_month_day, 0.03),
    (_fmt_vague_year, 0.02),
)
_YEAR_ONLY_FORMATS = (_fmt_year_only, _fmt_season_year, _fmt_vague_year)

# --------------------------------------------------------------------------- whole lines

_PREFIXES: tuple[tuple[str, float], ...] = (
    ("Published", 0.1), ("Received:", 0.08), ("Received", 0.08), ("(accepted", 0.05),
    ("Date:", 0.08), ("©", 0.06), ("Copyright ©", 0.03), ("Accepted", 0.06),
    ("Available online", 0.06), ("Published online:", 0.05), ("Revised", 0.04),
    ("Last updated:", 0.04), ("Submitted", 0.04), ("(", 0.04), ("Dated", 0.02),
    ("Rev. date:", 0.02), ("published", 0.03), ("Issued", 0.02), ("on", 0.02),
)
_PAIR_WORDS: tuple[tuple[str, str], ...] = (
    ("Received", "accepted"), ("Received:", "Accepted:"), ("Received", "revised"),
    ("Submitted", "accepted"), ("Received", "in final form"), ("Published online", "in print"),
    ("Accepted", "published online"),
)


def _random_date(rng: random.Random) -> datetime.date:
    return datetime.date.fromordinal(rng.randint(_FIRST_DAY, _LAST_DAY))


def _pick_format(rng: random.Random) -> _Format:
    formats, weights = zip(*_FORMATS)
    return rng.choices(formats, weights=weights)[0]


def _prefix(rng: random.Random) -> list[_Seg]:
    """An introducing word that gives the date its context, or nothing (about 40% of lines)."""
    if rng.random() < 0.4:
        return []
    words, weights = zip(*_PREFIXES)
    return [_other(rng.choices(words, weights=weights)[0], "")]


def _single(rng: random.Random) -> list[_Seg]:
    segs = _prefix(rng)
    lead = segs[0].text if segs else ""
    # A copyright sign is followed by a year; anything else may introduce any format.
    fmt = _fmt_year_only if "©" in lead and rng.random() < 0.8 else _pick_format(rng)
    segs += fmt(rng, _random_date(rng), " " if lead not in ("", "(") else "")
    opened = bool(segs) and segs[0].text.startswith("(")
    tail = rng.random()
    if opened and tail < 0.85:
        segs.append(_other(")", ""))
    elif tail < 0.12:
        segs.append(_other(rng.choice((";", ".", ",")), ""))
    return segs


def _range(rng: random.Random) -> list[_Seg]:
    """``June 2005 - July 2006``, ``12/06/2005 to 15/06/2005``: two dates, each fully labelled."""
    fmt = _pick_format(rng)
    # Formats without a day need ends at least a year apart, or the range reads "1998 - 1998".
    span = (370, 3000) if fmt in _YEAR_ONLY_FORMATS else (1, 800)
    start = datetime.date.fromordinal(rng.randint(_FIRST_DAY, _LAST_DAY - span[1]))
    end = datetime.date.fromordinal(start.toordinal() + rng.randint(*span))
    if fmt is _fmt_numeric:
        fmt = _fixed_numeric(_numeric_style(rng))
    joint = rng.choices(("-", "to", "until"), weights=(0.55, 0.4, 0.05))[0]
    segs = [_other("From", "")] if joint != "-" and rng.random() < 0.3 else []
    segs += fmt(rng, start, " " if segs else "")
    segs.append(_other(joint))
    if fmt is _fmt_month_day_year and rng.random() < 0.5:
        fmt = _fmt_day_month_year
    return [*segs, *fmt(rng, end, " ")]


def _event_pair(rng: random.Random) -> list[_Seg]:
    """``Received 3 March 2021; accepted 12/05/2021``: two events, each with its own word."""
    first, second = rng.choice(_PAIR_WORDS)
    start = _random_date(rng)
    end = datetime.date.fromordinal(min(_LAST_DAY, start.toordinal() + rng.randint(10, 400)))
    segs = [_other(first, ""), *_pick_format(rng)(rng, start, " ")]
    segs.append(_other(rng.choices((";", ","), weights=(0.7, 0.3))[0], ""))
    return [*segs, _other(second), *_pick_format(rng)(rng, end, " ")]


def _line_segments(rng: random.Random, two_dates: float) -> list[_Seg]:
    """One line: a single date most of the time, two dates with probability ``two_dates``."""
    if rng.random() >= two_dates:
        return _single(rng)
    return _range(rng) if rng.random() < 0.5 else _event_pair(rng)


def _check_count(n: int) -> None:
    """Reject a negative size here, where the message can name the parameter, not deep inside."""
    if n < 0:
        raise ConfigError(f"the number of demo sequences must be >= 0, got {n}")


def generate_date_corpus(n: int, seed: int = 0) -> Corpus:
    """``n`` labelled date lines, identical for identical ``(n, seed)``.

    A private ``random.Random`` is used so that the corpus does not depend on (or disturb) the
    global random state, which training seeds separately.
    """
    _check_count(n)
    rng = random.Random(seed)
    sequences = [labelled_sequence(_line_segments(rng, two_dates=0.2)) for _ in range(n)]
    logger.debug("generated %d demo date sequences (seed %d)", n, seed)
    return Corpus(sequences=sequences, format="text", path=f"<demo-dates seed={seed}>",
                  extra={"generator": "dates", "seed": seed})


def sample_texts(n: int, seed: int) -> list[str]:
    """Unlabelled date-bearing lines for the demo's tagging step.

    They come from a random stream separate from the one of ``generate_date_corpus`` with the
    same seed, so the demo tags lines it did not train on, and two-date lines are more frequent
    because they show the tagger's output best.
    """
    _check_count(n)
    rng = random.Random(f"textorch-demo-samples-{seed}")
    texts: list[str] = []
    while len(texts) < n:
        segs = _line_segments(rng, two_dates=0.6)
        # Split years and detached suffixes imitate PDF extraction; typed input has none.
        if not any(seg.field and " " in seg.text for seg in segs):
            texts.append(render(segs)[0])
    return texts

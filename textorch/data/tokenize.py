"""Plain-text tokeniser that keeps character offsets.

Tagging raw text must map each predicted label back onto the exact span of the input, so every
token carries ``(begin, end)`` offsets with ``text[begin:end] == token``. The rules follow DeLFT's
tokeniser in spirit: whitespace separates tokens, each punctuation or symbol character is a token
of its own, and runs of letters and digits stay together.

The scanner looks at each character once (no backtracking regex), so it runs in linear time on
any input, including pathological runs of punctuation or very long lines.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

_SPACE = 0
_WORD = 1
_SINGLE = 2
_JOIN = 3

_ZERO_WIDTH_JOINER = "\u200d"


@lru_cache(maxsize=65536)
def _char_class(char: str) -> int:
    """Classify one character; cached because real text reuses a small alphabet.

    Combining marks, format characters (joiners, soft hyphen) and emoji skin-tone modifiers
    cannot stand alone: they belong to the character before them, so they glue onto the current
    token. Controls (NUL and friends), private-use and unassigned code points are not words:
    like punctuation they become one-character tokens, which keeps them visible and aligned.
    """
    if char.isspace():
        return _SPACE
    category = unicodedata.category(char)
    if category[0] in "LN":
        return _WORD
    if category[0] == "M" or category == "Cf" or "\U0001f3fb" <= char <= "\U0001f3ff":
        return _JOIN
    return _SINGLE


def tokenize(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Split ``text`` into tokens and their ``(begin, end)`` offsets (end exclusive).

    Offsets are in code points of ``text``, so ``text[begin:end]`` gives the token back. A
    character following a zero-width joiner stays in the same token, which keeps joined emoji
    sequences whole.
    """
    tokens: list[str] = []
    offsets: list[tuple[int, int]] = []
    start = -1
    start_class = _SPACE
    glue_next = False
    for i, char in enumerate(text):
        cls = _char_class(char)
        if start >= 0 and cls != _SPACE and (
            cls == _JOIN or glue_next or (cls == _WORD and start_class == _WORD)
        ):
            glue_next = char == _ZERO_WIDTH_JOINER
            continue
        if start >= 0:
            tokens.append(text[start:i])
            offsets.append((start, i))
            start = -1
        glue_next = False
        if cls == _SPACE:
            continue
        start = i
        start_class = _WORD if cls == _JOIN else cls
        glue_next = char == _ZERO_WIDTH_JOINER
    if start >= 0:
        tokens.append(text[start:])
        offsets.append((start, len(text)))
    return tokens, offsets

"""String-to-index vocabularies, saved as plain JSON lists in the model directory."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

PAD = "<pad>"
UNK = "<unk>"


class Vocabulary:
    """An ordered list of items; the index of an item is its position.

    Specials (padding, unknown) come first so that index 0 is always padding and embedding
    layers can use ``padding_idx=0``.
    """

    def __init__(self, items: Iterable[str], with_specials: bool = True) -> None:
        self.with_specials = with_specials
        self.items: list[str] = [PAD, UNK] if with_specials else []
        seen = set(self.items)
        for item in items:
            if item not in seen:
                seen.add(item)
                self.items.append(item)
        self._index = {item: i for i, item in enumerate(self.items)}
        self.unk_id = self._index.get(UNK, -1)

    @classmethod
    def from_counts(
        cls, counts: Counter, min_count: int = 1, with_specials: bool = True
    ) -> "Vocabulary":
        """Most frequent first, ties broken alphabetically, so a vocabulary is reproducible."""
        ordered = sorted((c for c in counts.items() if c[1] >= min_count), key=lambda kv: (-kv[1], kv[0]))
        return cls((item for item, _ in ordered), with_specials=with_specials)

    def __len__(self) -> int:
        return len(self.items)

    def __contains__(self, item: str) -> bool:
        return item in self._index

    def id(self, item: str) -> int:
        """Index of ``item``; unknown items map to ``<unk>`` (KeyError without specials)."""
        found = self._index.get(item)
        if found is not None:
            return found
        if self.unk_id < 0:
            raise KeyError(item)
        return self.unk_id

    def ids(self, items: Iterable[str]) -> list[int]:
        get, unk = self._index.get, self.unk_id
        return [get(item, unk) for item in items]

    def item(self, index: int) -> str:
        return self.items[index]

    def extend(self, items: Iterable[str]) -> None:
        """Add unseen items at the end; existing indices never move (incremental training)."""
        for item in items:
            if item not in self._index:
                self._index[item] = len(self.items)
                self.items.append(item)

    def to_json(self) -> dict:
        return {"items": self.items, "with_specials": self.with_specials}

    @classmethod
    def from_json(cls, data: dict) -> "Vocabulary":
        vocab = cls([], with_specials=False)
        vocab.with_specials = bool(data["with_specials"])
        vocab.items = list(data["items"])
        vocab._index = {item: i for i, item in enumerate(vocab.items)}
        vocab.unk_id = vocab._index.get(UNK, -1)
        return vocab

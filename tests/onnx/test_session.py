"""The one way both ONNX engines open and feed an ONNX Runtime session (textorch.onnx.session)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from textorch.errors import ModelFormatError
from textorch.onnx.session import feed


def test_feed_takes_the_graphs_inputs_by_name_and_names_every_missing_one() -> None:
    mask = torch.ones(2, 3, dtype=torch.int64)
    vectors = np.zeros((2, 3, 4), dtype=np.float32)
    fed = feed(["mask", "word_vectors"], {"word_vectors": vectors, "mask": mask, "casing_ids": None, "extra": 1})
    assert list(fed) == ["mask", "word_vectors"]  # the graph's order; what it does not read is left out
    assert fed["word_vectors"] is vectors
    assert isinstance(fed["mask"], np.ndarray) and fed["mask"].dtype == np.int64 and (fed["mask"] == 1).all()
    with pytest.raises(ModelFormatError, match="reads casing_ids, feature_ids, which"):
        feed(["mask", "feature_ids", "casing_ids"], {"mask": mask, "casing_ids": None})

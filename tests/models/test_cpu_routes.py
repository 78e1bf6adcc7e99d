"""The CPU routes of a tagging call: decided once from the call's facts, current for the call only,
and each switch really takes its general route, with the same labels."""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest
import torch

from textorch.data.corpus import TokenSequence
from textorch.models import cpu_routes, heads, inference_batches, onednn_lstm, padded_rnn
from textorch.models.costs import INFERENCE_GROUP_COSTS, ONNX_GROUP_COSTS
from textorch.models.cpu_routes import FAST, REFERENCE, CpuRoutes, decide
from textorch.models.one_sequence import OneSequenceTagger
from textorch.tagging import labeler as labeler_module
from textorch.tagging.labeler import SequenceLabeler
from textorch.tagging.training import train_sequence_labeler

CPU, GPU = torch.device("cpu"), torch.device("cuda")


def test_decide_lets_the_allowed_routes_through_where_the_call_facts_permit() -> None:
    assert decide(FAST, CPU, has_transformer=False) == FAST
    assert decide(FAST, GPU, has_transformer=False) == REFERENCE  # CUDA: packed batches, the torch CRF
    assert decide(FAST.without("row_buckets"), CPU, False) == FAST.without("row_buckets")
    assert decide(FAST, CPU, has_transformer=True).batch_groups is None  # windows are grouped elsewhere
    onnx = decide(FAST, CPU, False, ONNX_GROUP_COSTS, torch_runs=False)
    assert onnx.batch_groups is ONNX_GROUP_COSTS and not onnx.one_sequence
    assert decide(FAST.without("batch_groups"), CPU, False, ONNX_GROUP_COSTS).batch_groups is None
    assert not decide(FAST.without("laid_out_lstm"), CPU, False).one_sequence  # the route runs on laid-out weights
    assert FAST.batch_groups is INFERENCE_GROUP_COSTS
    assert REFERENCE == CpuRoutes(False, None, False, False, False, False)
    with pytest.raises(ValueError, match="no such CPU route: fast"):
        FAST.without("fast")


def test_routes_are_current_for_the_block_and_the_thread_only() -> None:
    assert cpu_routes.current() is FAST
    seen: list[CpuRoutes] = []
    with cpu_routes.taking(REFERENCE):
        assert cpu_routes.current() is REFERENCE
        worker = threading.Thread(target=lambda: seen.append(cpu_routes.current()))
        worker.start()
        worker.join()
        with pytest.raises(RuntimeError), cpu_routes.taking(FAST.without("crf_kernel")):
            raise RuntimeError
        assert cpu_routes.current() is REFERENCE
    assert cpu_routes.current() is FAST and seen == [FAST]


@pytest.fixture(scope="module")
def labeler(tmp_path_factory: pytest.TempPathFactory) -> SequenceLabeler:
    from tests.conftest import write_tiny_conll

    path = write_tiny_conll(tmp_path_factory.mktemp("routes") / "tiny.conll")
    return train_sequence_labeler(path, max_epoch=2, seed=3, word_hidden=8, char_hidden=4)


def _sequences() -> list[TokenSequence]:
    """Lengths 1 to 90, many distinct tokens (more rows than a row bucket) and a few long ones
    (the character rows' length groups cut)."""
    rng = random.Random(4)
    letters = "JohnlivesParMyRmBr"  # characters the model knows: distinct tokens, distinct rows
    words = ["John", "lives", "in", "Paris", "Mary", "Rome", ".", "Berlin"]
    words += ["".join(rng.choice(letters) for _ in range(rng.randint(1, 6))) for _ in range(60)]
    words += ["Paris" * 8, "Rome" * 9]
    return [TokenSequence([rng.choice(words) for _ in range(n)]) for n in [1, 2, 3, 5, 8, 13, 40, 90] * 4]


def _spies(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[int]]:
    """Calls of each fast path's own code, counted."""
    counts: dict[str, list[int]] = {name: [] for name in ("laid_out_lstm", "row_buckets", "char_length_groups",
                                                          "crf_kernel", "one_sequence", "batch_groups")}

    def spy(owner: object, name: str, route: str, counted=lambda *a, **k: True) -> None:  # noqa: ANN001
        real = getattr(owner, name)

        def wrapper(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            if counted(*args, **kwargs):
                counts[route].append(1)
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, wrapper)

    spy(onednn_lstm, "_run", "laid_out_lstm")
    spy(padded_rnn, "in_row_buckets", "row_buckets")
    spy(padded_rnn, "in_length_groups", "char_length_groups")
    spy(heads, "cpu_crf_paths", "crf_kernel")
    spy(OneSequenceTagger, "decode", "one_sequence")
    cut = inference_batches.inference_batches
    spy(labeler_module, "inference_batches", "batch_groups",
        lambda lengths, size, costs: costs is not None and cut(lengths, size, costs) != cut(lengths, size, None))
    return counts


def _predict_all(labeler: SequenceLabeler, sequences: list[TokenSequence]) -> list:
    labeler.token_vector_cache.clear()
    batch = labeler.predict(sequences, batch_size=64)
    return batch + [labeler.predict([s])[0] for s in sequences[:3]]


@pytest.mark.parametrize("route", ["laid_out_lstm", "row_buckets", "char_length_groups", "crf_kernel", "one_sequence",
                                   "batch_groups", "all"])
def test_each_route_switched_off_takes_its_general_route_with_the_same_labels(
    labeler: SequenceLabeler, route: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not onednn_lstm.laid_out_lstm_available() and route in ("laid_out_lstm", "one_sequence", "all"):
        pytest.skip("this torch has no laid-out LSTM operators: the route never runs")
    sequences = _sequences()
    counts = _spies(monkeypatch)
    fast = _predict_all(labeler, sequences)
    assert all(counts.values()), {name: len(c) for name, c in counts.items()}  # every fast path served the call
    for c in counts.values():
        c.clear()
    labeler.routes = REFERENCE if route == "all" else FAST.without(route)
    try:
        general = _predict_all(labeler, sequences)
    finally:
        labeler.routes = FAST
    off = list(counts) if route == "all" else [route, "one_sequence"] if route == "laid_out_lstm" else [route]
    assert {name: len(counts[name]) for name in off} == {name: 0 for name in off}
    assert all(counts[name] for name in counts if name not in off)  # the others still ran
    assert [p.labels for p in general] == [p.labels for p in fast]
    assert len({tuple(p.labels) for p in fast}) > 1
    if route in ("crf_kernel", "all"):  # the torch CRF sums in float32, the kernel in float64
        diff = np.abs(np.subtract([x for p in general for x in p.scores], [x for p in fast for x in p.scores])).max()
        assert diff <= 1e-4, diff
    else:  # the same operators on the same values: bit for bit
        assert [p.scores for p in general] == [p.scores for p in fast]


def test_the_routes_are_the_labelers_and_outlive_no_call(labeler: SequenceLabeler) -> None:
    """A call's routes are current during it only; a labeler's own switches stay as set."""
    labeler.routes = FAST.without("crf_kernel")
    try:
        labeler.predict(_sequences()[:4])
        assert cpu_routes.current() is FAST and labeler.routes == FAST.without("crf_kernel")
    finally:
        labeler.routes = FAST

"""The speed paths give the same answers as the straightforward ones.

- CRF decoding on the CPU (the compiled kernel, and NumPy alone) against the PyTorch CRF in float64;
- padded, unpacked RNNs (training) against packed ones, outputs and gradients;
- per-distinct-token character encoding (batches and whole tagging calls) against per-position
  encoding, and the token-type table built by ``encode_many``.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from textorch.data.batching import collate, token_type_table, with_padding_row
from textorch.data.corpus import TokenSequence
from textorch.data import encoding
from textorch.data.encoding import SequenceEncoder, casing_class
from textorch.tagging.labeler import SequenceLabeler
from textorch.models import inference_batches
from textorch.models import crf_compiled, crf_numpy
from textorch.models.crf import CRF
from textorch.models.crf_numpy import viterbi_with_confidence
from textorch.models.embedders import CharBiLSTMEmbedder, CharCNNEmbedder
from textorch.models import padded_rnn
from textorch.models.padded_rnn import final_states, masked_padded_rnn, rnn_final_states, rnn_outputs


def _random_crf(num_tags: int, seed: int) -> CRF:
    torch.manual_seed(seed)
    crf = CRF(num_tags)
    with torch.no_grad():
        crf.transitions.normal_(0, 2)
        crf.start_transitions.normal_()
        crf.end_transitions.normal_()
    return crf


@pytest.fixture(params=["compiled", "numpy"])
def crf_decoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test once with the compiled CRF decoder (Numba, a dependency: it must be there)
    and once with NumPy alone, the decoder of installs without Numba."""
    monkeypatch.delenv(crf_compiled.DISABLE_ENV, raising=False)
    if request.param == "numpy":
        monkeypatch.setattr(crf_numpy, "current_decoder", lambda: None)
    else:
        crf_compiled.compiled_decoder.cache_clear()
        assert crf_compiled.compiled_decoder() is not None, "numba is installed with textorch and must compile the CRF"
    return request.param


@pytest.mark.parametrize("batch,length,tags", [(1, 1, 5), (1, 6, 9), (7, 13, 11), (32, 40, 17)])
def test_cpu_crf_decoders_equal_torch_crf(batch: int, length: int, tags: int, crf_decoder: str) -> None:
    crf = _random_crf(tags, seed=batch + length)
    emissions = torch.randn(batch, length, tags, dtype=torch.float64) * 3
    lengths = torch.randint(1, length + 1, (batch,))
    lengths[0] = length
    mask = torch.arange(length)[None, :] < lengths[:, None]
    with torch.no_grad():
        expected_paths, _ = crf.decode(emissions, mask)
        marginals = crf.marginals(emissions, mask)
    expected_scores = marginals.gather(-1, expected_paths.unsqueeze(-1)).squeeze(-1)
    paths, scores = viterbi_with_confidence(emissions.numpy(), lengths.numpy(), crf.transitions.detach().numpy(),
                                            crf.start_transitions.detach().numpy(), crf.end_transitions.detach().numpy())
    assert np.array_equal(paths, expected_paths.numpy())
    assert np.allclose(scores, expected_scores.numpy(), atol=1e-6)
    assert (scores[~mask.numpy()] == 0).all() and (scores[mask.numpy()] > 0).all()


def test_cpu_crf_decoders_agree_on_a_ragged_batch_and_each_row_alone(crf_decoder: str) -> None:
    """A ragged batch long enough to cross many renormalisations, against the PyTorch CRF;
    each row decoded alone (cut to its length) equals its row in the batch; labels only gives
    the same paths."""
    crf = _random_crf(7, seed=21)
    emissions = torch.randn(4, 23, 7, dtype=torch.float64) * 3
    lengths = torch.tensor([23, 1, 9, 16])
    mask = torch.arange(23)[None, :] < lengths[:, None]
    with torch.no_grad():
        expected_paths, _ = crf.decode(emissions, mask)
        expected = crf.marginals(emissions, mask).gather(-1, expected_paths.unsqueeze(-1)).squeeze(-1)
    params = [p.detach().numpy() for p in (crf.transitions, crf.start_transitions, crf.end_transitions)]
    paths, scores = viterbi_with_confidence(emissions.numpy(), lengths.numpy(), *params)
    assert np.array_equal(paths, expected_paths.numpy())
    assert np.allclose(scores, expected.numpy(), atol=1e-6)
    for row, n in enumerate(lengths.tolist()):
        one_paths, one_scores = viterbi_with_confidence(emissions[row:row + 1, :n].numpy(), lengths[row:row + 1].numpy(),
                                                        *params)
        assert np.array_equal(one_paths[0], paths[row, :n]) and np.allclose(one_scores[0], scores[row, :n], atol=1e-6)
    for rows in (slice(None), slice(0, 1)):
        bare_paths, none = viterbi_with_confidence(emissions[rows].numpy(), lengths[rows].numpy(), *params,
                                                   with_confidence=False)
        assert none is None and np.array_equal(bare_paths, paths[rows])


def test_cpu_crf_decoders_agree_with_each_other_on_real_sized_batches() -> None:
    """The compiled kernel and NumPy, on batches shaped like tagging's (CoNLL-2003 at batch 32,
    GROBID headers: long rows, more tags), float32 emissions as the network gives them."""
    rng = np.random.default_rng(3)
    kernel = crf_compiled.compiled_decoder()
    assert kernel is not None
    for batch, length, tags in ((32, 14, 9), (5, 159, 13), (1, 15, 9)):
        params = [rng.normal(size=size) for size in ((tags, tags), tags, tags)]
        emissions = (rng.normal(size=(batch, length, tags)) * 3).astype(np.float32)
        lengths = rng.integers(1, length + 1, batch)
        lengths[0] = length
        compiled = viterbi_with_confidence(emissions, lengths, *params)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(crf_numpy, "current_decoder", lambda: None)
            plain = viterbi_with_confidence(emissions, lengths, *params)
        assert np.array_equal(compiled[0], plain[0])
        assert np.allclose(compiled[1], plain[1], atol=1e-6) and compiled[1].dtype == np.float32
        # Any layout the kernel was not compiled for is converted, never misread: a strided view,
        # Fortran order, int32 lengths, read-only parameters.
        strided = np.repeat(emissions, 2, axis=1)[:, ::2]
        fortran = [np.asfortranarray(params[0]), *params[1:]]
        for p in fortran:
            p.setflags(write=False)
        odd = viterbi_with_confidence(strided, lengths.astype(np.int32), *fortran)
        assert not strided.flags.c_contiguous and np.array_equal(odd[0], compiled[0])
        assert np.allclose(odd[1], compiled[1], atol=1e-6)


def test_compiled_crf_kernel_source_runs_as_python_with_the_same_results() -> None:
    """The kernel's loops, uncompiled (how one would step through them in a debugger), give
    what the compiled kernel gives."""
    rng = np.random.default_rng(4)
    params = [rng.normal(size=size) for size in ((4, 4), 4, 4)]
    emissions, lengths = rng.normal(size=(3, 5, 4)) * 2, np.array([5, 1, 3])
    compiled = crf_compiled.decode(crf_compiled.compiled_decoder(), emissions, lengths, *params, True)
    python = crf_compiled.decode(crf_compiled._decode_rows, emissions, lengths, *params, True)
    assert np.array_equal(compiled[0], python[0]) and np.allclose(compiled[1], python[1], atol=1e-7)
    assert not compiled[2].any() and not python[2].any()


def test_compiled_crf_decoder_loads_once_numpy_decoding_has_cost_as_much(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ski-rental rule: NumPy decodes (its time counted) until it has cost
    ``LOAD_AFTER_NUMPY_S`` and at least ``MIN_SHARE`` of the tagging time; the next call then
    loads the compiled decoder."""
    monkeypatch.delenv(crf_compiled.DISABLE_ENV, raising=False)
    crf_compiled.compiled_decoder.cache_clear()
    monkeypatch.setattr(crf_compiled, "_numpy_seconds", 0.0)
    monkeypatch.setattr(crf_compiled, "_tagging_seconds", 0.0)
    monkeypatch.setattr(crf_compiled, "LOAD_AFTER_NUMPY_S", 3600.0)
    rng = np.random.default_rng(1)
    params = [rng.normal(size=size) for size in ((5, 5), 5, 5)]
    emissions, lengths = rng.normal(size=(3, 6, 5)), np.array([6, 2, 4])
    first = viterbi_with_confidence(emissions, lengths, *params)
    assert crf_compiled.compiled_decoder.cache_info().currsize == 0 and crf_compiled._numpy_seconds > 0
    monkeypatch.setattr(crf_compiled, "LOAD_AFTER_NUMPY_S", crf_compiled._numpy_seconds)
    # ... but the calls around it (a transformer encoder, say) took 100 times longer: not yet
    crf_compiled.tagging_time_spent(100 * crf_compiled._numpy_seconds)
    viterbi_with_confidence(emissions, lengths, *params)
    assert crf_compiled.compiled_decoder.cache_info().currsize == 0
    monkeypatch.setattr(crf_compiled, "_tagging_seconds", 0.0)
    second = viterbi_with_confidence(emissions, lengths, *params)
    assert crf_compiled.compiled_decoder.cache_info().currsize == 1 and crf_compiled.compiled_decoder() is not None
    assert np.array_equal(first[0], second[0]) and np.allclose(first[1], second[1], atol=1e-6)


def test_numpy_viterbi_breaks_ties_towards_the_first_tag(crf_decoder: str) -> None:
    """Whole-number scores tie everywhere: both decoders, on a batch and on each row alone,
    keep the lowest-numbered previous tag, as the brute-force search below does."""
    rng = np.random.default_rng(5)
    tags, length = 3, 4
    trans, start, end = (rng.integers(0, 2, size).astype(np.float64) for size in ((tags, tags), tags, tags))
    emissions = rng.integers(0, 2, (6, length, tags)).astype(np.float64)
    lengths = np.array([4, 4, 2, 1, 3, 4])

    def first_best(em: np.ndarray, n: int) -> list[int]:
        # Viterbi by hand, ties to the lowest previous tag, then the lowest last tag
        score, back = start + em[0], []
        for t in range(1, n):
            candidates = score[:, None] + trans
            back.append(candidates.argmax(axis=0))
            score = candidates.max(axis=0) + em[t]
        path = [int((score + end).argmax())]
        for pointers in reversed(back):
            path.append(int(pointers[path[-1]]))
        return path[::-1] + [0] * (length - n)

    expected = [first_best(em, n) for em, n in zip(emissions, lengths)]
    paths, _ = viterbi_with_confidence(emissions, lengths, trans, start, end)
    assert paths.tolist() == expected
    for row in range(len(lengths)):
        one, _ = viterbi_with_confidence(emissions[row:row + 1, : lengths[row]], lengths[row:row + 1],
                                         trans, start, end, with_confidence=False)
        assert one[0].tolist() == expected[row][: lengths[row]]


def test_cpu_crf_decoders_ignore_padding_values(crf_decoder: str) -> None:
    crf = _random_crf(6, seed=3)
    emissions = np.random.default_rng(0).normal(size=(3, 8, 6)).astype(np.float32)
    lengths = np.array([8, 3, 5])
    params = [p.detach().numpy() for p in (crf.transitions, crf.start_transitions, crf.end_transitions)]
    paths, scores = viterbi_with_confidence(emissions, lengths, *params)
    noisy = emissions.copy()
    for row, n in enumerate(lengths):
        noisy[row, n:] = np.nan if row == 1 else 1e6
    noisy_paths, noisy_scores = viterbi_with_confidence(noisy, lengths, *params)
    assert np.array_equal(paths, noisy_paths) and np.array_equal(scores, noisy_scores)


def test_compiled_crf_decoder_can_be_switched_off_and_falls_back_on_failure(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    """``TEXTORCH_DISABLE_NUMBA=1`` and a Numba that fails to compile both leave NumPy decoding
    (a warning for the failure), never a failed tagging call; a Numba that cannot cache
    compiles without caching."""
    import numba

    crf_compiled.compiled_decoder.cache_clear()
    monkeypatch.setenv(crf_compiled.DISABLE_ENV, "1")
    assert crf_compiled.compiled_decoder() is None
    crf_compiled.compiled_decoder.cache_clear()
    monkeypatch.delenv(crf_compiled.DISABLE_ENV)

    # No writable cache location (Numba refuses ``cache=True``): compiled without its cache.
    real_njit = numba.njit

    def no_cache(*args, **kwargs):
        if kwargs.get("cache"):
            raise RuntimeError("cannot cache function: no locator available")
        return real_njit(*args, **kwargs)

    monkeypatch.setattr(numba, "njit", no_cache)
    kernel = crf_compiled.compiled_decoder()
    assert kernel is not None
    paths, _, failed = crf_compiled.decode(kernel, np.array([[[0.0, 1.0], [2.0, 0.0]]]), np.array([2]),
                                           np.zeros((2, 2)), np.zeros(2), np.zeros(2), True)
    assert paths.tolist() == [[1, 0]] and not failed.any()
    crf_compiled.compiled_decoder.cache_clear()

    def broken(*args, **kwargs):
        raise RuntimeError("no LLVM here")

    monkeypatch.setattr(numba, "njit", broken)
    with caplog.at_level("WARNING", logger="textorch.models.crf_compiled"):
        assert crf_compiled.compiled_decoder() is None
    assert "no LLVM here" in caplog.text
    _assert_crf_head_decodes_as_torch_crf(seed=2)
    crf_compiled.compiled_decoder.cache_clear()
    monkeypatch.undo()
    assert crf_compiled.compiled_decoder() is not None


def test_crf_head_uses_the_numpy_path_only_without_gradients() -> None:
    _assert_crf_head_decodes_as_torch_crf(seed=5)


def _assert_crf_head_decodes_as_torch_crf(seed: int) -> None:
    """The CRF head's CPU decoding (compiled or NumPy) against the PyTorch CRF's own Viterbi."""
    crf = _random_crf(4, seed=seed)
    emissions = torch.randn(2, 5, 4)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]], dtype=torch.bool)
    with torch.no_grad():
        paths, scores = crf.best_paths_with_confidence(emissions, mask)
        reference, _ = crf.decode(emissions, mask)
    assert torch.equal(paths, reference)
    assert scores.shape == (2, 5) and float(scores[1, 2:].abs().sum()) == 0.0


@pytest.mark.parametrize("cell", [nn.LSTM, nn.GRU])
@pytest.mark.parametrize("layers,bidirectional,rows", [(1, True, 4), (2, True, 4), (1, False, 4), (1, True, 300)])
def test_padded_rnn_equals_packed_with_gradients(cell: type, layers: int, bidirectional: bool, rows: int) -> None:
    """300 rows, a long tail of lengths: final states run in groups of similar length
    (padded_rnn.final_states)."""
    torch.manual_seed(0)
    rnn = cell(7, 5, num_layers=layers, batch_first=True, bidirectional=bidirectional)
    x = torch.randn(rows, 9, 7, requires_grad=True)
    lengths = torch.tensor([9, 4, 1, 6]) if rows == 4 else torch.cat([torch.randint(1, 4, (rows - 20,)), torch.randint(5, 10, (20,))])
    if rows > 4:
        assert padded_rnn.length_groups(lengths, padded_rnn.FINAL_STATE_GROUP_COSTS) is not None

    def packed_run() -> tuple[torch.Tensor, torch.Tensor]:
        out, h_n = rnn(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
        h_n = h_n[0] if isinstance(h_n, tuple) else h_n
        last = torch.cat(list(h_n[-2:] if bidirectional else h_n[-1:]), dim=-1)
        return pad_packed_sequence(out, batch_first=True, total_length=9)[0], last

    expected, expected_final = packed_run()
    (expected.sum() + expected_final.sum()).backward()
    expected_grads = [p.grad.clone() for p in rnn.parameters()] + [x.grad.clone()]
    rnn.zero_grad()
    x.grad = None
    out = masked_padded_rnn(rnn, x, lengths)
    final = final_states(rnn, x, lengths)
    (out.sum() + final.sum()).backward()
    assert torch.allclose(out, expected, atol=1e-6)
    assert torch.allclose(final, expected_final, atol=1e-6)
    for got, want in zip([p.grad for p in rnn.parameters()] + [x.grad], expected_grads):
        assert torch.allclose(got, want, atol=1e-4)
    with torch.inference_mode():  # tagging takes the same unpacked route
        assert torch.allclose(rnn_final_states(rnn, x, lengths), expected_final, atol=1e-6)
        assert torch.allclose(rnn_outputs(rnn, x, lengths), expected, atol=1e-6)


@pytest.mark.parametrize("cell", [nn.LSTM, nn.GRU])
def test_training_rnn_in_length_groups_equals_packed_outputs_and_gradients(cell: type) -> None:
    """A heavy-tailed batch (one 60-step row among short ones) runs in length groups when
    training; outputs and gradients equal the packed computation's."""
    torch.manual_seed(4)
    rnn = cell(6, 4, batch_first=True, bidirectional=True)
    lengths = torch.tensor([3, 60, 2, 5, 4, 3, 1, 6, 2, 5, 3, 4])
    assert padded_rnn.length_groups(lengths) is not None
    x = torch.randn(len(lengths), 60, 6, requires_grad=True)
    weights = torch.randn(len(lengths), 60, 8)  # a loss that weighs every output differently

    def grads_of(run) -> tuple[torch.Tensor, list[torch.Tensor]]:
        rnn.zero_grad()
        x.grad = None
        out = run()
        (out * weights).sum().backward()
        return out.detach(), [p.grad.clone() for p in rnn.parameters()] + [x.grad.clone()]

    def packed() -> torch.Tensor:
        out, _ = rnn(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
        return pad_packed_sequence(out, batch_first=True, total_length=60)[0]

    expected, expected_grads = grads_of(packed)
    got, got_grads = grads_of(lambda: rnn_outputs(rnn, x, lengths))
    assert torch.allclose(got, expected, atol=1e-6)
    for g, e in zip(got_grads, expected_grads):
        assert torch.allclose(g, e, atol=1e-5)


def test_bucketed_rows_round_up_to_four_sizes_per_doubling() -> None:
    assert [padded_rnn.bucketed_rows(n) for n in (1, 7, 16)] == [1, 7, 16]  # small counts exact
    assert [padded_rnn.bucketed_rows(n) for n in (17, 20, 21, 33, 129, 300)] == [20, 20, 24, 40, 160, 320]
    for low in (32, 64, 256, 1024):
        sizes = {padded_rnn.bucketed_rows(n) for n in range(low + 1, 2 * low + 1)}
        assert len(sizes) == 4 and max(sizes) == 2 * low
    assert all(n <= padded_rnn.bucketed_rows(n) < 1.25 * n for n in range(17, 5000))


def test_cpu_recurrent_calls_see_bucketed_row_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """37 rows run as 40 (one oneDNN kernel for 33-40 rows); outputs and gradients stay those
    of the 37 rows alone."""
    torch.manual_seed(2)
    rnn = nn.LSTM(6, 4, batch_first=True, bidirectional=True)
    lengths = torch.randint(1, 8, (37,))
    x = torch.randn(37, 7, 6, requires_grad=True)
    seen: list[int] = []
    exact = padded_rnn._one_direction_exact
    monkeypatch.setattr(padded_rnn, "_one_direction_exact", lambda *a: seen.append(a[1].shape[0]) or exact(*a))
    out = masked_padded_rnn(rnn, x, lengths)
    out.sum().backward()
    assert seen == [40, 40]
    got_grads = [p.grad.clone() for p in rnn.parameters()] + [x.grad.clone()]
    rnn.zero_grad()
    x.grad = None
    packed, _ = rnn(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
    expected = pad_packed_sequence(packed, batch_first=True, total_length=7)[0]
    expected.sum().backward()
    assert out.shape == (37, 7, 8) and torch.allclose(out, expected, atol=1e-6)
    for got, want in zip(got_grads, [p.grad for p in rnn.parameters()] + [x.grad]):
        assert torch.allclose(got, want, atol=1e-5)


def _brute_force_cost(sizes: list[int], costs: padded_rnn.GroupCosts) -> float:
    """Cheapest cost over every way to cut the sorted rows into 1..max_groups groups."""
    s = sorted(sizes)
    best = float("inf")
    for k in range(costs.max_groups):
        for cuts in itertools.combinations(range(1, len(s)), k):
            bounds = (0, *cuts, len(s))
            total = sum(s[b - 1] * (b - a + costs.step_cost_in_rows) + costs.group_cost for a, b in zip(bounds[:-1], bounds[1:]))
            best = min(best, total)
    return best


@pytest.mark.parametrize("seed", range(20))
def test_length_groups_find_the_cheapest_cuts(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sizes = rng.choice([1, 2, 3, 5, 8, 13, 40, 200], size=int(rng.integers(2, 13))).tolist()
    costs = padded_rnn.GroupCosts(step_cost_in_rows=3.3, group_cost=float(rng.choice([5.0, 60.0, 600.0])), max_groups=3)
    groups = padded_rnn.length_groups(torch.tensor(sizes), costs)
    parts = [[sizes[i] for i in g.tolist()] for g in groups] if groups else [sizes]
    assert sorted(i for g in (groups or [torch.arange(len(sizes))]) for i in g.tolist()) == list(range(len(sizes)))
    got = sum(max(p) * (len(p) + costs.step_cost_in_rows) + costs.group_cost for p in parts)
    assert got == pytest.approx(_brute_force_cost(sizes, costs))


def test_quick_bound_never_keeps_one_block_when_a_split_is_cheaper() -> None:
    rng = np.random.default_rng(0)
    settled = 0
    for _ in range(200):
        sizes = rng.choice([1, 2, 3, 4, 5, 8, 13, 40], size=int(rng.integers(2, 11))).tolist()
        costs = padded_rnn.GroupCosts(step_cost_in_rows=3.3, group_cost=float(rng.choice([5.0, 60.0, 160.0, 600.0])),
                                      max_groups=3)
        one_block = max(sizes) * (len(sizes) + costs.step_cost_in_rows) + costs.group_cost
        if padded_rnn._one_block_is_cheapest(np.array(sizes), costs):
            settled += 1
            assert _brute_force_cost(sizes, costs) == pytest.approx(one_block), (sizes, costs)
    assert settled > 50  # the bound settles many cases, not only trivial ones


def test_quick_bound_settles_short_tagging_batches() -> None:
    """GROBID date's test batches (32 rows of 1-4 and of 4-8 tokens) need no search."""
    costs = inference_batches.INFERENCE_GROUP_COSTS
    for sizes in ([1] * 4 + [2] * 16 + [3] * 7 + [4] * 5, [4] * 9 + [5] * 16 + [7] * 5 + [8] * 2):
        assert padded_rnn._one_block_is_cheapest(np.array(sizes), costs)
    assert not padded_rnn._one_block_is_cheapest(np.array([5, 7, 9, 873] + [10] * 28), padded_rnn.WORD_GROUP_COSTS)


def test_length_groups_split_heavy_tails_only() -> None:
    groups = padded_rnn.length_groups(torch.tensor([5, 7, 9, 873] + [10] * 28))
    assert groups is not None and [g.tolist() for g in groups][-1] == [3]  # the long one alone
    assert sorted(torch.cat(groups).tolist()) == list(range(32))
    assert padded_rnn.length_groups(torch.tensor([14, 15, 16, 17, 18, 19, 20, 21] * 4)) is None
    assert padded_rnn.length_groups(torch.tensor([7])) is None


def _sequences() -> list[TokenSequence]:
    texts = ["John lives in Paris .", "Mary lives in Rome", "Paris", "John John John met Mary in Paris"]
    return [TokenSequence(tokens=t.split(), labels=None, features=None) for t in texts]


def test_encode_many_shares_token_types() -> None:
    sequences = _sequences()
    encoder = SequenceEncoder.fit(sequences, [])
    encoded = encoder.encode_many(sequences, with_labels=False)
    types = {}
    for sequence, item in zip(sequences, encoded):
        for token, type_id in zip(sequence.tokens, item.type_ids):
            assert types.setdefault(token, int(type_id)) == int(type_id)
    assert sorted(types.values()) == list(range(len(set(types))))
    table = token_type_table(encoded)
    for token, type_id in types.items():
        assert [encoder.chars.items[i] for i in table[type_id] if i] == list(token)
    single = encoder.encode(sequences[0], with_labels=False)
    assert np.array_equal(single.char_ids, encoded[0].char_ids) and np.array_equal(single.casing_ids, encoded[0].casing_ids)


def test_encode_many_equals_a_token_by_token_encoding() -> None:
    """The whole-call NumPy encoding against the plain definition: per token, its character ids
    (cut at max_char_length, unknown characters -> <unk>), casing class, feature ids and label."""
    rows = [("John", "Xxxx", "B-PER"), ("lives", "xxxx", "O"), ("in", "xx", "O"), ("Paris", "Xxxx", "B-LOC")]
    train = [TokenSequence([t for t, _, _ in rows], [lab for _, _, lab in rows], [[t, f] for t, f, _ in rows])]
    encoder = SequenceEncoder.fit(train, [1], max_char_length=6)
    texts = [["John", "☃☃", "Paris"], [], ["Supercalifragilistic", "in", "1999", "UN", "☃☃"], ["in"]]
    sequences = [TokenSequence(tokens, ["B-PER"] + ["O"] * (len(tokens) - 1) if tokens else [],
                               [[t, "Xxxx" if t[:1].isupper() else "zz"] for t in tokens]) for tokens in texts]
    sequences.append(TokenSequence(["no", "features"], None, None))
    encoded = encoder.encode_many(sequences, with_labels=True)
    types: dict[str, int] = {}
    for sequence, item in zip(sequences, encoded):
        chars = [[encoder.chars.id(c) for c in token[:6]] for token in sequence.tokens]
        width = max([len(c) for c in chars] + [1])
        expected_chars = np.zeros((len(chars), width), dtype=np.int64)
        for row, ids in enumerate(chars):
            expected_chars[row, : len(ids)] = ids
        assert item.char_ids.shape == expected_chars.shape and np.array_equal(item.char_ids, expected_chars)
        assert item.casing_ids.tolist() == [casing_class(t) for t in sequence.tokens]
        assert item.type_ids.tolist() == [types.setdefault(t, len(types)) for t in sequence.tokens]
        features = [[encoder.features[0].id(f[1])] for f in sequence.features or [[t, "<pad>"] for t in sequence.tokens]]
        if sequence.features is None:
            features = [[0] for _ in sequence.tokens]
        assert item.feature_ids.tolist() == features
        labels = None if sequence.labels is None else [encoder.labels.id(lab) for lab in sequence.labels]
        assert (None if item.label_ids is None else item.label_ids.tolist()) == labels
    assert encoded[1].char_ids.shape == (0, 1) and len(encoded[1]) == 0
    assert encoded[2].char_ids.shape == (5, 6)  # "Supercalifragilistic" cut to 6 characters
    assert encoder.encode_many([], with_labels=False) == []


@pytest.mark.parametrize("n_sequences", [1, 40])  # up to and past SMALL_TABLE_ROWS token types
def test_encode_many_gives_each_token_its_word_row_and_characters(n_sequences: int) -> None:
    """Word rows looked up once per token type, then spread to every token, equal the rows of a
    per-token lookup; the character table built in one masked copy (many types) or row by row
    (few) holds each token's characters."""
    words = [f"w{i}x{'y' * (i % 7)}" for i in range(60)]
    sequences = [TokenSequence(tokens=[words[(3 * s + k) % 60] for k in range(s % 5 + 1)] + ["the"], labels=None,
                               features=None) for s in range(n_sequences)]
    encoder = SequenceEncoder.fit(sequences, [])
    looked_up: list[list[str]] = []
    rows = {word: 100 + i for i, word in enumerate(sorted({t for s in sequences for t in s.tokens}))}

    def word_rows(tokens: list[str]) -> np.ndarray:
        looked_up.append(tokens)
        return np.array([rows[t] for t in tokens], dtype=np.int64)

    encoded = encoder.encode_many(sequences, with_labels=False, word_rows=word_rows)
    assert len(looked_up) == 1 and sorted(looked_up[0]) == sorted(rows)  # each type once
    assert (encoded[0].type_table.shape[0] > encoding.SMALL_TABLE_ROWS) == (n_sequences == 40)
    for sequence, item in zip(sequences, encoded):
        assert item.word_ids.tolist() == [rows[t] for t in sequence.tokens]
        for token, chars in zip(sequence.tokens, item.char_ids):
            assert chars.tolist() == [encoder.chars.id(c) for c in token] + [0] * (len(chars) - len(token))


def test_token_type_table_of_one_call_holds_each_tokens_character_ids() -> None:
    """``token_type_table`` returns the table ``encode_many`` kept, whose row of each token type
    holds that token's character ids (the sequences' own ``char_ids``, gathered lazily from it),
    empty sequences included; sequences of two calls have no common table."""
    sequences = _sequences()
    sequences.insert(1, TokenSequence(tokens=[], labels=None, features=None))
    encoder = SequenceEncoder.fit(sequences, [])
    encoded = encoder.encode_many(sequences, with_labels=False)
    kept = token_type_table(encoded)
    assert kept is encoded[0].type_table
    assert kept.shape[0] == len({t for s in sequences for t in s.tokens})
    for sequence, item in zip(sequences, encoded):
        assert item.char_ids.shape == (len(sequence), max([len(t) for t in sequence.tokens], default=1))
        for token, type_id, row in zip(sequence.tokens, item.type_ids, item.char_ids):
            expected = [encoder.chars.id(ch) for ch in token]
            assert row[: len(token)].tolist() == expected and not row[len(token):].any()
            assert kept[type_id, : len(token)].tolist() == expected and not kept[type_id, len(token):].any()
    other_call = encoder.encode_many(sequences[:1], with_labels=False)
    assert token_type_table(encoded[:1] + other_call) is None
    # nor do their batches share distinct-token rows: each position is encoded on its own
    mixed = collate(encoded[:1] + other_call, [0, 1])
    assert mixed.char_rows is None and mixed.char_index is None and mixed.char_ids.shape[:2] == (2, 5)


@pytest.mark.parametrize("embedder_class", [CharBiLSTMEmbedder, CharCNNEmbedder])
def test_character_encoders_per_distinct_token_equal_per_position(embedder_class: type) -> None:
    sequences = _sequences()
    encoder = SequenceEncoder.fit(sequences, [])
    encoded = encoder.encode_many(sequences, with_labels=False)
    torch.manual_seed(1)
    embedder = embedder_class(len(encoder.chars.items)).eval()
    batch = collate(encoded, [0, 1, 2, 3])
    assert batch.char_rows is not None and batch.char_rows.shape[0] == len({t for s in sequences for t in s.tokens})
    per_position = embedder.encode_rows(batch.char_ids.reshape(-1, batch.char_ids.shape[2])).reshape(4, batch.mask.shape[1], -1)
    per_position = per_position * batch.mask.unsqueeze(-1)
    with torch.no_grad():
        assert torch.allclose(embedder(batch), per_position, atol=1e-6)
        table = torch.from_numpy(token_type_table(encoded))
        whole_call = collate(encoded, [3, 0], token_vectors=with_padding_row(embedder.encode_rows(table)))
        assert torch.allclose(embedder(whole_call), per_position[[3, 0]], atol=1e-6)


def test_tagging_with_whole_call_token_vectors_equals_one_sequence_at_a_time(tiny_conll: Path) -> None:
    labeler = SequenceLabeler.train(tiny_conll, max_epoch=2, seed=3, word_hidden=8, char_hidden=4)
    sequences = [s for s in _sequences()]
    together = labeler.predict(sequences, batch_size=3)
    alone = [labeler.predict([s], batch_size=1)[0] for s in sequences]
    assert [p.labels for p in together] == [p.labels for p in alone]
    assert np.allclose([x for p in together for x in p.scores], [x for p in alone for x in p.scores], atol=1e-5)


def test_cpu_crf_decoders_survive_extreme_scores(crf_decoder: str) -> None:
    """Emission gaps of thousands underflow the scaled recursion; the log-space one takes over
    (for the compiled decoder: for the rows that underflowed)."""
    crf = _random_crf(3, seed=9)
    extreme = [[0.0, -3000.0, -3000.0], [-3000.0, 0.0, -6000.0], [0.0, 0.0, -3000.0]]
    emissions = np.array([extreme, [[0.5, -1.0, 0.2], [0.1, 0.3, -0.4], [9.0, 9.0, 9.0]]])  # row 1: 2 tokens
    lengths = np.array([3, 2])
    mask = torch.from_numpy(np.arange(3)[None, :] < lengths[:, None])
    with torch.no_grad():
        crf.transitions.fill_(0.0)
        crf.transitions[0, 1] = -4000.0
        reference = crf.marginals(torch.from_numpy(emissions), mask)
        expected, _ = crf.decode(torch.from_numpy(emissions), mask)
    params = [p.detach().numpy() for p in (crf.transitions, crf.start_transitions, crf.end_transitions)]
    if crf_decoder == "compiled":  # the kernel gives up on the extreme row only
        failed = crf_compiled.decode(crf_compiled.compiled_decoder(), emissions, lengths, *params, True)[2]
        assert failed.tolist() == [True, False]
    paths, scores = viterbi_with_confidence(emissions, lengths, *params)
    assert np.array_equal(paths, expected.numpy())
    assert np.isfinite(scores).all()
    assert np.allclose(scores, reference.gather(-1, expected.unsqueeze(-1)).squeeze(-1).numpy(), atol=1e-6)


def test_log_space_fallback_equals_torch_crf() -> None:
    from textorch.models.crf_numpy import _log_space_confidence

    crf = _random_crf(7, seed=11)
    emissions = torch.randn(5, 9, 7, dtype=torch.float64) * 4
    lengths = torch.tensor([9, 3, 1, 7, 9])
    mask = torch.arange(9)[None, :] < lengths[:, None]
    with torch.no_grad():
        paths, _ = crf.decode(emissions, mask)
        expected = crf.marginals(emissions, mask).gather(-1, paths.unsqueeze(-1)).squeeze(-1)
    params = [p.detach().numpy().astype(np.float64) for p in (crf.transitions, crf.start_transitions, crf.end_transitions)]
    got = _log_space_confidence(emissions.numpy(), mask.numpy(), True, paths.numpy(), *params)
    assert np.allclose(got, expected.numpy(), atol=1e-6)


@pytest.mark.parametrize("p", [0.5, 0.3])
def test_fast_dropout_keeps_the_expectation_and_is_identity_in_eval(p: float) -> None:
    from textorch.models.tagger import FastDropout

    torch.manual_seed(0)
    dropout = FastDropout(p)
    x = torch.ones(201, 299, requires_grad=True)  # not a multiple of 8 elements
    y = dropout.train()(x)
    kept = (y != 0).float().mean().item()
    assert abs(kept - (1 - p)) < 0.01
    flips = (y != 0).float().flatten()
    for lag in (1, 7, 8, 64):  # neighbours (bits of one 64-bit draw too) are independent
        assert abs(torch.corrcoef(torch.stack([flips[:-lag], flips[lag:]]))[0, 1].item()) < 0.02
    assert torch.allclose(y[y != 0], torch.full_like(y[y != 0], 1 / (1 - p)))
    assert abs(y.mean().item() - 1.0) < 0.02
    y.sum().backward()
    assert torch.equal(x.grad, (y != 0).float() / (1 - p))
    assert dropout.eval()(x) is x


def test_new_models_have_the_dense_layer_and_old_configs_do_not(tiny_conll: Path, tmp_path: Path) -> None:
    import json

    labeler = SequenceLabeler.train(tiny_conll, max_epoch=1, seed=1, word_hidden=8, char_hidden=4, dense_hidden=6,
                                    output=tmp_path / "model")
    assert isinstance(labeler.model.head.emissions, nn.Sequential)
    assert labeler.model.head.emissions[0].out_features == 6
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    assert config["model"]["dense_hidden"] == 6
    reloaded = SequenceLabeler.load(tmp_path / "model")
    sequences = _sequences()
    assert [p.labels for p in reloaded.predict(sequences)] == [p.labels for p in labeler.predict(sequences)]
    plain = SequenceLabeler.train(tiny_conll, max_epoch=1, seed=1, word_hidden=8, char_hidden=4, dense_hidden=0)
    assert isinstance(plain.model.head.emissions, nn.Linear)


def test_v1_directories_load_without_the_dense_layer_and_v2_is_written(tiny_conll: Path, tmp_path: Path) -> None:
    import json

    from textorch.model_dir import load_model_dir

    from model_fixture import v1_model_dir

    old = SequenceLabeler.load(v1_model_dir(tmp_path / "v1"))
    assert isinstance(old.model.head.emissions, nn.Linear) and old.model_config.dense_hidden == 0
    SequenceLabeler.train(tiny_conll, max_epoch=1, seed=1, word_hidden=8, char_hidden=4, output=tmp_path / "m")
    config, _, _ = load_model_dir(tmp_path / "m")
    assert config["builder"] == "rnn_tagger.v2" and config["model"]["dense_hidden"] == 100
    config["builder"] = "rnn_tagger.v9"
    (tmp_path / "m" / "config.json").write_text(json.dumps(config))
    with pytest.raises(Exception, match="rnn_tagger.v9"):
        SequenceLabeler.load(tmp_path / "m")


def test_bad_dense_and_dropout_settings_are_refused() -> None:
    from textorch.tagging.config import ModelConfig
    from textorch.errors import ConfigError
    from textorch.models.tagger import FastDropout

    with pytest.raises(ConfigError, match="dense_hidden must be >= 0"):
        ModelConfig(dense_hidden=-1)
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\)"):
        FastDropout(1.0)


@pytest.mark.parametrize("batch,length,tags", [(1, 1, 3), (3, 7, 5), (8, 30, 9)])
def test_numpy_log_partition_gives_the_torch_crf_loss_and_gradients(
    batch: int, length: int, tags: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Training on the CPU takes log Z and its gradient from crf_numpy.log_partition; the
    log-space autograd loop of the CRF is the reference."""
    crf = _random_crf(tags, seed=batch * 7 + length)
    generator = torch.Generator().manual_seed(length)
    emissions = (torch.randn(batch, length, tags, dtype=torch.float64, generator=generator) * 3).requires_grad_()
    lengths = torch.randint(1, length + 1, (batch,), generator=generator)
    lengths[0] = length
    mask = torch.arange(length)[None, :] < lengths[:, None]
    gold = torch.randint(0, tags, (batch, length), generator=generator)
    weights = torch.rand(batch, dtype=torch.float64, generator=generator)

    def loss_and_grads() -> tuple[torch.Tensor, list[torch.Tensor]]:
        emissions.grad = None
        crf.zero_grad()
        loss = crf.neg_log_likelihood(emissions, gold, mask)
        (loss * weights).sum().backward()
        grads = [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in crf.parameters()]  # unused: none
        return loss.detach(), [emissions.grad.clone()] + grads

    loss, grads = loss_and_grads()
    monkeypatch.setattr(CRF, "_log_partition_numpy", staticmethod(lambda *args: None))
    expected_loss, expected_grads = loss_and_grads()
    assert torch.allclose(loss, expected_loss, atol=1e-9)
    for got, want in zip(grads, expected_grads):
        assert torch.allclose(got, want, atol=1e-9)
    assert float(grads[0][~mask].abs().sum()) == 0.0


def test_numpy_log_partition_declines_extreme_scores() -> None:
    from textorch.models.crf_numpy import log_partition

    crf = _random_crf(3, seed=9)
    params = [p.detach().numpy() for p in (crf.transitions, crf.start_transitions, crf.end_transitions)]
    extreme = np.array([[[0.0, -3000.0, -3000.0], [-3000.0, -3000.0, 0.0]]])
    params[0] = np.where(np.eye(3, dtype=bool), -5000.0, 0.0)  # staying on a tag is all but impossible
    assert log_partition(extreme, np.array([2]), *params) is not None
    params[0] = np.full((3, 3), -5000.0)
    params[0][0, 1] = 0.0  # the only likely step leads to an emission thousands below the best
    assert log_partition(extreme, np.array([2]), *params) is None
    emissions = torch.from_numpy(extreme).requires_grad_()
    with torch.no_grad():
        crf.transitions.copy_(torch.from_numpy(params[0]))
    loss = crf.neg_log_likelihood(emissions, torch.tensor([[0, 2]]), torch.ones(1, 2, dtype=torch.bool))
    loss.sum().backward()  # the log-space CRF took over
    assert torch.isfinite(loss).all() and torch.isfinite(emissions.grad).all()


def test_numpy_log_partition_declines_batches_too_large_for_its_step_matrices(monkeypatch: pytest.MonkeyPatch) -> None:
    from textorch.models import crf_numpy

    crf = _random_crf(4, seed=2)
    emissions = torch.randn(3, 10, 4, dtype=torch.float64, requires_grad=True)
    mask = torch.ones(3, 10, dtype=torch.bool)
    params = [p.detach().numpy() for p in (crf.transitions, crf.start_transitions, crf.end_transitions)]
    assert crf_numpy.log_partition(emissions.detach().numpy(), np.full(3, 10), *params) is not None
    expected = crf.neg_log_likelihood(emissions, torch.zeros(3, 10, dtype=torch.long), mask)
    monkeypatch.setattr(crf_numpy, "TRAINING_CELLS", 3 * 10 * 4 * 4 - 1)
    assert crf_numpy.log_partition(emissions.detach().numpy(), np.full(3, 10), *params) is None
    got = crf.neg_log_likelihood(emissions, torch.zeros(3, 10, dtype=torch.long), mask)  # the log-space CRF
    assert torch.allclose(got, expected, atol=1e-9)


@pytest.mark.parametrize("cell, lengths, packs", [
    (nn.LSTM, [9, 9, 9], False), (nn.LSTM, [9, 8, 7, 9], False),
    (nn.LSTM, [9, 1, 2, 1], False), (nn.LSTM, [9] + [1, 2] * 20, True),
    (nn.GRU, [9, 8, 7, 9], False), (nn.GRU, [9, 1, 2, 1], True),
])
def test_tagging_outputs_equal_packed_whether_padded_or_packed(cell: type, lengths: list[int], packs: bool) -> None:
    """No padding (fused call), little padding (unpacked directions), mostly padding: an LSTM
    packs only with many rows (the step-by-step kernel costs more than a few padded rows), a
    GRU, which steps through time either way, with a few."""
    torch.manual_seed(1)
    rnn = cell(7, 5, batch_first=True, bidirectional=True)
    x = torch.randn(len(lengths), 9, 7)
    n = torch.tensor(lengths)
    expected, _ = rnn(pack_padded_sequence(x, n, batch_first=True, enforce_sorted=False))
    expected = pad_packed_sequence(expected, batch_first=True, total_length=9)[0]
    with torch.inference_mode():
        got = rnn_outputs(rnn, x, n)
        packed = padded_rnn._packs(rnn, x, n)
    assert torch.allclose(got, expected, atol=1e-6)
    assert packed == packs


def test_tagging_through_time_major_rows_equals_the_batch_first_path(
    tiny_conll: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A BiLSTM-CRF tagger's rows go from the BiLSTM to the CRF time-major on the CPU; turned
    off, the batch-first path must give the same labels and confidences (padded batches too)."""
    from textorch.models.encoders import RecurrentEncoder

    labeler = SequenceLabeler.train(tiny_conll, max_epoch=2, seed=5, word_hidden=8, char_hidden=4)
    sequences = _sequences() * 6  # 24 sequences of 1 to 7 tokens: batches of 4 with and without padding
    taken = []
    time_major = RecurrentEncoder.time_major

    def counted(self, x, lengths):
        out = time_major(self, x, lengths)
        if out is not None:
            taken.append(int(lengths.min()) < x.shape[1])  # padded or not
        return out

    monkeypatch.setattr(RecurrentEncoder, "time_major", counted)
    fast = labeler.predict(sequences, batch_size=4) + labeler.predict(sequences[:1], batch_size=1)
    if padded_rnn.packed_lstm.packed_lstm_available():
        assert True in taken and False in taken
    monkeypatch.setattr(RecurrentEncoder, "time_major", lambda self, x, lengths: None)
    ordinary = labeler.predict(sequences, batch_size=4) + labeler.predict(sequences[:1], batch_size=1)
    assert [p.labels for p in fast] == [p.labels for p in ordinary]
    assert np.allclose([x for p in fast for x in p.scores], [x for p in ordinary for x in p.scores], atol=1e-6)


def test_cpu_crf_decoding_by_lengths_ignores_what_lies_past_them(crf_decoder: str) -> None:
    """The time-major path hands the CRF a strided view whose padded positions hold leftovers."""
    crf = _random_crf(5, seed=8)
    emissions = torch.randn(3, 6, 5, generator=torch.Generator().manual_seed(8))
    lengths = torch.tensor([6, 2, 4])
    mask = torch.arange(6)[None, :] < lengths[:, None]
    with torch.no_grad():
        expected_paths, expected_scores = crf.best_paths_with_confidence(emissions * mask.unsqueeze(-1), mask)
        leftovers = emissions.masked_fill(~mask.unsqueeze(-1), 1e4).transpose(0, 1).contiguous().transpose(0, 1)
        paths, scores = crf.cpu_best_paths(leftovers, lengths)
    assert torch.equal(paths[mask], expected_paths[mask])
    assert torch.allclose(scores[mask], expected_scores[mask], atol=1e-6)
    with pytest.raises(ValueError, match="one length per row"):
        crf.cpu_best_paths(emissions, lengths[:2])

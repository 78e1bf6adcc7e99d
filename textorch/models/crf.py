"""Linear-chain conditional random field over per-token tag scores.

A CRF output layer lets a tagger score whole label sequences instead of each token on
its own, so that it learns which tag transitions are plausible (``I-PER`` after ``B-PER``,
not after ``B-LOC``). Everything here works in log space and on a batch at once.

Conventions shared by every method:

* ``emissions`` is ``(B, L, T)``: batch first, then time, then tag scores.
* ``mask`` is ``(B, L)`` and left-aligned: a sequence's valid positions are a prefix of
  length >= 1. Values at padded positions (emissions or tags) never change a result.
* Computations run in ``float64`` when the emissions are ``float64`` and in ``float32``
  otherwise (half precision is promoted, because a log-partition summed over hundreds of
  steps loses too much in 16 bits).

Why a Python loop over time is acceptable: each step is a handful of batched ``(B, T, T)``
tensor operations, and T (the number of tags) is small, tens at most. The loop runs L
times, not B * L, so the cost per step is a few kernel launches whatever the batch size;
the dependency between consecutive steps would prevent parallelising over time anyway.

This module is the reference CRF: training everywhere, decoding on GPUs, and the oracle of the
tests; it knows no fast path. Tagging on the CPU decodes with the one CPU decoder where the call's
routes take it (:mod:`textorch.models.cpu_routes`, chosen by the CRF head): a compiled kernel,
whose rows fall back to the same recursions in log space, in NumPy, where its scaled arithmetic
would underflow (:mod:`textorch.models.cpu_decoder`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import torch
from torch import Tensor, nn

logger = logging.getLogger(__name__)

_INIT_RANGE = 0.1
FORBIDDEN_SCORE = -10000.0
"""The score of a move :meth:`CRF.forbid` rules out: low enough that no path through it can win
or carry probability (``exp`` of it is 0 in float32), finite so that sums stay finite."""


class CRF(nn.Module):
    """Linear-chain CRF with start, end and tag-to-tag transition scores.

    ``transitions[i, j]`` is the score of moving from tag ``i`` to tag ``j``. The start and
    end scores let the model learn that some tags cannot open or close a sequence (an
    ``I-`` tag at the start, for instance) without reserving extra tags for the borders.
    """

    def __init__(self, num_tags: int) -> None:
        super().__init__()
        if num_tags < 1:
            raise ValueError(f"num_tags must be >= 1, got {num_tags}")
        self.num_tags = num_tags
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags))
        self.start_transitions = nn.Parameter(torch.empty(num_tags))
        self.end_transitions = nn.Parameter(torch.empty(num_tags))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Start near zero so that emissions dominate early training, before the
        transitions have learnt anything; small noise breaks the symmetry between tags."""
        for param in (self.transitions, self.start_transitions, self.end_transitions):
            nn.init.uniform_(param, -_INIT_RANGE, _INIT_RANGE)

    def extra_repr(self) -> str:
        return f"num_tags={self.num_tags}"

    def forbid(self, transitions: Tensor, starts: Tensor) -> None:
        """Rule moves out: ``transitions[i, j]`` (bool, ``(T, T)``) from tag ``i`` to ``j`` and
        ``starts[j]`` (bool, ``(T,)``) opening a sequence with ``j`` get :data:`FORBIDDEN_SCORE`.

        Why: a CRF learns a move it never sees in training only through the partition
        function, so on a few dozen sequences a move like ``B-<figure_head>`` -> ``I-<content>``
        keeps a score near zero, and a long sequence whose emissions waver is decoded as a
        string of one-token fields. Fixed scores need nothing from any decoder: every one
        (this module, the compiled kernel, NumPy, an ONNX export's ``crf.json``) reads the
        parameters, and a saved model carries them. Training leaves them where they are: no gold
        path uses a forbidden move (the labeler makes gold labels valid IOB2 first), and the
        partition function's gradient at such a score is 0.
        """
        with torch.no_grad():
            self.transitions.masked_fill_(transitions.to(self.transitions.device), FORBIDDEN_SCORE)
            self.start_transitions.masked_fill_(starts.to(self.start_transitions.device), FORBIDDEN_SCORE)

    # ------------------------------------------------------------------ public API

    def neg_log_likelihood(self, emissions: Tensor, tags: Tensor, mask: Tensor) -> Tensor:
        """Per-sequence ``log Z - score(gold)``, shape ``(B,)``.

        Returned unreduced so that the caller chooses between sum and mean (and can weight
        sequences) without the layer guessing.
        """
        em, mask = self._prepare(emissions, mask)
        if tags.shape != mask.shape:
            raise ValueError(f"tags shape {tuple(tags.shape)} != mask shape {tuple(mask.shape)}")
        trans, start, end = self._params(em.dtype)
        *_, last_alpha = self._alpha_steps(em, mask, trans, start)
        log_z = torch.logsumexp(last_alpha + end, dim=-1)
        return log_z - self._gold_score(em, tags, mask, trans, start, end)

    def decode(self, emissions: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """Viterbi best paths ``(B, L)`` (0 beyond each length) and their scores ``(B,)``."""
        em, mask = self._prepare(emissions, mask)
        return viterbi(em, mask, *self._params(em.dtype))

    def marginals(self, emissions: Tensor, mask: Tensor) -> Tensor:
        """Posterior ``P(y_t = k | x)`` per position, ``(B, L, T)``, zero at padding.

        Gives each predicted tag (and hence each entity) a calibrated confidence, which
        the Viterbi score alone cannot: it is unnormalised and grows with length.
        """
        em, mask = self._prepare(emissions, mask)
        return marginal_probabilities(em, mask, *self._params(em.dtype))

    def best_paths_with_confidence(
        self, emissions: Tensor, mask: Tensor, with_confidence: bool = True
    ) -> tuple[Tensor, Tensor | None]:
        """Viterbi paths ``(B, L)`` and the posterior of each chosen tag ``(B, L)``, for tagging
        (None with ``with_confidence=False``: evaluation needs the labels only): :meth:`decode`
        and :meth:`marginals`, on any device."""
        paths, _ = self.decode(emissions, mask)
        if not with_confidence:
            return paths, None
        scores = self.marginals(emissions, mask).gather(-1, paths.unsqueeze(-1)).squeeze(-1)
        return paths, scores

    # ------------------------------------------------------------------ internals

    def _prepare(self, emissions: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """Validate shapes and neutralise padding once, so that no later step can leak
        a padded value (even NaN or inf) into a result or a gradient."""
        self.check_shapes(emissions, mask)
        mask = mask.to(device=emissions.device, dtype=torch.bool)
        dtype = torch.promote_types(emissions.dtype, torch.float32)
        em = emissions.to(dtype).masked_fill(~mask.unsqueeze(2), 0.0)
        return em, mask

    def check_shapes(self, emissions: Tensor, mask: Tensor) -> None:
        if emissions.dim() != 3 or emissions.size(2) != self.num_tags:
            raise ValueError(
                f"emissions must be (batch, length, {self.num_tags}), got {tuple(emissions.shape)}"
            )
        if mask.shape != emissions.shape[:2]:
            raise ValueError(
                f"mask shape {tuple(mask.shape)} != emissions (batch, length) "
                f"{tuple(emissions.shape[:2])}"
            )
        if emissions.size(1) == 0:
            raise ValueError("sequences must have length >= 1")

    def _params(self, dtype: torch.dtype) -> tuple[Tensor, Tensor, Tensor]:
        """Cast parameters to the computation dtype; the cast is differentiable, so a
        float32 module still trains from float64 emissions."""
        return (
            self.transitions.to(dtype),
            self.start_transitions.to(dtype),
            self.end_transitions.to(dtype),
        )

    @staticmethod
    def _alpha_steps(em: Tensor, mask: Tensor, trans: Tensor, start: Tensor) -> Iterator[Tensor]:
        """The log forward variables ``(B, T)`` one position at a time: alpha[b, j] sums the
        scores of all prefixes ending in tag j there. Past a sequence's end the last value is
        carried over, so the last one yielded is every sequence's final alpha whatever its length.

        The positions come from one ``unbind``, not from indexing ``em[:, t]`` at each step: the
        gradient of an index is a zero tensor of the whole ``(B, L, T)`` shape, so training on a
        piece of ``L`` tokens would fill and add ``L`` of them (time quadratic in ``L``);
        ``unbind``'s gradient is one ``stack`` (docs/performance.md, "GROBID's big models")."""
        emissions, valid = em.unbind(1), mask.unsqueeze(2).unbind(1)
        alpha = start + emissions[0]
        yield alpha
        for em_t, valid_t in zip(emissions[1:], valid[1:]):
            step = torch.logsumexp(alpha.unsqueeze(2) + trans, dim=1) + em_t
            alpha = torch.where(valid_t, step, alpha)
            yield alpha

    @staticmethod
    def _forward_alphas(em: Tensor, mask: Tensor, trans: Tensor, start: Tensor) -> Tensor:
        """Every log forward variable, ``(B, L, T)`` (:meth:`_alpha_steps` stacked)."""
        return torch.stack(list(CRF._alpha_steps(em, mask, trans, start)), dim=1)

    @staticmethod
    def _backward_betas(em: Tensor, mask: Tensor, trans: Tensor, end: Tensor) -> Tensor:
        """Log backward variables ``(B, L, T)``: beta[b, t, i] sums the scores of all
        suffixes after tag i at t, end score included. A step is taken only where the
        next position is valid, so beta equals the end score at each sequence's last
        position (and beyond) with one shared loop for all lengths. Positions unbound once,
        as in :meth:`_alpha_steps`."""
        batch, _, num_tags = em.shape
        emissions, valid = em.unbind(1), mask.unsqueeze(2).unbind(1)
        beta = end.expand(batch, num_tags)
        betas = [beta]
        for em_next, valid_next in zip(reversed(emissions[1:]), reversed(valid[1:])):
            nxt = (em_next + beta).unsqueeze(1)  # (B, 1, T): indexed by next tag j
            step = torch.logsumexp(trans + nxt, dim=2)
            beta = torch.where(valid_next, step, beta)
            betas.append(beta)
        betas.reverse()
        return torch.stack(betas, dim=1)

    @staticmethod
    def _gold_score(
        em: Tensor, tags: Tensor, mask: Tensor, trans: Tensor, start: Tensor, end: Tensor
    ) -> Tensor:
        """Unnormalised score of the given tag sequences, ``(B,)``. Padded tags (which
        may be -100 or anything else) are replaced by 0 before any indexing and their
        contributions are then dropped."""
        tags = tags.to(em.device).long().masked_fill(~mask, 0)
        zero = em.new_zeros(())
        emit = em.gather(2, tags.unsqueeze(2)).squeeze(2)
        score = torch.where(mask, emit, zero).sum(dim=1)
        score = score + start[tags[:, 0]]
        if tags.size(1) > 1:
            step = trans[tags[:, :-1], tags[:, 1:]]
            score = score + torch.where(mask[:, 1:], step, zero).sum(dim=1)
        last = mask.long().sum(dim=1).clamp(min=1) - 1
        last_tags = tags.gather(1, last.unsqueeze(1)).squeeze(1)
        return score + end[last_tags]


def viterbi(em: Tensor, mask: Tensor, trans: Tensor, start: Tensor, end: Tensor) -> tuple[Tensor, Tensor]:
    """:meth:`CRF.decode` on prepared emissions (padding zeroed) and parameters of their dtype."""
    batch, length, num_tags = em.shape
    identity = torch.arange(num_tags, device=em.device).expand(batch, num_tags)
    score = start + em[:, 0]
    backpointers: list[Tensor] = []
    for t in range(1, length):
        # best[b, j] = max_i score[b, i] + trans[i, j]
        best, best_prev = (score.unsqueeze(2) + trans).max(dim=1)
        step_mask = mask[:, t].unsqueeze(1)
        score = torch.where(step_mask, best + em[:, t], score)
        # At padded steps the pointer is the identity: the backtrack then walks
        # through the padding unchanged and reaches each sequence's true last tag
        # without any per-sequence indexing.
        backpointers.append(torch.where(step_mask, best_prev, identity))

    best_score, current = (score + end).max(dim=1)
    path = [current]
    for pointers in reversed(backpointers):
        current = pointers.gather(1, current.unsqueeze(1)).squeeze(1)
        path.append(current)
    path.reverse()
    paths = torch.stack(path, dim=1).masked_fill(~mask, 0)
    return paths, best_score


def marginal_probabilities(em: Tensor, mask: Tensor, trans: Tensor, start: Tensor, end: Tensor) -> Tensor:
    """:meth:`CRF.marginals` on prepared emissions and parameters of their dtype."""
    alphas = CRF._forward_alphas(em, mask, trans, start)
    betas = CRF._backward_betas(em, mask, trans, end)
    log_z = torch.logsumexp(alphas[:, -1] + end, dim=-1)
    log_marg = alphas + betas - log_z[:, None, None]
    return log_marg.exp().masked_fill(~mask.unsqueeze(2), 0.0)


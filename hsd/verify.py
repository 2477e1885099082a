"""The shared verification core: one target distribution per proposed position, one verdict.

Two rules, both lossless:

* :func:`rejection` (spec §1 steps 3–4; TLI §3 step 3; SLRS §4 step 3): accept proposal ``t_i``
  with probability ``min(1, p_i(t_i) / q_i(t_i))``; at the first rejection emit a token from the
  residual ``max(0, p_i - q_i)``; if all pass, a bonus token from ``p_{m+1}``.
* :func:`exact_match` (SLEM §2 step 4): draw the target's own token ``u_j ~ p_j``; keep going while
  it equals the proposal; the first mismatch is emitted as the correction; bonus if all match.

Inputs are tensors on the target's device; one host synchronisation per call.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .sampling import Rng, Sampling, pick
from .trace import Position


@dataclass
class Verdict:
    n_accepted: int
    token: int  # the target token emitted after the accepted proposals
    label: str  # "corrected" or "bonus"
    positions: list[Position]


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """``max(0, p - q)``, normalised; falls back to ``p`` when it vanishes (p == q up to rounding)."""
    r = torch.clamp(p - q, min=0)
    total = r.sum()
    return r / total if total > 0 else p


def _positions(tokens, p_t, q_t, accept, n_accepted, n_checked) -> list[Position]:
    out = []
    for i, t in enumerate(tokens):
        outcome = "accepted" if i < n_accepted else "rejected" if i < n_checked else "unverified"
        out.append(Position(int(t), float(p_t[i]), None if q_t is None else float(q_t[i]), float(accept[i]), outcome))
    return out


def rejection(p: torch.Tensor, q: torch.Tensor, proposal: list[int], sampling: Sampling, rng: Rng) -> Verdict:
    """Speculative sampling. ``p``: ``[m+1, V]`` target distributions, ``q``: ``[m, V]`` proposal
    distributions over the same (target) vocabulary, ``proposal``: the ``m`` sampled tokens."""
    m = len(proposal)
    idx = torch.tensor(proposal, dtype=torch.long, device=p.device)
    rows = torch.arange(m, device=p.device)
    p_t, q_t = p[rows, idx], q[rows, idx]
    accept = torch.where(q_t > 0, torch.clamp(p_t / q_t, max=1.0), torch.zeros_like(p_t))
    draws = rng.uniform(m, p.device)
    passed = (draws < accept).long()
    n = int(passed.cumprod(0).sum()) if m else 0
    if n < m:
        token = int(pick(residual(p[n], q[n]).unsqueeze(0), sampling, rng)[0])
        label = "corrected"
    else:
        token = int(pick(p[m:m + 1], sampling, rng)[0])
        label = "bonus"
    return Verdict(n, token, label, _positions(proposal, p_t.tolist(), q_t.tolist(), accept.tolist(), n, min(n + 1, m)))


def exact_match(p: torch.Tensor, proposal: list[int], sampling: Sampling, rng: Rng,
                q_t: list[float] | None = None) -> Verdict:
    """SLEM verification. ``p``: ``[m+1, V]``; the target samples every position once."""
    m = len(proposal)
    own = pick(p, sampling, rng).tolist()
    n = 0
    while n < m and own[n] == proposal[n]:
        n += 1
    idx = torch.tensor(proposal, dtype=torch.long, device=p.device)
    p_t = p[torch.arange(m, device=p.device), idx].tolist() if m else []
    label = "bonus" if n == m else "corrected"
    return Verdict(n, own[n], label, _positions(proposal, p_t, q_t, p_t, n, min(n + 1, m)))

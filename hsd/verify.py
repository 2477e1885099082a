"""The shared verification core: one target distribution per proposed position, one verdict.

Two rules, both lossless:

* :func:`rejection` (spec §1 steps 3–4; TLI §3 step 3): accept proposal ``t_i``
  with probability ``min(1, p_i(t_i) / q_i(t_i))``; at the first rejection emit a token from the
  residual ``max(0, p_i - q_i)``; if all pass, a bonus token from ``p_{m+1}``.
* :func:`sequential_rejection` (SLRS §4 step 3): the same rule when the proposal probability is
  costly (SLRS's ψ): it is asked for one position at a time, only where a position is verified, and
  the residual is drawn by :func:`residual_by_rejection` without the whole of ``q``.
* :func:`exact_match` (SLEM §2 step 4): draw the target's own token ``u_j ~ p_j``; keep going while
  it equals the proposal; the first mismatch is emitted as the correction; bonus if all match.

Inputs are on the target's device: ``p`` a ``[m+1, V]`` tensor of probabilities, or at temperature 0 a
:class:`~hsd.sampling.OneHot` (each ``p_i`` is one-hot on the target's argmax, and the rules reduce to comparing
ids, so that no row over the vocabulary is built); proposals likewise. One host synchronisation per call (per
verified position for :func:`sequential_rejection`).

Each rule takes an optional :class:`Recorder` (``record``): when a run asks for the rejection-sampling
picture (``record_distributions``), the rule hands it each verified position's ``p`` and proposal, and the
recorder keeps what :mod:`hsd.picture` draws. It only reads what the rule computed and draws nothing from
the rng, so the output is the same with or without it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from .sampling import OneHot, Rng, Rows, Sampling, draw, draws, pick_one, probs_at, probs_list, row
from .trace import Distributions, Position

TOP = 20  # a recorded picture keeps the target's TOP most probable tokens ...
SIDE = 5  # ... and the proposal's and the residual's SIDE most probable


def token_text(data: bytes | None, name: str | None = None) -> str:
    """A token's text for a picture: its characters, ⟨hex⟩ if it is not whole UTF-8, ⟨name⟩ if special."""
    if not data:
        return f"⟨{name or 'special'}⟩"
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "⟨" + data.hex(" ") + "⟩"


class Recorder:
    """Keeps each verified position's :class:`~hsd.trace.Distributions` (the target's vocabulary: ``tokens``
    its bytes, ``special_text`` the names of its special tokens; ``symbol`` the proposal's name)."""

    def __init__(self, tokens: list[bytes | None], special_text: dict[int, str] | None = None,
                 symbol: str | None = "q", top: int = TOP):
        self.tokens, self.special_text, self.symbol, self.top = tokens, special_text or {}, symbol, top

    def position(self, p: torch.Tensor, q: torch.Tensor, token: int, emitted: int | None,
                 rule: str = "rejection") -> Distributions:
        """``p`` and the proposal ``q`` (rows over the target vocabulary) of one verified position."""
        r = torch.clamp(p - q, min=0)
        accepted = float(torch.minimum(p, q).sum())
        r = r / r.sum() if float(r.sum()) > 0 else p  # what :func:`residual` samples from
        size = p.shape[-1]
        chosen: dict[int, None] = {}
        for dist, k in ((p, self.top), (q, SIDE), (r, SIDE)):
            values, ids = dist.topk(min(k, size))
            chosen.update((i, None) for v, i in zip(values.tolist(), ids.tolist()) if v > 0)
        chosen.update((t, None) for t in (token, emitted) if t is not None and 0 <= t < size)
        ids = list(chosen)
        index = torch.tensor(ids, dtype=torch.long, device=p.device)
        pv, qv, rv = (row[index].tolist() for row in (p, q, r))
        order = sorted(range(len(ids)), key=lambda j: (-pv[j], -qv[j], ids[j]))
        ids, pv, qv, rv = ([xs[j] for j in order] for xs in (ids, pv, qv, rv))
        text = [token_text(self.tokens[i] if i < len(self.tokens) else None, self.special_text.get(i)) for i in ids]
        symbol = "δ" if rule == "exact match" else self.symbol or "q"
        return Distributions(ids, text, pv, qv, rv, max(0.0, 1 - sum(pv)), max(0.0, 1 - sum(qv)),
                             max(0.0, 1 - sum(rv)), accepted, int(token), emitted, rule, symbol)


def _record(record: Recorder | None, positions: list[Position], n: int, m: int, token: int, row) -> None:
    """Give each verified position (the accepted ones and the first rejected one) its distributions:
    ``row(i)`` = ``(p_i, proposal_i, rule)``; the emitted token is the proposal, or ``token`` at a rejection."""
    if record is None:
        return
    for i in range(min(n + 1, m)):
        p_i, q_i, rule = row(i)
        positions[i].dist = record.position(p_i, q_i, positions[i].token, positions[i].token if i < n else token,
                                            rule)


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


def residual_weights(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """:func:`residual` before normalising, what a draw reads (an inverse CDF scales by the row's total): one
    pass over the vocabulary fewer."""
    r = (p - q).clamp_(min=0)
    return r if r.sum() > 0 else p


def _positions(tokens, p_t, q_t, accept, n_accepted, n_checked) -> list[Position]:
    """The trace's positions. ``p_t`` and ``accept`` are read for the first ``n_checked`` (the verified ones); an
    unverified position, after the first rejection, has no ``p`` and no acceptance probability: the rule never
    reached it. ``q_t``, the proposal's probabilities, is known for every position."""
    out = []
    for i, t in enumerate(tokens):
        checked = i < n_checked
        outcome = "accepted" if i < n_accepted else "rejected" if checked else "unverified"
        q = None if q_t is None or q_t[i] is None else float(q_t[i])
        out.append(Position(int(t), float(p_t[i]) if checked else None, q, float(accept[i]) if checked else None,
                            outcome))
    return out


def _ratio(p: float, q: float) -> float:
    """``min(1, p / q)`` (0 where ``q`` is 0) in float32, as the tensor rule computes it for float32 rows."""
    return float(min(np.float32(1.0), np.float32(p) / np.float32(q))) if q > 0 else 0.0


def _bonus(p, m: int, sampling: Sampling, rng: Rng) -> int:
    """The bonus token, from ``p_{m+1}``."""
    if isinstance(p, OneHot):
        return p.id(m)
    return pick_one(row(p, m), sampling, rng)


def rejection(p: torch.Tensor | OneHot, q, proposal: list[int], sampling: Sampling, rng: Rng,
              record: Recorder | None = None) -> Verdict:
    """Speculative sampling. ``p``: ``[m+1, V]`` target distributions, ``q``: ``[m, V]`` proposal
    distributions over the same (target) vocabulary (a tensor, or rows read by :func:`~hsd.sampling.probs_at`
    and :func:`~hsd.sampling.row`), ``proposal``: the ``m`` sampled tokens."""
    m = len(proposal)
    device = p.device
    if isinstance(p, OneHot) and isinstance(q, OneHot):
        # Greedy target and drafter: p_i(t) and q_i(t) are 1 or 0, so min(1, p/q) is 1 where both are 1, else 0,
        # and no uniform decides anything. It is drawn all the same, so the generator moves as in the general case.
        # The target's rows are read up to the first rejection only.
        q_t = [float(a == t) for a, t in zip(q.ids, proposal)]
        p_t, accept = [], []
        for i, t in enumerate(proposal):
            p_t.append(float(p.id(i) == t))
            accept.append(p_t[i] * q_t[i])
            if accept[i] < 1.0:
                break
        rng.uniform(m, device)
        n = next((i for i, a in enumerate(accept) if a < 1.0), m)
    elif isinstance(p, Rows):  # the target's rows built one at a time, up to the first rejection, read as floats
        q_t = probs_list(q, proposal)
        u = rng.uniform(m, device).tolist()
        p_t, accept, n = [], [], 0
        while n < m:
            p_t.append(float(p.row(n)[proposal[n]]))
            accept.append(_ratio(p_t[n], q_t[n]))
            if not u[n] < accept[n]:
                break
            n += 1
    else:
        p_tensor, q_tensor = probs_at(p, proposal), probs_at(q, proposal).to(device)
        ratio = torch.where(q_tensor > 0, torch.clamp(p_tensor / q_tensor, max=1.0), torch.zeros_like(p_tensor))
        passed = (rng.uniform(m, device) < ratio).long()
        n = int(passed.cumprod(0).sum()) if m else 0
        p_t, q_t, accept = p_tensor.tolist(), q_tensor.tolist(), ratio.tolist()
    if n < m:
        if isinstance(p, OneHot):  # p_n is one-hot on a: max(0, p_n - q_n) is 0 off a, so the residual is p_n
            token = p.id(n)
        else:
            token = pick_one(residual_weights(p[n], row(q, n).to(device)), sampling, rng)
        label = "corrected"
    else:
        token = _bonus(p, m, sampling, rng)
        label = "bonus"
    positions = _positions(proposal, p_t, q_t, accept, n, min(n + 1, m))
    _record(record, positions, n, m, token, lambda i: (row(p, i), row(q, i).to(device), "rejection"))
    return Verdict(n, token, label, positions)


def residual_by_rejection(p: torch.Tensor | OneHot, q_of: Callable[[int], float], support: list[int],
                          sampling: Sampling, rng: Rng, max_draws: int,
                          q_under: Callable[[int, Callable[[float], bool]], bool] | None = None) -> tuple[int, int]:
    """A draw from ``max(0, p - q)`` normalised, where ``q`` is 0 outside ``support`` and ``q_of(u)`` is costly.

    Draw ``u ~ p`` and keep it with probability ``1 - min(1, q(u)/p(u))`` (always outside ``support``):
    a kept ``u`` has exactly the residual's distribution, and the expected number of draws per rejected
    position is 1 (docs/slrs.md). After ``max_draws`` draws without keeping one, ``q`` is evaluated on
    the whole (short) support and the residual sampled directly, which is the same distribution, so
    the work is bounded by ``len(support)`` evaluations. Greedy: the argmax. Returns (token, draws).

    ``q_under(u, kept)``, when given, says whether an upper bound of ``q(u)`` is kept already: ``kept`` only grows as
    ``q`` falls, so the bound's verdict is ``q(u)``'s, in floats too, and ``q(u)`` itself is never asked for.
    """
    if sampling.greedy:
        return draw(p if isinstance(p, OneHot) else p.unsqueeze(0), sampling, rng)[0], 0
    inside = set(support)
    for drawn in range(1, max_draws + 1):
        u = rng.draw(p)
        if u not in inside:
            return u, drawn
        pu, v = float(p[u]), float(rng.uniform(1, p.device)[0])

        def kept(q: float) -> bool:
            return v < 1.0 - min(1.0, q / pu)

        if (q_under is not None and q_under(u, kept)) or kept(q_of(u)):
            return u, drawn
    q = torch.zeros_like(p)
    for u in support:
        if p[u] > 0:
            q[u] = q_of(u)
    return pick_one(residual_weights(p, q), sampling, rng), max_draws


def sequential_rejection(p: torch.Tensor | OneHot, proposal: list[int], q_of: Callable[[int, int], float],
                         support_of: Callable[[int], list[int]], sampling: Sampling, rng: Rng,
                         max_draws: int, record: Recorder | None = None, q_under=None) -> tuple[Verdict, int]:
    """:func:`rejection` with the proposal probability asked lazily: ``q_of(i, t)`` = ``q_i(t)``, only for
    positions that are verified and for residual candidates; ``support_of(i)`` = the tokens where
    ``q_i`` may be positive. A negative id in ``proposal`` is ``⊥``: no target token, always rejected.
    ``p``: ``[m+1, V]``, or ``[m, V]`` when the last proposal is ``⊥`` (nothing after it is verified).
    Returns the verdict and the residual's draws from ``p``. A recorded position evaluates ``q`` on its
    whole support (after verification, so nothing above changes). ``q_under(i, u, kept)``: the residual's test of
    :func:`residual_by_rejection` on an upper bound of ``q_i(u)``."""
    m = len(proposal)
    p_t, q_t, accept = [], [], []
    n, draws = 0, 0
    while n < m:
        t = proposal[n]
        pt = _prob(p, n, t) if t >= 0 else 0.0
        qt = q_of(n, t) if t >= 0 else 0.0
        a = min(1.0, pt / qt) if qt > 0 else 0.0
        p_t.append(pt)
        q_t.append(qt)
        accept.append(a)
        if not float(rng.uniform(1, p.device)[0]) < a:
            break
        n += 1
    if n < m:
        under = None if q_under is None else lambda u, kept: q_under(n, u, kept)
        token, draws = residual_by_rejection(p[n], lambda u: q_of(n, u), support_of(n), sampling, rng, max_draws, under)
        label = "corrected"
    else:
        token, label = _bonus(p, m, sampling, rng), "bonus"
    for _ in proposal[len(p_t):]:  # unverified: nothing was computed there
        p_t.append(None), q_t.append(None), accept.append(None)
    positions = _positions(proposal, p_t, None, accept, n, min(n + 1, m))
    for pos, q in zip(positions, q_t):
        pos.q = q

    def dense(i: int):  # q is 0 outside the support: a full row from the support's values
        p_i = row(p, i)
        q_i = torch.zeros_like(p_i)
        for u in dict.fromkeys(support_of(i) + ([proposal[i]] if proposal[i] >= 0 else [])):
            q_i[u] = q_of(i, u)
        return p_i, q_i, "rejection"

    _record(record, positions, n, m, token, dense)
    return Verdict(n, token, label, positions), draws


def _prob(p, i: int, t: int) -> float:
    """``p_i(t)``."""
    if isinstance(p, OneHot):
        return float(p.id(i) == t)
    return float(row(p, i)[t])


def exact_match(p: torch.Tensor | OneHot, proposal: list[int], sampling: Sampling, rng: Rng,
                q_t: list[float] | None = None, record: Recorder | None = None,
                own_at: Callable[[int], int] | None = None) -> Verdict:
    """SLEM verification. ``p``: ``[m+1, V]``; the target samples every position once. (As a picture, the
    proposal is a point mass on the proposed token: the target's own sample matches it with probability
    ``p(t)``, and a mismatch is a draw from ``p`` without ``t``, the residual.) ``own_at(j)``, when given, is
    the target's own token at position ``j`` (shared noise, :mod:`hsd.noise`), drawn only up to the first
    mismatch."""
    m = len(proposal)
    n = 0
    if own_at is None:  # the target's token at each position, each row built and read only up to the first mismatch
        own_at = draws(p, sampling, rng)
    own = [own_at(0)]
    while n < m and own[n] == proposal[n]:
        n += 1
        own.append(own_at(n))
    p_t = probs_list(p, proposal[:n + 1])
    label = "bonus" if n == m else "corrected"
    positions = _positions(proposal, p_t, q_t, p_t, n, min(n + 1, m))

    def point_mass(i: int):
        p_i = row(p, i)
        mass = torch.zeros_like(p_i)
        mass[proposal[i]] = 1.0
        return p_i, mass, "exact match"

    _record(record, positions, n, m, own[n], point_mass)
    return Verdict(n, own[n], label, positions)

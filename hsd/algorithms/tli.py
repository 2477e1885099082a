"""TLI: token-level intersection (spec §3; Timor et al. 2025, Algorithm 4).

The drafter drafts only tokens whose bytes the target also has (``q'``: ``q`` restricted to the
intersection and renormalised); each maps to its target token; verification is standard
speculative sampling with ``q'`` scattered into the target vocabulary. The scatter *adds*: when two
drafter ids spell the same bytes, the target token's proposal probability is their sum.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import verify
from ..sampling import OneHot, Rows, row
from ..session import Session
from ..trace import Round
from ..vocab import IntersectionMaps
from .common import close_round, commit_verdict, draft, place_drafted, spans
from .contract import Algorithm

PAPER = "https://arxiv.org/abs/2502.05202"


def step(s: Session) -> Round:
    rnd = Round(len(s.rounds))
    d = s.drafter
    k = min(s.settings.lookahead, s.settings.max_new_tokens - s.n_generated)
    maps = s.pair.vocab.intersection_maps(d.model.n_logits, s.pair.target.n_logits, d.runner.device, s.target.device)
    rnd.t_other = s.clock.split()
    # 2. Draft from q' (drafter restricted to the intersection, renormalised).
    drafted, q = draft(rnd, s, k, restrict=maps)
    place_drafted(rnd, d.model.vocab.tokens, drafted, q)
    proposal = [maps.drafter_to_target[t] for t in drafted]
    q_target = InTarget.of(q, maps, s.pair.target.n_logits, s.target.device)
    rnd.proposed = spans(s.vocab.tokens, proposal)
    rnd.t_convert = s.clock.split()
    # 3. Standard speculative sampling against q'.
    p = s.target_rows(proposal)
    v = verify.rejection(p, q_target, proposal, s.settings.sampling, s.rng, record=s.recorder)
    commit_verdict(rnd, s, proposal, v)
    for span, position in zip(rnd.proposed, v.positions):
        span.prob = position.q
    # 4. Emitted tokens outside the intersection reach the drafter by re-encoding their text.
    close_round(rnd, s, drafted, proposal)
    return rnd


@dataclass(frozen=True)
class InTarget:
    """``q'`` carried into the target's vocabulary (step 3), read only where verification needs it: at the proposed
    tokens (:meth:`at`) and, for a residual or a picture, one whole row (:meth:`row`). Target token ``t`` gets the
    sum of ``q'`` over the drafter ids that spell its bytes, added in the order of their ids from 0, as one
    ``scatter_add`` of the whole rows adds them, so every value is that scatter's, bit for bit."""

    q: torch.Tensor | Rows  # [n, V_drafter]: the drafter's q', as sampled
    maps: IntersectionMaps
    size: int  # the target's logits
    device: torch.device

    @classmethod
    def of(cls, q: torch.Tensor | OneHot, maps: IntersectionMaps, size: int, device) -> InTarget | OneHot:
        if isinstance(q, OneHot):  # a greedy drafter's q' is one-hot on the drafted id, so q' in target ids is too
            return OneHot(tuple(maps.drafter_to_target[d] for d in q.ids), size, torch.device(device))
        return cls(q, maps, size, torch.device(device))

    def __len__(self) -> int:
        return self.q.shape[0]

    def at(self, tokens: list[int]) -> torch.Tensor:
        values, slots = [], []
        for i, t in enumerate(tokens):
            ids = self.maps.target_to_drafter.get(t, ())
            if ids:
                values.append(row(self.q, i)[list(ids)])
                slots += [i] * len(ids)
        values = torch.cat(values).to(self.device) if values else torch.zeros(0, device=self.device)
        index = torch.tensor(slots, dtype=torch.long, device=self.device)
        return torch.zeros(len(tokens), device=self.device).scatter_add_(0, index, values)

    def row(self, i: int) -> torch.Tensor:
        out = torch.zeros(self.size, device=self.device)
        return out.scatter_add_(0, self.maps.dst, row(self.q, i)[self.maps.src].to(self.device))


def _requires(pair) -> str | None:
    if pair.vocab.intersection_size == 0:
        return ("'tli' drafts only tokens both vocabularies share, and these share none. Use 'slem', or a drafter "
                "whose tokenizer overlaps the target's.")
    return None


ALGORITHM = Algorithm(
    "tli", step, requires=_requires, proposal_symbol="q′", draft_symbol="q′",
    long_name="TLI (token-level intersection)", round_seconds=0.005, peer="hf-tli", engine_equivalent="tli",
    color="#f59e0b", lossless_draws=5000,  # 4-9 s at T = 1 on code prompts
    about=f"**TLI** — token-level intersection ([paper]({PAPER}), Alg. 4): the drafter may only draft tokens whose "
          "bytes the target also has (q′ = q restricted to the intersection, renormalised); then standard "
          "rejection sampling with q′. Beats SLEM when sampling if the drafter puts most of its mass on shared "
          "tokens; collapses when the intersection is small.")

"""TLI: token-level intersection (spec §3; Timor et al. 2025, Algorithm 4).

The drafter drafts only tokens whose bytes the target also has (``q'``: ``q`` restricted to the
intersection and renormalised); each maps to its target token; verification is standard
speculative sampling with ``q'`` scattered into the target vocabulary. The scatter *adds*: when two
drafter ids spell the same bytes, the target token's proposal probability is their sum.
"""

from __future__ import annotations

import torch

from .. import verify
from ..session import Session
from ..trace import Round
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
    drafted, q = draft(rnd, s, k, allowed=maps.allowed)
    place_drafted(rnd, d.model.vocab.tokens, drafted, q)
    proposal = [maps.drafter_to_target[t] for t in drafted]
    q_target = torch.zeros(len(drafted), s.pair.target.n_logits, device=s.target.device)
    q_target.scatter_add_(1, maps.dst.expand(len(drafted), -1), q[:, maps.src].to(s.target.device))
    rnd.proposed = spans(s.vocab.tokens, proposal)
    rnd.t_convert = s.clock.split()
    # 3. Standard speculative sampling against q'.
    p = s.target_probs(proposal)
    v = verify.rejection(p, q_target, proposal, s.settings.sampling, s.rng, record=s.recorder)
    commit_verdict(rnd, s, proposal, v)
    for span, position in zip(rnd.proposed, v.positions):
        span.prob = position.q
    # 4. Emitted tokens outside the intersection reach the drafter by re-encoding their text.
    close_round(rnd, s, drafted, proposal)
    return rnd


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

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
from ..trace import Round, Span
from .slem import close_round, place_drafted

NEEDS_DRAFTER = True


def _maps(s: Session):
    """Per call: the drafter mask, and which drafter ids scatter into which target ids."""
    if "tli" not in s.scratch:
        d2t = s.pair.vocab.drafter_to_target[:s.drafter.model.n_logits]
        allowed = (d2t >= 0) & (d2t < s.pair.target.n_logits)
        src = allowed.nonzero().squeeze(-1)
        s.scratch["tli"] = (allowed.to(s.drafter.runner.device), src.to(s.drafter.runner.device),
                            d2t[src].to(s.target.device), d2t.tolist())
    return s.scratch["tli"]


def step(s: Session) -> Round:
    rnd = Round(len(s.rounds))
    d = s.drafter
    k = min(s.settings.lookahead, s.settings.max_new_tokens - s.n_generated)
    allowed, src, dst, d2t = _maps(s)
    rnd.t_other = s.clock.split()
    # 2. Draft from q' (drafter restricted to the intersection, renormalised).
    before = d.runner.forwards
    drafted, q = d.draft(k, s.settings.drafter_sampling, s.rng, allowed=allowed)
    rnd.drafter_forwards = d.runner.forwards - before
    rnd.t_draft = s.clock.split()
    place_drafted(rnd, d.model.vocab.tokens, drafted, q)
    proposal = [d2t[t] for t in drafted]
    q_target = torch.zeros(len(drafted), s.pair.target.n_logits, device=s.target.device)
    q_target.scatter_add_(1, dst.expand(len(drafted), -1), q[:, src].to(s.target.device))
    pos = 0
    for t in proposal:
        b = s.vocab.tokens[t] or b""
        rnd.proposed.append(Span(t, pos, pos + len(b)))
        pos += len(b)
    rnd.t_convert = s.clock.split()
    # 3. Standard speculative sampling against q'.
    p = s.target_probs(proposal)
    v = verify.rejection(p, q_target, proposal, s.settings.sampling, s.rng)
    s.commit(rnd, proposal[:v.n_accepted], v.token, v.label)
    rnd.positions = v.positions
    for span, position in zip(rnd.proposed, v.positions):
        span.prob = position.q
    rnd.target_forwards = 1
    rnd.t_verify = s.clock.split()
    # 4. Emitted tokens outside the intersection reach the drafter by re-encoding their text.
    close_round(rnd, s, drafted, proposal)
    return rnd

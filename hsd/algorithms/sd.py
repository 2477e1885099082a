"""SD: standard speculative decoding on a shared vocabulary (spec §1; Leviathan et al. 2023).

The drafter's context *is* the target's: same ids, so no conversion. A padded ``vocab_size`` on
either side does not matter: both distributions are cut to the real vocabulary.
"""

from __future__ import annotations

import torch

from .. import verify
from ..session import Session
from ..trace import Round, Span

NEEDS_DRAFTER = True


def step(s: Session) -> Round:
    rnd = Round(len(s.rounds))
    d = s.drafter
    k = min(s.settings.lookahead, s.settings.max_new_tokens - s.n_generated)
    rnd.t_other = s.clock.split()
    # 1. Draft k tokens d_i ~ q(. | x, d_<i).
    before = d.runner.forwards
    drafted, q = d.draft(k, s.settings.drafter_sampling, s.rng)
    rnd.drafter_forwards = d.runner.forwards - before
    rnd.t_draft = s.clock.split()
    q_target = torch.zeros(len(drafted), s.pair.target.n_logits, device=s.target.device)
    width = min(q.shape[-1], q_target.shape[-1])
    q_target[:, :width] = q[:, :width].to(q_target.device)
    # 2-4. One target forward; accept with min(1, p/q); residual or bonus.
    p = s.target_probs(drafted)
    v = verify.rejection(p, q_target, drafted, s.settings.sampling, s.rng)
    s.commit(rnd, drafted[:v.n_accepted], v.token, v.label)
    rnd.target_forwards = 1
    rnd.t_verify = s.clock.split()
    _record(rnd, s, drafted, q, v.positions)
    d.ids = list(s.ids)
    before = len(d.runner)
    d.runner.sync_to(d.ids)
    rnd.drafter_dropped = before - len(d.runner)
    rnd.t_other += s.clock.split()
    return rnd


def _record(rnd: Round, s: Session, drafted, q, positions) -> None:
    toks = s.vocab.tokens
    pos = 0
    for i, t in enumerate(drafted):
        b = toks[t] or b""
        rnd.drafted.append(Span(t, pos, pos + len(b), float(q[i, t])))
        rnd.proposed.append(Span(t, pos, pos + len(b), positions[i].q))
        pos += len(b)
    rnd.draft = b"".join(toks[t] or b"" for t in drafted)
    accepted = sum(len(toks[t] or b"") for t in drafted[:rnd.n_accepted])
    rnd.rejected = rnd.draft[accepted:]
    rnd.positions = positions

"""SD: standard speculative decoding on a shared vocabulary (spec §1; Leviathan et al. 2023).

The drafter's context *is* the target's: same ids, so no conversion. A padded ``vocab_size`` on
either side does not matter: both distributions are cut to the real vocabulary.
"""

from __future__ import annotations

import torch

from .. import verify
from ..sampling import OneHot, row
from ..session import Session
from ..trace import Round
from .common import commit_verdict, draft, place_drafted, spans
from .contract import Algorithm


def step(s: Session) -> Round:
    rnd = Round(len(s.rounds))
    d = s.drafter
    k = min(s.settings.lookahead, s.settings.max_new_tokens - s.n_generated)
    rnd.t_other = s.clock.split()
    # 1. Draft k tokens d_i ~ q(. | x, d_<i).
    drafted, q = draft(rnd, s, k)
    q_target = in_target_vocabulary(q, s.pair.target.n_logits, s.target.device)
    # 2-4. One target forward; accept with min(1, p/q); residual or bonus.
    p = s.target_rows(drafted)
    v = verify.rejection(p, q_target, drafted, s.settings.sampling, s.rng, record=s.recorder)
    commit_verdict(rnd, s, drafted, v)
    place_drafted(rnd, s.vocab.tokens, drafted, q)
    rnd.proposed = spans(s.vocab.tokens, drafted, probs=[position.q for position in v.positions])
    rnd.rejected = rnd.draft[sum(len(s.vocab.tokens[t] or b"") for t in drafted[:rnd.n_accepted]):]
    d.ids = list(s.ids)
    before = len(d.runner)
    d.runner.sync_to(d.ids)
    rnd.drafter_dropped = before - len(d.runner)
    rnd.t_other += s.clock.split()
    return rnd


def in_target_vocabulary(q: torch.Tensor | OneHot, n_target: int, device) -> torch.Tensor | OneHot:
    """The drafter's rows over the target's ``n_target`` logits: the same ids, cut or padded with zeros (the two
    vocabularies are one; only a padded ``vocab_size`` may differ)."""
    if isinstance(q, OneHot):
        return OneHot(q.ids, n_target, torch.device(device))
    if q.shape[-1] == n_target and torch.device(device) == q.device:
        return q  # the same ids and size: rows (a tensor or :class:`~hsd.sampling.Rows`) as they are
    q = q if isinstance(q, torch.Tensor) else torch.stack([row(q, i) for i in range(len(q))])
    width = min(q.shape[-1], n_target)
    if width == n_target:
        return q[:, :width].to(device)
    out = torch.zeros(q.shape[0], n_target, device=device)
    out[:, :width] = q[:, :width].to(device)
    return out


def _requires(pair) -> str | None:
    pv = pair.vocab
    if not pv.shared:
        return (f"'sd' needs a shared vocabulary, but these tokenizers differ ({pv.intersection_size} byte strings "
                "in common). Use 'slem' or 'tli', which work across vocabularies.")
    return None


ALGORITHM = Algorithm(
    "sd", step, requires=_requires, proposal_symbol="q", draft_symbol="q",
    drafter_prompt=lambda target_ids, encode: target_ids,  # one vocabulary: the drafter reads the target's ids
    long_name="SD (standard speculative decoding)", round_seconds=0.004, engine_equivalent="sd", color="#8b5cf6",
    lossless_draws=5000,  # one drafted token per draw, as TLI
    about="**SD** — standard speculative decoding (Leviathan et al. 2023): the drafter proposes k tokens, the target "
          "checks them in one forward and accepts each with probability min(1, p/q); a rejection is replaced by a "
          "sample from the residual max(0, p − q). Needs a **shared vocabulary**.")

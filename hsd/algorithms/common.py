"""Steps several algorithms share: drafting with its bookkeeping, placing tokens in the draft string,
closing a round. No algorithm imports another; they all import from here."""

from __future__ import annotations

import torch

from ..sampling import OneHot, probs_list
from ..session import Session
from ..trace import Round, Span
from ..vocab import IntersectionMaps


def spans(tokens, ids: list[int], start: int = 0, probs: list[float | None] | None = None) -> list[Span]:
    """``ids`` placed one after another in the draft string from byte ``start``: each token's span."""
    out, pos = [], start
    for i, t in enumerate(ids):
        b = tokens[t] or b""
        out.append(Span(t, pos, pos + len(b), probs[i] if probs is not None else None))
        pos += len(b)
    return out


def draft(rnd: Round, s: Session, k: int,
          restrict: IntersectionMaps | None = None) -> tuple[list[int], torch.Tensor | OneHot]:
    """Up to ``k`` drafter tokens (:meth:`DrafterContext.draft`), their forwards and time recorded on ``rnd``."""
    d = s.drafter
    before = d.runner.forwards
    drafted, q = d.draft(k, s.settings.drafter_sampling, s.rng, restrict=restrict,
                         threshold=s.settings.draft_threshold, empties=s.empties)
    rnd.drafter_forwards = d.runner.forwards - before
    rnd.t_draft = s.clock.split()
    return drafted, q


def place_drafted(rnd: Round, tokens, drafted: list[int], q) -> bytes:
    """Record the drafted tokens with their byte spans in the draft string; return the string."""
    rnd.drafted = spans(tokens, drafted, probs=probs_list(q, drafted))
    rnd.draft = b"".join(tokens[t] or b"" for t in drafted)
    return rnd.draft


def commit_verdict(rnd: Round, s: Session, proposal: list[int], v) -> None:
    """The end of a verification (spec: "emit the accepted proposals, then the verdict's token"): commit them,
    record the verified positions, the round's one target forward and the time since the split before it."""
    s.commit(rnd, proposal[:v.n_accepted], v.token, v.label)
    rnd.positions = v.positions
    rnd.target_forwards = 1
    rnd.t_verify = s.clock.split()


def close_round(rnd: Round, s: Session, drafted: list[int], proposal: list[int]) -> None:
    """Record the rejected remainder and bring the drafter's context up to the emitted text (docs/design.md,
    *Which tokens the context keeps*): on a shared vocabulary the drafter reads the target's emitted ids, as SD's
    does; otherwise the text around the round's end is re-encoded in context, the drafter's canonical
    tokenization, on which it was trained."""
    toks = s.vocab.tokens
    accepted = rnd.lag + sum(len(toks[t] or b"") for t in proposal[:rnd.n_accepted])
    rnd.rejected = rnd.draft[accepted:]
    generated = bytes(s.generated)
    emitted = [e.token for e in rnd.emitted] if s.pair.vocab.shared else None
    start = len(generated) - sum(len(e.text) for e in rnd.emitted)
    events, rnd.drafter_dropped = s.drafter.sync(generated, drafted, target_ids=emitted, target_start=start)
    rnd.events += events
    rnd.t_convert += s.clock.split()

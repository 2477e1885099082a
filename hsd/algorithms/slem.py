"""SLEM: string-level exact match (spec §2; Timor et al. 2025, Algorithm 2).

The drafter drafts text; the text is re-tokenized by the target's tokenizer in context; the target
verifies by sampling its own token at every position and keeping the proposals it reproduces.
Every emitted token is the target's own sample, so SLEM is lossless for any proposal.
"""

from __future__ import annotations

from .. import verify
from ..session import Session
from ..trace import Round, Span

NEEDS_DRAFTER = True


def step(s: Session) -> Round:
    rnd = Round(len(s.rounds))
    d = s.drafter
    room = s.settings.max_new_tokens - s.n_generated
    rnd.t_other = s.clock.split()
    # 1. Draft k drafter tokens; their bytes form the draft string.
    before = d.runner.forwards
    drafted, q = d.draft(s.settings.lookahead, s.settings.drafter_sampling, s.rng)
    rnd.drafter_forwards = d.runner.forwards - before
    rnd.t_draft = s.clock.split()
    draft = place_drafted(rnd, d.model.vocab.tokens, drafted, q)
    # 2. Convert to target tokens continuing the emitted ones (look-behind re-tokenization).
    proposal = convert(rnd, s, drafted, draft)[:room]
    rnd.t_convert = s.clock.split()
    # 3-4. One target forward; the target samples every position; first mismatch ends the round.
    p = s.target_probs(proposal)
    v = verify.exact_match(p, proposal, s.settings.sampling, s.rng)
    s.commit(rnd, proposal[:v.n_accepted], v.token, v.label)
    rnd.positions = v.positions
    rnd.target_forwards = 1
    rnd.t_verify = s.clock.split()
    close_round(rnd, s, drafted, proposal)
    return rnd


def place_drafted(rnd: Round, tokens, drafted: list[int], q) -> bytes:
    """Record the drafted tokens with their byte spans in the draft string; return the string."""
    pos = 0
    for i, t in enumerate(drafted):
        b = tokens[t] or b""
        rnd.drafted.append(Span(t, pos, pos + len(b), float(q[i, t])))
        pos += len(b)
    rnd.draft = b"".join(tokens[t] or b"" for t in drafted)
    return rnd.draft


def convert(rnd: Round, s: Session, drafted: list[int], draft: bytes) -> list[int]:
    """Target tokens proposed by the draft string (spec §2 step 2).

    The drafter may lag behind the emitted text by an incomplete UTF-8 character (``lag`` bytes): the
    draft is usable only if it starts by spelling those bytes.
    """
    d = s.drafter
    lag = len(s.generated) - d.synced
    rnd.lag = lag
    if draft[:lag] != bytes(s.generated[d.synced:]):
        rnd.events.append("target:draft-contradicts-emitted")
        return []
    cont = s.retok.continue_ids(s.ids, draft[lag:])
    rnd.events += [f"target:{e}" for e in cont.events]
    proposal = cont.new_ids
    if drafted and drafted[-1] in d.model.vocab.eos_ids and cont.pending == 0 and s.vocab.eos_ids:
        proposal = proposal + [s.vocab.eos_ids[0]]  # a drafter EOS proposes the target's EOS
    pos = lag
    for t in proposal:
        b = s.vocab.tokens[t] or b""
        rnd.proposed.append(Span(t, pos, pos + len(b)))
        pos += len(b)
    return proposal


def close_round(rnd: Round, s: Session, drafted: list[int], proposal: list[int]) -> None:
    """Record the rejected remainder and bring the drafter's context up to the emitted text."""
    toks = s.vocab.tokens
    accepted = rnd.lag + sum(len(toks[t] or b"") for t in proposal[:rnd.n_accepted])
    rnd.rejected = rnd.draft[accepted:]
    events, rnd.drafter_dropped = s.drafter.sync(bytes(s.generated), drafted)
    rnd.events += events
    rnd.t_convert += s.clock.split()

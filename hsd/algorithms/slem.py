"""SLEM: string-level exact match (spec §2; Timor et al. 2025, Algorithm 2).

The drafter drafts text; the text is re-tokenized by the target's tokenizer in context; the target
verifies by sampling its own token at every position and keeping the proposals it reproduces.
Every emitted token is the target's own sample, so SLEM is lossless for any proposal.
"""

from __future__ import annotations

from .. import verify
from ..session import Session
from ..trace import Round
from .common import close_round, commit_verdict, draft, place_drafted, spans
from .contract import Algorithm

PAPER = "https://arxiv.org/abs/2502.05202"


def step(s: Session) -> Round:
    rnd = Round(len(s.rounds))
    room = s.settings.max_new_tokens - s.n_generated
    rnd.t_other = s.clock.split()
    # 1. Draft k drafter tokens; their bytes form the draft string.
    drafted, q = draft(rnd, s, s.settings.lookahead)
    text = place_drafted(rnd, s.drafter.model.vocab.tokens, drafted, q)
    # 2. Convert to target tokens continuing the emitted ones (look-behind re-tokenization).
    proposal = convert(rnd, s, drafted, text)[:room]
    rnd.t_convert = s.clock.split()
    # 3-4. One target forward; the target samples every position; first mismatch ends the round.
    p = s.target_rows(proposal)
    v = verify.exact_match(p, proposal, s.settings.sampling, s.rng, record=s.recorder, own_at=own_at(s, p, proposal))
    commit_verdict(rnd, s, proposal, v)
    close_round(rnd, s, drafted, proposal)
    return rnd


def own_at(s: Session, p, proposal: list[int]):
    """With shared noise (:mod:`hsd.noise`): the target's own token at position ``j`` of the round, drawn from the
    field where that position starts in the generated text (as AR would draw it there). ``None`` otherwise."""
    if not s.rng.shared:
        return None
    starts, offset, empties = [], len(s.generated), s.empties
    for t in proposal:
        starts.append((offset, empties))
        b = s.vocab.tokens[t] or b""
        offset, empties = offset + len(b), empties + (not b)
    starts.append((offset, empties))
    return lambda j: s.sample_at(p[j], *starts[j])


def convert(rnd: Round, s: Session, drafted: list[int], text: bytes) -> list[int]:
    """Target tokens proposed by the draft string (spec §2 step 2).

    The drafter may lag behind the emitted text by an incomplete UTF-8 character (``lag`` bytes): the
    draft is usable only if it starts by spelling those bytes.
    """
    d = s.drafter
    lag = len(s.generated) - d.synced
    rnd.lag = lag
    if text[:lag] != bytes(s.generated[d.synced:]):
        rnd.events.append("target:draft-contradicts-emitted")
        return []
    cont = s.retok.continue_ids(s.ids, text[lag:])
    rnd.events += [f"target:{e}" for e in cont.events]
    proposal = cont.new_ids
    if drafted and drafted[-1] in d.model.vocab.eos_ids and cont.pending == 0 and s.vocab.eos_ids:
        proposal = proposal + [s.vocab.eos_ids[0]]  # a drafter EOS proposes the target's EOS
    rnd.proposed = spans(s.vocab.tokens, proposal, start=lag)
    return proposal


ALGORITHM = Algorithm(
    "slem", step, proposal_symbol=None, draft_symbol="q", long_name="SLEM (string-level exact match)",
    round_seconds=0.008,  # the draft string re-tokenized every round
    shared_noise=True,  # every emitted token is the target's own sample, whatever was proposed
    peer="hf-slem", engine_equivalent="slem", color="#0ea5e9",
    lossless_draws=2000,  # 3-17 s at T = 1 on code prompts: its drafts of `lookahead` tokens miss the memo most
    about=f"**SLEM** — string-level exact match ([paper]({PAPER}), Alg. 2): the drafter's tokens are turned into "
          "text, the text is re-tokenized by the target's tokenizer (with a look-behind window), and the target "
          "keeps each proposed token only if its own sample equals it. Works for any pair of tokenizers; lossless "
          "because every emitted token is the target's own sample. Accepts less than rejection sampling when "
          "sampling.")

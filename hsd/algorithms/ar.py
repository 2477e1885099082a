"""AR: plain autoregressive decoding (spec §1), timed exactly like the speculative loops."""

from __future__ import annotations

from ..session import Session
from ..trace import Round
from .contract import Algorithm


def step(s: Session) -> Round:
    rnd = Round(len(s.rounds))
    rnd.t_other = s.clock.split()
    p = s.target_rows([])
    token = s.sample_at(p[0], len(s.generated), s.empties)
    s.commit(rnd, [], token, "target")
    rnd.target_forwards = 1
    rnd.t_verify = s.clock.split()
    return rnd


ALGORITHM = Algorithm(
    "ar", step, needs_drafter=False, proposal_symbol=None, advised=False, dynamic_lookahead=False,
    long_name="AR (autoregressive decoding)", round_seconds=0.001, shared_noise=True, peer="hf-ar",
    engine_equivalent="ar", color="#6b7280",
    about="**AR** — plain autoregressive decoding: one target forward per token. The baseline every speedup is "
          "measured against, timed by the same loop.")

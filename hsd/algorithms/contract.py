"""What an algorithm tells the rest of hsd about itself, so that no other module names it.

An algorithm module defines ``step(session) -> Round`` (one verification round, following the numbered
steps of its section of the spec, docs/algorithms.md) and declares an :class:`Algorithm` that
:mod:`hsd.algorithms` registers. Everything outside the module (``generate``, the costs, the metrics, the CLI,
the benchmark, the advice, the compatibility report, the production configurations, the ZeroGPU durations, the
losslessness check, the app and the pictures) reads these fields instead of switching on a name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..trace import Round


def _no_requirement(pair) -> str | None:
    return None


def _own_encoding(target_ids: list[int], encode: Callable[[], list[int]]) -> list[int]:
    return encode()


def _one_forward_per_drafted_token(rnd: Round) -> int:
    return len(rnd.drafted)


@dataclass(frozen=True)
class PairCost:
    """What running an algorithm on a pair costs beyond its drafts, known before anything runs (SLRS's ψ path
    counts). ``measure(pair)`` is the compatibility report's entry under the algorithm's name (a dict), ``lines``
    turn it into the report's text lines, ``note`` into the app's note beside the algorithm; ``explanation`` is
    the algorithm's Markdown bullet in :func:`hsd.report.explain`."""

    measure: Callable[..., dict]
    lines: Callable[[dict], list[str]]
    note: Callable[[dict], str]
    explanation: str = ""


@dataclass(frozen=True)
class Algorithm:
    """The contract of one decoding algorithm.

    ``requires(pair)`` says why the pair cannot run it (``None``: it can); a drafter's presence is checked
    before it, from ``needs_drafter``. ``proposal_symbol`` names what ``Position.q`` and the target spans'
    ``prob`` hold (``None``: the algorithm has no proposal probability), ``draft_symbol`` what each drafted
    token was sampled from. ``drafter_prompt(target_ids, encode)`` gives the drafter's prompt ids
    (``encode()`` is the drafter's own encoding of the prompt). ``ideal_drafted(round)`` is the number of
    drafter forwards an ideal engine spends on the round (:mod:`hsd.costs`). ``summed_extra`` are the
    ``Round.extra`` counters summed into the metrics; ``options`` the keyword settings of
    :func:`hsd.generate` that only this algorithm takes. ``advised``: :func:`hsd.advise.advise` calibrates
    it unless told which algorithms to calibrate. ``dynamic_lookahead``: :func:`hsd.generate`'s
    ``draft_threshold`` applies to it (its drafting stops after a drafted token the drafter doubts); where it
    does not, the threshold is ignored and advise calibrates no dynamic lookahead for it. ``about`` is one
    paragraph of Markdown for the app, ``long_name`` its name spelled out for sentences (empty: the name in
    capitals).

    What the consumers need besides, each with a default that works for a new algorithm:

    - ``round_seconds``: a round's own work besides the model forwards (sampling, conversion, bookkeeping) on
      the ZeroGPU slice that :mod:`hsd.zerogpu` writes its durations for; the default is the most a built-in
      algorithm costs, so a new one is not given too short a duration. ``drafts_per_position``: drafter
      forwards per drafted position in the worst case (1 unless the algorithm drafts more, as SLRS's ψ does).
    - ``shared_noise``: its verification keeps the target's own sample whatever was proposed, so drafting and
      verifying from one noise field (:mod:`hsd.noise`) stays lossless; rejection sampling does not.
    - ``peer``: the row of :mod:`hsd.peer` (Transformers) that runs the same algorithm (``None``: none does).
    - ``engine_equivalent``: which of the algorithms vLLM and Transformers implement this one is (``"ar"``,
      ``"sd"``, ``"tli"``, ``"slem"``: :mod:`hsd.production`); ``None``: neither engine has it, and the
      nearest configuration they offer is shown with the match ``"none"``.
    - ``color``: its colour in every figure (``None``: a stable one of :data:`hsd.figures.EXTRA_COLORS`).
    - ``lossless_draws``: draws per histogram of :mod:`hsd.lossless`'s check by default, sized so that AR plus
      the algorithm take about 15 s on the embedded pair on 2 CPU cores (docs/app.md).
    - ``pair_cost``: its cost on a pair beyond its drafts, for the compatibility report (:class:`PairCost`).
    """

    name: str
    step: Callable
    needs_drafter: bool = True
    requires: Callable = _no_requirement
    proposal_symbol: str | None = "q"
    draft_symbol: str = "q"
    drafter_prompt: Callable = _own_encoding
    ideal_drafted: Callable[[Round], int] = _one_forward_per_drafted_token
    summed_extra: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    advised: bool = True
    dynamic_lookahead: bool = True
    about: str = ""
    long_name: str = ""
    round_seconds: float = 0.012
    drafts_per_position: int = 1
    shared_noise: bool = False
    peer: str | None = None
    engine_equivalent: str | None = None
    color: str | None = None
    lossless_draws: int = 2000
    pair_cost: PairCost | None = None

    def applies(self, pair) -> str | None:
        """Why ``algorithm`` cannot run on ``pair``, as a message that says what to do; ``None`` if it can."""
        if not self.needs_drafter:
            return None
        if pair.drafter is None:
            return (f"{self.name!r} needs a drafter: load the pair with drafter='<hub id or dir>', or use "
                    "algorithm='ar'.")
        return self.requires(pair)

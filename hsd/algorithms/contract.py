"""What an algorithm tells the rest of hsd about itself, so that no other module names it.

An algorithm module defines ``step(session) -> Round`` (one verification round, following its spec
section's numbered steps) and declares an :class:`Algorithm` that :mod:`hsd.algorithms` registers.
Everything outside the module (``generate``, the costs, the metrics, the CLI, the benchmark, the advice,
the compatibility report, the app and the pictures) reads these fields instead of switching on a name.
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
    paragraph of Markdown for the app.
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

    @property
    def NEEDS_DRAFTER(self) -> bool:  # noqa: N802 - the name algorithm modules used before the contract
        return self.needs_drafter

    def applies(self, pair) -> str | None:
        """Why ``algorithm`` cannot run on ``pair``, as a message that says what to do; ``None`` if it can."""
        if not self.needs_drafter:
            return None
        if pair.drafter is None:
            return (f"{self.name!r} needs a drafter: load the pair with drafter='<hub id or dir>', or use "
                    "algorithm='ar'.")
        return self.requires(pair)

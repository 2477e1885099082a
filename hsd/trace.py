"""The trace: plain dataclasses that record what happened in each round (spec §5).

One trace type feeds the CLI's JSON, the benchmark's tables and every picture in the app. Byte
offsets (``start``/``end``) are positions in the round's draft string, the bytes the drafter
proposed; the target's proposed tokens are placed in the same coordinates, which is what the
token-boundary view draws.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

LABELS = ("accepted", "corrected", "bonus", "target")  # "target": a plain autoregressive step


def text(b: bytes) -> str:
    return b.decode("utf-8", errors="replace")


@dataclass
class Span:
    """A token placed in the draft string: ``draft[start:end]`` are its bytes."""

    id: int
    start: int
    end: int
    prob: float | None = None  # drafter: q (or q') it was sampled with; target: q / q' / psi of the proposal


@dataclass
class Distributions:
    """What the rejection-sampling picture of one verified position needs (:mod:`hsd.picture`), recorded only
    when a run asks for it (``record_distributions``), over the tokens worth showing: the target's ``top``
    most probable, the proposal's and the residual's most probable, the proposed and the emitted token.

    ``p`` is the target's distribution after temperature / top-k / top-p; ``proposal`` what verification
    tested against it: ``q`` (SD), ``q′`` (TLI), ``ψ′`` (SLRS: ψ on the target's likely light tokens, 0
    elsewhere, the rest of its mass on ⊥), or for SLEM's exact match a point mass on the proposed token
    (the target's own sample equals it with probability ``p(t)``: rejection sampling against that point
    mass). ``residual`` is ``max(0, p − proposal)`` renormalised, what a rejection samples from. The
    ``*_rest`` fields are each distribution's mass on the tokens not listed. ``accepted_mass`` is
    ``Σ min(p, proposal)`` over the whole vocabulary (``1 − TV(p, proposal)`` when the proposal sums to 1):
    the chance that a fresh proposal is accepted here."""

    ids: list[int]
    text: list[str]  # each token's text; a part of a UTF-8 character as ⟨hex⟩, a special token as ⟨name⟩
    p: list[float]
    proposal: list[float]
    residual: list[float]
    p_rest: float
    proposal_rest: float
    residual_rest: float
    accepted_mass: float
    token: int  # the proposed token (-1: SLRS's ⊥ without a token)
    emitted: int | None  # what the target emitted here: the proposal if accepted, else its correction
    rule: str  # "rejection" (SD, TLI, SLRS) or "exact match" (SLEM)
    symbol: str = "q"  # the proposal's name in pictures: q (SD), q′ (TLI), ψ (SLRS), δ (SLEM's point mass)


@dataclass
class Position:
    """Verification of one proposed target token."""

    token: int
    p: float | None  # target probability of the proposed token, after sampling settings; None if unverified
    q: float | None  # proposal probability (q for SD, q' for TLI, psi for SLRS; None for SLEM)
    accept_prob: float | None  # min(1, p/q) for rejection sampling; p for exact match; None if unverified
    outcome: str  # "accepted" | "rejected" | "unverified"
    # SLRS only: why the proposal was ⊥ (always rejected; ``token`` is then the drafted target token, or -1 if
    # there was none): "heavy" (its exact ψ needs more than slrs_max_paths drafter paths), "unlikely" (not among
    # the target's most probable tokens here), "no token" or "context full"; "" for an ordinary proposal
    bottom: str = ""
    paths: int | None = None  # SLRS only: drafter paths spent on ψ at this position (proposal and residual)
    dist: Distributions | None = None  # only with record_distributions, on verified positions


@dataclass
class Emitted:
    token: int
    label: str  # one of LABELS
    text: bytes  # its bytes (b"" for special tokens)


@dataclass
class Round:
    index: int
    drafted: list[Span] = field(default_factory=list)
    draft: bytes = b""
    lag: int = 0  # leading bytes of the draft string that were already emitted
    proposed: list[Span] = field(default_factory=list)
    positions: list[Position] = field(default_factory=list)
    emitted: list[Emitted] = field(default_factory=list)
    rejected: bytes = b""  # the part of the draft string after the last accepted proposal
    events: list[str] = field(default_factory=list)  # re-tokenization events
    drafter_dropped: int = 0  # drafter tokens removed from its cache after the round
    target_forwards: int = 0
    drafter_forwards: int = 0
    t_draft: float = 0.0
    t_convert: float = 0.0
    t_verify: float = 0.0
    t_other: float = 0.0
    t_end: float = 0.0  # seconds since the call started, when this round's tokens were ready
    forward_seconds: float = 0.0  # of the round's time, the part inside model forwards
    extra: dict = field(default_factory=dict)  # algorithm-specific counters (e.g. SLRS psi cost)

    @property
    def n_accepted(self) -> int:
        return sum(e.label == "accepted" for e in self.emitted)

    @property
    def n_proposed(self) -> int:
        return len(self.positions)

    @property
    def seconds(self) -> float:
        return self.t_draft + self.t_convert + self.t_verify + self.t_other

    def to_dict(self) -> dict:
        d = asdict(self)
        d["draft"] = text(self.draft)
        d["draft_hex"] = self.draft.hex()
        d["rejected"] = text(self.rejected)
        for e in d["emitted"]:
            e["text"] = text(e["text"])
        for pos in d["positions"]:
            if pos["dist"] is None:  # recorded only on request: ordinary traces keep their keys
                del pos["dist"]
        return d


@dataclass
class Result:
    algorithm: str
    prompt_ids: list[int]
    token_ids: list[int]
    text: str
    rounds: list[Round]
    metrics: object  # an hsd.metrics.Metrics (which also reads a dict of the same keys)
    settings: dict
    stop_reason: str  # "eos" | "max_new_tokens"
    prefill: dict = field(default_factory=dict)  # prefill time and forwards

    def to_dict(self) -> dict:
        return {"algorithm": self.algorithm, "text": self.text, "prompt_ids": self.prompt_ids,
                "token_ids": self.token_ids, "stop_reason": self.stop_reason, "settings": self.settings,
                "metrics": self.metrics.to_dict() if hasattr(self.metrics, "to_dict") else self.metrics,
                "prefill": self.prefill, "rounds": [r.to_dict() for r in self.rounds]}

"""The rejection-sampling picture of one verified position: why the output is exactly the target's.

For a position a run recorded (``hsd.generate(..., record_distributions=True)``, which fills
:attr:`Position.dist <hsd.trace.Position>`), :func:`rejection_figure` draws, over the tokens worth
showing, four bars per token: the target's distribution ``p`` (after temperature, top-k, top-p), the
proposal (``q`` for SD, ``q′`` for TLI, ``ψ`` for SLRS, a point mass on the proposed token for SLEM's
exact match), the accepted mass ``min(p, proposal)`` and the residual ``max(0, p − proposal)``
renormalised, which a rejection samples from. The last column holds every other token's mass.
:func:`rejection_explanation` is the line of plain words under it.

Why this is lossless, in the figure's terms: a token ``x`` is emitted either as an accepted proposal,
with probability ``min(p(x), proposal(x))`` (the green bar), or after a rejection, with probability
``(1 − Σ min(p, proposal)) · residual(x) = max(0, p(x) − proposal(x))``; the two add up to ``p(x)``.

Pure functions of the trace: no models, so a run loaded back with :mod:`hsd.share` draws the same.
"""

from __future__ import annotations

import html
import re

import plotly.graph_objects as go

from .errors import HsdError
from .trace import Distributions, Position, Result, Round
from .viz import visible

COLORS = {"p": "#1d4ed8", "proposal": "#f59e0b", "min": "#22c55e", "residual": "#ef4444"}
OTHER = "all other tokens"


BOTTOM_WHY = {"heavy": "heavy: its exact ψ needs more drafter paths than the budget",
              "unlikely": "not among the target's most probable tokens here",
              "no token": "the drafted string spells no target token", "context full": "the drafter's context is full"}


class NoPictureError(HsdError, LookupError):
    """The position has no recorded distributions (not verified, or the run did not record them)."""


def recorded_positions(source: Result | list[Round]) -> list[tuple[int, int]]:
    """``(round index, position index)`` of every position of a run that has a picture, in order."""
    rounds = source.rounds if isinstance(source, Result) else source
    return [(r.index, i) for r in rounds for i, pos in enumerate(r.positions) if pos.dist is not None]


def _locate(source: Result | Round, position) -> tuple[Round, int, Position]:
    """The round, the position's index in it and the position. ``source``: a round (``position``: an index
    into its positions) or a result (``position``: ``(round index, position index)``, or the n-th position
    that has a picture, as :func:`recorded_positions` lists them)."""
    if isinstance(source, Round):
        rnd, i = source, position
    elif isinstance(source, Result):
        if isinstance(position, tuple):
            index, i = position
            rnd = next((r for r in source.rounds if r.index == index), None)
            if rnd is None:
                raise NoPictureError(f"This run has no round {index} (it has {len(source.rounds)}).")
        else:
            located = recorded_positions(source)
            if not isinstance(position, int) or not 0 <= position < len(located):
                raise NoPictureError(f"Position {position!r} is not one of the {len(located)} positions with a "
                                     "picture in this run.")
            index, i = located[position]
            rnd = next(r for r in source.rounds if r.index == index)
    else:
        raise TypeError(f"rejection_figure takes a Round or a Result, not {type(source).__name__}.")
    if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(rnd.positions):
        raise NoPictureError(f"Round {rnd.index} verified {len(rnd.positions)} proposed token(s); there is no "
                             f"position {i!r}.")
    pos = rnd.positions[i]
    if pos.dist is None:
        why = ("it was not verified (an earlier proposal in its round was rejected)" if pos.outcome == "unverified"
               else "the run did not record distributions: run it with record_distributions=True")
        raise NoPictureError(f"Round {rnd.index}, position {i} has no picture: {why}.")
    return rnd, i, pos


def visible_token(text: str, short: bool = False) -> str:
    """A recorded token's text for a label: whitespace made visible (␣ ↵ →), ⟨hex⟩ and ⟨special⟩ kept;
    ``short``: a run of four or more spaces or tabs as ``␣×8``, so indentation tokens fit under a bar."""
    if not text:
        return "∅"
    if text.startswith("⟨") and text.endswith("⟩"):
        return text
    out = visible(text)
    if short:
        out = re.sub(r"([␣→])\1{3,}", lambda m: f"{m.group(1)}×{len(m.group(0))}", out)
    return out


def _name(d: Distributions, token: int | None) -> str:
    """``'text'`` of a token the picture lists (its id when it does not list it)."""
    if token is None or token < 0:
        return "⊥"
    if token in d.ids:
        return f"'{visible_token(d.text[d.ids.index(token)])}'"
    return f"id {token}"


def _value(values: list[float], d: Distributions, token: int) -> float:
    return values[d.ids.index(token)] if token in d.ids else 0.0


def _f(x: float) -> str:
    return f"{x:.3f}"


def rejection_figure(source: Result | Round, position, *, top: int | None = None) -> go.Figure:
    """The picture of one verified position (see the module docstring); ``top``: at most this many token
    columns (the most probable under ``p`` first, then the proposed and emitted tokens if not among them)."""
    rnd, i, pos = _locate(source, position)
    d = pos.dist
    keep = list(range(len(d.ids)))
    if top is not None and len(keep) > top:
        must = [j for j in keep if d.ids[j] in (d.token, d.emitted)]
        keep = sorted(set(keep[:max(0, top - len(must))]) | set(must))
    dropped = [j for j in range(len(d.ids)) if j not in keep]

    def column(values, rest):
        return [values[j] for j in keep] + [rest + sum(values[j] for j in dropped)]

    low = [min(a, b) for a, b in zip(d.p, d.proposal)]
    low_rest = max(0.0, d.accepted_mass - sum(low))
    labels = []
    for j in keep:
        t = d.ids[j]
        text = html.escape(visible_token(d.text[j], short=True), quote=False)
        mark = " (proposed)" if t == d.token else ""
        mark += " (emitted)" if t == d.emitted and pos.outcome == "rejected" else ""
        labels.append(f"<b>{text}{mark}</b>" if mark else text)
    labels.append(f"<i>{OTHER}</i>")
    xs = list(range(len(labels)))
    ids = [d.ids[j] for j in keep] + [None]
    sym = d.symbol
    series = [("p", "p (target)", column(d.p, d.p_rest)),
              ("proposal", f"{sym} (proposal)" if d.rule == "rejection" else "δ (the proposed token)",
               column(d.proposal, d.proposal_rest)),
              ("min", f"min(p, {sym}): accepted mass", column(low, low_rest)),
              ("residual", f"max(0, p − {sym}) renormalised: the residual", column(d.residual, d.residual_rest))]
    fig = go.Figure()
    for key, name, ys in series:
        fig.add_bar(x=xs, y=ys, name=name, marker_color=COLORS[key],
                    customdata=[[f"id {t}" if t is not None else "rest"] for t in ids],
                    hovertemplate=f"{name}<br>%{{customdata[0]}}: %{{y:.4f}}<extra></extra>")
    fig.update_layout(barmode="group", template="plotly_white", height=440, font=dict(size=14),
                      title=dict(text=_title(rnd, i, pos), font=dict(size=16)),
                      xaxis=dict(tickmode="array", tickvals=xs, ticktext=labels, tickangle=-35, title="token",
                                 automargin=True, ticklabeloverflow="allow"),
                      yaxis=dict(title="probability", rangemode="tozero"),
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0),
                      margin=dict(l=120, r=20, t=130, b=40))
    return fig


def _title(rnd: Round, i: int, pos: Position) -> str:
    d = pos.dist
    head = f"Round {rnd.index}, position {i + 1}: proposed {html.escape(_name(d, d.token), quote=False)}"
    if d.rule == "exact match":
        rule = f"P(target's own sample = it) = p = {_f(pos.accept_prob)}"
    else:
        rule = f"P(accept) = min(1, p/{d.symbol}) = {_f(pos.accept_prob)}"
    return (f"{head}, {pos.outcome}<br><sup>{rule} · Σ min(p, {d.symbol}) = {_f(d.accepted_mass)} · "
            f"emitted {html.escape(_name(d, d.emitted), quote=False)}</sup>")


def rejection_explanation(source: Result | Round, position) -> str:
    """One line of plain words for the picture of the same position."""
    rnd, i, pos = _locate(source, position)
    d = pos.dist
    tok, emitted = _name(d, d.token), _name(d, d.emitted)
    outcome = (f"It was accepted, so {tok} was emitted." if pos.outcome == "accepted"
               else f"It was rejected, and the target emitted {emitted} instead.")
    if d.rule == "exact match":
        shared = isinstance(source, Result) and source.settings.get("noise") == "shared"
        chance = (f"which with independent draws happens with probability p({tok}) = {_f(pos.accept_prob)} (this run "
                  "shared its noise with the drafter, which makes a match more likely; the target's draw still "
                  "follows p)" if shared else f"which happens with probability p({tok}) = {_f(pos.accept_prob)}")
        return (f"SLEM's exact match: the target draws its own token from p (blue) and keeps the proposal {tok} only "
                f"if the two agree, {chance}; on a mismatch "
                "the target's own token is emitted, and it then follows p without the proposed token (red), so "
                f"either way the output follows p exactly. {outcome}")
    s = d.symbol
    if d.token < 0 or pos.bottom:
        why = BOTTOM_WHY.get(pos.bottom, pos.bottom or "no token")
        what = f"The drafter's token {tok} was" if d.token >= 0 else "The drafter's string was"
        proposed = (f"{what} proposed as ⊥ ({why}), which the target always rejects: {s} = 0 there, P(accept) = "
                    f"{_f(pos.accept_prob)}.")
    else:
        p_t, q_t = _value(d.p, d, d.token), _value(d.proposal, d, d.token)
        proposed = (f"The drafter proposed {tok} with {s} = {_f(q_t)}, the target gives it p = {_f(p_t)}, so it is "
                    f"kept with probability min(1, p/{s}) = {_f(pos.accept_prob)}.")
    return (f"{proposed} Over all tokens a proposal is accepted with probability Σ min(p, {s}) = "
            f"{_f(d.accepted_mass)} (green); a rejection draws from the residual max(0, p − {s}) renormalised (red), "
            f"which puts mass only where the target wants more than the drafter offered, so accepted plus corrected "
            f"tokens follow p (blue) exactly. {outcome}")

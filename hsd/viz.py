"""Pictures of a trace: coloured output, the token-boundary view, the summary table and badges.

Pure functions from :class:`~hsd.trace.Round` / :class:`~hsd.trace.Result` to HTML strings and
pandas DataFrames, so the app, notebooks and tests share them (no gradio here). The plotly figures
live in :mod:`hsd.figures` (re-exported here).

Text is stored as bytes (spec §0): a token may be half of a UTF-8 character. Output HTML decodes
the whole emitted byte stream once and gives each character to the token holding its first byte;
the token-boundary view cuts the draft at every boundary of either tokenizer and shows a piece that
is not whole characters as its hex bytes, so no boundary is ever moved to make text look nicer.
"""

from __future__ import annotations

import html
import math

import pandas as pd

from .algorithms import ALGORITHMS
from .figures import predicted
from .divergence import first_difference
from . import marks
from .metrics import NOISY_SPREAD, Metrics
from .trace import Result, Round

COLORS = {"accepted": "#22c55e", "corrected": "#f97316", "bonus": "#3b82f6", "rejected": "#9ca3af",
          "target": None}
OUTCOME_COLORS = {"accepted": "#22c55e", "rejected": "#ef4444", "unverified": "#9ca3af"}
LEGEND_TEXT = {"accepted": "accepted draft", "corrected": "target's correction", "bonus": "bonus token",
               "target": "target token (AR)", "rejected": "rejected draft"}
MONO = "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace"


# ----------------------------------------------------------------------------- bytes -> characters

def char_spans(data: bytes) -> list[tuple[int, int, str]]:
    """``(start, end, char)`` for each character of ``data``; an invalid byte becomes one U+FFFD."""
    out, i, n = [], 0, len(data)
    while i < n:
        b = data[i]
        size = 1 if b < 0x80 else 2 if 0xC2 <= b < 0xE0 else 3 if 0xE0 <= b < 0xF0 else 4 if 0xF0 <= b < 0xF5 else 0
        try:
            ch = data[i:i + size].decode("utf-8") if size else None
        except UnicodeDecodeError:
            ch = None
        if ch is None or len(ch) != 1:
            out.append((i, i + 1, "\ufffd"))
            i += 1
        else:
            out.append((i, i + size, ch))
            i += size
    return out


def _is_whole_text(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def visible(text: str) -> str:
    """Whitespace made visible for token cells: space ␣, tab →, newline ↵."""
    return text.replace(" ", "␣").replace("\t", "→").replace("\r", "␍").replace("\n", "↵")


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _fmt(x: float | None, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.{digits}f}"


# ----------------------------------------------------------------------------- coloured output

def legend_html(labels=("accepted", "corrected", "bonus", "target", "rejected")) -> str:
    items = []
    for label in labels:
        items.append(f'<span class="hsd-legend-item" style="margin-right:1.1em;white-space:nowrap">'
                     f'{_token_span("abc", label, "")} {LEGEND_TEXT[label]}</span>')
    return f'<div class="hsd-legend" style="font-size:0.9em;margin:0.3em 0 0.6em 0">{" ".join(items)}</div>'


def _token_span(text: str, label: str, title: str) -> str:
    color = COLORS.get(label)
    if label == "rejected":
        style = f"color:{color};text-decoration:line-through;text-decoration-thickness:2px"
    elif color:
        style = f"background:{color}33;border-bottom:3px solid {color};border-radius:3px"
    else:
        style = ""
    body = _esc(text).replace("\n", '<span style="opacity:0.4">↵</span>\n')  # a newline token stays visible
    if color and text and not text.strip(" \t"):  # a coloured run of spaces: show it, not an empty box
        body = f'<span style="opacity:0.5">{_esc(visible(text))}</span>'
    return f'<span class="hsd-tok hsd-{label}" style="{style}" title="{_esc(title)}">{body}</span>'


def prompt_html(prompt: str, special: list[tuple[int, int, str]] | None = None) -> str:
    """The prompt, faint, with each span that became a special token outlined and titled as such."""
    parts, at = [], 0
    for start, end, token in special or ():
        parts.append(_esc(prompt[at:start]))
        parts.append(f'<span class="hsd-prompt-special" title="parsed as the special token {_esc(token)}, not as '
                     f'text" style="outline:1.5px dashed #d97706;border-radius:3px;opacity:1">⚑{_esc(prompt[start:end])}'
                     '</span>')
        at = end
    parts.append(_esc(prompt[at:]))
    return f'<span class="hsd-prompt" style="opacity:0.55">{"".join(parts)}</span>'


def output_html(rounds: list[Round], *, show_rejected: bool = True, special_text: dict[int, str] | None = None,
                legend: bool = True, prompt: str | None = None,
                prompt_special: list[tuple[int, int, str]] | None = None) -> str:
    """The generated text coloured by origin, with each round's rejected draft struck through.

    ``special_text`` names special tokens (they have no bytes), e.g. ``pair.target.vocab.special_text``.
    ``prompt_special``: the spans of ``prompt`` its tokenizer read as special tokens
    (:func:`hsd.generate.special_spans`), outlined and flagged so the user sees they were not plain text.
    """
    special_text = special_text or {}
    stream, owners, inserts = bytearray(), [], []  # inserts: (byte offset, round) in stream order
    for r in rounds:
        for e in r.emitted:
            owners.append((len(stream), len(stream) + len(e.text), e, r.index))
            stream += e.text
        if show_rejected and r.rejected:
            inserts.append((len(stream), r))
    inserts.append((float("inf"), None))
    parts = [prompt_html(prompt, prompt_special)] if prompt else []
    chars = char_spans(bytes(stream))
    ci = ii = 0
    for start, end, e, index in owners + [(float("inf"), float("inf"), None, None)]:
        while inserts[ii][1] is not None and inserts[ii][0] <= start:  # after the last token of its round
            r = inserts[ii][1]
            parts.append(_token_span(r.rejected.decode("utf-8", errors="replace"), "rejected",
                                     f"round {r.index}: rejected draft"))
            ii += 1
        if e is None:
            break
        text = []
        while ci < len(chars) and chars[ci][0] < end:
            text.append(chars[ci][2])
            ci += 1
        if not e.text:
            text = [f"⟨{special_text.get(e.token, f'special {e.token}')}⟩"]
        title = f"{LEGEND_TEXT[e.label]} · round {index} · id {e.token} · bytes {e.text.hex(' ') or '—'}"
        parts.append(_token_span("".join(text), e.label, title))
    body = "".join(parts)
    box = (f'<div class="hsd-output" style="white-space:pre-wrap;font-family:{MONO};font-size:1.05em;'
           f'line-height:1.7;overflow-wrap:anywhere">{body}</div>')
    labels = ("accepted", "corrected", "bonus", "target") + (("rejected",) if show_rejected else ())
    return (legend_html(labels) if legend else "") + box


# ----------------------------------------------------------------------------- one run

#: why a run ended, in the status line's words
STOP_WORDS = {"max_new_tokens": "reached the token limit", "eos": "the target ended the text"}


def tip(text: str, explanation: str) -> str:
    """``text`` with ``explanation`` as its tooltip (a dotted underline says there is one)."""
    return f'<abbr title="{_esc(explanation)}">{text}</abbr>'


def run_summary(result: Result, device: str = "") -> str:
    """One Markdown line in plain words: what was written, how many tokens each round kept, why it stopped and
    where it ran; the terms (τ, verified and proposed positions) are in tooltips."""
    m = Metrics.of(result.metrics)
    rounds = f"{m.rounds} round" + ("s" if m.rounds != 1 else "")
    text = (f"**{result.algorithm.upper()}** wrote {m.new_tokens} tokens in {rounds} "
            f"({m.tokens_per_s or 0:.0f} tokens/s)")
    if result.algorithm != "ar" and m.rounds:
        text += ", " + tip(f"{m.mean_accepted_length:.1f} tokens per round",
                           f"τ = {m.mean_accepted_length:.2f}: the mean number of tokens a round (one call of "
                           "the target) emitted; plain decoding emits 1")
    if m.draft_acceptance_rate is not None:
        text += "; the target kept " + tip(
            f"{m.draft_acceptance_rate:.0%} of the drafted tokens",
            f"accepted / proposed positions = {m.draft_acceptance_rate:.1%} (vLLM's draft acceptance rate); "
            f"accepted / verified positions = {m.verified_acceptance_rate:.1%} (a round stops verifying at its "
            "first rejection)")
    text += (f" · {STOP_WORDS.get(result.stop_reason, f'stopped by {result.stop_reason}')}"
             f" · {device + ', ' if device else ''}{result.settings['dtype']}")
    if result.algorithm != "ar":
        text += " · how much faster than the target alone? **Compare** times both, in turns"
    return text


def interesting_round(rounds: list[Round]) -> int:
    """A round worth showing first: some drafts accepted and one rejected; else the first with a draft."""
    for r in rounds:
        if r.n_accepted and any(p.outcome == "rejected" for p in r.positions):
            return r.index
    return next((r.index for r in rounds if r.proposed), 0)


# ----------------------------------------------------------------------------- token-boundary view

def _columns(draft: bytes, spans_a, spans_b):
    """Cut the draft at every boundary of either tokenization; zero-width tokens get their own column.

    Returns the columns (``(start, end)`` byte ranges, or ``(offset, None)`` for a zero-width slot) and,
    for each tokenization, each span's ``(first_column, last_column + 1)``.
    """
    n = len(draft)
    cuts = {0, n}
    for s in list(spans_a) + list(spans_b):
        cuts.update((min(s.start, n), min(s.end, n)))
    cuts = sorted(cuts)
    zero = {}
    for spans in (spans_a, spans_b):
        counts = {}
        for s in spans:
            if s.end <= s.start:
                counts[min(s.start, n)] = counts.get(min(s.start, n), 0) + 1
        for off, c in counts.items():
            zero[off] = max(zero.get(off, 0), c)
    cols, at_start, slots = [], {}, {}
    for i, c in enumerate(cuts):
        slots[c] = len(cols)
        for _ in range(zero.get(c, 0)):
            cols.append((c, None))
        at_start[c] = len(cols)
        if i + 1 < len(cuts):
            cols.append((c, cuts[i + 1]))
    end_col = {c: at_start[c] for c in cuts}  # first column at or after offset c (past its zero slots)
    col_of_end = {}
    for ci, (s, e) in enumerate(cols):
        if e is not None:
            col_of_end[e] = ci + 1

    def place(spans):
        out, used = [], {}
        for s in spans:
            a, b = min(s.start, n), min(s.end, n)
            if b <= a:
                k = used.get(a, 0)
                used[a] = k + 1
                out.append((slots[a] + k, slots[a] + k + 1))
            else:
                out.append((end_col[a], col_of_end[b]))
        return out

    return cols, place(spans_a), place(spans_b)


def _piece_text(draft: bytes, start: int, end: int) -> tuple[str, bool]:
    """Visible text of ``draft[start:end]``, bytes of a split character as ⟨hex⟩; and whether it is whole."""
    out, broken, whole = [], [], True
    for a, b, ch in char_spans(draft[start:end]) + [(0, 0, "")]:
        if ch == "\ufffd" and not _is_whole_text(draft[start + a:start + b]):
            broken.append(draft[start + a:start + b].hex())
            whole = False
            continue
        if broken:
            out.append("⟨" + " ".join(broken) + "⟩")
            broken = []
        out.append(visible(ch))
    return "".join(out), whole


def _emitted_text(e, specials: dict[int, str]) -> str:
    return visible(e.text.decode("utf-8", errors="replace")) or f"⟨{specials.get(e.token, e.token)}⟩"


#: at most this many draft columns per line of the round view; a long round (a byte-level drafter's) wraps
WRAP_COLUMNS = 12


def _wrap(n: int, *placements) -> list[tuple[int, int]]:
    """Column ranges of at most :data:`WRAP_COLUMNS` (longer only where a token spans the cut), cut only
    where no token of either row crosses."""
    inside = {c for placement in placements for a, b in placement for c in range(a + 1, b)}
    chunks, lo = [], 0
    while lo < n:
        hi = min(n, lo + WRAP_COLUMNS)
        while hi < n and hi in inside:
            hi += 1
        chunks.append((lo, hi))
        lo = hi
    return chunks


def round_html(rnd: Round, *, algorithm: str = "slem", special_drafter: dict[int, str] | None = None,
               special_target: dict[int, str] | None = None, shared_noise: bool = False) -> str:
    """One round as a three-row picture: drafter tokens, the draft string, the target's proposed tokens.

    Below each proposed token: p, the proposal probability (q for SD, q′ for TLI, ψ for SLRS, none for
    SLEM), the acceptance probability and the outcome. A red boundary in the draft row is one that only
    one tokenizer has. ``special_*`` name special tokens, which have no bytes (e.g. ``vocab.special_text``).
    ``shared_noise``: the run drew from one noise field (:mod:`hsd.noise`): SLEM's ``p`` is then the chance of a
    match with independent draws, and the note under the round says the coupled chance was higher.
    """
    if not rnd.drafted and not rnd.proposed:
        emitted = " ".join(_token_span(_emitted_text(e, {}), e.label, "") for e in rnd.emitted)
        return (f'<div class="hsd-round" style="font-size:1.2em">Round {rnd.index}: no draft (plain autoregressive '
                f'step, one target forward, one token). Emitted: {emitted}</div>')
    view = _RoundView(rnd, ALGORITHMS.get(algorithm), special_drafter or {}, special_target or {}, shared_noise)
    return view.html()


_CELL = "padding:4px 8px;text-align:center;vertical-align:top;white-space:nowrap;border:none"
_HEAD = f"{_CELL};text-align:right;font-weight:600;opacity:0.8;font-family:sans-serif;font-size:0.75em"


class _RoundView:
    """The parts of :func:`round_html` for a round with a draft: the columns the two tokenizations share, one
    table row per tokenization, the draft string between them, the verification rows, the notes under it.
    Long rounds wrap: each part is drawn for the columns ``lo:hi`` of one line (:func:`_wrap`)."""

    def __init__(self, rnd: Round, spec, special_drafter: dict[int, str], special_target: dict[int, str],
                 shared_noise: bool):
        self.rnd, self.draft, self.shared_noise = rnd, rnd.draft, shared_noise
        self.cols, self.d_place, self.t_place = _columns(self.draft, rnd.drafted, rnd.proposed)
        end = len(self.draft)
        self.d_cuts = {min(s.start, end) for s in rnd.drafted} | {min(s.end, end) for s in rnd.drafted}
        self.t_cuts = {min(s.start, end) for s in rnd.proposed} | {min(s.end, end) for s in rnd.proposed}
        self.t_cuts.add(rnd.lag)
        self.symbol = spec.proposal_symbol if spec else "q"
        self.drafted_symbol = spec.draft_symbol if spec else "q"  # what the drafter sampled each token from
        self.sd, self.st = special_drafter, special_target
        self.outcome = {id(s): (rnd.positions[i] if i < len(rnd.positions) else None)
                        for i, s in enumerate(rnd.proposed)}
        self.bottom = {k: pos.bottom for k, pos in self.outcome.items() if pos is not None and pos.bottom}  # SLRS ⊥
        self.by_col = sorted(zip(rnd.proposed, self.t_place), key=lambda x: x[1][0])

    # --- the token rows
    def label(self, span, specials) -> str:
        if span.end > span.start:
            return _piece_text(self.draft, span.start, span.end)[0]
        return f"⟨{specials.get(span.id, 'special')}⟩"

    @staticmethod
    def token_row(spans, placement, cls, shade, label_of, extra_of, lo, hi) -> str:
        cells, col = [], lo
        for i, (span, (a, b)) in enumerate(sorted(zip(spans, placement), key=lambda x: x[1])):
            if not lo <= a < hi:
                continue
            if a > col:
                cells.append(f'<td colspan="{a - col}" style="border:none"></td>')
            bg = shade[i % 2]
            cells.append(f'<td class="{cls}" colspan="{b - a}" style="{_CELL};background:{bg};color:#0f172a;'
                         f'border:1px solid #64748b;border-radius:6px;font-family:{MONO}">'
                         f'<div style="font-size:1.1em;font-weight:600">{_esc(label_of(span))}</div>'
                         f'<div style="font-size:0.7em;opacity:0.75">{extra_of(span)}</div></td>')
            col = b
        if col < hi:
            cells.append(f'<td colspan="{hi - col}" style="border:none"></td>')
        return "".join(cells)

    def drafted_row(self, lo, hi) -> str:
        sym = self.drafted_symbol
        return self.token_row(self.rnd.drafted, self.d_place, "hsd-drafter-tok", ("#e0f2fe", "#bae6fd"),
                              lambda s: self.label(s, self.sd),
                              lambda s: f"id {s.id}" + ("" if s.prob is None else f"<br>{sym} {s.prob:.2f}"), lo, hi)

    def target_label(self, span) -> str:
        if id(span) not in self.bottom:
            return self.label(span, self.st)
        return "⊥ " + self.label(span, self.st) if span.id >= 0 else "⊥"

    def target_row(self, lo, hi) -> str:
        bottom = self.bottom
        return self.token_row(self.rnd.proposed, self.t_place, "hsd-target-tok", ("#fef3c7", "#fde68a"),
                              self.target_label,
                              lambda s: (f"id {s.id}" if s.id >= 0 else "no token")
                              + (f'<br><span class="hsd-bottom">⊥: {_esc(bottom[id(s)])}</span>' if id(s) in bottom
                                 else ""), lo, hi)

    def draft_cells(self) -> list[str]:
        """The draft string cut at every boundary either tokenizer has; a red one where only one has it."""
        cells = []
        for s, e in self.cols:
            if e is None:
                cells.append(f'<td class="hsd-draft-piece" style="{_CELL};opacity:0.5">·</td>')
                continue
            text, whole = _piece_text(self.draft, s, e)
            disagree = (s in self.d_cuts) != (s in self.t_cuts) and s != 0
            border = "3px dashed #ef4444" if disagree else "2px solid #334155" if s != 0 else "none"
            lagged = ";opacity:0.45" if e <= self.rnd.lag else ""
            cls = "hsd-draft-piece" + (" hsd-boundary-disagree" if disagree else "")
            cells.append(f'<td class="{cls}" style="{_CELL};border-left:{border};font-family:{MONO};'
                         f'font-size:{1.5 if whole else 0.9}em{lagged}">{_esc(text)}</td>')
        return cells

    # --- the verification rows
    def stat_rows(self, lo, hi) -> str:
        rows = [("p (target)", lambda p: _fmt(p.p))]
        if self.symbol:
            rows.append((f"{self.symbol} (proposal)", lambda p: _fmt(p.q)))
        accept = ("P(accept) = p" + (" if drawn apart" if self.shared_noise else "") if self.symbol is None
                  else f"P(accept) = min(1, p/{self.symbol})")
        rows.append((accept, lambda p: _fmt(p.accept_prob)))
        rows.append(("outcome", None))
        return "".join(self.stat_row(name, fn, lo, hi) for name, fn in rows)

    def stat_row(self, name, fn, lo, hi) -> str:
        cells, col = [f'<th style="{_HEAD}">{_esc(name)}</th>'], lo
        for span, (a, b) in self.by_col:
            if not lo <= a < hi:
                continue
            pos = self.outcome[id(span)]
            if a > col:
                cells.append(f'<td colspan="{a - col}" style="border:none"></td>')
            if pos is None:
                cells.append(f'<td colspan="{b - a}" style="border:none"></td>')
            elif fn is None:
                c = OUTCOME_COLORS.get(pos.outcome, "#9ca3af")
                cells.append(f'<td class="hsd-outcome hsd-{pos.outcome}" colspan="{b - a}" style="{_CELL};'
                             f'background:{c};color:white;font-weight:700;border-radius:6px">{pos.outcome}</td>')
            elif pos.outcome == "unverified":  # an earlier proposal was rejected: nothing was computed here
                cells.append(f'<td colspan="{b - a}" class="hsd-unverified" title="not verified: an earlier '
                             f'proposal was rejected" style="{_CELL};color:#9ca3af">—</td>')
            else:
                cells.append(f'<td colspan="{b - a}" style="{_CELL};font-family:{MONO}">{fn(pos)}</td>')
            col = b
        return "<tr>" + "".join(cells) + "</tr>"

    # --- the whole
    def tables(self) -> str:
        draft_cells = self.draft_cells()
        return "".join(f"""<table class="hsd-boundaries" style="border-collapse:separate;border-spacing:4px;border:none;
margin:0 0 0.6em 0"><tr><th style="{_HEAD}">drafter tokens</th>{self.drafted_row(lo, hi)}</tr>
<tr><th style="{_HEAD}">draft string</th>{"".join(draft_cells[lo:hi])}</tr>
<tr><th style="{_HEAD}">target tokens</th>{self.target_row(lo, hi)}</tr>
{self.stat_rows(lo, hi)}
</table>""" for lo, hi in _wrap(len(self.cols), self.d_place, self.t_place))

    def notes(self) -> tuple[str, str]:
        """(the sentence after the round's heading, the small print under the tables)."""
        rnd, x = self.rnd, self.rnd.extra
        events = ", ".join(_esc(e) for e in rnd.events) or "none"
        costs = ""
        if "psi_paths" in x:  # SLRS: what ψ cost this round, and how many proposals were ⊥
            costs = (f" ψ cost: {x['psi_paths']} drafter paths (at most {x.get('psi_max_paths', 0)} for one ψ) in "
                     f"{x.get('psi_forwards', 0)} batched drafter forwards, {1000 * x.get('psi_seconds', 0.0):.1f} "
                     f"ms; {x.get('psi_bottom', 0)} ⊥ proposal(s), {x.get('psi_heavy', 0)} of them heavy.")
        times = " · ".join(f"{k} {1000 * getattr(rnd, 't_' + k):.1f} ms"
                           for k in ("draft", "convert", "verify", "other"))
        lag = f" The first {rnd.lag} byte(s) were already emitted (an unfinished character)." if rnd.lag else ""
        if self.shared_noise and self.symbol is None:
            lag += (" Shared noise: the drafter drew from the target's noise field, so a match was more likely than "
                    "p, the chance with independent draws; the target's own draws still follow p.")
        small = (f"Red dashed line: a boundary only one tokenizer has.\nPieces in ⟨hex⟩ are parts of a UTF-8 "
                 f"character. Re-tokenization events: {events}.\nDrafter tokens dropped from its cache: "
                 f"{rnd.drafter_dropped}.{costs} Time: {times}.")
        return lag, small

    def html(self) -> str:
        rnd = self.rnd
        lag, small = self.notes()
        emitted = "".join(_token_span(_emitted_text(e, self.st), e.label, LEGEND_TEXT[e.label]) for e in rnd.emitted)
        return f"""<div class="hsd-round" style="font-size:20px;line-height:1.4">
<div style="margin-bottom:0.4em"><b>Round {rnd.index}</b>: the drafter drafted {len(rnd.drafted)} token(s);
the target was proposed {len(rnd.proposed)} token(s) and accepted {rnd.n_accepted}.{lag}</div>
<div style="overflow-x:auto">{self.tables()}</div>
<div style="margin-top:0.5em">Emitted this round:
<span style="font-family:{MONO};font-size:1.2em">{emitted}</span></div>
<div style="font-size:0.8em;opacity:0.8;margin-top:0.3em">{small}</div>
</div>"""


# ----------------------------------------------------------------------------- tables and badge

#: the summary table's columns before any the comparison or the algorithm adds (the app's empty table shows them)
SUMMARY_COLUMNS = ["algorithm", "tokens", "tokens/s", "speedup", "predicted speedup", "TTFT (ms)", "TPOT (ms)", "τ",
                   "accepted/verified", "accepted/proposed", "target forwards", "drafter forwards", "same tokens as AR"]


def summary_table(results: dict[str, Result], comparison=None) -> pd.DataFrame:
    """One row per run, with names production engines use (τ = mean accepted length per target forward).

    With a :class:`hsd.bench.Comparison`, tokens/s and speedups are medians over its interleaved repeats and
    a column gives each speedup's spread."""
    ar = results.get("ar")
    ar_tps = Metrics.of(ar.metrics).tokens_per_s if ar else None
    same = lossless(results)
    rows = []
    for name, res in results.items():
        m = Metrics.of(res.metrics)
        ms = lambda x: None if x is None else round(1000 * x, 2)  # noqa: E731
        rnd = lambda x, d=3: None if x is None else round(x, d)  # noqa: E731
        rows.append({
            "algorithm": name, "tokens": m.new_tokens, "tokens/s": rnd(m.tokens_per_s, 1),
            "speedup": rnd(m.tokens_per_s / ar_tps, 2) if ar_tps and m.tokens_per_s else None,
            "predicted speedup": rnd(predicted(res, ar), 2) if ar and name != "ar" else None,
            "TTFT (ms)": ms(m.ttft_s), "TPOT (ms)": ms(m.tpot_s), "τ": rnd(m.mean_accepted_length, 2),
            "accepted/verified": rnd(m.verified_acceptance_rate),
            "accepted/proposed": rnd(m.draft_acceptance_rate), "target forwards": m.target_forwards,
            "drafter forwards": m.drafter_forwards,
            "same tokens as AR": {True: "yes", False: "NO"}.get(same.get(name), "—"),
        })
        if comparison is not None:
            tps, up, pred = (comparison.spread(name, key) for key in ("tokens_per_s", "speedup", "predicted"))
            rows[-1].update({"tokens/s": rnd(tps and tps.median, 1),
                             "speedup": rnd(up.median, 2) if up else rows[-1]["speedup"],
                             "predicted speedup": rnd(pred and pred.median, 2),
                             "speedup spread": f"{up.low:.2f}–{up.high:.2f} ({up.n} repeats)" if up else None})
        if "psi_forwards" in m:  # SLRS: the cost of computing psi (spec §4)
            rows[-1].update({"ψ drafter forwards": m["psi_forwards"], "ψ paths": m.get("psi_paths")})
    extra = [c for c in ("speedup spread", "ψ drafter forwards", "ψ paths") if any(c in r for r in rows)]
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS + extra)


def availability_markdown(why: dict[str, str | None], cost: dict[str, str] | None = None) -> str:
    """:func:`hsd.availability` as a Markdown list: a "runs" badge for each algorithm that runs (with its cost note, e.g.
    SLRS's share of ⊥ proposals), a "not available" badge with the reason for each that does not."""
    cost = cost or {}
    return "\n".join(f"- {marks.YES} **{name}**" + (f": {cost[name]}" if cost.get(name) else "") if reason is None
                     else f"- {marks.NO} **{name}**: {reason}" for name, reason in why.items())


def cost_notes(report: dict) -> dict[str, str]:
    """Per algorithm, what running it costs beyond its drafts, from a compatibility report
    (:func:`hsd.report.compatibility_report`; :attr:`Algorithm.pair_cost <hsd.algorithms.contract.Algorithm>`):
    SLRS's ψ path counts and its share of ⊥ proposals."""
    return {name: a.pair_cost.note(report[name]) for name, a in ALGORITHMS.items()
            if a.pair_cost is not None and report.get(name)}


def compare_status(comparison, device: str, settings) -> str:
    """The status after a comparison: what ran where, what did not apply, how it was timed, what stopped."""
    results, failed = comparison.results, comparison.failed
    skipped = [a for a in ALGORITHMS if a not in results and a not in failed]
    return (f"{marks.OK} Compared {', '.join(results)} on {device}, temperature {settings.temperature}, seed "
            f"{settings.seed}" + (f" · not applicable here: {', '.join(skipped)}" if skipped else "")
            + f"\n\n{timing_note(comparison)}"
            + "".join(f"\n\n{marks.ERROR} {name} stopped: {msg}" for name, msg in failed.items()))


def timing_note(comparison) -> str:
    """One Markdown sentence on how a :class:`hsd.bench.Comparison` was timed, and whether to trust it."""
    parts = []
    for name in comparison.speedup:
        s = comparison.spread(name)
        if s is not None:
            parts.append(f"{name} {s.median:.2f}× ({s.low:.2f}–{s.high:.2f})")
    text = (f"Speedups: median of {comparison.repeats} interleaved repeats (AR and each algorithm alternately, "
            f"{comparison.seconds:.0f} s), with their spread: " + ", ".join(parts) + ".")
    noisy = comparison.noisy()
    if noisy:
        text += (f" {marks.badge('no', 'noisy')} **Too noisy to trust** for {', '.join(noisy)}: the timings varied "
                 f"by more than {NOISY_SPREAD:.0%} between repeats, so the machine's load, not the algorithm, decides "
                 "them. Compare again when the machine is quieter.")
    if getattr(comparison, "busy", False):
        text += (f" {marks.badge('no', 'busy machine')} **The machine was busy**: this comparison had the CPU "
                 f"{comparison.cpu_share:.0%} of the time it ran (other programs took the rest), so every figure here "
                 "may be off, however steady the repeats look. Compare again when the machine is quieter.")
    return text


def _shared(result: Result) -> bool:
    return result.settings.get("noise") == "shared"


def lossless(results: dict[str, Result]) -> dict[str, bool]:
    """Whether each run's token ids equal AR's, where they must: at temperature 0, and when sampling for the runs
    that drew from the shared noise field with AR (:mod:`hsd.noise`). Empty when not applicable."""
    ar = results.get("ar")
    if ar is None:
        return {}
    if ar.settings.get("temperature", 0) != 0:
        if not _shared(ar):
            return {}
        return {n: r.token_ids == ar.token_ids for n, r in results.items() if n != "ar" and _shared(r)}
    return {n: r.token_ids == ar.token_ids for n, r in results.items() if n != "ar"}


def lossless_badge(results: dict[str, Result], pair=None) -> str:
    """HTML badges: ✓ when an algorithm's tokens equal AR's at temperature 0, ✗ with the first difference.

    With the ``pair`` the runs came from, each difference is explained below the badges: both tokens and the
    target's top-2 margin there (:func:`hsd.divergence.first_difference`, one target forward), so a half-precision
    near-tie reads as one, with float32 as the way to check."""
    ar = results.get("ar")
    if ar is None:
        return '<div class="hsd-badge">Lossless check needs an AR run.</div>'
    sampling = ar.settings.get("temperature", 0) != 0
    if sampling and not _shared(ar):
        return ('<div class="hsd-badge" style="font-size:1.05em">Sampling (temperature &gt; 0): outputs are random, '
                'so equality with AR is not expected. Losslessness here means the same <i>distribution</i>; the '
                'test suite checks it statistically. Tick <b>shared noise</b> to see SLEM write AR\'s very text.</div>')
    badges, details = [], []
    for name, same in lossless(results).items():
        if same:
            color, text = "#16a34a", f"✓ {name}: identical to AR ({len(ar.token_ids)} tokens)"
        else:
            other = results[name].token_ids
            at = next((i for i, (x, y) in enumerate(zip(other, ar.token_ids)) if x != y),
                      min(len(other), len(ar.token_ids)))
            color, text = "#dc2626", f"✗ {name}: differs from AR at token {at}"
            diff = first_difference(pair, ar, results[name]) if pair is not None else None
            if diff is not None:
                details.append(f'<div class="hsd-divergence" style="font-size:0.9em;margin:4px 0">'
                               f'{_esc(diff.explain(name))}</div>')
        badges.append(f'<span class="hsd-badge hsd-lossless-{str(same).lower()}" style="display:inline-block;'
                      f'background:{color};color:white;border-radius:999px;padding:4px 14px;margin:3px;'
                      f'font-weight:600">{_esc(text)}</span>')
    dtype = ar.settings.get("dtype", "")
    note = "" if dtype in ("", "float32") else (f" In {dtype}, verifying several positions in one forward can round "
                                                "differently from one-at-a-time decoding and flip a near-tie; compare in "
                                                "float32 to check.")
    if sampling:
        apart = [n for n, r in results.items() if n != "ar" and not _shared(r)]
        if apart:
            note = (f"{', '.join(apart)}: sampled with independent noise (rejection sampling needs fresh draws), so "
                    "the same distribution as AR, not the same text. " + note)
        head = "<b>Lossless with shared noise</b> (same seed, same noise field: token ids equal to AR)"
    else:
        head = "<b>Lossless at temperature 0</b> (token ids equal to AR)"
    return (f'<div class="hsd-badges">{head}:<br>{"".join(badges)}'
            f'{"".join(details)}<div style="font-size:0.85em;opacity:0.8">{_esc(note)}</div></div>')

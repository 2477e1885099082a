"""A live losslessness check: draw the next token many times with AR and with an algorithm, and compare both
histograms with the target's exact next-token distribution.

:func:`check_next_token` (or its streaming form :func:`iter_check`) runs the algorithm's real first round
``n`` times, each from a fresh seed, at the user's settings, and counts the first emitted token; AR the same.
The exact distribution ``p`` of the next token is one target forward. Each histogram's total-variation
distance to ``p`` is compared with the *noise floor*: the ``quantile`` (99%) of the distance an exact sampler
of ``p`` reaches with the same ``n``, by simulation. A lossless algorithm stays within it (99 times in 100);
a lossy one, whose distribution differs from ``p`` by more than the noise, does not. ``lossy=True`` is a
test switch: it accepts every proposal without verification (the first emitted token is the first proposed
one), which the check must catch.

Speed: each draw reruns only the first round, on a session prefilled once (:meth:`Session.rewind
<hsd.session.Session.rewind>`), max_new_tokens = 1 (so SD, TLI and SLRS draft one position; SLEM drafts its
look-ahead and verifies one). Model forwards whose input was seen in an earlier draw are answered from a memo
of that forward's logits (a forward is a pure function of its tokens), so after the first few draws the cost
is the algorithm's own work: sampling, re-tokenization, ψ. The noise floor is simulated in one batch.
"""

from __future__ import annotations

import html
import time
from collections import Counter, OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import plotly.graph_objects as go
import torch

from . import threads
from .algorithms import ALGORITHMS
from .errors import InvalidSettingError
from .figures import _color
from .generate import open_session
from .loading import Pair
from .runner import Runner, Snapshot
from .sampling import Rng
from .verify import token_text
from .picture import visible_token

QUANTILE = 0.99
SIMULATIONS = 1000  # exact samplers simulated for the noise floor
MAX_N = 200_000
MEMO_FLOATS = 2**24  # logits each memo keeps (64 MB of float32), least recently used dropped first
SHOWN = 20  # the most probable tokens the figure shows (then any token a histogram over-draws)


def default_n(algorithm: str) -> int:
    """The default number of draws for ``algorithm``: its :attr:`Algorithm.lossless_draws
    <hsd.algorithms.contract.Algorithm>` (about 15 s for AR plus the algorithm on the embedded pair on 2 CPU cores)."""
    if algorithm not in ALGORITHMS:
        raise InvalidSettingError(f"Unknown algorithm {algorithm!r}: choose one of {', '.join(ALGORITHMS)}.")
    return ALGORITHMS[algorithm].lossless_draws


# ----------------------------------------------------------------------------- forwards answered from a memo

class _MemoRunner:
    """A :class:`~hsd.runner.Runner` whose forwards are answered from a memo of the same forward in an earlier
    draw: same tokens before, same tokens fed, same logits. Its ``ids`` are the tokens the session believes
    the cache holds; the real runner catches up (crops, feeds what it lacks) only on a miss."""

    def __init__(self, runner: Runner):
        self.real, self.model, self.device = runner, runner.model, runner.device
        self.ids: list[int] = list(runner.ids)
        self.forwards, self.seconds = 0, 0.0
        self.memo: OrderedDict[tuple, torch.Tensor] = OrderedDict()
        self.floats, self.hits, self.misses = 0, 0, 0

    def __len__(self) -> int:
        return len(self.ids)

    def _get(self, key: tuple) -> torch.Tensor | None:
        hit = self.memo.get(key)
        if hit is not None:
            self.memo.move_to_end(key)
            self.hits += 1
        return hit

    def _put(self, key: tuple, logits: torch.Tensor) -> None:
        self.misses += 1
        logits = logits.clone()
        self.memo[key] = logits
        self.floats += logits.numel()
        while self.floats > MEMO_FLOATS and len(self.memo) > 1:
            _, old = self.memo.popitem(last=False)
            self.floats -= old.numel()

    def _catch_up(self) -> list[int]:
        """Crop the real cache to what it shares with ``ids``; return the tokens it still lacks."""
        self.real.sync_to(self.ids)
        return self.ids[len(self.real.ids):]

    def forward(self, ids: list[int], keep: int = 1) -> torch.Tensor:
        key = (tuple(self.ids), tuple(ids), keep)
        logits = self._get(key)
        if logits is None:
            start = time.perf_counter()
            logits = self.real.forward(self._catch_up() + list(ids), keep=keep)
            self.seconds += time.perf_counter() - start
            self._put(key, logits)
        self.forwards += 1
        self.ids.extend(ids)
        return logits.clone()

    def crop(self, n: int) -> None:
        del self.ids[n:]

    def sync_to(self, ids: list[int]) -> None:
        n = 0
        for a, b in zip(self.ids, ids):
            if a != b:
                break
            n += 1
        self.crop(n)

    def snapshot(self) -> Snapshot:
        missing = self._catch_up()
        if missing:
            self.real.forward(missing, keep=1)
        return self.real.snapshot()

    def forward_paths(self, snap: Snapshot, paths: list[tuple[int, ...]]) -> torch.Tensor:
        keys = [("paths", snap.ids, tuple(p)) for p in paths]
        rows = [self._get(k) for k in keys]
        todo = [i for i, row in enumerate(rows) if row is None]
        if todo:
            start = time.perf_counter()
            fresh = self.real.forward_paths(snap, [paths[i] for i in todo])
            self.seconds += time.perf_counter() - start
            for i, row in zip(todo, fresh):
                self._put(keys[i], row)
                rows[i] = self.memo.get(keys[i], row)
        self.forwards += 1
        return torch.stack(rows)


# ----------------------------------------------------------------------------- the check

@dataclass
class CheckResult:
    """What :func:`check_next_token` measured. ``ids`` are the tokens a figure needs (the most probable under
    ``p``, then every token either side drew), with their text, exact probability and draw counts; the
    ``*_rest`` fields hold the remaining mass / draws. Distances are over the whole vocabulary."""

    algorithm: str
    n: int
    prompt: str
    settings: dict
    lossy: bool
    ids: list[int]
    text: list[str]
    p: list[float]
    ar: list[int]
    algo: list[int]
    p_rest: float
    ar_rest: int
    algo_rest: int
    tv_ar: float
    tv_algo: float
    floor: float
    quantile: float = QUANTILE
    seconds: float = 0.0
    draws_per_s: float = 0.0  # draws (AR and the algorithm together) per second
    extra: dict = field(default_factory=dict)

    @property
    def ar_within(self) -> bool:
        return self.tv_ar <= self.floor + 1e-9

    @property
    def algo_within(self) -> bool:
        return self.tv_algo <= self.floor + 1e-9

    @property
    def passed(self) -> bool:
        """The algorithm's histogram is as close to ``p`` as an exact sampler's usually is."""
        return self.algo_within


def total_variation(counts: dict[int, int], p: np.ndarray, n: int) -> float:
    """TV between ``n`` draws (``counts``) and the exact distribution ``p`` (a full row)."""
    seen = np.fromiter(counts, dtype=np.int64, count=len(counts))
    freq = np.fromiter(counts.values(), dtype=np.float64, count=len(counts)) / n
    return float(0.5 * (np.abs(freq - p[seen]).sum() + 1.0 - p[seen].sum()))


def noise_floor(p: np.ndarray, n: int, quantile: float = QUANTILE, simulations: int = SIMULATIONS,
                seed: int = 0) -> float:
    """The ``quantile`` of TV(``n`` exact draws from ``p``, ``p``) over ``simulations`` simulated samplers."""
    support = p[p > 0]
    support = support / support.sum()
    rng = np.random.default_rng(seed)
    batch = max(1, 2**22 // len(support))
    tvs = []
    for start in range(0, simulations, batch):
        counts = rng.multinomial(n, support, size=min(batch, simulations - start))
        tvs.append(0.5 * np.abs(counts / n - support).sum(1))
    return float(np.quantile(np.concatenate(tvs), quantile))


def _first_token(rnd, lossy: bool) -> int:
    """The round's first emitted token; with ``lossy``, its first proposal if it has one (no verification)."""
    if lossy and rnd.positions and rnd.positions[0].token >= 0:
        return rnd.positions[0].token
    return rnd.emitted[0].token


def _prepared(pair: Pair, prompt, messages, algorithm: str, settings: dict):
    s = open_session(pair, prompt, messages=messages, algorithm=algorithm, max_new_tokens=1, **settings)
    with torch.inference_mode():
        s.prefill()
    s.target = _MemoRunner(s.target)
    if s.drafter is not None:
        s.drafter.runner = _MemoRunner(s.drafter.runner)
    return s, ALGORITHMS[algorithm]


def iter_check(pair: Pair, algorithm: str, prompt: str | None = None, n: int | None = None, *,
               messages: list[dict] | None = None, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
               lookahead: int = 5, seed: int = 0, drafter_temperature: float | None = None,
               slrs_max_paths: int | None = None, slrs_max_forwards: int | None = None, lossy: bool = False,
               every_s: float = 0.5, draft_threshold: float = 0.0,
               noise: str = "independent") -> Iterator[str | CheckResult]:
    """:func:`check_next_token`, yielding a progress line about every ``every_s`` seconds, then the result."""
    n = default_n(algorithm) if n is None else n
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_N:
        raise InvalidSettingError(f"n must be an integer in 1..{MAX_N} (draws per histogram), got {n!r}.")
    settings = dict(temperature=temperature, top_k=top_k, top_p=top_p, lookahead=lookahead,
                    drafter_temperature=drafter_temperature, slrs_max_paths=slrs_max_paths,
                    slrs_max_forwards=slrs_max_forwards, draft_threshold=draft_threshold, noise=noise)
    if algorithm == "ar":
        raise InvalidSettingError("The check compares an algorithm with AR: choose one other than 'ar'.")
    started = time.perf_counter()
    n_threads = threads.for_pair(pair)  # the app's thread choice (hsd/threads.py), as a generation applies it
    threads.apply(n_threads)
    s, spec = _prepared(pair, prompt, messages, algorithm, settings)
    ar_settings = {k: v for k, v in settings.items() if k not in ("slrs_max_paths", "slrs_max_forwards")}
    a, ar_spec = _prepared(pair, prompt, messages, "ar", ar_settings)
    with torch.inference_mode():
        p = a.target_probs([])[0].double().cpu().numpy()  # what AR's step samples from
    p = p / p.sum()
    ar_counts, algo_counts = Counter(), Counter()
    last = time.perf_counter()
    with torch.inference_mode():
        for i in range(n):
            threads.apply(n_threads)  # a consumer may resume this generator on another thread
            a.rewind(Rng(seed + 2 * i, a.rng.noise))
            ar_counts[ar_spec.step(a).emitted[0].token] += 1
            s.rewind(Rng(seed + 2 * i + 1, s.rng.noise))
            algo_counts[_first_token(spec.step(s), lossy)] += 1
            if time.perf_counter() - last >= every_s:
                last = time.perf_counter()
                rate = 2 * (i + 1) / (last - started)
                yield f"{i + 1}/{n} draws each of AR and {algorithm} ({rate:.0f} draws/s)"
    floor = noise_floor(p, n, seed=seed)
    seconds = time.perf_counter() - started
    vocab = pair.target.vocab
    top = [int(t) for t in np.argsort(-p, kind="stable")[:SHOWN] if p[t] > 0]
    ids = list(dict.fromkeys(top + sorted(set(ar_counts) | set(algo_counts), key=lambda t: (-p[t], t))))
    text = [token_text(vocab.tokens[t] if t < len(vocab.tokens) else None, vocab.special_text.get(t)) for t in ids]
    pv = [float(p[t]) for t in ids]
    ar, algo = [ar_counts.get(t, 0) for t in ids], [algo_counts.get(t, 0) for t in ids]
    yield CheckResult(
        algorithm=algorithm, n=n, prompt=prompt if prompt is not None else str(messages), lossy=lossy,
        settings={**settings, "seed": seed}, ids=ids, text=text, p=pv, ar=ar, algo=algo,
        p_rest=max(0.0, 1.0 - sum(pv)), ar_rest=n - sum(ar), algo_rest=n - sum(algo),
        tv_ar=total_variation(ar_counts, p, n), tv_algo=total_variation(algo_counts, p, n), floor=floor,
        seconds=seconds, draws_per_s=2 * n / seconds,
        extra={"memo_hits": s.target.hits + a.target.hits + (s.drafter.runner.hits if s.drafter else 0),
               "memo_misses": s.target.misses + a.target.misses + (s.drafter.runner.misses if s.drafter else 0)})


def check_next_token(pair: Pair, algorithm: str, prompt: str | None = None, n: int | None = None,
                     **settings) -> CheckResult:
    """Draw the next token ``n`` times with AR and with ``algorithm`` at ``settings`` (temperature, top_k, top_p,
    lookahead, seed, drafter_temperature, draft_threshold, SLRS limits; ``lossy=True`` is the test switch), and
    measure each histogram's distance to the target's exact next-token distribution against an exact sampler's
    noise floor."""
    result = None
    for item in iter_check(pair, algorithm, prompt, n, **settings):
        result = item
    return result


# ----------------------------------------------------------------------------- the picture and its sentence

def _columns(check: CheckResult, shown: int) -> list[int]:
    """Indexes into ``check.ids`` for the figure: the most probable tokens, then the tokens whose frequency
    is furthest from ``p`` on either side (where a lossy algorithm shows), in order of ``p``."""
    order = list(range(len(check.ids)))
    top = order[:shown]
    gap = sorted(order[shown:], key=lambda j: -max(abs(check.ar[j] / check.n - check.p[j]),
                                                   abs(check.algo[j] / check.n - check.p[j])))[:max(3, shown // 4)]
    return sorted(set(top) | set(gap))


def lossless_figure(check: CheckResult, shown: int = SHOWN) -> go.Figure:
    """Both histograms (AR's, the algorithm's) as bars over the exact target distribution (black ticks), the
    most probable tokens as text, every other token in one last column; the distances and the floor in the
    title."""
    cols = _columns(check, shown)
    rest = [j for j in range(len(check.ids)) if j not in cols]

    def column(values, total, scale):
        return [values[j] / scale for j in cols] + [(total + sum(values[j] for j in rest)) / scale]

    labels = [html.escape(visible_token(check.text[j], short=True), quote=False) for j in cols]
    labels.append("<i>all other tokens</i>")
    xs = list(range(len(labels)))
    name = check.algorithm + (" (lossy test variant)" if check.lossy else "")
    fig = go.Figure()
    fig.add_bar(x=xs, y=column(check.ar, check.ar_rest, check.n), name=f"AR ({check.n} draws)",
                marker_color=_color("ar"))
    fig.add_bar(x=xs, y=column(check.algo, check.algo_rest, check.n), name=f"{name} ({check.n} draws)",
                marker_color=_color(check.algorithm))
    fig.add_scatter(x=xs, y=column(check.p, check.p_rest, 1.0), name="exact p (target)", mode="markers",
                    marker=dict(symbol="line-ew", size=34, line=dict(width=3, color="#111827")))
    verdict = "within" if check.algo_within else "ABOVE"
    fig.update_layout(
        barmode="group", template="plotly_white", height=440, font=dict(size=14),
        title=dict(font=dict(size=16), text=(
            f"Next token, {check.n} draws each: TV(AR, p) = {check.tv_ar:.3f}, TV({html.escape(name, quote=False)}, p)"
            f" = {check.tv_algo:.3f}<br><sup>noise floor (an exact sampler stays below it {check.quantile:.0%} of "
            f"the time) = {check.floor:.3f}: {check.algorithm} is {verdict} it</sup>")),
        xaxis=dict(tickmode="array", tickvals=xs, ticktext=labels, tickangle=-35, title="next token",
                   automargin=True, ticklabeloverflow="allow"),
        yaxis=dict(title="share of draws / probability", rangemode="tozero"),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0), margin=dict(l=120, r=20, t=130, b=40))
    return fig


def describe(check: CheckResult) -> str:
    """One sentence saying what the figure shows."""
    name = check.algorithm + (" (with its verification switched off)" if check.lossy else "")
    if check.algo_within:
        verdict = "as close as an exact sampler gets, so the check finds no sign that it changes the distribution"
    else:
        verdict = "further than an exact sampler goes, so its output does not follow the target's distribution"
    text = (f"Over {check.n} draws of the next token each, AR's histogram is {check.tv_ar:.3f} from the target's "
            f"exact distribution p and {name}'s is {check.tv_algo:.3f}, against a noise floor of {check.floor:.3f} "
            f"that an exact sampler stays under {check.quantile:.0%} of the time: {name} is {verdict}.")
    if not check.settings.get("temperature"):
        text += (" At temperature 0 there is nothing to sample: every draw is the target's argmax, so the floor is 0 "
                 "and the histograms are one bar; greedy losslessness is shown token for token by Compare's "
                 "\"same tokens as AR\". Set a temperature above 0 to test the sampling.")
    return text

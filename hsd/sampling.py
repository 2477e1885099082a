"""Sampling settings and the distributions they define (spec §0: ``p`` and ``q``).

``temperature``, ``top_k`` and ``top_p`` mean exactly what they mean in transformers' ``generate``:
we apply its own logits warpers, in its order (temperature, then top-k, then top-p). Temperature 0
is greedy: a one-hot distribution on the argmax, ties broken by the lowest id. A positive temperature
below ``MIN_TEMPERATURE`` is refused: ``logits / temperature`` would overflow float32 to ``inf`` and
the distribution would be NaN. Such a temperature is greedy in all but name: use 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from . import emulation
from .errors import InvalidSettingError
from .noise import sample as noise_sample

MIN_TEMPERATURE = 1e-6  # |logit| / 1e-6 stays finite in float32 for any |logit| < 3e32


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0

    def __post_init__(self):
        t, k, p = self.temperature, self.top_k, self.top_p
        if not _is_number(t) or math.isnan(t) or math.isinf(t) or t < 0:
            raise InvalidSettingError(f"temperature must be a finite number ≥ 0 (0 = greedy), got {t!r}.")
        if 0 < t < MIN_TEMPERATURE:
            raise InvalidSettingError(
                f"temperature {t!r} is too small: logits / temperature would overflow. Use 0 for greedy "
                f"decoding (its limit), or a temperature ≥ {MIN_TEMPERATURE:g}.")
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise InvalidSettingError(f"top_k must be an integer ≥ 0 (0 = no top-k filter), got {k!r}.")
        if not _is_number(p) or math.isnan(p) or not 0 < p <= 1:
            raise InvalidSettingError(f"top_p must be in (0, 1] (1 = no nucleus filter), got {p!r}.")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def warpers(self):
        out = []
        if self.temperature != 1.0:
            out.append(TemperatureLogitsWarper(float(self.temperature)))
        if self.top_k > 0:
            out.append(TopKLogitsWarper(self.top_k))
        if self.top_p < 1.0:
            out.append(TopPLogitsWarper(float(self.top_p)))
        return out

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        """Rows of ``logits`` (``[n, V]``) → the sampling distributions, float32."""
        logits = logits.float()
        if self.greedy:
            out = torch.zeros_like(logits)
            out.scatter_(-1, argmax(logits).unsqueeze(-1), 1.0)
            return out
        if self.temperature != 1.0 or self.top_k or self.top_p < 1.0:
            for warp in self.warpers():
                logits = warp(None, logits)
        return torch.softmax(logits, dim=-1)

    def rows(self, logits: torch.Tensor) -> torch.Tensor | OneHot | Rows:
        """:meth:`probs` as the verification rules read them: greedy rows are a :class:`OneHot` of their argmax
        (nothing is built over the vocabulary for a distribution whose whole mass is on one token), and on a CPU
        sampled rows are :class:`Rows`, each warped into its distribution when a rule first reads it."""
        if self.greedy:
            return OneHot.of_logits(logits.float())
        if logits.device.type == "cpu":
            return Rows(logits, self)
        return self.probs(logits)


def argmax(x: torch.Tensor) -> torch.Tensor:
    """``x.argmax(-1)``: each row's first maximal index, the lowest id winning a tie (a NaN counts as the maximum,
    as in torch). On a CPU numpy's vectorised argmax returns the same index about ten times sooner than torch's."""
    if x.is_cpu and x.dtype == torch.float32:
        return torch.from_numpy(np.asarray(x.detach().numpy().argmax(-1)))
    return x.argmax(-1)


def argmax_id(row: torch.Tensor) -> int:
    """``int(argmax(row))`` for one row ``[V]``, without a tensor in between: the drafting loop and verification
    take one per position."""
    if row.is_cpu and row.dtype == torch.float32:
        return int(row.detach().numpy().argmax())
    return int(row.argmax())


class OneHot:
    """Distributions that put all their mass on one token each (greedy decoding's, spec §0), held as those tokens'
    ids: rows ``[len(ids), size]`` that are never built unless a picture asks for one (:func:`row`). ``p[i]`` is
    row ``i`` as a one-row ``OneHot``; :func:`probs_at`, :func:`row` and :func:`draw` read a ``OneHot`` and a
    tensor of probabilities alike, with the same values.

    :meth:`of_logits` holds a forward's logits instead, and on a CPU searches a row for its argmax only when a rule
    first reads that row (:meth:`id`): verification stops at the first rejected position (spec §1 and §2), so the
    rows after it are never read, and each is a pass over the whole vocabulary. On an accelerator every row's
    argmax is taken at once, in one transfer to the host."""

    __slots__ = ("_ids", "_logits", "size", "device")

    def __init__(self, ids, size: int, device: torch.device):
        self._ids: list[int | None] = list(ids)
        self._logits: torch.Tensor | None = None
        self.size = size  # the vocabulary's
        self.device = device

    @classmethod
    def of_logits(cls, logits: torch.Tensor) -> OneHot:
        """The argmax of each row of ``logits`` (``[n, V]``, float32), searched when read."""
        if logits.device.type != "cpu":
            return cls(argmax(logits).tolist(), logits.shape[-1], logits.device)
        out = cls([None] * logits.shape[0], logits.shape[-1], logits.device)
        out._logits = logits
        return out

    def id(self, i: int) -> int:
        """Row ``i``'s token."""
        t = self._ids[i]
        if t is None:
            t = self._ids[i] = argmax_id(self._logits[i])
        return t

    @property
    def ids(self) -> tuple[int, ...]:
        """Every row's token."""
        return tuple(self.id(i) for i in range(len(self._ids)))

    def __len__(self) -> int:
        return len(self._ids)

    def __getitem__(self, i: int) -> OneHot:
        return OneHot((self.id(i),), self.size, self.device)

    def at(self, tokens: list[int]) -> torch.Tensor:
        """Row ``i``'s probability of ``tokens[i]``: 1 or 0 (rows past ``len(tokens)`` are not read)."""
        return torch.tensor([float(self.id(i) == t) for i, t in enumerate(tokens)], device=self.device)

    def row(self, i: int) -> torch.Tensor:
        out = torch.zeros(self.size, device=self.device)
        out[self.id(i)] = 1.0
        return out


class Rows:
    """A forward's sampled rows ``[n, V]``, each turned into its distribution (:meth:`Sampling.probs`: warpers, then
    a softmax, one pass or more over the vocabulary) only when a rule first reads it, on a CPU. Verification stops
    at the first rejected position (spec §1-§4), so the rows after it are never built; each row has the values the
    same row of ``Sampling.probs`` of all of them would have (every operation works row by row). ``p[i]`` is row
    ``i`` and ``p[i, t]`` its entry ``t``; :func:`probs_at`, :func:`row` and :func:`draws` read ``Rows`` and a
    tensor of probabilities alike."""

    __slots__ = ("_logits", "_rows", "sampling", "shape", "device")

    def __init__(self, logits: torch.Tensor, sampling: Sampling):
        self._logits = logits
        self._rows: list[torch.Tensor | None] = [None] * logits.shape[0]
        self.sampling = sampling
        self.shape = logits.shape
        self.device = logits.device

    @classmethod
    def built(cls, rows: list[torch.Tensor], sampling: Sampling) -> Rows:
        """Rows already built (``[V]`` each, at least one): a drafter's, each warped when its token was drawn, held
        as they are instead of copied into one ``[n, V]`` tensor (0.35 ms for 5 rows over 152k entries)."""
        out = cls.__new__(cls)
        out._logits, out._rows, out.sampling = None, list(rows), sampling
        out.shape, out.device = torch.Size((len(rows), rows[0].shape[-1])), rows[0].device
        return out

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index) -> torch.Tensor:
        """``p[i]`` (a row) and ``p[i, t]``, as a tensor of the rows would give them."""
        if isinstance(index, tuple):
            return self.row(index[0])[index[1:]]
        return self.row(index)

    def row(self, i: int) -> torch.Tensor:
        r = self._rows[i]
        if r is None:
            r = self._rows[i] = self.sampling.probs(self._logits[i:i + 1])[0]
        return r

    def at(self, tokens: list[int]) -> torch.Tensor:
        """Row ``i``'s probability of ``tokens[i]`` (rows past ``len(tokens)`` are not built)."""
        if not tokens:
            return torch.zeros(0, device=self.device)
        return torch.stack([self.row(i)[t] for i, t in enumerate(tokens)])


def probs_at(p, tokens: list[int]) -> torch.Tensor:
    """``p[i, tokens[i]]`` for each ``i < len(tokens)`` (float32), for ``p`` a ``[n, V]`` tensor of probabilities or
    rows with an ``at`` of their own (:class:`OneHot`, TLI's ``q'`` in target ids)."""
    if not isinstance(p, torch.Tensor):
        return p.at(tokens)
    idx = torch.tensor(tokens, dtype=torch.long, device=p.device)
    return p[torch.arange(len(tokens), device=p.device), idx]


def probs_list(p, tokens: list[int]) -> list[float]:
    """:func:`probs_at` as a list (for the trace); a :class:`OneHot`'s without a tensor in between."""
    if isinstance(p, OneHot):
        return [float(p.id(i) == t) for i, t in enumerate(tokens)]
    if isinstance(p, Rows):
        return [float(p.row(i)[t]) for i, t in enumerate(tokens)]
    return probs_at(p, tokens).tolist()


def row(p, i: int) -> torch.Tensor:
    """Row ``i`` of ``p`` over the whole vocabulary (built here for rows that are not a tensor)."""
    return p[i] if isinstance(p, torch.Tensor) else p.row(i)


class Rng:
    """The per-call source of randomness: one ``torch.Generator`` per device, seeded from ``seed``.

    With ``noise="shared"`` the target's and the drafter's token draws in AR and SLEM come instead from one
    field of noise keyed by where a token starts in the generated text (:mod:`hsd.noise`); the
    generators still serve every other draw.
    """

    def __init__(self, seed: int, noise: str = "independent"):
        self.seed = int(seed)
        self.noise = noise
        self._generators: dict[str, torch.Generator] = {}

    @property
    def shared(self) -> bool:
        return self.noise == "shared"

    def draw_at(self, probs: torch.Tensor, vocab, offset: int, empties: int) -> int:
        """The shared field's draw from one row ``probs`` at ``(offset, empties)`` (:func:`hsd.noise.sample`)."""
        return noise_sample(probs, vocab, self.seed, offset, empties)

    def generator(self, device) -> torch.Generator:
        key = str(torch.device(device))
        if key not in self._generators:
            # a process that only emulates CUDA (ZeroGPU's main process, the rehearsal's GPU worker: hsd.emulation)
            # keeps a cuda tensor's data on the host, where its draws are made
            g = torch.Generator(device="cpu" if key.startswith("cuda") and emulation.active() else key)
            g.manual_seed(self.seed + len(self._generators))
            self._generators[key] = g
        return self._generators[key]

    def sample(self, probs: torch.Tensor) -> torch.Tensor:
        """One draw per row of ``probs`` (``[n, V]`` → ``[n]`` long, rows need not sum to 1), by inverse CDF: one
        uniform number per row against the row's cumulative sum (:func:`inverse_cdf`), about one pass over the
        vocabulary (``torch.multinomial`` draws an exponential number per entry: about 20 times the time over 152k
        entries). An entry of probability 0 is never drawn: its cumulative sum equals its predecessor's."""
        return inverse_cdf(probs, self.uniform_draws(probs.shape[0], probs.device))

    def draw(self, row: torch.Tensor) -> int:
        """:meth:`sample` of the one row ``row`` (``[V]``), as an int: the same uniform number and the same token,
        without the tensors in between (a drafted token costs a draw, and the drafting loop waits for each)."""
        return draw_for(row, self.uniform_draws(1, row.device))

    def uniform_draws(self, n: int, device) -> torch.Tensor:
        """The ``[n, 1]`` float64 uniform numbers :meth:`sample` draws for ``n`` rows, in one call."""
        return torch.rand((n, 1), dtype=torch.float64, generator=self.generator(device), device=device)

    def uniform(self, n: int, device) -> torch.Tensor:
        return torch.rand(n, generator=self.generator(device), device=device)


BLOCK = 1024  # entries per block of the two-level inverse CDF on a CPU


def inverse_cdf(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Row ``i``'s draw for the uniform number ``u[i]`` (``[n, V]``, ``[n, 1]`` → ``[n]`` long), rows of
    non-negative weights (they need not sum to 1); an entry of weight 0 is never drawn.

    On an accelerator, and for rows of at most ``BLOCK`` entries: the first entry whose float64 cumulative sum
    exceeds ``u[i]`` times the row's total. A longer float32 row on a CPU is drawn in two levels
    (:func:`_inverse_cdf_blocked`): a block by its total, then an entry of that block, which reads the row once
    in a vectorised sum instead of a sequential float64 cumulative sum over all of it (0.16 ms over 151,936
    entries on one core), in a few numpy calls instead of several torch operations (half the time at 4k and 32k
    entries, warm or right after a forward)."""
    if _blocked(probs):
        rows, us = probs.detach().reshape(-1, probs.shape[-1]), u.reshape(-1).tolist()
        return torch.tensor([_inverse_cdf_blocked(rows[i], us[i]) for i in range(len(us))]).reshape(probs.shape[:-1])
    cdf = probs.to(torch.float64).cumsum(-1)
    total = cdf[..., -1:]
    idx = torch.searchsorted(cdf, u * total, right=True)
    past = idx >= probs.shape[-1]  # u * total rounded up to total (odds about 2**-53): the last possible entry
    if bool(past.any()):
        last = probs.shape[-1] - 1 - (probs > 0).flip(-1).to(torch.int8).argmax(-1, keepdim=True)
        idx = torch.where(past, last, idx)
    return idx.squeeze(-1)


def draw_for(row: torch.Tensor, u: torch.Tensor) -> int:
    """:func:`inverse_cdf` of the one row ``row`` (``[V]``) for the uniform number ``u`` (one element), as an int."""
    if _blocked(row):
        return _inverse_cdf_blocked(row.detach(), u.item())
    return int(inverse_cdf(row.unsqueeze(0), u.reshape(1, 1))[0])


def _blocked(probs: torch.Tensor) -> bool:
    """Whether :func:`inverse_cdf` draws from ``probs``'s rows in two levels."""
    return probs.device.type == "cpu" and probs.dtype == torch.float32 and probs.shape[-1] > BLOCK


_STARTS: dict[int, np.ndarray] = {}  # vocabulary size -> where each block starts


def _block_starts(n: int) -> np.ndarray:
    starts = _STARTS.get(n)
    if starts is None:
        starts = _STARTS[n] = np.arange(0, n, BLOCK)
    return starts


def _last_positive(x: np.ndarray) -> int:
    """The index of the last entry of ``x`` above 0 (the last one when none is)."""
    nz = np.flatnonzero(x > 0)
    return int(nz[-1]) if nz.size else len(x) - 1


def _inverse_cdf_blocked(row: torch.Tensor, u: float) -> int:
    """One draw from a float32 row ``[V]`` on a CPU for the uniform number ``u``, in two levels.

    The row is cut into blocks of ``BLOCK`` entries. Block ``b`` is chosen with probability ``S_b / sum(S)``,
    ``S_b`` its float32 total (numpy's pairwise sum, all blocks in one call: relative error at most a few
    1e-7, the rounding the float32 row itself carries), by ``u`` against the float64 cumulative sum of the
    totals; then entry ``j`` of the block with probability ``w_j / C_b``, ``C_b`` the block's float64 total, by
    where ``u`` fell inside the block's share, against the block's float64 cumulative sum. A block or an entry of
    weight 0 has a share of width 0, which ``u`` never lands in (the comparisons are "first cumulative sum
    above"), so neither is ever drawn."""
    w = row.numpy()
    # few calls: after a forward has streamed the weights through the caches, each call costs 10-20 us
    totals = np.add.reduceat(w, _block_starts(len(w)))
    cum = totals.cumsum(dtype=np.float64)
    if not cum[-1] > 0:  # nothing to draw (an all-zero or NaN row): the last entry, as the one-level search gives
        return len(w) - 1
    x = u * cum[-1]
    b = int(cum.searchsorted(x, side="right"))
    if b >= len(cum):  # x rounded up to the total: the last block with weight
        b = _last_positive(totals)
    lo = cum[b - 1] if b else 0.0
    start = b * BLOCK
    block = w[start:start + BLOCK]
    inner = block.cumsum(dtype=np.float64)
    span = cum[b] - lo  # > 0 unless the block's total is below float64's resolution of the sum
    y = (x - lo) / span * inner[-1] if span > 0 else inner[-1]
    j = int(inner.searchsorted(y, side="right"))
    if j >= len(block):  # y rounded up to the block's total: its last entry with weight
        j = _last_positive(block)
    return start + j


def draws(p, sampling: Sampling, rng: Rng) -> Callable[[int], int]:
    """Row ``i``'s :func:`pick`, as a function of ``i`` that builds and reads a row only when asked. The uniform
    numbers of every row are drawn at once, before any is read, so the generator moves as :func:`draw` moves it
    and each row's token is the one :func:`draw` gives it."""
    if isinstance(p, OneHot):
        return p.id
    if sampling.greedy:
        return lambda i: argmax_id(row(p, i))
    u = rng.uniform_draws(len(p), p.device)
    return lambda i: draw_for(row(p, i), u[i])


def pick(probs: torch.Tensor, sampling: Sampling, rng: Rng) -> torch.Tensor:
    """Sample each row: argmax when greedy (no randomness consumed), else a draw by :meth:`Rng.sample`."""
    if sampling.greedy:
        return argmax(probs)
    return rng.sample(probs)


def pick_one(probs: torch.Tensor, sampling: Sampling, rng: Rng) -> int:
    """:func:`pick` of the one row ``probs`` (``[V]``), as an int."""
    return argmax_id(probs) if sampling.greedy else rng.draw(probs)


def draw(p, sampling: Sampling, rng: Rng) -> list[int]:
    """:func:`pick` of every row of ``p``; a :class:`OneHot`'s are its ids (what the argmax of its rows is)."""
    if isinstance(p, OneHot):
        return list(p.ids)
    if isinstance(p, Rows):
        p = torch.stack([p.row(i) for i in range(len(p))])
    return pick(p, sampling, rng).tolist()


def pick_at(probs: torch.Tensor | OneHot, sampling: Sampling, rng: Rng, vocab, offset: int, empties: int) -> int:
    """One token from the row ``probs``: the shared noise field's draw at ``(offset, empties)`` when ``rng``
    shares noise (:mod:`hsd.noise`), else :func:`pick`'s."""
    if isinstance(probs, OneHot):
        return probs.id(0)
    if sampling.greedy or not rng.shared:
        return pick_one(probs, sampling, rng)
    return rng.draw_at(probs, vocab, offset, empties)

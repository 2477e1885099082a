"""Shared noise: the target's and the drafter's samples drawn from one field of noise over the text.

SLEM accepts a proposed token when the target's own sample equals it. With independent randomness the
chance is ``Σ_t p(t)·q(t)``, which cannot exceed ``max p``, even for a drafter that is the target. With
shared noise both models draw from one seeded field, indexed by *byte positions of the generated text*,
so where the drafter and the target agree on what the next bytes are likely to be they tend to write the
same bytes, whatever their tokenizers. docs/coupling.md has the proof and the measurements.

**A draw.** A token starting at byte ``c`` of the generated text (after ``e`` emitted tokens without
bytes) is drawn from ``p`` by walking the vocabulary's byte trie, one byte position ``j = c, c+1, ...`` at
a time, each decision from the field at ``(j, e)``:

1. at ``c``: a token without bytes (EOS, specials) or one with bytes, by the Gumbel-max trick (``ROOT``);
2. at every ``j``: the next byte, among the children of the current prefix, by Gumbel-max over their
   masses (``BYTE(j, e, byte)``: 256 Gumbels per position, the same for every vocabulary);
3. after a byte, at ``j + 1``: stop here (the token is the prefix) or go on, by one uniform (``STOP``);
   tokens with the same bytes are told apart by Gumbel-max over their ids (``DUP``).

Each step chooses with exactly the conditional probability of the subtree below it, so the walk draws
exactly from ``p`` when every noise value it reads is fresh. The drafter draws its tokens the same way
from its own trie. A drafter whose token ends at ``j`` where the target's goes on reads the same
``BYTE(j)`` for the next byte as the target: the coupling is of bytes, not of tokens.

**Lossless, pathwise.** Every emitted token is the target's own walk at the ``(c, e)`` where it starts,
so the emitted text is exactly what AR with the same field emits. A target walk from ``c`` reads
``ROOT(c)``, ``BYTE(c..c'-1)``, ``STOP(c+1..c')`` and ``DUP(c')`` at its ``e``, where ``c'`` is where it
ends; the next walk starts at ``c'`` (or at ``c`` with ``e + 1`` after a token without bytes) and reads
``ROOT(c')``, ``BYTE(c'..)``, ``STOP(c'+1..)``: no value any earlier target walk read. So every draw of
the target is an exact sample of ``p`` given everything before it, and what the drafter read changes
only how many proposals are accepted. That needs a verification that keeps the target's own sample
whatever was proposed: SLEM's exact match, and AR (no proposal). Rejection sampling (SD, TLI, SLRS)
needs each draft drawn afresh given the past, which a field read again in the next round is not:
:func:`hsd.generate.check_shared_noise` refuses every algorithm that does not declare
:attr:`Algorithm.shared_noise <hsd.algorithms.contract.Algorithm>`.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np
import torch

from .errors import InvalidSettingError

NOISES = ("independent", "shared")

_M64 = (1 << 64) - 1
_C1, _C2, _C3 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
ROOT, BYTE, STOP, DUP = 1, 2, 3, 4  # the field's four kinds of value, never confused with one another
_EOS_KEY = 1 << 62  # the first EOS of every vocabulary reads the same ROOT noise


def check_noise(noise: str) -> str:
    """``noise`` is one of :data:`NOISES`; whether an algorithm may share it is its own declaration
    (``Algorithm.shared_noise``, checked by :func:`hsd.generate.check_shared_noise`)."""
    if noise not in NOISES:
        raise InvalidSettingError(f"noise must be one of {', '.join(NOISES)}, got {noise!r}.")
    return noise


def _mix_int(x: int) -> int:
    """splitmix64's finaliser on a Python int (mod 2**64)."""
    x &= _M64
    x = ((x ^ (x >> 30)) * _C2) & _M64
    x = ((x ^ (x >> 27)) * _C3) & _M64
    return x ^ (x >> 31)


_U30, _U27, _U31, _U11 = (np.uint64(n) for n in (30, 27, 31, 11))
_UC1, _UC2, _UC3 = (np.uint64(n) for n in (_C1, _C2, _C3))


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on a uint64 array (numpy's array arithmetic on uint64 wraps mod 2**64, silently)."""
    x = (x ^ (x >> _U30)) * _UC2
    x = (x ^ (x >> _U27)) * _UC3
    return x ^ (x >> _U31)


def _site(seed: int, kind: int, j: int, e: int) -> int:
    """The 64-bit address of the field's values of ``kind`` at byte position ``j`` after ``e`` empties."""
    return _mix_int(_mix_int(_mix_int(_mix_int((seed & _M64) ^ _C1) ^ kind) ^ j) ^ ((e * _C2) & _M64))


def _uniforms(site: int, keys: np.ndarray) -> np.ndarray:
    """One uniform in (0, 1), never 0 or 1, per key at ``site`` (the same values as :func:`_uniform`)."""
    if len(keys) <= 24:  # numpy's per-call overhead exceeds the work
        return np.array([_uniform(site, k) for k in keys.tolist()])
    x = _mix(_mix(keys ^ np.uint64(site)) + _UC1)
    return ((x >> _U11).astype(np.float64) + 0.5) * (1.0 / (1 << 53))


def _uniform(site: int, key: int) -> float:
    """:func:`_uniforms` of one key, in Python integers."""
    x = _mix_int((_mix_int(key ^ site) + _C1) & _M64)
    return ((x >> 11) + 0.5) * (1.0 / (1 << 53))


def _gumbel_argmax(mass: np.ndarray, site: int, keys: np.ndarray) -> int:
    """Index ``i`` with probability ``mass[i] / Σ mass`` (the Gumbel-max trick). Only the options with mass read
    the field; a single one needs no noise."""
    live = mass.nonzero()[0]
    if len(live) == 1:
        return int(live[0])
    return int(live[(np.log(mass[live]) - np.log(-np.log(_uniforms(site, keys[live])))).argmax()])



@dataclass(frozen=True)
class Trie:
    """A vocabulary's byte strings sorted, so that the tokens under every prefix are one contiguous range of rows."""

    order: np.ndarray  # token ids with bytes, sorted by their bytes
    lengths: np.ndarray  # their lengths, in that order
    table: np.ndarray  # [n, L] uint8: their bytes, zero-padded
    byteless: np.ndarray  # token ids without bytes (specials, undetermined)
    root_keys: np.ndarray  # their ROOT keys (the first EOS: the key every vocabulary's first EOS has), then "bytes"
    nodes: dict = field(default_factory=dict, compare=False)  # (lo, depth) -> its stop rows and children, lazily

    @classmethod
    def of(cls, tokens: list[bytes | None], eos_ids=()) -> "Trie":
        with_bytes = sorted((b, i) for i, b in enumerate(tokens) if b)
        n, width = len(with_bytes), max((len(b) for b, _ in with_bytes), default=1)
        table = np.zeros((n, width), dtype=np.uint8)
        for r, (b, _) in enumerate(with_bytes):
            table[r, :len(b)] = np.frombuffer(b, dtype=np.uint8)
        byteless = np.array([i for i, b in enumerate(tokens) if not b], dtype=np.int64)
        eos = eos_ids[0] if eos_ids else None
        keys = np.array([_EOS_KEY if i == eos else i for i in byteless.tolist()] + [_EOS_KEY + 1], dtype=np.uint64)
        return cls(np.array([i for _, i in with_bytes], dtype=np.int64),
                   np.array([len(b) for b, _ in with_bytes], dtype=np.int64), table, byteless, keys)

    def node(self, lo: int, hi: int, depth: int) -> tuple[int, np.ndarray, np.ndarray]:
        """The prefix spelled by rows ``lo..hi`` at ``depth``: the end of its own tokens' rows (they sort first),
        its children's bytes and their row boundaries (``len(bytes) + 1``)."""
        hit = self.nodes.get((lo, depth))
        if hit is None:
            ends = lo + int(np.count_nonzero(self.lengths[lo:hi] == depth))
            col = self.table[ends:hi, depth] if ends < hi else np.zeros(0, dtype=np.uint8)
            starts = np.flatnonzero(np.diff(col)) + 1 if len(col) else np.zeros(0, dtype=np.int64)
            bounds = np.concatenate([[0], starts, [len(col)]]).astype(np.int64) + ends
            kids = col[bounds[:-1] - ends].astype(np.uint64) if len(col) else np.zeros(0, dtype=np.uint64)
            hit = self.nodes[(lo, depth)] = (ends, kids, bounds)
        return hit

    def draw(self, p: np.ndarray, seed: int, c: int, e: int) -> int:
        """The token that starts at byte ``c`` after ``e`` empties, drawn from ``p`` (``[V]`` float64) by the
        field (module docstring): an exact sample of ``p`` when none of the values it reads was read before."""
        n_ids = len(p)
        if n_ids < len(self.order) + len(self.byteless):  # a tokenizer may have more ids than the model has logits
            p = np.concatenate([p, np.zeros(len(self.order) + len(self.byteless) - n_ids)])
        cum = np.concatenate([[0.0], np.cumsum(p[self.order])])  # the mass of rows lo..hi is cum[hi] - cum[lo]
        # 1. without bytes, or with: Gumbel-max over the byteless tokens and one "with bytes" option
        pick = _gumbel_argmax(np.append(p[self.byteless], cum[-1]), _site(seed, ROOT, c, e), self.root_keys)
        if pick < len(self.byteless):
            return int(self.byteless[pick])
        lo, hi, depth, j = 0, len(self.order), 0, c
        while True:
            ends, kids, bounds = self.node(lo, hi, depth)
            if depth:  # 3. stop at this prefix (its own tokens), or go on
                here, total = cum[ends] - cum[lo], cum[hi] - cum[lo]
                if here > 0 and (here >= total or _uniform(_site(seed, STOP, j, e), 0) * total < here):
                    if ends - lo == 1:
                        return int(self.order[lo])
                    dup = _gumbel_argmax(np.diff(cum[lo:ends + 1]), _site(seed, DUP, j, e),
                                         self.order[lo:ends].astype(np.uint64))
                    return int(self.order[lo + dup])
            # 2. the byte at j among the children
            mass = cum[bounds[1:]] - cum[bounds[:-1]]
            k = _gumbel_argmax(mass, _site(seed, BYTE, j, e), kids)
            lo, hi, depth, j = int(bounds[k]), int(bounds[k + 1]), depth + 1, j + 1


_CACHE: dict[int, tuple[weakref.ref, Trie]] = {}


def trie(vocab) -> Trie:
    """The :class:`Trie` of ``vocab`` (a :class:`hsd.vocab.Vocab`), built once per vocabulary object."""
    hit = _CACHE.get(id(vocab))
    if hit is not None and hit[0]() is vocab:
        return hit[1]
    t = Trie.of(vocab.tokens, vocab.eos_ids)
    _CACHE[id(vocab)] = (weakref.ref(vocab), t)
    return t


def sample(probs: torch.Tensor, vocab, seed: int, offset: int, empties: int) -> int:
    """The field's draw from one distribution row ``probs`` (``[V]``) of a model with vocabulary ``vocab``, for
    the token that starts at generated byte ``offset`` after ``empties`` tokens without bytes."""
    p = probs.detach().to("cpu").double().numpy()  # to the CPU first: MPS has no float64
    return trie(vocab).draw(p, seed, offset, empties)

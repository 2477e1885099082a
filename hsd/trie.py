"""Byte tries of a vocabulary, built once per vocabulary: what SLRS needs to compute ``f`` and ``ψ``.

* :class:`TargetTrie` (spec §4 step 1): every prefix of a target token's bytes is a node. A draft
  string ``u`` is *open* (a proper prefix of some target token) iff its node exists and has children;
  ``best[node]`` is the longest target token that is a prefix of the node's string, which is
  ``f(u)`` when the string stops there.
* :class:`DrafterTrie`: the drafter's token bytes, numbered in depth-first order so that the tokens
  under any node are one contiguous range of ``order``. A prefix sum of the drafter distribution
  in that order gives the mass of a whole subtree (every drafter token that starts with some bytes)
  in two lookups, which is how ψ sums the drafter tokens that overshoot the target trie.

Only ids below the model's ``n_logits`` take part: the others can never be sampled or emitted.
"""

from __future__ import annotations

import weakref

import numpy as np
import torch

from .vocab import Vocab

BOTTOM = -1  # ⊥: no target token is a prefix of the draft string


class TargetTrie:
    def __init__(self, vocab: Vocab, n_logits: int):
        self.children: list[dict[int, int]] = [{}]
        self.byte: list[int] = [-1]  # the last byte of the node's string (none for the root)
        self.token: list[int] = [BOTTOM]  # canonical (lowest) id whose bytes end at this node
        self.node: dict[int, int] = {}  # canonical token id -> its node
        for tid in range(min(n_logits, len(vocab))):
            b = vocab.tokens[tid]
            if not b:
                continue
            node = 0
            for byte in b:
                nxt = self.children[node].get(byte)
                if nxt is None:
                    nxt = len(self.children)
                    self.children[node][byte] = nxt
                    self.children.append({})
                    self.byte.append(byte)
                    self.token.append(BOTTOM)
                node = nxt
            if self.token[node] == BOTTOM:
                self.token[node] = tid
                self.node[tid] = node
        self.best = [BOTTOM] * len(self.token)
        self.parent = [0] * len(self.token)
        stack = [0]
        while stack:  # parents before children
            node = stack.pop()
            for child in self.children[node].values():
                self.parent[child] = node
                self.best[child] = self.token[child] if self.token[child] != BOTTOM else self.best[node]
                stack.append(child)
        self.max_depth = max((len(b) for b in vocab.tokens[:n_logits] if b), default=0)
        eos = [e for e in vocab.eos_ids if e < n_logits]
        self.eos = eos[0] if eos else BOTTOM

    def path_to(self, node: int) -> set[int]:
        """The node and all its ancestors (the prefixes of its string)."""
        out = {node}
        while node:
            node = self.parent[node]
            out.add(node)
        return out

    def along(self, node: int) -> dict[int, int]:
        """Each proper ancestor of ``node`` -> the next byte of ``node``'s string after it."""
        out = {}
        while node:
            out[self.parent[node]] = self.byte[node]
            node = self.parent[node]
        return out


class DrafterTrie:
    def __init__(self, vocab: Vocab, n_logits: int):
        n = min(n_logits, len(vocab))
        children: list[dict[int, int]] = [{}]
        here: list[list[int]] = [[]]
        for tid in range(n):
            b = vocab.tokens[tid]
            if not b:
                continue
            node = 0
            for byte in b:
                nxt = children[node].get(byte)
                if nxt is None:
                    nxt = len(children)
                    children[node][byte] = nxt
                    children.append({})
                    here.append([])
                node = nxt
            here[node].append(tid)
        self.children = [dict(sorted(c.items())) for c in children]
        self.here = here
        self.lo = [0] * len(children)  # order[lo:hi] = tokens of the subtree; the node's own come first
        self.hi = [0] * len(children)
        order: list[int] = []
        stack = [(0, False)]
        while stack:
            node, done = stack.pop()
            if done:
                self.hi[node] = len(order)
                continue
            self.lo[node] = len(order)
            order.extend(here[node])
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(list(self.children[node].values())))
        self.order = torch.tensor(order, dtype=torch.long)
        self.order_ids = self.order.numpy()
        self._outside: dict[int, np.ndarray] = {}
        self.bytes = [vocab.tokens[t] if t < n else None for t in range(n)]
        eos = set(e for e in vocab.eos_ids if e < n)
        stops = [t for t in range(n) if not vocab.tokens[t]]  # specials (and empty tokens) end the string
        self.eos = frozenset(eos)
        self.eos_ids = torch.tensor(sorted(eos), dtype=torch.long)
        self.other_stop_ids = torch.tensor([t for t in stops if t not in eos], dtype=torch.long)

    def outside(self, size: int) -> np.ndarray:
        """The ids of a row of ``size`` entries that no node holds (special and padding ids), ascending."""
        if size not in self._outside:
            held = np.zeros(max(size, len(self.bytes)), dtype=bool)
            held[self.order_ids] = True
            self._outside[size] = np.flatnonzero(~held[:size])
        return self._outside[size]


_TRIES: dict[tuple, object] = {}


def _cached(kind, vocab: Vocab, n_logits: int):
    key = (kind.__name__, id(vocab), n_logits)
    if key not in _TRIES:
        _TRIES[key] = kind(vocab, n_logits)
        weakref.finalize(vocab, _TRIES.pop, key, None)
    return _TRIES[key]


def target_trie(vocab: Vocab, n_logits: int) -> TargetTrie:
    """The target trie of ``vocab``, built on first use and kept while the vocabulary lives."""
    return _cached(TargetTrie, vocab, n_logits)


def drafter_trie(vocab: Vocab, n_logits: int) -> DrafterTrie:
    return _cached(DrafterTrie, vocab, n_logits)

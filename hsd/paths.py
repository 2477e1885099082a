"""How many drafter paths the exact ψ(t) of SLRS needs, from the two vocabularies alone (docs/slrs.md).

:class:`~hsd.psi.Enumerator` expands, for ψ(t), every drafter token sequence whose string (after the
``lag`` bytes) is still *open* (a proper prefix of some target token) and can still end with
``f = t``: the string is a prefix of ``lag ⊕ b(t)``, or extends it with no longer target token in
between. Which of those sequences exist depends only on the vocabularies; the drafter's
probabilities can only remove some (a zero probability under top-k, top-p or greedy). So

    paths(t) = Σ over open states σ that can still lead to t of N(σ),

where ``N(σ)`` is the number of ways to spell σ's string ``lag ⊕ w`` as a sequence of drafter tokens
(two drafter ids with the same bytes are two ways). ``N`` does not depend on ``t``: one dynamic
program over the target trie gives it for every node, and prefix sums along the trie give
``paths(t)`` for every target token at once. It is an upper bound on what the enumeration expands
at any drafter state, and equal to it when the drafter samples from full support.

Counts are exact Python integers (they grow exponentially with token length). They are cached per
(target vocabulary, drafter vocabulary, lag); ``lag`` is at most an incomplete UTF-8 character.
"""

from __future__ import annotations

import weakref

from .trie import DrafterTrie, TargetTrie, drafter_trie, target_trie
from .vocab import Vocab


class PathCounts:
    """``paths[t]``: drafter paths the exact ψ(t) expands (upper bound), for every canonical target id and
    the target's EOS; ``ways[node]``: N of each target-trie node's string after ``lag``."""

    def __init__(self, target: TargetTrie, drafter: DrafterTrie, lag: bytes = b""):
        self.lag = lag
        n_nodes = len(target.children)
        lag_ways = [0] * (len(lag) + 1)  # lag_ways[i]: spellings of lag[:i]; lag_ways[len(lag)] is the root's
        ways = [0] * n_nodes
        lag_ways[0] = 1

        def spread(start_ways: int, i: int | None, node: int | None) -> None:
            """Add ``start_ways`` to every state one drafter token after (lag position ``i`` | trie ``node``)."""
            stack = [(0, i, node)]
            while stack:
                dnode, li, tn = stack.pop()
                for byte, dchild in drafter.children[dnode].items():
                    if li is not None:  # still inside lag
                        if byte != lag[li]:
                            continue
                        nli, ntn = (li + 1, None) if li + 1 < len(lag) else (None, 0)
                    else:
                        ntn = target.children[tn].get(byte)
                        if ntn is None:
                            continue
                        nli = None
                    here = len(drafter.here[dchild])
                    if here:
                        if nli is not None:
                            lag_ways[nli] += start_ways * here
                        else:
                            ways[ntn] += start_ways * here
                    stack.append((dchild, nli, ntn))

        for i in range(len(lag)):
            if lag_ways[i]:
                spread(lag_ways[i], i, None)
        if not lag:
            ways[0] = 1
        order = [0]  # breadth first: a node's ways are final before they spread
        for node in order:
            if ways[node] and target.children[node]:
                spread(ways[node], None, node)
            order.extend(target.children[node].values())
        self.ways = ways
        lag_total = sum(lag_ways[:len(lag)])
        # Open states on the way to each node (prefix sums), then the extensions with best == t.
        along = [0] * n_nodes
        for node in order:
            own = ways[node] if target.children[node] else 0
            along[node] = (along[target.parent[node]] if node else 0) + own
        extension: dict[int, int] = {}
        for node in order:
            t = target.best[node]
            if node and t >= 0 and target.token[node] != t and target.children[node]:
                extension[t] = extension.get(t, 0) + ways[node]
        self.paths: dict[int, int] = {t: lag_total + along[n] + extension.get(t, 0) for t, n in target.node.items()}
        if target.eos >= 0:
            self.paths[target.eos] = lag_total + ways[0]

    def __getitem__(self, t: int) -> int:
        """Paths for ψ(t); 0 for ids ``f`` never returns (specials, duplicate spellings): ψ is 0 there."""
        return self.paths.get(t, 0)


_CACHE: dict[tuple, PathCounts] = {}


def path_counts(target: Vocab, target_logits: int, drafter: Vocab, drafter_logits: int, lag: bytes = b"") -> PathCounts:
    """The path counts of a pair for one ``lag``, computed on first use and kept while both vocabularies live."""
    key = (id(target), target_logits, id(drafter), drafter_logits, lag)
    if key not in _CACHE:
        _CACHE[key] = PathCounts(target_trie(target, target_logits), drafter_trie(drafter, drafter_logits), lag)
        for vocab in (target, drafter):
            weakref.finalize(vocab, _CACHE.pop, key, None)
    return _CACHE[key]

"""A model with its own KV cache: feed tokens, get logits, crop on rejection.

One :class:`Runner` per model per generation, so two generations never share a cache and the model
object itself is only read. ``ids`` is the exact list of tokens the cache holds, so cropping to a
common prefix after re-tokenization is a list comparison.

Cropping must work at any depth (the drafter's cache goes back past earlier rounds after
re-tokenization), for every kind of attention layer. Transformers' ``DynamicSlidingWindowLayer``
(sliding-window and chunked attention: Mistral, Qwen2, Gemma-2/3, Llama-4) drops the keys that fell
out of the window, so it cannot go back once the window is full; the runner's cache holds a
:class:`RewindableWindowLayer` in its place. Layers it cannot rewind (recurrent states of linear
attention) are rebuilt by a prefill of the kept tokens instead. See ``docs/design.md``.
"""

from __future__ import annotations

import functools
import inspect
import time
from dataclasses import dataclass

import torch
from transformers import DynamicCache, PretrainedConfig
from transformers import cache_utils
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

from .loading import Model


def inference(method):
    """``torch.inference_mode()`` around ``method`` unless it is on already. A generation runs its whole loop in
    inference mode, and entering it again around every forward cost about 15 µs a forward there (a twelfth of
    the engine's own time in a greedy SLEM round at real vocabulary sizes, ``benchmarks/engine_cost.py``)."""

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        if torch.is_inference_mode_enabled():
            return method(*args, **kwargs)
        with torch.inference_mode():
            return method(*args, **kwargs)

    return wrapper


def _cache_kwarg(model) -> str:
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


class RewindableWindowLayer(DynamicLayer):
    """A sliding-window (or chunked) attention layer that keeps every key and value, so ``crop`` can
    go back any number of positions.

    Attention sees exactly what it sees through transformers' ``DynamicSlidingWindowLayer``: the last
    ``sliding_window - 1`` cached positions plus the new ones (``update``), sized and placed by
    ``get_mask_sizes`` with the same length and offset, so the model's mask (built from absolute
    positions and the model's own window or chunk size) and the attention inputs are those of the
    model's own cache, and the logits are the same. Only the storage differs: older keys stay, as in
    a full-attention layer, instead of being dropped. ``is_sliding`` keeps the mask builders sizing
    the sliding mask against this layer.
    """

    is_sliding = True

    def __init__(self, sliding_window: int):
        super().__init__()
        self.sliding_window = sliding_window

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        keys, values = super().update(key_states, value_states)
        visible = self.sliding_window - 1 + key_states.shape[-2]
        return keys[:, :, -visible:, :], values[:, :, -visible:, :]

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        past = self.get_seq_length()
        offset = max(past - self.sliding_window + 1, 0)
        return past - offset + query_length, offset


def _rewindable_types(module=cache_utils) -> tuple[type, ...]:
    """The cache layers that ``crop`` rolls back exactly. DynamicIndexedLayer came with transformers 5.17 and
    DummyLayer with 5.23: a version without one never builds it, and hsd still imports there."""
    return (DynamicLayer, RewindableWindowLayer) + tuple(
        getattr(module, name) for name in ("DynamicIndexedLayer", "DummyLayer") if hasattr(module, name))


_REWINDABLE = _rewindable_types()


def _rewindable(layer) -> bool:
    """Whether ``layer.crop(-n)`` restores the layer exactly for any ``n`` (exact types: a subclass
    may keep state that crop does not roll back)."""
    return type(layer) in _REWINDABLE


def new_cache(model) -> DynamicCache:
    """An empty cache for ``model``: the layer types its config asks for, with every sliding-window or
    chunked layer a :class:`RewindableWindowLayer` (the model and its config are only read)."""
    config = getattr(model, "config", None)
    if not isinstance(config, PretrainedConfig):
        return DynamicCache()
    cache = DynamicCache(config=config)
    cache.layers = [RewindableWindowLayer(layer.sliding_window) if type(layer) is DynamicSlidingWindowLayer else layer
                    for layer in cache.layers]
    return cache


@dataclass(frozen=True)
class Snapshot:
    """The cache as it was for ``ids``: per layer ``(keys, values, window)`` (``window`` is ``None`` for full
    attention), or ``None`` when a layer cannot be shared (then :meth:`Runner.forward_paths` recomputes).
    Neither full-attention nor rewindable-window layers write their tensors in place, so a snapshot stays
    valid while the runner goes on."""

    ids: tuple[int, ...]
    layers: list | None


class Runner:
    def __init__(self, model: Model):
        self.model = model
        self.ids: list[int] = []
        self.cache = new_cache(model.model)
        self._kwarg = _cache_kwarg(model.model)
        self.forwards = 0
        self.seconds = 0.0  # wall time inside forward passes
        self._cuda = model.device.type == "cuda"
        self.device = model.device

    def __len__(self) -> int:
        return len(self.ids)

    @inference
    def forward(self, ids: list[int], keep: int = 1) -> torch.Tensor:
        """Append ``ids`` to the cache; return the logits of the last ``keep`` positions, ``[keep, V]``."""
        start = time.perf_counter()
        inputs = torch.tensor([ids], dtype=torch.long, device=self.device)
        out = self.model.model(input_ids=inputs, use_cache=True, logits_to_keep=keep, **{self._kwarg: self.cache})
        logits = out.logits[0, -keep:, : self.model.n_logits]
        if self._cuda:
            torch.cuda.synchronize()
        self.ids.extend(ids)
        self.forwards += 1
        self.seconds += time.perf_counter() - start
        return logits

    def snapshot(self) -> Snapshot:
        """The cache for the tokens it holds now, for batched forwards on top of it later."""
        kinds = (DynamicLayer, RewindableWindowLayer)
        n = len(self.ids)
        layers = self.cache.layers
        if n and all(type(l) in kinds and l.get_seq_length() == n for l in layers):
            return Snapshot(tuple(self.ids), [(l.keys, l.values, getattr(l, "sliding_window", None)) for l in layers])
        return Snapshot(tuple(self.ids), None)

    @inference
    def forward_paths(self, snap: Snapshot, paths: list[tuple[int, ...]]) -> torch.Tensor:
        """Logits after each of ``paths`` (token sequences of one length) fed on top of ``snap``, ``[len(paths),
        V]``, in one batched forward. The runner's own cache is not touched: the snapshot's keys and values
        are expanded to the batch (a view), or, for layers that cannot be shared, whole sequences are
        recomputed without a cache. Counted as one forward."""
        start = time.perf_counter()
        model = self.model.model
        if snap.layers is not None:
            b = len(paths)
            # A third element makes transformers' own sliding-window layer (this forward never crops).
            cache = DynamicCache(ddp_cache_data=[(k.expand(b, -1, -1, -1), v.expand(b, -1, -1, -1))
                                                 + (() if w is None else (torch.tensor(w),))
                                                 for k, v, w in snap.layers])
            ids = torch.tensor(paths, dtype=torch.long, device=self.device)
            out = model(input_ids=ids, use_cache=True, logits_to_keep=1, **{self._kwarg: cache})
        else:
            ids = torch.tensor([list(snap.ids) + list(p) for p in paths], dtype=torch.long, device=self.device)
            out = model(input_ids=ids, use_cache=False, logits_to_keep=1)
        logits = out.logits[:, -1, : self.model.n_logits]
        if self._cuda:
            torch.cuda.synchronize()
        self.forwards += 1
        self.seconds += time.perf_counter() - start
        return logits

    def crop(self, n: int) -> None:
        """Keep the first ``n`` cached positions.

        A cache with a layer no crop can undo (a recurrent or convolution state of linear attention)
        is rebuilt instead: one prefill of the kept tokens, counted as a forward. Either way the cache
        then holds exactly what the model computes for ``ids[:n]``.
        """
        drop = len(self.ids) - n
        if drop <= 0:
            return
        if all(_rewindable(layer) for layer in self.cache.layers):
            self.cache.crop(-drop)
            del self.ids[n:]
            return
        kept = self.ids[:n]
        self.ids, self.cache = [], new_cache(self.model.model)
        if kept:
            self.forward(kept, keep=1)

    def sync_to(self, ids: list[int]) -> None:
        """Crop to the longest common prefix of the cached tokens and ``ids``."""
        limit = min(len(self.ids), len(ids))
        if self.ids[:limit] == ids[:limit]:  # the usual case, compared in C
            self.crop(limit)
            return
        low, high = 0, limit  # the first difference lies in [low, high)
        while high - low > 1:
            mid = (low + high) // 2
            if self.ids[low:mid] == ids[low:mid]:
                low = mid
            else:
                high = mid
        self.crop(low)

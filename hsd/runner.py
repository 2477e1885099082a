"""A model with its own KV cache: feed tokens, get logits, crop on rejection.

One :class:`Runner` per model per generation, so two generations never share a cache and the model
object itself is only read. ``ids`` is the exact list of tokens the cache holds, so cropping to a
common prefix after re-tokenization is a list comparison.
"""

from __future__ import annotations

import inspect
import time

import torch
from transformers import DynamicCache, PretrainedConfig

from .loading import Model


def _cache_kwarg(model) -> str:
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


class Runner:
    def __init__(self, model: Model):
        self.model = model
        self.ids: list[int] = []
        config = getattr(model.model, "config", None)
        self.cache = DynamicCache(config=config) if isinstance(config, PretrainedConfig) else DynamicCache()
        self._kwarg = _cache_kwarg(model.model)
        self.forwards = 0
        self.seconds = 0.0  # wall time inside forward passes
        self._cuda = model.device.type == "cuda"
        self.device = model.device

    def __len__(self) -> int:
        return len(self.ids)

    @torch.inference_mode()
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

    def crop(self, n: int) -> None:
        """Keep the first ``n`` cached positions."""
        drop = len(self.ids) - n
        if drop > 0:
            self.cache.crop(-drop)
            del self.ids[n:]

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

"""Sampling settings and the distributions they define (spec §0: ``p`` and ``q``).

``temperature``, ``top_k`` and ``top_p`` mean exactly what they mean in transformers' ``generate``:
we apply its own logits warpers, in its order (temperature, then top-k, then top-p). Temperature 0
is greedy: a one-hot distribution on the argmax, ties broken by the lowest id. A positive temperature
below ``MIN_TEMPERATURE`` is refused: ``logits / temperature`` would overflow float32 to ``inf`` and
the distribution would be NaN. Such a temperature is greedy in all but name: use 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

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
            out.scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
            return out
        for warp in self.warpers():
            logits = warp(None, logits)
        return torch.softmax(logits, dim=-1)


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
            g = torch.Generator(device=key)
            g.manual_seed(self.seed + len(self._generators))
            self._generators[key] = g
        return self._generators[key]

    def sample(self, probs: torch.Tensor) -> torch.Tensor:
        """One draw per row of ``probs`` (``[n, V]`` → ``[n]`` long)."""
        return torch.multinomial(probs, 1, generator=self.generator(probs.device)).squeeze(-1)

    def uniform(self, n: int, device) -> torch.Tensor:
        return torch.rand(n, generator=self.generator(device), device=device)


def pick(probs: torch.Tensor, sampling: Sampling, rng: Rng) -> torch.Tensor:
    """Sample each row: argmax when greedy (no randomness consumed), else a multinomial draw."""
    if sampling.greedy:
        return probs.argmax(-1)
    return rng.sample(probs)


def pick_at(probs: torch.Tensor, sampling: Sampling, rng: Rng, vocab, offset: int, empties: int) -> int:
    """One token from the row ``probs``: the shared noise field's draw at ``(offset, empties)`` when ``rng``
    shares noise (:mod:`hsd.noise`), else :func:`pick`'s."""
    if sampling.greedy or not rng.shared:
        return int(pick(probs.unsqueeze(0), sampling, rng)[0])
    return rng.draw_at(probs, vocab, offset, empties)

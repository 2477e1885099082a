"""Where a greedy run left AR's output, and how close the target's choice was there.

At temperature 0 every algorithm must emit AR's tokens exactly (design.md, "lossless"). In float32 a difference
is a bug. In bfloat16 or float16 it usually is not: verifying k + 1 positions in one forward sums in a different
order than AR's one-position forwards, and when the target's two best tokens are nearly tied, the rounding can
flip which one wins. :func:`first_difference` finds the first differing position and measures the target's
top-2 margin there with one forward, so a user sees a numeric near-tie, not a broken algorithm, and knows how
to check: run again in float32.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .errors import InvalidSettingError
from .loading import Model, Pair
from .trace import Result

#: a top-2 logit gap below this share of the top logit's size (at least 1) is within half precision's rounding
NEAR_TIE = 0.02


@dataclass(frozen=True)
class Difference:
    """The first position where ``other`` left AR: both tokens, and the target's top-2 there (one forward over
    the prompt and AR's tokens before it, in the model's own dtype)."""

    position: int  # index into the generated tokens
    ar_token: int | None  # None: that run had already stopped
    other_token: int | None
    ar_text: str
    other_text: str
    top_tokens: tuple[int, int]
    top_texts: tuple[str, str]
    top_logits: tuple[float, float]
    top_probs: tuple[float, float]  # softmax at temperature 1
    dtype: str

    @property
    def margin(self) -> float:
        """The target's top-1 minus top-2 logit at the position."""
        return self.top_logits[0] - self.top_logits[1]

    @property
    def near_tie(self) -> bool:
        """Whether the gap is small enough for half-precision rounding to flip it (never in float32)."""
        return self.dtype != "float32" and self.margin <= NEAR_TIE * max(1.0, abs(self.top_logits[0]))

    def explain(self, name: str = "the run") -> str:
        """One or two sentences for a user: what differs, the margin, and what to do."""
        if self.ar_token is None or self.other_token is None:
            return f"{name} and AR stop at different lengths (token {self.position}): one of them hit a stop token."
        head = (f"{name} differs from AR at token {self.position}: AR chose {self.ar_text!r}, {name} "
                f"{self.other_text!r}. The target's two best tokens there are {self.top_texts[0]!r} and "
                f"{self.top_texts[1]!r}, {self.margin:.3g} apart in logits (p = {self.top_probs[0]:.3f} vs "
                f"{self.top_probs[1]:.3f}, {self.dtype}).")
        if self.near_tie:
            return head + (" A near-tie: rounding in one multi-position forward can flip it, so this is numeric, "
                           "not an algorithm error. To check, run again with dtype float32: the outputs must match.")
        if self.dtype != "float32":
            return head + " Not a near-tie: run again with dtype float32; if they still differ, please report it."
        return head + " In float32 this should not happen: please report it with the prompt and settings."


def _text(model: Model, token: int) -> str:
    data = model.vocab.tokens[token] if 0 <= token < len(model.vocab.tokens) else None
    if data is None:
        return f"⟨{model.vocab.special_text.get(token, f'special {token}')}⟩"
    return data.decode("utf-8", errors="replace")


def first_difference(pair: Pair, ar: Result, other: Result) -> Difference | None:
    """The first generated position where ``other``'s tokens differ from ``ar``'s, with the target's top-2 logits
    there from one forward (on the target's device and dtype); ``None`` if the two outputs are identical."""
    if ar.prompt_ids != other.prompt_ids:
        raise InvalidSettingError("first_difference compares two runs of the same prompt: these have different "
                                  "prompt ids.")
    a, b = ar.token_ids, other.token_ids
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    if at == len(a) == len(b):
        return None
    target = pair.target
    ids = torch.tensor([list(ar.prompt_ids) + list(a[:at])], device=target.device)
    with torch.inference_mode():
        logits = target.model(ids).logits[0, -1, :target.n_logits].float()
    probs = torch.softmax(logits, -1)
    top = torch.topk(logits, 2)
    tokens = tuple(int(t) for t in top.indices)
    ar_token, other_token = (a[at] if at < len(a) else None), (b[at] if at < len(b) else None)
    return Difference(
        position=at, ar_token=ar_token, other_token=other_token,
        ar_text=_text(target, ar_token) if ar_token is not None else "",
        other_text=_text(target, other_token) if other_token is not None else "",
        top_tokens=tokens, top_texts=tuple(_text(target, t) for t in tokens),
        top_logits=tuple(float(v) for v in top.values), top_probs=tuple(float(probs[t]) for t in tokens),
        dtype=str(target.dtype).replace("torch.", ""))

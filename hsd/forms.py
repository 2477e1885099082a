"""Values typed into a form (the app) turned into :func:`hsd.generate`'s keyword arguments.

A form box can hold anything: an empty string, ``None``, ``2.5`` for an integer, a checkbox's bool. Each
becomes a specific :class:`~hsd.errors.HsdError` that names the box; the engine's own checks
(:func:`hsd.generate`) still apply after these. Interactive use has tighter limits than the library.
"""

from __future__ import annotations

from .errors import InvalidSettingError, PromptError

MAX_PROMPT_CHARS = 20_000
#: tokens per interactive run; the library allows :data:`hsd.generate.MAX_NEW_TOKENS`, a front end answers sooner
MAX_NEW_TOKENS = 1024


def check_prompt(prompt) -> None:
    if not isinstance(prompt, str) or not prompt.strip():
        raise PromptError("The prompt is empty: type some text for the model to continue.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise PromptError(f"The prompt is {len(prompt):,} characters; this app accepts at most "
                          f"{MAX_PROMPT_CHARS:,}. Shorten it.")


def number(name: str, value, kind):
    """A form number as int/float; an empty or non-numeric box is a readable error, not a TypeError."""
    if isinstance(value, bool):  # float(True) is 1.0: a checkbox wired to a number box is a bug, not a value
        raise InvalidSettingError(f"{name} must be a number, got {value!r}.")
    try:
        out = kind(value)
    except (TypeError, ValueError, OverflowError):
        raise InvalidSettingError(f"{name} must be a number, got {value!r}.") from None
    if kind is int and isinstance(value, float) and not value.is_integer():
        raise InvalidSettingError(f"{name} must be a whole number, got {value!r}.")
    return out


def generation_kwargs(temperature, top_k, top_p, lookahead, max_new_tokens, seed, mode, prompt) -> dict:
    """The keyword arguments of :func:`hsd.generate` for a form's values; ``mode`` ``"chat"`` sends the prompt
    as one user message through each model's chat template."""
    check_prompt(prompt)
    kw = dict(temperature=number("temperature", temperature, float), top_k=number("top-k", top_k, int),
              top_p=number("top-p", top_p, float), lookahead=number("lookahead", lookahead, int),
              max_new_tokens=number("max new tokens", max_new_tokens, int), seed=number("seed", seed, int))
    if not 1 <= kw["max_new_tokens"] <= MAX_NEW_TOKENS:
        raise InvalidSettingError(f"max new tokens must be in 1..{MAX_NEW_TOKENS} in this app.")
    if mode == "chat":
        kw["messages"] = [{"role": "user", "content": prompt}]
    else:
        kw["prompt"] = prompt
    return kw

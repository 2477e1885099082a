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
#: the form's ranges; a value outside one is refused with a message, never clamped
TEMPERATURE = (0.0, 2.0)
LOOKAHEAD = (1, 16)
#: what lookahead k counts, for every algorithm (SLRS proposes target tokens, its drafter drafts as many bytes
#: as those need)
LOOKAHEAD_INFO = ("SD, TLI, SLEM: drafter tokens per round; SLRS: target positions per round (its drafter "
                  "drafts as many tokens as they need)")


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


def in_range(name: str, value, low, high, hint: str = ""):
    """``value`` if ``low <= value <= high``, else an error that gives the range (a form never clamps)."""
    if not low <= value <= high:
        raise InvalidSettingError(f"{name} must be in {low:g}..{high:g}{hint}, got {value:g}.")
    return value


def generation_kwargs(temperature, top_k, top_p, lookahead, max_new_tokens, seed, mode, prompt,
                      parse_special=True, drafter_temperature=None, draft_threshold=None, shared_noise=False) -> dict:
    """The keyword arguments of :func:`hsd.generate` for a form's values; ``mode`` ``"chat"`` sends the prompt
    as one user message through each model's chat template. ``parse_special=False`` (a checkbox) reads a raw
    prompt's special-token text (``<|endoftext|>``) as plain text; chat mode ignores it (the template's output
    is made of special tokens). ``shared_noise`` (a checkbox) draws AR's and SLEM's tokens from one noise field
    (:mod:`hsd.noise`)."""
    check_prompt(prompt)
    kw = dict(temperature=number("temperature", temperature, float), top_k=number("top-k", top_k, int),
              top_p=number("top-p", top_p, float), lookahead=number("lookahead", lookahead, int),
              max_new_tokens=number("max new tokens", max_new_tokens, int), seed=number("seed", seed, int))
    in_range("temperature", kw["temperature"], *TEMPERATURE, " (0 = greedy)")
    in_range("lookahead", kw["lookahead"], *LOOKAHEAD, " in this app")
    in_range("max new tokens", kw["max_new_tokens"], 1, MAX_NEW_TOKENS, " in this app")
    if drafter_temperature not in (None, ""):  # empty: the drafter samples at the target's settings
        kw["drafter_temperature"] = in_range("drafter temperature", number("drafter temperature", drafter_temperature,
                                                                           float), *TEMPERATURE,
                                             " (0 = a greedy drafter; empty = the target's temperature)")
    if draft_threshold not in (None, "", 0):  # empty or 0: always draft the whole lookahead
        kw["draft_threshold"] = in_range("draft threshold", number("draft threshold", draft_threshold, float),
                                         0.0, 0.99, " (0 = off: always draft the whole lookahead)")
    if shared_noise not in (None, False):
        if shared_noise is not True:
            raise InvalidSettingError(f"shared noise must be on or off, got {shared_noise!r}.")
        kw["noise"] = "shared"
    if mode == "chat":
        kw["messages"] = [{"role": "user", "content": prompt}]
    else:
        kw["prompt"] = prompt
        if parse_special is not True:
            if not isinstance(parse_special, bool):
                raise InvalidSettingError(f"parse special tokens must be on or off, got {parse_special!r}.")
            kw["parse_special"] = False
    return kw


def prompt_special(pair, kw: dict) -> list[tuple[int, int, str]]:
    """The spans of the raw prompt in ``kw`` (:func:`generation_kwargs`) that the target reads as special tokens
    (:func:`hsd.generate.special_spans`), for ``viz.output_html(..., prompt_special=...)``; none in chat mode or
    with ``parse_special`` off."""
    from .generate import special_spans

    if kw.get("prompt") is None or not kw.get("parse_special", True):
        return []
    return special_spans(pair.target, kw["prompt"])


def room(pair, kw: dict) -> int:
    """The most new tokens this pair's target has room for after the prompt of ``kw``
    (:func:`generation_kwargs`), capped at :data:`MAX_NEW_TOKENS`."""
    from .generate import _check_prompt, encode_prompt

    _check_prompt(kw.get("prompt"), kw.get("messages"))  # text a tokenizer cannot take is a PromptError first
    prompt_ids = encode_prompt(pair.target, kw.get("prompt"), kw.get("messages"),
                               parse_special=kw.get("parse_special", True))[0]
    limit = pair.target.context_length or 10**9
    return max(0, min(MAX_NEW_TOKENS, limit - len(prompt_ids)))


def check_room(pair, kw: dict) -> None:
    """Refuse a max-new-tokens value the target's context cannot hold after this prompt, saying the limit."""
    most = room(pair, kw)
    if kw["max_new_tokens"] > most:
        raise InvalidSettingError(f"max new tokens is {kw['max_new_tokens']}, but after this prompt the target "
                                  f"has room for at most {most} (its context is {pair.target.context_length} "
                                  "tokens). Lower max new tokens or shorten the prompt.")


def default_algorithm(choices: list[str]) -> str:
    """The algorithm a form selects among ``choices``: SLEM where it runs, else SD, else AR."""
    return next((a for a in ("slem", "sd", "ar") if a in choices), choices[0])

"""Values typed into a form (the app) turned into :class:`hsd.Settings` and a prompt.

A form box can hold anything: an empty string, ``None``, ``2.5`` for an integer, a checkbox's bool. Each
becomes a specific :class:`~hsd.errors.HsdError` that names the box; the engine's own checks
(:func:`hsd.generate`) still apply after these. Interactive use has tighter limits than the library.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from .errors import InvalidSettingError, PromptError
from .settings import Settings

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


@dataclass(frozen=True)
class Form:
    """The app's decoding form as typed: any box may be empty, hold ``2.5`` for an integer or the wrong kind of
    value. :meth:`read` turns it into :class:`hsd.Settings` and the prompt once, or into an error that names
    the box. The defaults are the page's. The app passes its boxes in :data:`FORM_FIELDS` order."""

    prompt: object = ""
    mode: object = "raw"  # "chat": the prompt goes as one user message through each model's chat template
    temperature: object = 0
    top_k: object = 0
    top_p: object = 1.0
    lookahead: object = 5
    max_new_tokens: object = 96
    seed: object = 0
    drafter_temperature: object = None  # empty: the drafter samples at the target's settings
    draft_threshold: object = None  # empty or 0: always draft the whole lookahead
    shared_noise: object = False  # a checkbox: AR's and SLEM's tokens from one noise field (hsd.noise)
    parse_special: object = True  # a checkbox: off reads a raw prompt's special-token text as plain text
    record: object = False  # a checkbox: keep what the rejection-sampling picture needs

    def settings(self) -> Settings:
        """The form's :class:`hsd.Settings`, checked against the app's ranges (tighter than the library's)."""
        kw = dict(temperature=number("temperature", self.temperature, float), top_k=number("top-k", self.top_k, int),
                  top_p=number("top-p", self.top_p, float), lookahead=number("lookahead", self.lookahead, int),
                  max_new_tokens=number("max new tokens", self.max_new_tokens, int),
                  seed=number("seed", self.seed, int), record_distributions=self._flag("record distributions",
                                                                                      self.record))
        in_range("temperature", kw["temperature"], *TEMPERATURE, " (0 = greedy)")
        in_range("lookahead", kw["lookahead"], *LOOKAHEAD, " in this app")
        in_range("max new tokens", kw["max_new_tokens"], 1, MAX_NEW_TOKENS, " in this app")
        if self.drafter_temperature not in (None, ""):
            kw["drafter_temperature"] = in_range(
                "drafter temperature", number("drafter temperature", self.drafter_temperature, float), *TEMPERATURE,
                " (0 = a greedy drafter; empty = the target's temperature)")
        if self.draft_threshold not in (None, "", 0):
            kw["draft_threshold"] = in_range("draft threshold", number("draft threshold", self.draft_threshold, float),
                                             0.0, 0.99, " (0 = off: always draft the whole lookahead)")
        if self._flag("shared noise", self.shared_noise):
            kw["noise"] = "shared"
        if self.mode != "chat":  # a chat template's output is made of special tokens: the box is for raw prompts
            kw["parse_special"] = self._flag("parse special tokens", self.parse_special, default=True)
        return Settings(**kw)

    def text(self) -> dict:
        """The prompt as :func:`hsd.generate` takes it: ``{"prompt": ...}``, or ``{"messages": [...]}`` in chat
        mode."""
        check_prompt(self.prompt)
        if self.mode == "chat":
            return {"messages": [{"role": "user", "content": self.prompt}]}
        return {"prompt": self.prompt}

    def read(self) -> tuple[Settings, dict]:
        """(settings, prompt) as :meth:`settings` and :meth:`text` give them; the prompt is checked first."""
        text = self.text()
        return self.settings(), text

    @staticmethod
    def _flag(name: str, value, default: bool = False) -> bool:
        if value is None:
            return default
        if not isinstance(value, bool):
            raise InvalidSettingError(f"{name} must be on or off, got {value!r}.")
        return value


FORM_FIELDS = tuple(f.name for f in fields(Form))


def prompt_special(pair, settings: Settings, text: dict) -> list[tuple[int, int, str]]:
    """The spans of the raw prompt in ``text`` (:meth:`Form.text`) that the target reads as special tokens
    (:func:`hsd.generate.special_spans`), for ``viz.output_html(..., prompt_special=...)``; none in chat mode or
    with ``parse_special`` off."""
    from .generate import special_spans

    if text.get("prompt") is None or not settings.parse_special:
        return []
    return special_spans(pair.target, text["prompt"])


def room(pair, settings: Settings, text: dict) -> int:
    """The most new tokens this pair's target has room for after the prompt in ``text``, capped at
    :data:`MAX_NEW_TOKENS`."""
    from .generate import _check_prompt, encode_prompt

    _check_prompt(text.get("prompt"), text.get("messages"))  # text a tokenizer cannot take is a PromptError first
    prompt_ids = encode_prompt(pair.target, text.get("prompt"), text.get("messages"),
                               parse_special=settings.parse_special)[0]
    limit = pair.target.context_length or 10**9
    return max(0, min(MAX_NEW_TOKENS, limit - len(prompt_ids)))


def check_room(pair, settings: Settings, text: dict) -> None:
    """Refuse a max-new-tokens value the target's context cannot hold after this prompt, saying the limit."""
    most = room(pair, settings, text)
    if settings.max_new_tokens > most:
        raise InvalidSettingError(f"max new tokens is {settings.max_new_tokens}, but after this prompt the target "
                                  f"has room for at most {most} (its context is {pair.target.context_length} "
                                  "tokens). Lower max new tokens or shorten the prompt.")


def default_algorithm(choices: list[str]) -> str:
    """The algorithm a form selects among ``choices``: SLEM where it runs, else SD, else AR."""
    return next((a for a in ("slem", "sd", "ar") if a in choices), choices[0])

"""The decoding settings of one generation: one frozen object, checked once, read everywhere.

Every front end builds a :class:`Settings` (the CLI from its flags, the app from its form through
:func:`hsd.forms.read_form`, a script with ``Settings(temperature=0.7)``), and it travels unchanged
through the lab's actions, :func:`hsd.generate`, the engine's session and the ZeroGPU duration estimates
to :attr:`hsd.Result.settings`. A value that cannot run is refused when the object is built, with a
message that names the setting; what depends on the pair (the algorithm, shared noise for it, the
prompt's room in the target's context) is checked by :func:`hsd.generate.open_session`.

Adding a setting: a field here (with its check in ``__post_init__``), its form field and CLI flag, and the
code that uses it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from functools import cached_property

from .errors import InvalidSettingError
from .noise import check_noise
from .sampling import Sampling
from .verify import TOP

MAX_LOOKAHEAD = 64
MAX_NEW_TOKENS = 4096


def check_int(name: str, value, low: int, high: int, hint: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidSettingError(f"{name} must be an integer in {low}..{high} ({hint}), got {value!r}.")
    return value


def plain(value):
    """A numpy or torch scalar (a 0-d array or tensor, ``np.float32(0.7)``, ``np.int64(5)``) as the Python
    number it holds, exactly (``.item()``); anything else as it is, for the checks to judge."""
    if isinstance(value, (bool, int, float, str, type(None))) or not hasattr(value, "item"):
        return value
    if getattr(value, "ndim", 0) != 0:
        return value  # an array, even of one element, is not a number
    try:
        item = value.item()
    except (TypeError, ValueError, RuntimeError):
        return value
    return item if isinstance(item, (bool, int, float)) else value


def check_draft_threshold(value) -> float:
    """``draft_threshold`` is a probability below 1 (0: off)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 <= value < 1.0
    if not ok:
        raise InvalidSettingError(f"draft_threshold must be a number in [0, 1) (0 = off: always draft the whole "
                                  f"lookahead), got {value!r}.")
    return float(value)


@dataclass(frozen=True)
class Settings:
    """How to decode; the defaults are :func:`hsd.generate`'s.

    ``temperature``/``top_k``/``top_p`` define the target's distribution (:class:`hsd.sampling.Sampling`);
    ``drafter_temperature`` (``None``: the target's) changes what the drafter proposes, never the output's
    distribution. ``lookahead`` is drafter tokens per round (SLRS: target positions per round).
    ``draft_threshold`` (0: off) ends a round's drafting after a token the drafter gives less than it (SD, SLEM,
    TLI). ``noise="shared"`` draws AR's and SLEM's tokens from one field of noise over the text
    (:mod:`hsd.noise`). ``parse_special=False`` reads special-token text in a raw prompt as plain text.
    ``slrs_max_paths``/``slrs_max_forwards`` bound SLRS's cost (``None``: its defaults).
    ``record_distributions`` keeps what the rejection-sampling picture needs: ``True`` for :data:`TOP` tokens
    per verified position, or a number of tokens (0: off)."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    lookahead: int = 5
    max_new_tokens: int = 64
    seed: int = 0
    drafter_temperature: float | None = None
    draft_threshold: float = 0.0
    noise: str = "independent"
    parse_special: bool = True
    slrs_max_paths: int | None = None
    slrs_max_forwards: int | None = None
    record_distributions: int = field(default=0)

    def __post_init__(self):
        for f in fields(self):  # a numpy or torch scalar is taken as the Python number it holds exactly
            object.__setattr__(self, f.name, plain(getattr(self, f.name)))
        self.sampling  # noqa: B018 - builds (and so checks) the target's sampling now
        if self.drafter_temperature is not None:
            try:
                self.drafter_sampling  # noqa: B018
            except InvalidSettingError as exc:  # Sampling names its temperature: here it is the drafter's
                text = str(exc)
                text = "drafter_" + text if text.startswith("temperature") else f"drafter_temperature: {text}"
                raise InvalidSettingError(text.replace("(0 = greedy)", "(0 = the drafter proposes greedily; empty: "
                                                       "the target's temperature)")) from None
        check_int("lookahead", self.lookahead, 1, MAX_LOOKAHEAD, "drafted tokens per round")
        check_int("max_new_tokens", self.max_new_tokens, 1, MAX_NEW_TOKENS, "tokens to generate")
        check_int("seed", self.seed, -2**63, 2**63 - 1, "any integer")
        object.__setattr__(self, "draft_threshold", check_draft_threshold(self.draft_threshold))
        check_noise(self.noise)
        if not isinstance(self.parse_special, bool):
            raise InvalidSettingError(f"parse_special must be True or False, got {self.parse_special!r}.")
        top = TOP if self.record_distributions is True else self.record_distributions or 0
        check_int("record_distributions", top, 0, 10**6, "True, False, or tokens to keep per position")
        object.__setattr__(self, "record_distributions", top)
        for name in ("slrs_max_paths", "slrs_max_forwards"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), 1, 10**9, "an SLRS cost limit")

    @cached_property
    def sampling(self) -> Sampling:
        """The target's sampling: what the output is an exact sample of."""
        return Sampling(self.temperature, self.top_k, self.top_p)

    @cached_property
    def drafter_sampling(self) -> Sampling:
        """The drafter's sampling: the target's, or its own temperature with the target's filters."""
        if self.drafter_temperature is None:
            return self.sampling
        return Sampling(self.drafter_temperature, self.top_k, self.top_p)

    def replace(self, **changes) -> Settings:
        """A copy with ``changes`` (setting names), checked again; an unknown name says which ones exist."""
        unknown = sorted(set(changes) - NAMES)
        if unknown:
            raise InvalidSettingError(f"Unknown setting{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}: "
                                      f"the settings are {', '.join(sorted(NAMES))}.")
        return replace(self, **changes) if changes else self

    def to_dict(self) -> dict:
        """The settings as plain values (JSON), every field."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> Settings:
        """The settings recorded in ``values`` (e.g. a saved run's ``settings``, which also holds the pair's
        provenance): known names are read, others ignored, absent ones take their defaults."""
        return cls(**{k: v for k, v in values.items() if k in NAMES})

    def only(self, *names: str) -> dict:
        """Some fields as keyword arguments, for an API that takes only those (a production config, a drafter
        comparison)."""
        return {name: getattr(self, name) for name in names}


NAMES = frozenset(f.name for f in fields(Settings))


def settings_of(settings: Settings | None = None, **changes) -> Settings:
    """``settings`` (default: :class:`Settings`'s defaults) with ``changes``: how :func:`hsd.generate` reads
    its ``settings=`` and keyword arguments together."""
    if settings is not None and not isinstance(settings, Settings):
        raise InvalidSettingError(f"settings must be an hsd.Settings, got {type(settings).__name__}.")
    return (settings or Settings()).replace(**changes) if changes or settings is None else settings

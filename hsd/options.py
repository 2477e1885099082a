"""The command line's shared option groups, written once: the pair to load, the decoding settings every
subcommand that decodes takes, and the :class:`hsd.Settings` they make (a refusal names the flag)."""

from __future__ import annotations

import argparse

from .errors import InvalidSettingError
from .settings import NAMES, Settings


def add_model_options(p: argparse.ArgumentParser) -> None:
    """The pair to load: ``--target``/``--drafter`` (or ``--preset``), their revisions, device, dtype, remote code."""
    p.add_argument("--target", help="target: Hub id or local directory (default: the embedded tiny-code pair)")
    p.add_argument("--drafter", help="drafter: Hub id or local directory (default: the embedded tiny-code pair)")
    p.add_argument("--preset", help="a named pair (tiny-code, tiny-code-bytes)")
    p.add_argument("--target-revision", help="pin the Hub target to a branch, tag or commit hash (default: main)")
    p.add_argument("--drafter-revision", help="pin the Hub drafter to a branch, tag or commit hash (default: main)")
    p.add_argument("--device", default="auto", help="auto (cuda, then mps, then cpu), cpu, cuda, cuda:N, mps")
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"])
    p.add_argument("--device-map", default=None, help="'auto' spreads a large target over several GPUs")
    p.add_argument("--trust-remote-code", action="store_true", help="run model code from the Hub (off by default)")


def add_decoding_options(p: argparse.ArgumentParser, *, max_new_tokens: int = 64, noise: bool = False) -> None:
    """``--max-new-tokens``, ``--temperature``, ``--top-k``, ``--top-p``, ``--lookahead``, ``--drafter-temperature``,
    ``--draft-threshold``, ``--seed`` and, where the subcommand can share noise, ``--noise``."""
    p.add_argument("--max-new-tokens", type=int, default=max_new_tokens)
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    p.add_argument("--top-k", type=int, default=0, help="0 = off")
    p.add_argument("--top-p", type=float, default=1.0, help="1 = off")
    p.add_argument("--lookahead", type=int, default=5, help="drafter tokens per round (1..64)")
    p.add_argument("--drafter-temperature", type=float, default=None,
                   help="the drafter's own temperature (default: the target's); changes acceptance, never the "
                        "output's distribution. 0 (a greedy drafter) often helps SLEM when sampling")
    p.add_argument("--draft-threshold", type=float, default=0.0,
                   help="stop a round's drafting after a token the drafter gives less than this probability "
                        "(0 = off; SD, SLEM, TLI); with a large --lookahead the drafts get long only where the "
                        "drafter is sure")
    if noise:
        p.add_argument("--noise", default="independent", choices=["independent", "shared"],
                       help="shared (SLEM and AR): the drafter and the target draw from one seeded noise field over "
                            "the text's byte positions: SLEM accepts more when sampling, and its output is AR's "
                            "output with the same --noise shared --seed, token for token (docs/coupling.md)")
    p.add_argument("--seed", type=int, default=0)


def settings_from_args(args) -> Settings:
    """The :class:`hsd.Settings` of the decoding flags in ``args``, checked before any model loads; a refusal that
    does not already name its setting gets the flag's name."""
    values = {name: getattr(args, name) for name in NAMES if hasattr(args, name)}
    try:
        return Settings(**values)
    except InvalidSettingError as exc:
        text = str(exc)  # "lookahead must be ..." names the flag already; "slrs_max_paths: ..." and the drafter's
        # temperature (whose words would read as the target's) get the flag's name
        name = next((n for n in NAMES if text.startswith(f"{n}: ")), None) or (
            "drafter_temperature" if text.startswith("drafter_temperature ") else None)
        if name is None:
            raise
        raise InvalidSettingError(f"--{name.replace('_', '-')}{text[len(name):]}") from None

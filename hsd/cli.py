"""Command line: ``python -m hsd generate|vocab``. Bad input prints an hsd error and exits with 2."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

from .errors import HsdError, InvalidSettingError, PromptError


def _model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", help="target: Hub id or local directory (default: the embedded tiny-code pair)")
    p.add_argument("--drafter", help="drafter: Hub id or local directory (default: the embedded tiny-code pair)")
    p.add_argument("--preset", help="a named pair (tiny-code)")
    p.add_argument("--device", default="auto", help="auto (cuda, then mps, then cpu), cpu, cuda, cuda:N, mps")
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"])
    p.add_argument("--device-map", default=None, help="'auto' spreads a large target over several GPUs")
    p.add_argument("--trust-remote-code", action="store_true", help="run model code from the Hub (off by default)")


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(prog="python -m hsd", description=__doc__)
    parser.add_argument("--version", action="version", version=f"hsd {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="generate text with one algorithm and print metrics")
    _model_args(gen)
    gen.add_argument("--algorithm", default="slem", choices=["ar", "sd", "slem", "tli", "slrs"])
    src = gen.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="the prompt text")
    src.add_argument("--prompt-file", type=Path, help="read the prompt from a file")
    gen.add_argument("--chat", action="store_true", help="send the prompt as a user message through chat templates")
    gen.add_argument("--max-new-tokens", type=int, default=64)
    gen.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    gen.add_argument("--top-k", type=int, default=0, help="0 = off")
    gen.add_argument("--top-p", type=float, default=1.0, help="1 = off")
    gen.add_argument("--lookahead", type=int, default=5, help="drafter tokens per round (1..64)")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--json", type=Path, help="write {text, token_ids, rounds, metrics} to this file")
    voc = sub.add_parser("vocab", help="report how the target's and drafter's vocabularies relate")
    _model_args(voc)
    voc.add_argument("--json", type=Path, help="write the report as JSON")
    from .bench import add_bench_parser
    add_bench_parser(sub)  # bench, advise: their options and handlers live in hsd/bench.py
    from .space import add_space_parser
    add_space_parser(sub)  # space push: deploy the app to a Hugging Face Space (hsd/space.py)
    return parser


def check_output_file(path: Path | None, flag: str = "--json") -> None:
    """Fail before any model loads if ``path`` cannot be written (a directory, a missing folder...)."""
    if path is None:
        return
    if path.is_dir():
        raise InvalidSettingError(f"{flag} {path} is a directory: give a file name, e.g. {path / 'run.json'}.")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InvalidSettingError(f"{flag} {path}: the folder {parent} does not exist; create it first.")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise InvalidSettingError(f"{flag} {path}: no permission to write there; choose another path.")


def write_output(path: Path, text: str, flag: str = "--json") -> int:
    """Write ``text`` to ``path``; if that fails after the run, print it to stdout so the run is not lost."""
    try:
        path.write_text(text, encoding="utf-8")
        return 0
    except OSError as exc:
        print(text)
        print(f"error: {flag} {path}: {exc.strerror or exc}; the JSON was printed to stdout instead.",
              file=sys.stderr)
        return 2


def read_prompt_file(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except IsADirectoryError:
        raise PromptError(f"--prompt-file {path} is a directory: give the path of a text file.") from None
    except FileNotFoundError:
        raise PromptError(f"--prompt-file {path}: file not found.") from None
    except UnicodeDecodeError as exc:
        raise PromptError(f"--prompt-file {path} is not valid UTF-8 text (byte {exc.start}): save it as UTF-8 "
                          "and try again.") from None
    except OSError as exc:
        raise PromptError(f"--prompt-file {path} cannot be read: {exc.strerror or exc}.") from None


def _pair(args, need_drafter: bool = True, command: str = "generate"):
    from .loading import load_pair

    drafter = args.drafter if need_drafter or args.drafter else None
    if args.drafter and not args.target and not args.preset:
        raise HsdError("--drafter needs a --target too (or use --preset).")
    if args.target and not drafter and not args.preset and need_drafter:
        hint = "" if command == "vocab" else " (or use --algorithm ar)"
        raise HsdError(f"--drafter is needed with --target{hint}.")
    return load_pair(args.target, drafter, preset=args.preset, device=args.device, dtype=args.dtype,
                     device_map=args.device_map, trust_remote_code=args.trust_remote_code)


def _metrics_lines(m: dict) -> list[str]:
    def fmt(x, spec):
        return "-" if x is None else format(x, spec)
    return [
        f"tokens {m['new_tokens']} in {fmt(m['total_s'], '.3f')} s | {fmt(m['tokens_per_s'], '.1f')} tok/s | "
        f"TTFT {fmt(m['ttft_s'] and m['ttft_s'] * 1e3, '.1f')} ms | TPOT {fmt(m['tpot_s'] and m['tpot_s'] * 1e3, '.2f')} ms",
        f"rounds {m['rounds']} | tau (tokens per target forward) {fmt(m['mean_accepted_length'], '.2f')} | "
        f"acceptance {fmt(m['acceptance_rate'], '.1%')} ({m['accepted']}/{m['proposed']}) | "
        f"forwards target {m['target_forwards']} drafter {m['drafter_forwards']}",
        "time split " + " ".join(f"{k} {v * 1e3:.1f}ms" for k, v in m["time_split_s"].items())
        + f" | outside forwards {fmt(m['overhead_share'], '.1%')}",
    ]


def cmd_generate(args) -> int:
    from .generate import generate

    from .generate import MAX_LOOKAHEAD, MAX_NEW_TOKENS, _check_int
    from .sampling import Sampling

    prompt = args.prompt if args.prompt is not None else read_prompt_file(args.prompt_file)
    Sampling(args.temperature, args.top_k, args.top_p)  # bad settings fail before any model loads
    check_output_file(args.json)
    _check_int("lookahead", args.lookahead, 1, MAX_LOOKAHEAD, "drafted tokens per round")
    _check_int("max_new_tokens", args.max_new_tokens, 1, MAX_NEW_TOKENS, "tokens to generate")
    pair = _pair(args, need_drafter=args.algorithm != "ar")
    kwargs = dict(algorithm=args.algorithm, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                  top_k=args.top_k, top_p=args.top_p, lookahead=args.lookahead, seed=args.seed)
    if args.chat:
        res = generate(pair, messages=[{"role": "user", "content": prompt}], **kwargs)
    else:
        res = generate(pair, prompt, **kwargs)
    print(res.text)
    print("---", file=sys.stderr)
    print(f"{args.algorithm} on {pair.target.device} ({res.settings['dtype']}), stop: {res.stop_reason}", file=sys.stderr)
    for line in _metrics_lines(res.metrics):
        print(line, file=sys.stderr)
    if args.json:
        return write_output(args.json, json.dumps(res.to_dict(), indent=1, ensure_ascii=False))
    return 0


def cmd_vocab(args) -> int:
    from .report import compatibility_report, format_report

    check_output_file(args.json)
    report = compatibility_report(_pair(args, command="vocab"))
    print(format_report(report))
    if args.json:
        return write_output(args.json, json.dumps(report, indent=1, ensure_ascii=False, default=str))
    return 0


_API_WORDS = re.compile(r"\b(target|drafter|algorithm|preset|device|dtype)='([^']*)'")


def cli_words(message: str) -> str:
    """The library's messages name its keywords (``algorithm='ar'``); on the command line, name the flags."""
    return _API_WORDS.sub(lambda m: f"--{m.group(1)} {m.group(2)}", message)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return (getattr(args, "func", None) or {"generate": cmd_generate, "vocab": cmd_vocab}[args.command])(args)
    except HsdError as exc:
        print(f"error: {cli_words(str(exc))}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"error: {exc.filename}: file not found", file=sys.stderr)
        return 2

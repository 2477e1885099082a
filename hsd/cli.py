"""Command line: ``python -m hsd generate|vocab|bench|advise``. Bad input prints an hsd error and exits with 2.

Every subcommand takes the same model options and loads its pair through :func:`load_cli_pair`; every
option is checked before a model loads.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from .algorithms import ALGORITHMS
from .errors import HsdError, InvalidSettingError, PromptError
from .outfiles import check_output_file, write_output  # noqa: F401 - the subcommands' output files
from .options import add_decoding_options, add_model_options, settings_from_args


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(prog="python -m hsd", description=__doc__)
    parser.add_argument("--version", action="version", version=f"hsd {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="generate text with one algorithm and print metrics")
    add_model_options(gen)
    gen.add_argument("--algorithm", default="slem", choices=list(ALGORITHMS))
    src = gen.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="the prompt text")
    src.add_argument("--prompt-file", type=Path, help="read the prompt from a file")
    gen.add_argument("--chat", action="store_true", help="send the prompt as a user message through chat templates")
    gen.add_argument("--no-parse-special", dest="parse_special", action="store_false",
                     help="read special-token text in the prompt (<|endoftext|>, </s>) as plain text, not as tokens")
    add_decoding_options(gen, max_new_tokens=64, noise=True)
    gen.add_argument("--json", type=Path, help="write {text, token_ids, rounds, metrics} to this file")
    voc = sub.add_parser("vocab", help="report how the target's and drafter's vocabularies relate")
    add_model_options(voc)
    voc.add_argument("--json", type=Path, help="write the report as JSON")
    _bench_parsers(sub)
    from .space import add_space_parser
    add_space_parser(sub)  # space push: deploy the app to a Hugging Face Space (hsd/space.py)
    from .drafters import add_drafters_parser
    add_drafters_parser(sub)  # drafters: compare drafters for one target (hsd/drafters.py)
    from .production import add_production_parser
    add_production_parser(sub)  # production: the vLLM / Transformers configuration of a choice (hsd/production.py)
    return parser


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


def load_cli_pair(args, need_drafter: bool = True, hint: str = ""):
    """The pair every subcommand runs on, from the shared model options (and ``--threads`` where given)."""
    from . import threads
    from .loading import load_pair

    threads.choose(getattr(args, "threads", None) or "auto")  # --threads, else by the pair's size (hsd/threads.py)
    drafter = args.drafter if need_drafter or args.drafter else None
    if args.drafter and not args.target and not args.preset:
        raise HsdError("--drafter needs a --target too (or use --preset).")
    if args.target and not drafter and not args.preset and need_drafter:
        raise HsdError(f"--drafter is needed with --target{hint}.")
    return load_pair(args.target, drafter, preset=args.preset, device=args.device, dtype=args.dtype,
                     device_map=args.device_map, trust_remote_code=args.trust_remote_code,
                     target_revision=args.target_revision, drafter_revision=args.drafter_revision)


def _metrics_lines(m) -> list[str]:
    def fmt(x, spec):
        return "-" if x is None else format(x, spec)
    return [
        f"tokens {m.new_tokens} in {fmt(m.total_s, '.3f')} s | {fmt(m.tokens_per_s, '.1f')} tok/s | "
        f"TTFT {fmt(m.ttft_s and m.ttft_s * 1e3, '.1f')} ms | TPOT {fmt(m.tpot_s and m.tpot_s * 1e3, '.2f')} ms",
        f"rounds {m.rounds} | tau (tokens per target forward) {fmt(m.mean_accepted_length, '.2f')} | "
        f"accepted/verified {fmt(m.verified_acceptance_rate, '.1%')} ({m.accepted}/{m.verified}) | "
        f"accepted/proposed {fmt(m.draft_acceptance_rate, '.1%')} ({m.accepted}/{m.proposed}) | "
        f"forwards target {m.target_forwards} drafter {m.drafter_forwards}",
        "time split " + " ".join(f"{k} {v * 1e3:.1f}ms" for k, v in m.time_split_s.items())
        + f" | outside forwards {fmt(m.outside_forwards, '.1%')}",
    ]


def cmd_generate(args) -> int:
    from .generate import check_shared_noise, special_spans

    prompt = args.prompt if args.prompt is not None else read_prompt_file(args.prompt_file)
    settings = settings_from_args(args)
    check_shared_noise(settings.noise, args.algorithm)
    check_output_file(args.json)
    if args.chat and not args.parse_special:
        raise InvalidSettingError("--no-parse-special applies to a raw prompt, not to --chat (a chat template's "
                                  "output is made of special tokens): drop one of the two.")
    pair = load_cli_pair(args, need_drafter=ALGORITHMS[args.algorithm].needs_drafter, hint=" (or use --algorithm ar)")
    if args.chat:
        res = _generate_or_stopped(pair, None, [{"role": "user", "content": prompt}], args.algorithm,
                                   settings.replace(parse_special=True), args.json)
    else:
        res = _generate_or_stopped(pair, prompt, None, args.algorithm, settings, args.json)
    if res is None:
        return 130
    if not args.chat:
        spans = special_spans(pair.target, prompt) if args.parse_special else []
        if spans:
            print(f"note: the prompt's {', '.join(repr(t) for _, _, t in spans)} became the target's special "
                  "token(s); --no-parse-special reads such text as plain text", file=sys.stderr)
    print(res.text)
    print("---", file=sys.stderr)
    print(f"{args.algorithm} on {pair.target.device} ({res.settings['dtype']}), stop: {res.stop_reason}", file=sys.stderr)
    for line in _metrics_lines(res.metrics):
        print(line, file=sys.stderr)
    if args.json:
        return write_output(args.json, json.dumps(res.to_dict(), indent=1, ensure_ascii=False))
    return 0


def _generate_or_stopped(pair, prompt, messages, algorithm, settings, json_path):
    """:func:`hsd.generate.stream` to its :class:`~hsd.Result`; on Ctrl-C, the text generated so far is printed
    (and, with ``--json``, written with the rounds so far) and ``None`` returned."""
    from .generate import stream

    rounds = []
    try:
        for item in stream(pair, prompt, messages=messages, algorithm=algorithm, settings=settings):
            if not hasattr(item, "emitted"):
                return item
            rounds.append(item)
    except KeyboardInterrupt:
        data = b"".join(e.text for rd in rounds for e in rd.emitted)
        text = data.decode("utf-8", errors="replace")
        print(text)
        print(f"---\nstopped (Ctrl-C) after {len(rounds)} round{'s' * (len(rounds) != 1)}: the text above is what "
              "was generated until then", file=sys.stderr)
        if json_path:
            write_output(json_path, json.dumps({"stopped": "ctrl-c", "text": text, "rounds": len(rounds),
                                                "algorithm": algorithm, "settings": settings.to_dict()},
                                               indent=1, ensure_ascii=False))
        return None
    raise HsdError("the generation ended without a result")


def cmd_vocab(args) -> int:
    from .report import compatibility_report, format_report

    check_output_file(args.json)
    report = compatibility_report(load_cli_pair(args))
    print(format_report(report))
    if args.json:
        return write_output(args.json, json.dumps(report, indent=1, ensure_ascii=False, default=str))
    return 0


# ------------------------------------------------------------------------------------------- bench, advise

def _bench_args(p: argparse.ArgumentParser) -> None:
    add_model_options(p)
    p.add_argument("--threads", type=int,
                   help="torch intra-op threads (default: 1 for a CPU target under 250M parameters, else one per CPU)")
    p.add_argument("--prompts", default="code", help="prompt set in assets/prompts (code, summarize, long) or a file")
    p.add_argument("--num-prompts", type=int, default=8)
    p.add_argument("--seed", type=int, default=0, help="prompt i uses seed + i, in hsd and in the peer")


def _bench_parsers(sub) -> None:
    """``bench`` and ``advise``: the benchmark (:mod:`hsd.bench`) and the advice (:mod:`hsd.advise`)."""
    b = sub.add_parser("bench", help="paper-style benchmark: tokens/s, speedup, tau, limit, Transformers peer")
    _bench_args(b)
    b.add_argument("--algorithms", nargs="+", default=["ar", "slem", "tli"], help=" ".join(ALGORITHMS))
    b.add_argument("--temperatures", nargs="+", type=float, default=[0.0, 1.0])
    b.add_argument("--max-new-tokens", type=int, default=128)
    b.add_argument("--lookahead", type=int, default=5)
    b.add_argument("--warmups", type=int, default=1, help="untimed calls per row before timing")
    b.add_argument("--repeats", type=int, default=3, help="timed runs per prompt; medians count")
    b.add_argument("--min-new-tokens", type=int, default=0, help="drop prompts where a row made fewer (paper: 128)")
    b.add_argument("--no-peer", action="store_true", help="skip the Transformers rows")
    b.add_argument("--scale", action="store_true", help="also the per-token time vs length curve")
    b.add_argument("--scale-new-tokens", nargs="+", type=int, default=[64, 128, 256, 512, 1024])
    b.add_argument("--scale-prompt-tokens", nargs="+", type=int, default=[16, 64, 256, 512])
    b.add_argument("--no-png", action="store_true", help="HTML figures only")
    b.add_argument("--out", type=Path, default=Path("bench-out"), help="output folder")
    b.set_defaults(func=cmd_bench)
    a = sub.add_parser("advise", help="short calibration; predicted tokens/s and speedup per algorithm and lookahead")
    _bench_args(a)
    a.add_argument("--algorithms", nargs="+", help="default: every drafting algorithm that applies, but SLRS")
    a.add_argument("--temperature", type=float, default=0.0)
    a.add_argument("--max-new-tokens", type=int, default=128, help="tokens per calibration prompt (as in the bench)")
    a.add_argument("--drafter-temperature", type=float, default=None,
                   help="the drafter's temperature in every calibration (default: --temperature); 0, a greedy "
                        "drafter, often pays for SLEM when sampling")
    a.add_argument("--draft-thresholds", nargs="*", type=float, metavar="θ",
                   help="also calibrate a dynamic lookahead per θ: lookahead 12, a draft ended after a token the "
                        "drafter gives below θ (generate's --draft-threshold); each in (0, 1); default 0.5 0.7; "
                        "no value, or 0, calibrates none")
    a.add_argument("--json", type=Path, help="write the advice as JSON")
    a.set_defaults(func=cmd_advise, num_prompts=4)


def check_bench_args(args) -> list[str]:
    """Every bench/advise option checked before a model loads; returns the prompts."""
    from .bench import load_prompts
    from .generate import MAX_LOOKAHEAD, MAX_NEW_TOKENS, _check_int
    from .sampling import Sampling

    for name in args.algorithms or []:
        if name not in ALGORITHMS:
            raise InvalidSettingError(f"Unknown algorithm {name!r} in --algorithms: choose from "
                                      f"{', '.join(ALGORITHMS)}.")
    for t in getattr(args, "temperatures", None) or [args.temperature]:
        Sampling(t)
    if getattr(args, "drafter_temperature", None) is not None:
        try:
            Sampling(args.drafter_temperature)
        except InvalidSettingError as exc:
            raise InvalidSettingError(f"--drafter-temperature: {exc}") from None
    _check_int("--max-new-tokens", args.max_new_tokens, 1, MAX_NEW_TOKENS, "tokens to generate")
    if hasattr(args, "lookahead"):
        _check_int("--lookahead", args.lookahead, 1, MAX_LOOKAHEAD, "drafted tokens per round")
        _check_int("--warmups", args.warmups, 0, 1000, "untimed calls per row")
        _check_int("--repeats", args.repeats, 1, 1000, "timed runs per prompt")
    _check_int("--num-prompts", args.num_prompts, 1, 10**6, "prompts from the set")
    if args.threads is not None:
        _check_int("--threads", args.threads, 1, 4096, "torch intra-op threads")
    if getattr(args, "out", None) is not None:
        _check_out_dir(args.out)
    if getattr(args, "json", None) is not None:
        check_output_file(args.json)
    return load_prompts(args.prompts, args.num_prompts)


def _check_out_dir(out: Path) -> None:
    """Create ``--out`` now and write a probe file, so an unwritable place fails before the run, not after."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".hsd-write-check"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise InvalidSettingError(f"--out {out}: cannot write there ({exc.strerror or exc}); choose another "
                                  "folder.") from None


def cmd_bench(args) -> int:
    from .bench import BenchConfig, run_bench, run_scale
    from .benchout import markdown_table, write_report
    from .machine import machine_info, machine_line

    prompts = check_bench_args(args)
    pair = load_cli_pair(args, need_drafter=any(ALGORITHMS[a].needs_drafter for a in args.algorithms),
                         hint=" (or --preset)")
    cfg = BenchConfig(args.algorithms, args.temperatures, args.prompts, len(prompts), args.max_new_tokens,
                      args.lookahead, args.warmups, args.repeats, args.seed, not args.no_peer, args.min_new_tokens)
    print(f"machine: {machine_line(machine_info(pair))}")
    print(f"pair: {pair.target.name} <- {pair.drafter.name if pair.drafter else None}; {len(prompts)} prompts")
    report = run_bench(pair, prompts, cfg)
    if args.scale:
        report["scale"] = run_scale(pair, prompts, cfg, args.scale_new_tokens, args.scale_prompt_tokens)
    print(markdown_table(report["rows"]))
    try:
        written = write_report(report, args.out, png=not args.no_png)
    except OSError as exc:  # the folder was writable at the start; the table above is the run's result
        raise HsdError(f"--out {args.out}: writing the report failed ({exc.strerror or exc}); the table above "
                       "holds the results.") from None
    print(f"wrote {', '.join(written)} to {args.out}/")
    return 0


def advise_thresholds(values: list[float] | None) -> tuple[float, ...]:
    """``--draft-thresholds``: absent, the default; no value or a lone 0, none; else each checked in (0, 1)."""
    from .advise import DRAFT_THRESHOLDS, check_draft_thresholds

    if values is None:
        return DRAFT_THRESHOLDS
    if values in ([], [0.0]):
        return ()
    return check_draft_thresholds(values, "--draft-thresholds", "give no value, or 0 alone, for none")


def cmd_advise(args) -> int:
    from .advise import advise, format_advice

    thresholds = advise_thresholds(args.draft_thresholds)
    prompts = check_bench_args(args)
    pair = load_cli_pair(args, hint=" (or --preset)")
    advice = advise(pair, prompts, temperature=args.temperature, algorithms=args.algorithms,
                    max_new_tokens=args.max_new_tokens, seed=args.seed, draft_thresholds=thresholds,
                    drafter_temperature=args.drafter_temperature)
    print(format_advice(advice))
    if args.json:
        return write_output(args.json, json.dumps({**advice, "pair": pair.provenance()}, indent=1, default=str))
    return 0


_API_WORDS = re.compile(r"\b(target|drafter|algorithm|preset|device|dtype|target_revision|drafter_revision)='([^']*)'")


def cli_words(message: str) -> str:
    """The library's messages name its keywords (``algorithm='ar'``); on the command line, name the flags."""
    return _API_WORDS.sub(lambda m: f"--{m.group(1).replace('_', '-')} {m.group(2)}", message)


def main(argv=None) -> int:
    for stream in (sys.stdout, sys.stderr):  # a terminal that cannot show a character gets an escape, not a crash
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    args = build_parser().parse_args(argv)
    try:
        return (getattr(args, "func", None) or {"generate": cmd_generate, "vocab": cmd_vocab}[args.command])(args)
    except KeyboardInterrupt:
        print("\nstopped (Ctrl-C)", file=sys.stderr)
        return 130
    except HsdError as exc:
        print(f"error: {cli_words(str(exc))}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"error: {exc.filename}: file not found", file=sys.stderr)
        return 2

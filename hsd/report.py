"""The drafter-compatibility report (``python -m hsd vocab``, the app's compatibility panel).

What the two vocabularies share, how their special roles map, and how faithfully each tokenizer
round-trips text (``decode(encode(s)) == s``; the paper's injectivity appendix). Tokenizers that
do not round-trip are why SLEM tokenizes with a look-behind window. An algorithm's cost for the pair beyond
its drafts (SLRS's ψ path counts, from the vocabularies alone) is its :attr:`Algorithm.pair_cost
<hsd.algorithms.contract.Algorithm>`, computed before anything runs and reported under its name.
"""

from __future__ import annotations

from .algorithms import ALGORITHMS, availability
from .loading import Model, Pair

ROUNDTRIP_SAMPLES = [
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "  two leading spaces", "trailing space ", "tabs\tand\ttabs", "windows\r\nnewlines",
    "The quick brown fox jumps over the lazy dog.", "numbers 1234567890 and 3.14159",
    "中文文本", "日本語のテキスト", "emoji 😀🎉", "combining e\u0301", "naïve café Ünïcödé",
    "שלום עולם", "مرحبا بالعالم", "<s> fake special </s>", "<|endoftext|>", "a  b   c    d",
    "    indented = {'k': [1, 2]}", "x", " ",
]


def roundtrip_rate(tokenizer, samples=ROUNDTRIP_SAMPLES) -> tuple[float, list[str]]:
    """Share of samples with ``decode(encode(s)) == s`` (no special tokens added), and the failures."""
    failures = [s for s in samples
                if tokenizer.decode(tokenizer.encode(s, add_special_tokens=False, split_special_tokens=True),
                                    skip_special_tokens=False, clean_up_tokenization_spaces=False) != s]
    return 1 - len(failures) / len(samples), failures


def bytes_roundtrip_rate(tokenizer, vocab, samples=ROUNDTRIP_SAMPLES) -> tuple[float, list[str], int]:
    """Share of samples whose tokens spell exactly the sample's bytes (``text_of(encode(s)) == s``), the
    failures, and how many of those differ only by one invented leading space.

    This is the engine's own view of a tokenizer: where it fails (normalisation, SentencePiece's
    dummy prefix space, added-token matching), hsd's look-behind re-tokenization has to absorb the
    difference or fall back to a longest-match encoding.
    """
    spelled = {s: vocab.text_of(tokenizer.encode(s, add_special_tokens=False, split_special_tokens=True))
               for s in samples}
    failures = [s for s in samples if spelled[s] != s.encode()]
    prefix_only = sum(spelled[s] == b" " + s.encode() for s in failures)
    return 1 - len(failures) / len(samples), failures, prefix_only


def segmentations(data: bytes, spelled: set[bytes], longest: int, cap: int = 10**9) -> int:
    """Number of ways to spell ``data`` as a sequence of tokens from ``spelled`` (capped at ``cap``).

    For a target token's bytes and the drafter's vocabulary, this counts the drafter paths SLRS must
    enumerate to compute ψ of that token (a lower bound: paths that run past the token are extra).
    """
    ways = [1] + [0] * len(data)
    for end in range(1, len(data) + 1):
        total = 0
        for start in range(max(0, end - longest), end):
            if ways[start] and data[start:end] in spelled:
                total += ways[start]
        ways[end] = min(total, cap)
    return ways[-1]


def _sample_ids(model: Model, text: str) -> list[int]:
    return model.tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True)


def text_statistics(pair: Pair, samples=ROUNDTRIP_SAMPLES) -> dict:
    """How the two tokenizers cut the same text, and what that means for each algorithm."""
    t, d = pair.target.vocab, pair.drafter.vocab
    text = "\n".join(samples)
    t_ids, d_ids = _sample_ids(pair.target, text), _sample_ids(pair.drafter, text)
    t_ordinary = [i for i in t_ids if t.tokens[i]]
    d_ordinary = [i for i in d_ids if d.tokens[i]]
    d_spelled = set(d.bytes_to_id)
    paths = [segmentations(t.tokens[i], d_spelled, d.max_token_bytes) for i in t_ordinary]
    n_bytes = len(text.encode())
    return {
        "bytes": n_bytes,
        "target_tokens": len(t_ids),
        "drafter_tokens": len(d_ids),
        "target_bytes_per_token": n_bytes / max(1, len(t_ids)),
        "drafter_bytes_per_token": n_bytes / max(1, len(d_ids)),
        "drafter_tokens_per_target_token": len(d_ids) / max(1, len(t_ids)),
        "target_tokens_in_intersection": sum(t.tokens[i] in d.bytes_to_id for i in t_ordinary) / max(1, len(t_ordinary)),
        "drafter_tokens_in_intersection": sum(d.tokens[i] in t.bytes_to_id for i in d_ordinary) / max(1, len(d_ordinary)),
        "drafter_paths_per_target_token_median": sorted(paths)[len(paths) // 2] if paths else 0,
        "drafter_paths_per_target_token_max": max(paths, default=0),
    }


def _side(model: Model) -> dict:
    vocab = model.vocab
    rate, failures = roundtrip_rate(model.tokenizer)
    brate, bfailures, bprefix = bytes_roundtrip_rate(model.tokenizer, vocab)
    config_size = getattr(getattr(model.model, "config", None), "vocab_size", None)
    return {
        "name": model.name,
        "revision": model.revision,
        "commit": model.commit,
        "tokenizer_size": len(vocab),
        "model_vocab_size": config_size,
        "padded": bool(config_size and config_size > len(vocab)),
        "scheme": vocab.scheme,
        "special_tokens": {i: vocab.special_text.get(i, "?") for i in sorted(vocab.special_ids)},
        "eos": [vocab.special_text.get(i) for i in vocab.eos_ids],
        "bytes_determined": len(vocab) - len(vocab.special_ids) - vocab.undetermined,
        "bytes_undetermined": vocab.undetermined,
        "roundtrip_rate": rate,
        "roundtrip_failures": failures,
        "bytes_roundtrip_rate": brate,
        "bytes_roundtrip_failures": bfailures,
        "bytes_roundtrip_dummy_prefix": bprefix,
        "max_token_bytes": vocab.max_token_bytes,
    }


def _examples(own, other_ids: dict, limit: int = 12) -> list[str]:
    out = []
    for b in own.tokens:
        if b and b not in other_ids and b.strip():
            try:
                out.append(b.decode("utf-8"))
            except UnicodeDecodeError:
                continue
            if len(out) >= limit:
                break
    return out


def _pair_costs(names):
    """The registered algorithms among ``names`` that report a cost on the pair, with their :class:`PairCost`."""
    return [(name, ALGORITHMS[name].pair_cost) for name in names
            if name in ALGORITHMS and ALGORITHMS[name].pair_cost is not None]


def compatibility_report(pair: Pair) -> dict:
    pv = pair.vocab
    t, d = pair.target.vocab, pair.drafter.vocab
    target_ordinary = len(t) - len(t.special_ids)
    drafter_ordinary = len(d) - len(d.special_ids)
    algorithms = {name: why or "ok" for name, why in availability(pair).items() if ALGORITHMS[name].needs_drafter}
    return {
        "target": _side(pair.target),
        "drafter": _side(pair.drafter),
        "shared": pv.shared,
        "intersection": pv.intersection_size,
        "intersection_share_of_target": pv.intersection_size / max(1, target_ordinary),
        "intersection_share_of_drafter": pv.intersection_size / max(1, drafter_ordinary),
        "special_roles": {role: {"target": t_id, "drafter": d_id,
                                 "target_text": t.special_text.get(t_id) if t_id is not None else None,
                                 "drafter_text": d.special_text.get(d_id) if d_id is not None else None}
                          for role, (t_id, d_id) in pv.special_map.items()},
        "text": text_statistics(pair),
        "only_target_examples": _examples(t, d.bytes_to_id),
        "only_drafter_examples": _examples(d, t.bytes_to_id),
        "algorithms": algorithms,
        **{name: cost.measure(pair) for name, cost in _pair_costs(algorithms)},
    }


def format_report(report: dict) -> str:
    t, d = report["target"], report["drafter"]
    lines = [
        f"target : {t['name']}",
        f"         {t['tokenizer_size']} tokens ({t['scheme']}), model vocab_size {t['model_vocab_size']}"
        f"{' (padded)' if t['padded'] else ''}, EOS {t['eos']}",
        f"drafter: {d['name']}",
        f"         {d['tokenizer_size']} tokens ({d['scheme']}), model vocab_size {d['model_vocab_size']}"
        f"{' (padded)' if d['padded'] else ''}, EOS {d['eos']}",
        f"vocabulary: {'SHARED (same bytes, same ids): sd applies' if report['shared'] else 'heterogeneous'}",
        f"intersection: {report['intersection']} byte strings = {report['intersection_share_of_target']:.1%} of the "
        f"target's, {report['intersection_share_of_drafter']:.1%} of the drafter's ordinary tokens",
        "special roles: " + ", ".join(f"{role} {v['target']}<->{v['drafter']}" for role, v in report["special_roles"].items()),
        f"text sample ({report['text']['bytes']} bytes): target {report['text']['target_tokens']} tokens, drafter "
        f"{report['text']['drafter_tokens']} ({report['text']['drafter_tokens_per_target_token']:.2f} drafter tokens per "
        f"target token); {report['text']['target_tokens_in_intersection']:.0%} of the target's tokens are in the "
        f"intersection; {report['text']['drafter_paths_per_target_token_median']} drafter paths per target token (median, "
        f"max {report['text']['drafter_paths_per_target_token_max']})",
        f"bytes determined: target {t['bytes_determined']} (+{t['bytes_undetermined']} unknown), "
        f"drafter {d['bytes_determined']} (+{d['bytes_undetermined']} unknown)",
        f"round-trip decode(encode(s)) == s: target {t['roundtrip_rate']:.0%}, drafter {d['roundtrip_rate']:.0%}",
        f"byte round-trip bytes(encode(s)) == s: target {t['bytes_roundtrip_rate']:.0%}, "
        f"drafter {d['bytes_roundtrip_rate']:.0%}"
        + "".join(f" ({side} failures: {x['bytes_roundtrip_dummy_prefix']} of {len(x['bytes_roundtrip_failures'])} "
                  "only add a leading space)" for side, x in (("target", t), ("drafter", d))
                  if x["bytes_roundtrip_dummy_prefix"]),
        "only in target: " + " | ".join(repr(x) for x in report["only_target_examples"]),
        "only in drafter: " + " | ".join(repr(x) for x in report["only_drafter_examples"]),
        "algorithms:",
    ]
    lines += [f"  {name:5s} {status}" for name, status in report["algorithms"].items()]
    for name, cost in _pair_costs(report["algorithms"]):
        if report.get(name):
            lines += cost.lines(report[name])
    return "\n".join(lines)


def explain(report: dict) -> str:
    """What a :func:`compatibility_report` means for each algorithm, as Markdown bullets."""
    share = report["intersection_share_of_drafter"]
    lines = ["**What this means**"]
    if report["shared"]:
        lines.append("- The tokenizers are the same (same bytes, same ids): standard **SD** applies, and SLEM/TLI "
                     "reduce to it.")
    else:
        lines.append("- The vocabularies differ, so standard SD cannot run. **SLEM** always works: it converts the "
                     "draft through text.")
    lines.append(f"- **TLI** drafts only from the {report['intersection']:,} shared byte strings ({share:.0%} of the "
                 "drafter's ordinary tokens). The more of the drafter's probability mass falls there, the better "
                 "TLI does; near 0% it collapses.")
    rt = min(report["target"]["roundtrip_rate"], report["drafter"]["roundtrip_rate"])
    lines.append(f"- Round-trip `decode(encode(s)) == s` holds for {rt:.0%} of the samples on the worse side. Below "
                 "100%, the tokenizer is not injective: SLEM re-tokenizes with a look-behind window so the proposal "
                 "continues the emitted tokens, and the round view lists those re-tokenization events.")
    lines += [cost.explanation for _, cost in _pair_costs(report["algorithms"]) if cost.explanation]
    return "\n".join(lines)

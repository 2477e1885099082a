"""The drafter-compatibility report (``python -m hsd vocab``, the app's compatibility panel).

What the two vocabularies share, how their special roles map, and how faithfully each tokenizer
round-trips text (``decode(encode(s)) == s``; the paper's injectivity appendix). Tokenizers that
do not round-trip are why SLEM tokenizes with a look-behind window.
"""

from __future__ import annotations

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


def _side(model: Model) -> dict:
    vocab = model.vocab
    rate, failures = roundtrip_rate(model.tokenizer)
    config_size = getattr(getattr(model.model, "config", None), "vocab_size", None)
    return {
        "name": model.name,
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


def compatibility_report(pair: Pair) -> dict:
    from .generate import check_algorithm
    from .errors import HsdError

    pv = pair.vocab
    t, d = pair.target.vocab, pair.drafter.vocab
    target_ordinary = len(t) - len(t.special_ids)
    drafter_ordinary = len(d) - len(d.special_ids)
    algorithms = {}
    for name in ("sd", "slem", "tli"):
        try:
            check_algorithm(pair, name)
            algorithms[name] = "ok"
        except HsdError as exc:
            algorithms[name] = str(exc)
    return {
        "target": _side(pair.target),
        "drafter": _side(pair.drafter),
        "shared": pv.shared,
        "intersection": pv.intersection_size,
        "intersection_share_of_target": pv.intersection_size / max(1, target_ordinary),
        "intersection_share_of_drafter": pv.intersection_size / max(1, drafter_ordinary),
        "special_roles": {role: {"target": t_id, "drafter": d_id} for role, (t_id, d_id) in pv.special_map.items()},
        "only_target_examples": _examples(t, d.bytes_to_id),
        "only_drafter_examples": _examples(d, t.bytes_to_id),
        "algorithms": algorithms,
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
        f"bytes determined: target {t['bytes_determined']} (+{t['bytes_undetermined']} unknown), "
        f"drafter {d['bytes_determined']} (+{d['bytes_undetermined']} unknown)",
        f"round-trip decode(encode(s)) == s: target {t['roundtrip_rate']:.0%}, drafter {d['roundtrip_rate']:.0%}",
        "only in target: " + " | ".join(repr(x) for x in report["only_target_examples"]),
        "only in drafter: " + " | ".join(repr(x) for x in report["only_drafter_examples"]),
        "algorithms:",
    ]
    lines += [f"  {name:5s} {status}" for name, status in report["algorithms"].items()]
    return "\n".join(lines)

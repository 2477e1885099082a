"""Build the benchmark prompt sets in ``assets/prompts/`` from local, freely licensed text.

    python scripts/build_prompts.py

* ``code.jsonl``: code-completion prompts (a function's ``def`` line, its docstring and its first body
  line) cut from the Python standard library files the embedded tiny-code pair held out of training
  (``assets/tiny-code/corpus.json``, "heldout"), so the pair has not seen them. PSF License. Each
  ends at the end of its last line, *without* the newline: the target's byte-level BPE merges a
  newline with the next line's indentation (``"\n   "`` is one token), so a prompt ending in a bare
  ``"\n"`` token tells the model that the next line is unindented or that the file ends, and a
  well-trained target often ends the text at once.
* ``summarize.jsonl``: the paper's CNN/DailyMail template (``paper.md`` §2.2) around a section of the
  Python language reference as shipped in ``pydoc_data/topics.py`` (PSF License), 1,000-2,500 characters.
* ``long.jsonl``: the paper's SCROLLS template around 8,000-12,000 characters of the same reference.

Deterministic: the same Python version gives the same files.
"""

from __future__ import annotations

import ast
import json
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "assets" / "prompts"
STDLIB = Path(sysconfig.get_paths()["stdlib"])
HELDOUT = ["smtplib.py", "tracemalloc.py", "asyncio/timeouts.py", "curses/textpad.py", "xml/etree/ElementTree.py",
           "multiprocessing/sharedctypes.py", "importlib/metadata/_text.py", "__future__.py"]
SUMMARIZE = "Summarize the following article:\n{article}\nSummary:\n"  # CNN/DailyMail, paper.md §2.2
LONG = "Summarize the following text:\n{input}\nSummary:\n"  # SCROLLS QASPER, paper.md §2.2
LICENSE = "PSF-2.0 (Python standard library)"


def code_prompts(limit: int = 30) -> list[dict]:
    """Functions with a docstring, round-robin over the held-out files so no single file dominates."""
    per_file = []
    for name in HELDOUT:
        path = STDLIB / name
        if not path.exists():
            continue
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines(keepends=True)
        found = []
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and ast.get_docstring(node) and len(node.body) > 1:
                body = node.body[1]
                text = "".join(lines[node.lineno - 1:body.lineno]).rstrip("\n")
                if 40 <= len(text) <= 1200:
                    found.append({"prompt": text, "source": f"{name}:{node.lineno}", "license": LICENSE})
        per_file.append(sorted(found, key=lambda p: int(p["source"].rsplit(":", 1)[1])))
    out = []
    while len(out) < limit and any(per_file):
        for found in per_file:
            if found and len(out) < limit:
                out.append(found.pop(0))
    return out


def _topics() -> list[tuple[str, str]]:
    from pydoc_data.topics import topics

    return sorted(topics.items())


def _cut(text: str, low: int, high: int) -> str | None:
    """The first ``high`` characters, ended at a paragraph break after ``low``; None if too short."""
    if len(text) < low:
        return None
    if len(text) <= high:
        return text.strip()
    end = text.rfind("\n\n", low, high)
    return text[: end if end > 0 else high].strip()


def summarize_prompts(limit: int = 24) -> list[dict]:
    out = []
    for key, text in _topics():
        article = _cut(text, 1000, 2500)
        if article and len(out) < limit:
            out.append({"prompt": SUMMARIZE.format(article=article), "source": f"pydoc_data.topics[{key!r}]",
                        "license": LICENSE})
    return out


def long_prompts(limit: int = 12) -> list[dict]:
    out, buffer, keys = [], "", []
    for key, text in _topics():
        buffer += text.strip() + "\n\n"
        keys.append(key)
        if len(buffer) >= 8000:
            out.append({"prompt": LONG.format(input=_cut(buffer, 8000, 12000)),
                        "source": "pydoc_data.topics[" + ", ".join(map(repr, keys)) + "]", "license": LICENSE})
            buffer, keys = "", []
            if len(out) >= limit:
                break
    return out


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, prompts in (("code", code_prompts()), ("summarize", summarize_prompts()), ("long", long_prompts())):
        path = OUT / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"id": f"{name}-{i}", **p}, ensure_ascii=False) + "\n"
                                for i, p in enumerate(prompts)), encoding="utf-8")
        print(f"{path.relative_to(ROOT)}: {len(prompts)} prompts, "
              f"{sum(len(p['prompt']) for p in prompts) // max(1, len(prompts))} characters on average")


if __name__ == "__main__":
    main()

"""Build the benchmark prompt sets in ``assets/prompts/`` from local, freely licensed text.

    python scripts/build_prompts.py                                   # code, summarize, long
    python scripts/build_prompts.py --corpus ~/.cache/hsd-train/corpus  # and the two package sets

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
* ``code-packages.jsonl`` and ``code-calibration.jsonl`` (with ``--corpus``, a folder ``build_corpus.py`` wrote):
  a function's or method's ``def`` line(s) and docstring, as indented in its file and ending at the end of the
  docstring's closing line (no newline, as above), from the PyPI packages the corpus holds out whole: the
  evaluation packages (the pair's goals are measured on these) and the calibration packages (settings are
  chosen on these, never measured). A function whose header and docstring also occur in the training split
  (a package vendored into another, code copied between packages) is left out, and so is any prompt already
  taken: the two sets share no prompt. Each package's candidates are shuffled (seeded) and taken round-robin
  over the packages, so the first prompts of a set cover every package and none dominates. Each row names its
  package, version and licence from the corpus manifest.

Deterministic: the same Python version (and the same corpus) gives the same files.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import random
import sys
import sysconfig
import warnings
from pathlib import Path

import build_corpus

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "assets" / "prompts"
STDLIB = Path(sysconfig.get_paths()["stdlib"])
HELDOUT = ["smtplib.py", "tracemalloc.py", "asyncio/timeouts.py", "curses/textpad.py", "xml/etree/ElementTree.py",
           "multiprocessing/sharedctypes.py", "importlib/metadata/_text.py", "__future__.py"]
SUMMARIZE = "Summarize the following article:\n{article}\nSummary:\n"  # CNN/DailyMail, paper.md §2.2
LONG = "Summarize the following text:\n{input}\nSummary:\n"  # SCROLLS QASPER, paper.md §2.2
LICENSE = "PSF-2.0 (Python standard library)"
#: the package prompt sets: file name, the corpus group they come from, how many prompts
PACKAGE_SETS = (("code-packages", "evaluation", 48), ("code-calibration", "calibration", 24))
PROMPT_CHARS = (40, 1200)  # a prompt's length, as for code.jsonl: long docstrings are left out
MIN_DOC_WORDS = 3  # a shorter docstring ("Getter.", "TODO") says too little about what follows
SEED = 0


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


def docstring_prompts(source: str) -> list[tuple[int, str]]:
    """(line, prompt) for each function or method of ``source`` with a docstring of at least
    :data:`MIN_DOC_WORDS` words and a body after it: its ``def`` line(s) and its docstring, indented as in the
    file, up to the end of the docstring's closing line, without the newline."""
    lines = io.StringIO(source, newline="").readlines()  # the line ends ast counts, nothing else
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # invalid escapes in old code
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return []
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        doc = ast.get_docstring(node)
        if doc is None or len(doc.split()) < MIN_DOC_WORDS or len(node.body) < 2:
            continue
        end = node.body[0].end_lineno
        if node.body[1].lineno <= end:  # more code on the docstring's closing line
            continue
        prompt = "".join(lines[node.lineno - 1:end]).rstrip("\r\n")
        if PROMPT_CHARS[0] <= len(prompt) <= PROMPT_CHARS[1]:
            out.append((node.lineno, prompt))
    return sorted(out)


def line_key(text: str) -> tuple[str, ...]:
    """``text``'s lines without their indentation: the same function as a method, or vendored elsewhere."""
    return tuple(line.strip() for line in text.splitlines())


def keys_in(path: Path, keys: set[tuple[str, ...]]) -> set[tuple[str, ...]]:
    """Those of ``keys`` (:func:`line_key`) whose lines occur consecutively in a document of the corpus file."""
    by_first = {}
    for key in keys:
        by_first.setdefault(key[0], []).append(key)
    found = set()
    for doc in build_corpus.read_jsonl(path):
        lines = line_key(doc["text"])
        for i, line in enumerate(lines):
            for key in by_first.get(line, ()):
                if lines[i:i + len(key)] == key:
                    found.add(key)
    return found


def package_prompts(corpus: Path, group: str, limit: int, taken: set, seed: int = SEED) -> list[dict]:
    """``limit`` prompts from the corpus's ``group`` packages (evaluation or calibration), round-robin over the
    packages in name order, each package's candidates in a seeded shuffle; none in ``taken`` (keys of
    :func:`line_key`) or in the training split, and each one taken is added to ``taken``."""
    manifest = json.loads((corpus / "manifest.json").read_text())
    names = manifest.get("heldout_packages", {}).get(group)
    if not names:
        raise SystemExit(f"{corpus / 'manifest.json'} holds out no {group} packages: build the corpus with "
                         "scripts/build_corpus.py --pypi")
    about = {p["name"]: p for p in manifest["packages"]}
    candidates = {name: [] for name in sorted(names)}
    for doc in build_corpus.read_jsonl(corpus / build_corpus.SPLIT_FILES[group]):
        if doc.get("group") == group and doc["source"] in candidates:
            candidates[doc["source"]] += [(doc["path"], line, prompt) for line, prompt in docstring_prompts(doc["text"])]
    keys = {line_key(prompt) for found in candidates.values() for _, _, prompt in found}
    trained = keys_in(corpus / "train.jsonl", keys)
    queues = []
    for name, found in candidates.items():
        random.Random(f"{seed}:{name}").shuffle(found)
        queues.append((name, [c for c in found if line_key(c[2]) not in trained]))
    out = []
    while len(out) < limit and any(q for _, q in queues):
        for name, queue in queues:
            while queue and len(out) < limit:
                path, line, prompt = queue.pop(0)
                if line_key(prompt) not in taken:
                    taken.add(line_key(prompt))
                    out.append({"prompt": prompt, "source": f"{path}:{line}", "package": name,
                                "version": about[name]["version"], "license": about[name]["licence"]})
                    break
    return out


def write_set(name: str, prompts: list[dict]) -> None:
    path = OUT / f"{name}.jsonl"
    path.write_text("".join(json.dumps({"id": f"{name}-{i}", **p}, ensure_ascii=False) + "\n"
                            for i, p in enumerate(prompts)), encoding="utf-8")
    print(f"{path.relative_to(ROOT)}: {len(prompts)} prompts, "
          f"{sum(len(p['prompt']) for p in prompts) // max(1, len(prompts))} characters on average")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=None,
                    help="a corpus folder of scripts/build_corpus.py (WORK/corpus): also write the package sets")
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    for name, prompts in (("code", code_prompts()), ("summarize", summarize_prompts()), ("long", long_prompts())):
        write_set(name, prompts)
    if args.corpus is None:
        print("the package sets (" + ", ".join(f"{name}.jsonl" for name, _, _ in PACKAGE_SETS)
              + ") need --corpus: left as they are")
        return 0
    taken = set()
    for name, group, limit in PACKAGE_SETS:
        write_set(name, package_prompts(Path(args.corpus).expanduser(), group, limit, taken))
    return 0


if __name__ == "__main__":
    sys.exit(main())

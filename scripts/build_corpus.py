#!/usr/bin/env python3
"""Build the embedded pair's training corpus: Python sources of the standard library and of every
permissively licensed package that ``requirements.txt`` installs, deduplicated by content, split by
file into train and held-out.

    python scripts/build_corpus.py --work ~/.cache/hsd-train        # writes WORK/corpus/*.jsonl
    python scripts/build_corpus.py --work DIR --manifest assets/tiny-code/corpus.json

Rules, in order (all deterministic, so the same package versions give the same corpus):

1. Sources: the stdlib (``sysconfig``'s ``stdlib`` path, minus test suites, IDLE, lib2to3 and demos)
   and the ``.py`` files listed in the installed distribution records (``importlib.metadata``) of
   the requirement closure of ``requirements.txt`` (its packages and, recursively, theirs).
2. Licences: read per distribution from ``License-Expression``, ``License`` or the trove
   classifiers; a distribution is kept only if its licence is permissive (MIT, BSD, Apache, PSF,
   ISC, Zlib, CC0, ...); anything copyleft (MPL, GPL, LGPL, ...) or unknown is dropped and listed.
3. Files: UTF-8, non-empty, at most ``--max-file-chars`` characters (drops generated tables),
   outside the stdlib's test suite and vendored copies, and not mostly
   repetition (zlib compresses the text to less than ``--min-zlib-ratio`` of its size: generated
   validators, data tables).
4. Dedup: the first file with a given content (stdlib first, then distributions by name) is kept.
5. Split: the files the shipped pair already held out (``--previous``'s ``heldout`` list) stay
   held out and the files it trained on stay in train, so continuing from the shipped weights
   never tests on seen text; every other file is held out when the first byte of
   sha256(source/path) is below 256/``--heldout-every``, which keeps the split stable when
   packages are added.

The manifest (``corpus.json``) records versions, licences, counts and the held-out file list; the
texts themselves (about 150 MB) live in the work folder, outside the repository.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import re
import sys
import sysconfig
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STDLIB_EXCLUDED = {
    "test", "tests", "idlelib", "lib2to3", "site-packages", "dist-packages", "__pycache__",
    "turtledemo", "ensurepip", "idle_test", "__phello__",
}
PACKAGE_EXCLUDED = {"__pycache__", "_vendor", "vendored"}
PERMISSIVE = re.compile(
    r"^(mit(-\w+)?|(the )?mit license|x11|0?bsd([- ]\d-clause)?|bsd license|new bsd|apache([- ]?2\.0)?( license)?|"
    r"apache software license|psf(-2\.0)?|python software foundation license|python-2\.0|isc( license)?|"
    r"isc license \(iscl\)|zlib|cc0(-1\.0)?|unlicense|bsl-1\.0|cnri-python|hpnd|mit-cmu|llvm-exception)$",
    re.I)
COPYLEFT = re.compile(r"gpl|mpl|mozilla|eupl|epl|cddl|copyleft|sspl|agpl", re.I)
STDLIB_LICENCE = "PSF-2.0"


# ---------------------------------------------------------------------------------------------
# Licences
# ---------------------------------------------------------------------------------------------
def _expression_permissive(expr: str) -> bool | None:
    """SPDX-like expression -> permissive?; None when it cannot be read as one."""
    expr = expr.replace("(", " ").replace(")", " ").strip()
    if not expr or len(expr) > 200 or "\n" in expr:
        return None
    alternatives = re.split(r"\s+OR\s+", expr)
    verdicts = []
    for alt in alternatives:
        terms = [re.sub(r"\s+WITH\s+.*$", "", t).strip() for t in re.split(r"\s+AND\s+", alt)]
        if any(COPYLEFT.search(t) for t in terms):
            verdicts.append(False)
        elif all(PERMISSIVE.match(t) for t in terms):
            verdicts.append(True)
        else:
            verdicts.append(None)
    if True in verdicts:
        return True
    return False if False in verdicts else None


def licence_of(dist) -> tuple[str, bool]:
    """(licence as recorded, permissive?) for an installed distribution."""
    meta = dist.metadata
    classifiers = [c.split("::")[-1].strip() for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    classifiers = [c for c in classifiers if c != "OSI Approved"]
    for field in ("License-Expression", "License"):
        value = (meta.get(field) or "").strip()
        verdict = _expression_permissive(value) if value else None
        if verdict is not None:
            return value, verdict
    if classifiers:
        verdicts = [_expression_permissive(c) for c in classifiers]
        return " AND ".join(classifiers), all(v is True for v in verdicts)
    return (meta.get("License") or "unknown").strip()[:80], False


# ---------------------------------------------------------------------------------------------
# Sources
# ---------------------------------------------------------------------------------------------
def requirement_closure(requirements: Path) -> list:
    """Installed distributions that ``requirements`` pulls in, recursively, sorted by name."""
    import importlib.metadata as md

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    stack = []
    for line in requirements.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            stack.append(Requirement(line).name)
    seen = {}
    while stack:
        name = canonicalize_name(stack.pop())
        if name in seen:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        seen[name] = dist
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                stack.append(req.name)
    return [seen[n] for n in sorted(seen)]


def stdlib_files(stdlib: Path):
    for path in sorted(stdlib.rglob("*.py")):
        rel = path.relative_to(stdlib)
        if any(part in STDLIB_EXCLUDED or part.startswith(".") for part in rel.parts[:-1]):
            continue
        if rel.name.startswith("test_"):
            continue
        yield rel.as_posix(), path


def package_files(dist):
    for f in sorted(dist.files or [], key=str):
        rel = str(f)
        if not rel.endswith(".py") or ".dist-info" in rel or rel.startswith(".."):
            continue
        parts = Path(rel).parts
        if any(p in PACKAGE_EXCLUDED for p in parts[:-1]) or parts[-1].startswith("test_"):
            continue
        yield rel, Path(dist.locate_file(f))


def read_text(path: Path, max_chars: int) -> str | None:
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None
    text = text.replace("\r\n", "\n")
    if not text.strip() or len(text) > max_chars:
        return None
    return text


def is_repetitive(text: str, min_ratio: float) -> bool:
    raw = text.encode("utf-8")
    return len(raw) > 2000 and len(zlib.compress(raw, 6)) < min_ratio * len(raw)


def heldout_by_hash(key: str, every: int) -> bool:
    return hashlib.sha256(key.encode()).digest()[0] < 256 // every


# ---------------------------------------------------------------------------------------------
# Build
# ---------------------------------------------------------------------------------------------
def build(requirements: Path, stdlib: Path, previous: dict | None, heldout_every: int = 50,
          max_file_chars: int = 300_000, min_zlib_ratio: float = 0.12, max_files: int | None = None):
    """Return (train, heldout, manifest); train/heldout are lists of dicts {source, path, text}."""
    prev_train = set(previous.get("train", [])) if previous else set()
    prev_held = set(previous.get("heldout", [])) if previous else set()
    sources = [dict(source="stdlib", name="python", version=platform.python_version(), licence=STDLIB_LICENCE,
                    permissive=True, files=stdlib_files(stdlib))]
    dropped = []
    for dist in requirement_closure(requirements):
        licence, ok = licence_of(dist)
        name = dist.metadata["Name"]
        if ok:
            sources.append(dict(source=name, name=name, version=dist.version, licence=licence, permissive=True,
                                files=package_files(dist)))
        else:
            dropped.append(dict(name=name, version=dist.version, licence=licence))
    seen, train, heldout, packages = set(), [], [], []
    skipped = dict(unreadable_or_large=0, repetitive=0, duplicate=0)
    for src in sources:
        kept = chars = 0
        for rel, path in src["files"]:
            text = read_text(path, max_file_chars)
            if text is None:
                skipped["unreadable_or_large"] += 1
                continue
            if is_repetitive(text, min_zlib_ratio):
                skipped["repetitive"] += 1
                continue
            digest = hashlib.sha256(text.encode()).hexdigest()
            if digest in seen:
                skipped["duplicate"] += 1
                continue
            seen.add(digest)
            key = rel if src["source"] == "stdlib" else f"{src['source']}/{rel}"
            doc = dict(source=src["source"], path=key, text=text)
            if src["source"] == "stdlib" and key in prev_train:
                held = False
            elif src["source"] == "stdlib" and key in prev_held:
                held = True
            else:
                held = heldout_by_hash(key, heldout_every)
            (heldout if held else train).append(doc)
            kept += 1
            chars += len(text)
        packages.append(dict(name=src["name"], version=src["version"], licence=src["licence"], files=kept,
                             chars=chars))
    if max_files:  # smoke tests: a spread-out slice that still has held-out files
        train = train[:: max(1, len(train) // max_files)][:max_files]
        heldout = heldout[:: max(1, len(heldout) // max(2, max_files // 10))][: max(2, max_files // 10)]
    digest = hashlib.sha256()
    for doc in train + heldout:
        digest.update(doc["path"].encode() + b"\0" + doc["text"].encode() + b"\0")
    manifest = dict(
        python=platform.python_version(), stdlib=str(stdlib), requirements=requirements.name,
        rules=dict(heldout_every=heldout_every, max_file_chars=max_file_chars, min_zlib_ratio=min_zlib_ratio,
                   stdlib_excluded_dirs=sorted(STDLIB_EXCLUDED), package_excluded_dirs=sorted(PACKAGE_EXCLUDED),
                   previous_split_kept=bool(previous), max_files=max_files),
        train_files=len(train), heldout_files=len(heldout),
        train_chars=sum(len(d["text"]) for d in train), heldout_chars=sum(len(d["text"]) for d in heldout),
        skipped=skipped, sha256=digest.hexdigest(), packages=packages, dropped_licences=dropped,
        heldout=[d["path"] for d in heldout],
        previous_train=sorted(prev_train) if previous else [],
    )
    return train, heldout, manifest


def write_jsonl(path: Path, docs) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    tmp.replace(path)


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True, help="folder for the corpus texts (outside the repository)")
    ap.add_argument("--manifest", default=None, help="also write the manifest here (e.g. assets/tiny-code/corpus.json)")
    ap.add_argument("--previous", default=str(ROOT / "assets" / "tiny-code" / "corpus.json"),
                    help="manifest of the shipped pair, whose split is kept ('' for none)")
    ap.add_argument("--requirements", default=str(ROOT / "requirements.txt"))
    ap.add_argument("--stdlib", default=sysconfig.get_paths()["stdlib"])
    ap.add_argument("--heldout-every", type=int, default=50)
    ap.add_argument("--max-file-chars", type=int, default=300_000)
    ap.add_argument("--min-zlib-ratio", type=float, default=0.12)
    ap.add_argument("--max-files", type=int, default=None, help="smoke tests: keep a slice of N train files")
    args = ap.parse_args(argv)
    previous = None
    if args.previous and Path(args.previous).is_file():
        previous = json.loads(Path(args.previous).read_text())
        if "previous_train" in previous and previous["previous_train"]:
            # a manifest written by this script: its stdlib split is the one to keep
            previous = dict(train=previous["previous_train"], heldout=previous["heldout"])
    train, heldout, manifest = build(Path(args.requirements), Path(args.stdlib), previous, args.heldout_every,
                                     args.max_file_chars, args.min_zlib_ratio, args.max_files)
    work = Path(args.work).expanduser() / "corpus"
    write_jsonl(work / "train.jsonl", train)
    write_jsonl(work / "heldout.jsonl", heldout)
    (work / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    if args.manifest:
        Path(args.manifest).write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"corpus: {manifest['train_files']} train files ({manifest['train_chars']:,} chars), "
          f"{manifest['heldout_files']} held out ({manifest['heldout_chars']:,} chars) from "
          f"{len(manifest['packages'])} sources; dropped for licence: "
          f"{', '.join(d['name'] for d in manifest['dropped_licences']) or 'none'}; skipped {manifest['skipped']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

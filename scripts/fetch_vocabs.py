#!/usr/bin/env python3
"""Fetch real tokenizer vocabularies (vocab-only GGUF files) without Hub access.

The llama-cpp-python *source* distribution on PyPI vendors llama.cpp, whose
``models/`` folder holds vocabulary-only GGUF files (``ggml-vocab-*.gguf``)
for many real model families (Llama SPM, Llama-3 BPE, Qwen2, Phi-3, StarCoder,
GPT-2, DeepSeek, Falcon, ...), each with reference tokenizations
(``.gguf.inp`` / ``.gguf.out``).  PyPI is reachable from every machine of this
project, the Hugging Face Hub is not, so this is how the test-suite gets real
tokenizers.

Downloads the sdist once per machine with ``pip download`` and extracts only
``vendor/llama.cpp/models/ggml-vocab-*`` into ``$HSD_CACHE/gguf-vocabs/``
(``HSD_CACHE`` defaults to ``~/.cache/hsd``).  Idempotent: does nothing but
list what it has when the files are already there.

Usage: python scripts/fetch_vocabs.py [--force] [--version X.Y.Z]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "llama-cpp-python"
# Pinned: 0.3.36 is verified to ship ggml-vocab-*.gguf with .inp/.out files.
DEFAULT_VERSION = "0.3.36"
# Tried in order if the pinned version cannot be downloaded.
FALLBACK_VERSIONS = ("0.3.35", "0.3.34", "0.3.30", "0.3.20", "0.3.16")
MEMBER_MARKER = "vendor/llama.cpp/models/ggml-vocab-"
DONE_MARKER = ".complete"


def cache_root() -> Path:
    return Path(os.environ.get("HSD_CACHE") or Path.home() / ".cache" / "hsd").expanduser()


def vocab_dir() -> Path:
    return cache_root() / "gguf-vocabs"


def _download(version: str, dest: Path) -> Path | None:
    # pip prepares the sdist's metadata (installs its build backend in an isolated env,
    # ~15 s) but builds nothing.
    cmd = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
           f"{PACKAGE}=={version}", "-d", str(dest)]
    print("+", " ".join(cmd), flush=True)
    res = subprocess.run(cmd, capture_output=True, text=True)
    tarballs = sorted(dest.glob("llama_cpp_python-*.tar.gz"))
    if tarballs:
        return tarballs[0]
    tail = (res.stderr or res.stdout).strip().splitlines()[-3:]
    print("  pip download failed:", *tail, sep="\n    ", file=sys.stderr)
    return None


def _extract(tarball: Path, out: Path) -> int:
    n = 0
    with tarfile.open(tarball) as tf:
        for m in tf.getmembers():
            if MEMBER_MARKER not in m.name or not m.isfile():
                continue
            name = Path(m.name).name
            src = tf.extractfile(m)
            assert src is not None
            tmp = out / (name + ".part")
            with open(tmp, "wb") as f:
                shutil.copyfileobj(src, f)
            tmp.replace(out / name)
            n += 1
    return n


def list_vocabs(out: Path) -> None:
    files = sorted(out.glob("ggml-vocab-*.gguf"))
    print(f"{len(files)} vocab files in {out}:")
    for f in files:
        ref = "with reference tokenizations" if Path(str(f) + ".inp").exists() else "no reference"
        name = f.name[len("ggml-vocab-"):-len(".gguf")]
        print(f"  {name:<18} {f.stat().st_size / 1e6:7.2f} MB  {ref}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--force", action="store_true", help="download again even if present")
    ap.add_argument("--version", default=None, help=f"{PACKAGE} version (default {DEFAULT_VERSION})")
    args = ap.parse_args(argv)

    out = vocab_dir()
    marker = out / DONE_MARKER
    if marker.exists() and not args.force:
        print(f"already fetched ({marker.read_text().strip()})")
        list_vocabs(out)
        return 0

    out.mkdir(parents=True, exist_ok=True)
    versions = [args.version] if args.version else [DEFAULT_VERSION, *FALLBACK_VERSIONS]
    with tempfile.TemporaryDirectory(prefix="hsd-sdist-") as tmp:
        for version in versions:
            tarball = _download(version, Path(tmp))
            if tarball is None:
                continue
            n = _extract(tarball, out)
            if n == 0:
                print(f"  {tarball.name} has no {MEMBER_MARKER}* files", file=sys.stderr)
                tarball.unlink()
                continue
            marker.write_text(f"{PACKAGE}=={version}\n")
            print(f"extracted {n} files from {tarball.name}")
            list_vocabs(out)
            return 0
    print(f"error: could not download a source distribution of {PACKAGE} "
          f"(tried {', '.join(versions)}) from the package index; "
          "check network access to PyPI / pip configuration.", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())

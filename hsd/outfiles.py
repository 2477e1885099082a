"""Output files of the command line: checked before any model loads, written without losing a finished run.

Shared by the subcommands in :mod:`hsd.cli` and those defined in their own modules (:mod:`hsd.drafters`,
:mod:`hsd.production`), which :mod:`hsd.cli` imports, so they must not import it back.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .errors import InvalidSettingError


def check_output_file(path: Path | None, flag: str = "--json") -> None:
    """Fail before any model loads if ``path`` cannot be written (a directory, a missing folder...)."""
    if path is None:
        return
    try:
        _check_writable(path, flag)
    except OSError as exc:  # a name too long for the file system, a path through a file...
        raise InvalidSettingError(f"{flag} {path}: {exc.strerror or exc}; choose another path.") from None


def _check_writable(path: Path, flag: str) -> None:
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InvalidSettingError(f"{flag} {path}: the folder {parent} does not exist; create it first.")
    limit = os.pathconf(parent, "PC_NAME_MAX") if hasattr(os, "pathconf") else 255
    if len(os.fsencode(path.name)) > limit:
        raise InvalidSettingError(f"{flag} {path.name[:40]}...: the file name is {len(os.fsencode(path.name))} bytes, "
                                  f"more than this file system's {limit}; choose a shorter name.")
    if path.is_dir():
        raise InvalidSettingError(f"{flag} {path} is a directory: give a file name, e.g. {path / 'run.json'}.")
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

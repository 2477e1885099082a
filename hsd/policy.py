"""What a visitor of a public app may load: presets, Hub ids, and local directories under an allow-list.

An app that anyone can reach (a Hugging Face Space, or one launched with a share link) must not let a
visitor read the server's directories: a model name is a path as much as a Hub id, and the difference
between "not allowed" and "does not exist" is enough to probe the file system. So, in public mode, a local
directory is accepted only under

- the package's embedded assets folder (:data:`hsd.assets.ASSETS`, the presets),
- the Hugging Face cache (``huggingface_hub.constants.HF_HUB_CACHE``),
- the folders the operator names in ``HSD_ALLOWED_DIRS`` (``os.pathsep``-separated),

each checked after symbolic links and ``..`` are resolved, and a path outside them is refused with the same
error whether or not it exists. ``trust_remote_code`` is never the visitor's to switch on: the operator names
the repositories whose own code may run in ``HSD_TRUST_REMOTE_CODE`` (comma-separated Hub ids).

The app is public when ``SPACE_ID`` is set (a Space), when ``HSD_PUBLIC=1``, or after :func:`make_public` (the
app calls it when it launches with ``share=True``). The Python API and the CLI never consult this module: they
load whatever their caller names.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from huggingface_hub import constants as hub_constants

from .assets import ASSETS
from .errors import NotAllowedError

ALLOWED_DIRS_ENV = "HSD_ALLOWED_DIRS"
TRUST_ENV = "HSD_TRUST_REMOTE_CODE"
#: a Hub id as the Hub accepts it: owner/name (or a bare name), parts starting and ending alphanumeric,
#: no ``..`` or ``--`` (huggingface_hub's own rule), so ``..``, ``.hidden`` and ``../etc`` are paths, never ids
HUB_ID = re.compile(r"^(?:[A-Za-z0-9](?:[\w.-]{0,94}[A-Za-z0-9])?/)?[A-Za-z0-9](?:[\w.-]{0,94}[A-Za-z0-9])?$")

_declared_public = False


def make_public() -> None:
    """Treat this process as a public app from now on (the app calls it when launched with ``share=True``)."""
    global _declared_public
    _declared_public = True


def is_public(public: bool | None = None) -> bool:
    """``public`` if given; otherwise whether this process serves the public: on a Space (``SPACE_ID``), with
    ``HSD_PUBLIC=1``, or after :func:`make_public`."""
    if public is not None:
        return bool(public)
    return _declared_public or bool(os.environ.get("SPACE_ID")) or os.environ.get("HSD_PUBLIC", "") == "1"


def allowed_dirs() -> list[Path]:
    """The folders a public app loads local models from, resolved: the embedded assets, the Hugging Face cache,
    and every folder in ``HSD_ALLOWED_DIRS``."""
    extra = [p for p in os.environ.get(ALLOWED_DIRS_ENV, "").split(os.pathsep) if p.strip()]
    return [Path(p).expanduser().resolve() for p in (ASSETS, hub_constants.HF_HUB_CACHE, *extra)]


def is_dir(name: str) -> bool:
    """Whether ``name`` is an existing directory; ``False`` for a name no file system takes (too long, NUL)."""
    try:
        return Path(name).expanduser().is_dir()
    except (OSError, ValueError, RuntimeError):  # RuntimeError: an unknown ~user
        return False


def is_hub_id(name: str) -> bool:
    """Whether ``name`` has the shape of a Hub id (``owner/name`` or ``name``), as the Hub validates it."""
    return bool(HUB_ID.match(name)) and ".." not in name and "--" not in name


def check_local(name: str, path: str | None = None) -> str:
    """``path`` (default ``name``, which the message shows) resolved, if it lies under :func:`allowed_dirs`;
    otherwise :class:`NotAllowedError`, the same whether it exists or not, so a visitor learns nothing about the
    server's files."""
    try:
        path = Path(path or name).expanduser().resolve()
        if any(path == root or root in path.parents for root in allowed_dirs()):
            return str(path)
    except (OSError, ValueError, RuntimeError):  # too long, NUL, a lone surrogate, an unknown ~user: no folder
        pass
    shown = repr(name) if len(name) <= 200 else repr(name[:200]) + "…"
    raise NotAllowedError(
        f"{shown} is not allowed here: this public app loads the presets, Hugging Face Hub ids (owner/name) "
        f"and local directories under the embedded assets or the Hugging Face cache only. The operator can allow "
        f"more folders with the environment variable {ALLOWED_DIRS_ENV} (folders separated by "
        f"{os.pathsep!r}).")


def check_name(name: str, path: str | None = None) -> str:
    """A public app's check of a model name as typed (``path``: the embedded folder it names, if any): a Hub id
    passes as it is unless it is also a directory here (transformers would read the directory), which must then
    be allowed; every other name is a path and must lie under :func:`allowed_dirs`."""
    if not name:
        return name
    if path is None and is_hub_id(name) and not is_dir(name):
        return name
    return check_local(name, path)


def trusted_repos() -> frozenset[str]:
    """The repositories whose own code the operator lets a public or interactive app run (``HSD_TRUST_REMOTE_CODE``)."""
    return frozenset(p.strip() for p in os.environ.get(TRUST_ENV, "").split(",") if p.strip())


def trusts_remote_code(name: str) -> bool:
    """Whether the operator allowed ``name``'s repository code (``HSD_TRUST_REMOTE_CODE``); a visitor never can."""
    return bool(name) and name in trusted_repos()

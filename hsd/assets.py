"""Where the embedded pair and the prompt sets live.

Installed (``pip install .``), they are package data: pyproject.toml maps the repository's top-level
``assets/`` onto the package ``hsd._assets``. Run from a checkout, or installed editable (``pip install
-e .``, where the package is the checkout's ``hsd/``), they are the checkout's ``assets/``. Either way
the path never depends on the current directory.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def assets_dir() -> Path:
    """``hsd/_assets`` in an installed package, else ``assets/`` beside the ``hsd/`` of a checkout."""
    installed = files(__package__) / "_assets"
    if installed.is_dir():
        return Path(str(installed))
    return Path(__file__).resolve().parent.parent / "assets"


ASSETS = assets_dir()

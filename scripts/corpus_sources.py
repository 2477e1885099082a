"""What the embedded pair's corpus is made of: which licences count as permissive, and which installed
distributions ``requirements.txt`` pulls in. Shared by ``build_corpus.py`` and ``pypi_packages.py``."""

from __future__ import annotations

import re
from pathlib import Path

PERMISSIVE = re.compile(
    r"^(mit(-\w+)?|(the )?mit license|x11|0?bsd([- ]\d-clause)?|bsd license|new bsd|apache([- ]?2\.0)?( license)?|"
    r"apache software license|apache license 2\.0|psf(-2\.0)?|python software foundation license|"
    r"python-2\.0|isc( license)?|isc license iscl|zlib|cc0(-1\.0)?|(the )?unlicense( unlicense)?|bsl-1\.0|cnri-python|hpnd|mit-cmu|llvm-exception)$",
    re.I)
COPYLEFT = re.compile(r"gpl|mpl|mozilla|eupl|epl|cddl|copyleft|sspl|agpl", re.I)



def _expression_permissive(expr: str) -> bool | None:
    """SPDX-like expression -> permissive?; None when it cannot be read as one."""
    expr = " ".join(expr.replace("(", " ").replace(")", " ").split())
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
    return licence_of_metadata(dist.metadata)


def licence_of_metadata(meta) -> tuple[str, bool]:
    """(licence as recorded, permissive?) from core metadata (an installed distribution's or a wheel's METADATA)."""
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

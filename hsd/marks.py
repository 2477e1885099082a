"""The state a status line or a list item is in, as a word in a coloured badge.

A badge is a ``<span>`` with a class the app's style sheet colours (:data:`CSS`) and a word that says the same
thing without the colour, so the meaning survives a browser with no emoji font, a projector that washes the
colours out, and a screen reader. Markdown and HTML components keep the span; :func:`plain` takes it out for
text that is not HTML (a log, a terminal).
"""

from __future__ import annotations

import re

#: kind -> the word the badge shows
WORDS = {"ok": "done", "busy": "working", "error": "error", "stopped": "stopped", "no": "not available",
         "saved": "saved run", "fail": "failed", "yes": "runs"}


def badge(kind: str, word: str | None = None) -> str:
    """A badge of ``kind`` (a key of :data:`WORDS`) showing ``word`` (default: the kind's own word)."""
    return f'<span class="hsd-mark hsd-mark-{kind}">{word or WORDS[kind]}</span>'


OK, BUSY, ERROR, STOPPED, NO, SAVED, FAIL, YES = (badge(kind) for kind in
                                                  ("ok", "busy", "error", "stopped", "no", "saved", "fail", "yes"))


def mark(kind: str, text: str) -> str:
    """``text`` after a badge of ``kind``."""
    return f"{badge(kind)} {text}"


def starts(text, *kinds: str) -> bool:
    """Whether ``text`` begins with a badge of one of ``kinds``."""
    head = str(text or "").lstrip()
    return any(head.startswith(f'<span class="hsd-mark hsd-mark-{kind}">') for kind in kinds)


_SPAN = re.compile(r'<span class="hsd-mark hsd-mark-[a-z]+">([^<]*)</span>')


def plain(text: str) -> str:
    """``text`` with each badge written as its word in brackets (``[done] ...``), for logs and terminals."""
    return _SPAN.sub(lambda m: f"[{m.group(1)}]", str(text))


#: the badges' look: a word on a tinted ground with a border, legible in any font and without colour
CSS = """
.hsd-mark { display: inline-block; padding: 0 0.45em; border-radius: 0.35em; border: 1px solid;
            font-size: 0.8em; font-weight: 600; line-height: 1.5; vertical-align: 0.08em;
            white-space: nowrap; }
.hsd-mark-ok, .hsd-mark-yes { color: #14532d; background: #dcfce7; border-color: #16a34a; }
.hsd-mark-busy { color: #1e3a8a; background: #dbeafe; border-color: #2563eb; }
.hsd-mark-error, .hsd-mark-fail { color: #7f1d1d; background: #fee2e2; border-color: #dc2626; }
.hsd-mark-stopped, .hsd-mark-saved { color: #374151; background: #f3f4f6; border-color: #6b7280; }
.hsd-mark-no { color: #78350f; background: #fef3c7; border-color: #d97706; }
"""

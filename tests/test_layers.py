"""The import graph of hsd/ has no cycle, counting imports inside functions too (docs/design.md, Layers)."""

import ast
from pathlib import Path

HSD = Path(__file__).resolve().parent.parent / "hsd"


def _module(path: Path) -> str:
    parts = path.relative_to(HSD.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    name = _module(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rsplit(".", 1)[0]
            target = (f"{base}.{node.module}" if node.module else base) if node.level else node.module or ""
            for alias in node.names:  # "from . import ar" names a module; "from .x import f" a name in one
                out.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in modules else target)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return {m for m in out if m in modules and m != name}


def test_hsd_import_graph_has_no_cycle():
    files = sorted(HSD.rglob("*.py"))
    modules = {_module(p) for p in files}
    graph = {_module(p): _imports(p, modules) - {"hsd"} for p in files}
    for name in graph:  # a package's own __init__ is imported by its modules' import machinery, not by them
        graph[name] = {m for m in graph[name] if not name.startswith(m + ".")}
    state: dict[str, int] = {}

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(graph[node]):
            assert state.get(nxt) != 1, "import cycle: " + " -> ".join(path + [nxt])
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])

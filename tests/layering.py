"""The layer checker: every import under replicator/ against the README's layer list (pure, no Spark).

A part is the first path component under replicator/ (a package such as `engine`, or a top-level
module such as `metrics`); the package root `replicator/__init__.py` is the part `__init__`. The
layers are read from ONE place, the README's Layout block between `<!-- layers:start -->` and
`<!-- layers:end -->`: one numbered line per layer, top first, its parts named in backticks.
Every import counts: module level, inside function bodies and under `if TYPE_CHECKING:`.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "replicator"
LAYERS_START = "<!-- layers:start -->"
LAYERS_END = "<!-- layers:end -->"
MAX_LINES = 600


@dataclass(frozen=True)
class Import:
    source: str  # dotted module name of the importer
    target: str  # dotted module name imported (resolved to a module of the package)
    line: int

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} (line {self.line})"


def module_files(root: Path) -> dict[str, Path]:
    """Every module of the package under `root` (the repository root), by dotted name."""
    found: dict[str, Path] = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def part_of(module: str) -> str:
    """The part a module belongs to: the first component under the package, `__init__` for the root."""
    names = module.split(".")
    return names[1] if len(names) > 1 else "__init__"


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of `name` that is a module of the package (None outside the package)."""
    names = name.split(".")
    while names:
        candidate = ".".join(names)
        if candidate in modules:
            return candidate
        names.pop()
    return None


def imports_of(module: str, modules: dict[str, Path]) -> list[Import]:
    """Every import of the package in `module`'s file, wherever it stands in the file."""
    path = modules[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[Import] = []

    def add(name: str, line: int) -> None:
        target = _resolve(name, modules)
        if target is not None and target != module:
            found.append(Import(module, target, line))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")
                if node.level > 1:
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                add(submodule if submodule in modules else base, node.lineno)
    return sorted(found, key=lambda i: (i.line, i.target))


def import_graph(root: Path) -> list[Import]:
    modules = module_files(root)
    return [imp for module in modules for imp in imports_of(module, modules)]


def read_layers(readme: Path) -> list[list[str]]:
    """The README's layer list, top first: each numbered line's parts (the names in backticks)."""
    text = readme.read_text(encoding="utf-8")
    start, end = text.find(LAYERS_START), text.find(LAYERS_END)
    if start < 0 or end < start:
        raise AssertionError(f"{readme}: no {LAYERS_START} ... {LAYERS_END} block")
    layers = []
    for line in text[start + len(LAYERS_START) : end].splitlines():
        if re.match(r"\s*\d+\.\s", line):
            layers.append(re.findall(r"`([^`]+)`", line))
    return layers


def placement_problems(root: Path, layers: list[list[str]]) -> list[str]:
    """Parts under the package missing from the layer list, named twice, or named but absent."""
    existing = {part_of(m) for m in module_files(root)}
    named: dict[str, list[int]] = {}
    for number, parts in enumerate(layers, start=1):
        for part in parts:
            named.setdefault(part, []).append(number)
    problems = [f"part {p!r} is in no layer of the README's list" for p in sorted(existing - set(named))]
    problems += [f"part {p!r} is in layers {n}" for p, n in sorted(named.items()) if len(n) > 1]
    problems += [f"part {p!r} is in the README's list but not under {PACKAGE}/" for p in sorted(set(named) - existing)]
    return problems


def layer_violations(imports: list[Import], layers: list[list[str]]) -> list[Import]:
    """Imports between parts that do not go to a strictly lower layer (same layer included)."""
    layer = {part: number for number, parts in enumerate(layers) for part in parts}
    bad = []
    for imp in imports:
        src, dst = part_of(imp.source), part_of(imp.target)
        if src != dst and src in layer and dst in layer and layer[dst] <= layer[src]:
            bad.append(imp)
    return sorted(bad, key=lambda i: (i.source, i.line, i.target))


def import_cycles(imports: list[Import]) -> list[list[str]]:
    """The module-level import cycles (Tarjan's strongly connected components of more than one module)."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        graph.setdefault(imp.source, set()).add(imp.target)
        graph.setdefault(imp.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(cycles)


def long_files(root: Path, dirs: tuple[str, ...] = (PACKAGE, "bench"), limit: int = MAX_LINES) -> list[str]:
    """Python files over `limit` lines, with their line counts."""
    found = []
    for name in dirs:
        for path in sorted((root / name).rglob("*.py")):
            count = len(path.read_text(encoding="utf-8").splitlines())
            if count > limit:
                found.append(f"{path.relative_to(root)}: {count} lines")
    return found

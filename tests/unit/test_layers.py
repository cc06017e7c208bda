"""The package's layers: imports only go down the README's layer list, no import cycles, short modules."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.layering import (
    MAX_LINES,
    Import,
    import_cycles,
    import_graph,
    layer_violations,
    long_files,
    placement_problems,
    read_layers,
)

ROOT = Path(__file__).resolve().parents[2]


def check(root: Path) -> list[str]:
    """Everything wrong with the tree at `root`, one line each (empty when it keeps its layers)."""
    layers = read_layers(root / "README.md")
    imports = import_graph(root)
    problems = placement_problems(root, layers)
    problems += [f"upward or sideways import: {imp}" for imp in layer_violations(imports, layers)]
    problems += ["import cycle: " + " -> ".join(cycle) for cycle in import_cycles(imports)]
    return problems


def test_every_part_is_placed_in_one_layer() -> None:
    problems = placement_problems(ROOT, read_layers(ROOT / "README.md"))
    assert not problems, "\n".join(problems)


def test_imports_only_go_to_lower_layers() -> None:
    bad = layer_violations(import_graph(ROOT), read_layers(ROOT / "README.md"))
    assert not bad, "imports against the README's layer list:\n" + "\n".join(map(str, bad))


def test_no_import_cycles() -> None:
    cycles = import_cycles(import_graph(ROOT))
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_modules_fit_in_a_head() -> None:
    found = long_files(ROOT)
    assert not found, f"modules over {MAX_LINES} lines:\n" + "\n".join(found)


# --- the checker catches what it is for -------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the package and the README to break."""
    shutil.copytree(ROOT / "replicator", tmp_path / "replicator", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    assert check(tmp_path) == []
    return tmp_path


def _insert_after_future(path: Path, code: str) -> int:
    """Insert `code` (one line) after the file's `from __future__` import; return its line number."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("from __future__")) + 1
    lines.insert(at, code + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return at + 1


def test_upward_imports_are_reported_eager_lazy_and_type_checking(tree: Path) -> None:
    pkg = tree / "replicator"
    top = _insert_after_future(pkg / "delta" / "writer.py", "from replicator.engine import window")
    with (pkg / "codec" / "values.py").open("a", encoding="utf-8") as f:
        f.write("\n\ndef _lazy() -> None:\n    import replicator.sim.demo  # noqa\n")
    lazy = len((pkg / "codec" / "values.py").read_text(encoding="utf-8").splitlines())
    with (pkg / "storage" / "local.py").open("a", encoding="utf-8") as f:
        f.write("\nif TYPE_CHECKING:\n    from ..delta import session\n")
    typed = len((pkg / "storage" / "local.py").read_text(encoding="utf-8").splitlines())

    bad = layer_violations(import_graph(tree), read_layers(tree / "README.md"))

    assert bad == [
        Import("replicator.codec.values", "replicator.sim.demo", lazy),
        Import("replicator.delta.writer", "replicator.engine.window", top),
        Import("replicator.storage.local", "replicator.delta.session", typed),
    ]
    reported = [line for line in check(tree) if not line.startswith("import cycle: ")]
    assert reported == [f"upward or sideways import: {imp}" for imp in bad]


def test_an_import_within_one_layer_is_reported(tree: Path) -> None:
    line = _insert_after_future(tree / "replicator" / "codec" / "large.py", "from replicator.formats import framing")
    assert check(tree) == [
        f"upward or sideways import: replicator.codec.large -> replicator.formats.framing (line {line})"
    ]


def test_a_cycle_inside_one_part_is_reported(tree: Path) -> None:
    engine = tree / "replicator" / "engine"
    (engine / "ping.py").write_text('"""one half."""\n\nfrom . import pong\n', encoding="utf-8")
    (engine / "pong.py").write_text('"""the other half."""\n\n\ndef f() -> None:\n    from . import ping\n')
    assert check(tree) == ["import cycle: replicator.engine.ping -> replicator.engine.pong"]


def test_a_part_missing_from_the_readme_is_reported(tree: Path) -> None:
    readme = tree / "README.md"
    text = readme.read_text(encoding="utf-8")
    readme.write_text(text.replace("`faults`", "faults"), encoding="utf-8")
    assert check(tree) == ["part 'faults' is in no layer of the README's list"]


def test_a_long_module_is_reported(tmp_path: Path) -> None:
    for name, lines in [("replicator/short.py", MAX_LINES), ("bench/long.py", MAX_LINES + 1)]:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("x = 1\n" * lines, encoding="utf-8")
    assert long_files(tmp_path) == [f"bench/long.py: {MAX_LINES + 1} lines"]

"""The README is a front door and the docs link up: every relative link in README.md and docs/**/*.md
leads to a file or directory that exists, and an anchor into a Markdown page names one of its headings.
Code spans of those pages, schemas/*.md and the notebooks' Markdown cells that name a file of this
repository (`replicator/engine/loop.py`, `engine/loop.py`, `java/s3commit`, `bench/`, `writer.py`, a
Layout row's `window.py`) or a module or class of ours (`replicator.delta.explore`,
`replicator.s3commit.Pin`) name one that exists, so a module that moves or becomes a package cannot
leave the docs pointing at its old place."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# Pages whose code spans are checked: the linked pages, the format notes, the notebooks' Markdown.
CODE_PAGES = [*PAGES, *sorted((ROOT / "schemas").glob("*.md")), *sorted((ROOT / "notebooks").glob("*.ipynb"))]
README_MAX_LINES = 420

_FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[ \t]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.DOTALL)
_LINK = re.compile(r"\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^()\s<>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)

# A code span read as a repository path: slash-separated names, an optional trailing slash and an
# optional `#anchor`. No scheme (`s3a://...`), no leading `/` or `.` (`/tmp/x`, `./warehouse`), no
# placeholder or pattern (`<schema>`, `*`, `{uuid}`), no space: those are examples, not our files.
_PATH_SPAN = re.compile(r"^(?P<path>[A-Za-z_][\w.-]*(?:/[A-Za-z_][\w.-]*)*/?)(?:#(?P<anchor>[\w-]+))?$")
# A span starting with one of these names a path from the repository root.
TOP_DIRS = ("replicator", "bench", "tests", "tools", "deploy", "docs", "notebooks", "schemas")
# A span starting with a package of replicator/ names a path under replicator/ (`engine/loop.py`).
PACKAGES = sorted(p.name for p in (ROOT / "replicator").iterdir() if (p / "__init__.py").is_file())
# Where any other path is looked for (`craft/` in replicator/codec/, `java/s3commit` in replicator/delta/,
# `unit/` in tests/, `grafana/replicator.json` in deploy/), besides the directory of the README Layout
# row it is written in.
RELATIVE_BASES = ("replicator", *(f"replicator/{p}" for p in PACKAGES), "tests", "deploy", "tools")
# A span with a slash ending in one of these (or in `/`) reads as a file of ours and must resolve.
FILE_SUFFIXES = (".py", ".java", ".md", ".proto", ".toml", ".yml", ".json", ".sh", ".ipynb", ".xml")
# First names of paths that are not ours: the warehouse's and TiCDC's storage-sink layouts, and the
# files of other projects the docs cite (TiCDC's repository, Go's standard library).
NOT_OURS = {"_replicator", "_delta_log", "_change_data", "dead_letters", "meta", "tables", "windows",
            "ticdc", "pkg", "internal", "examples", "encoding"}
# Files the docs name that a command writes and git ignores (a fresh clone does not have them).
GENERATED = {"bench/results.json"}
# Directories a bare `name.py` is looked for in.
SOURCE_DIRS = ("replicator", "bench", "tests", "tools")

# A dotted name of ours in a span: `replicator.delta.explore`, `python -m replicator.sim.demo`,
# `replicator.s3commit.Pin`, `bench.features`; not part of a file name (`/etc/replicator.toml`).
_DOTTED = re.compile(r"(?<![\w./-])(?:replicator|bench)(?:\.(?:\w+|\*))+(?![\w-])")
_FILE_EXTS = {"json", "jsonl", "toml", "yml", "yaml", "jar", "log", "md", "py", "txt", "properties", "gz"}
_DECLARED_PACKAGE = re.compile(r"^package\s+([\w.]+)\s*;", re.MULTILINE)


def _without_code(text: str) -> str:
    """The text without fenced code blocks and code spans (a link whose text is code keeps its target)."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text).replace("\\`", "'"))


def links(text: str) -> list[str]:
    """The targets of the Markdown links `[text](target)` outside code."""
    return [m.group(2) for m in _LINK.finditer(_without_code(text))]


def code_spans(text: str) -> list[tuple[int, str]]:
    """(line number, content) of every code span outside fenced blocks, content stripped of its
    backticks and the spaces inside them."""
    text = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text).replace("\\`", "'")
    return [(text.count("\n", 0, m.start()) + 1, m.group(0).strip("`").strip()) for m in _CODE_SPAN.finditer(text)]


def row_dirs(text: str) -> dict[int, str]:
    """Line number -> the directory a table row is about, where its first cell opens with a code span
    naming a directory (the README's Layout: `window.py` in the row of `replicator/engine/`)."""
    out: dict[int, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        m = re.match(r"^\|\s*`([^`]+/)`", line)
        if m:
            out[n] = m.group(1)
    return out


def markdown_of(page: Path) -> list[tuple[str, str]]:
    """(where, Markdown text) of a page: the file itself, or each Markdown cell of a notebook."""
    rel = page.relative_to(ROOT)
    if page.suffix != ".ipynb":
        return [(str(rel), page.read_text(encoding="utf-8"))]
    cells = json.loads(page.read_text(encoding="utf-8"))["cells"]
    return [(f"{rel} cell {i}", "".join(c["source"])) for i, c in enumerate(cells) if c["cell_type"] == "markdown"]


def _source_names() -> set[str]:
    """The names of every source file a bare `name.py` may mean."""
    return {p.name for d in SOURCE_DIRS for p in (ROOT / d).rglob("*.py") if "__pycache__" not in p.parts}


def _resolves(path: str, anchor: str | None, dest: Path, shown: str) -> str | None:
    """Why `dest` (written `path`) is not what the span promises; None when it is."""
    if not dest.exists():
        return f"{shown}: no such file or directory"
    if path.endswith("/") and not dest.is_dir():
        return f"{shown}: not a directory"
    if anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text(encoding="utf-8")):
        return f"{shown}: no heading with anchor #{anchor}"
    return None


def path_problem(span: str, root: Path = ROOT, source_names: set[str] | None = None,
                 row_dir: str | None = None) -> str | None:
    """Why the code span `span` names a repository path that does not exist; None when it names one
    that does, or does not read as a repository path at all. `replicator/...`, `bench/...`,
    `tests/...` (any of TOP_DIRS) resolve from the root, `engine/loop.py` (a package of replicator/)
    under replicator/; another path with a slash resolves in the table row's directory or one of
    RELATIVE_BASES when it ends like a file of ours or in `/`, or starts with a directory there
    (`java/s3commit`). A bare `writer.py` must be a file under the row's directory, else of SOURCE_DIRS;
    an anchor into a Markdown page must name one of its headings."""
    m = _PATH_SPAN.match(span)
    if not m:
        return None
    path, anchor = m.group("path"), m.group("anchor")
    first = path.split("/", 1)[0]
    if "/" not in path:
        if not path.endswith(".py"):
            return None
        if row_dir:
            found = any("__pycache__" not in p.parts for p in (root / row_dir).rglob(path))
            return None if found else f"no file named {path} under {row_dir}"
        names = _source_names() if source_names is None else source_names
        return None if path in names else f"no file named {path} under {', '.join(SOURCE_DIRS)}"
    if path.rstrip("/") in GENERATED or first in NOT_OURS or first.isupper():
        return None  # ignored, not ours, or a placeholder (`DIR/expected.json`)
    if first in TOP_DIRS:
        return _resolves(path, anchor, root / path, path)
    if first in PACKAGES:
        return _resolves(path, anchor, root / "replicator" / path, f"replicator/{path}")
    bases = list(dict.fromkeys([row_dir.rstrip("/")] if row_dir else []) | dict.fromkeys(RELATIVE_BASES))
    if not (path.endswith(("/", *FILE_SUFFIXES)) or any((root / b / first).is_dir() for b in bases)):
        return None  # a state or URL path (`state/kafka`, `a/b`, `encoding/json`), not a file of ours
    problems: list[str] = []
    for base in bases:
        why = _resolves(path, anchor, root / base / path, f"{base}/{path}")
        if why is None:
            return None
        problems.append(why)
    where = f"{row_dir}, " if row_dir and row_dir.rstrip("/") not in RELATIVE_BASES else ""
    return problems[0] if len(problems) == 1 else \
        f"{path}: no such file or directory in {where}replicator/, replicator/<package>/, tests/, deploy/ or tools/"


@functools.cache
def _declared_packages(root: Path) -> dict[str, set[str]]:
    """Java package -> its class names, and protobuf package -> its .proto files' names: the dotted
    names of ours that are not Python (`replicator.s3commit.Pin`, `package replicator.archive`)."""
    out: dict[str, set[str]] = {}
    sources = [*(root / "replicator").rglob("*.java"), *(root / "tools").rglob("*.java"),
               *(root / "schemas").glob("*.proto")]
    for f in sources:
        m = _DECLARED_PACKAGE.search(f.read_text(encoding="utf-8"))
        if m:
            out.setdefault(m.group(1), set()).add(f.stem)
    return out


def _module_file(root: Path, parts: list[str]) -> Path | None:
    """The file of the Python module `.`.join(parts), found on disk (nothing imported)."""
    base = root.joinpath(*parts)
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.is_file():
            return f
    return None


def dotted_names(span: str) -> list[str]:
    """The dotted names starting with `replicator.` or `bench.` in a span, file names left out."""
    return [m.group(0) for m in _DOTTED.finditer(span) if m.group(0).rsplit(".", 1)[1] not in _FILE_EXTS]


def dotted_problem(name: str, root: Path = ROOT) -> str | None:
    """Why `name` is not a module of ours, an attribute of one (found in its source), a Java class or
    package, or a protobuf package; None when it is one of those."""
    parts = name.split(".")
    declared = _declared_packages(root)
    if parts[-1] == "*":
        pkg = parts[:-1]
        if ".".join(pkg) in declared or (root.joinpath(*pkg) / "__init__.py").is_file():
            return None
        return f"{name}: no package {'.'.join(pkg)}"
    if _module_file(root, parts) or ".".join(parts) in declared:
        return None
    owner, attr = ".".join(parts[:-1]), parts[-1]
    if attr in declared.get(owner, ()):
        return None
    module = _module_file(root, parts[:-1])
    if module is None:
        return f"{name}: no module {owner} (no {'/'.join(parts[:-1])}.py or package), Java class or proto package"
    if attr.startswith("__") or re.search(rf"\b{re.escape(attr)}\b", module.read_text(encoding="utf-8")):
        return None  # a dunder every module has, or a name its source defines or imports
    return f"{name}: no module {name}, and {module.relative_to(root)} defines no {attr}"


def span_problems(span: str, row_dir: str | None = None, source_names: set[str] | None = None,
                  root: Path = ROOT) -> list[str]:
    """Every reason the span names something of ours that does not exist (path or dotted names)."""
    found = [path_problem(span, root, source_names, row_dir)] + [dotted_problem(n, root) for n in dotted_names(span)]
    return [why for why in found if why]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation other than `-` and `_`
    dropped, spaces -> `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor; a repeated heading gets GitHub's `-1`, `-2`, ... suffixes."""
    seen: dict[str, int] = {}
    out = set()
    for m in _HEADING.finditer(_FENCE.sub("", text)):
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def test_slug_is_githubs() -> None:
    assert slug("Size tables") == "size-tables"
    assert slug("Reading and decoding on Spark executors (`--reader spark`)") == \
        "reading-and-decoding-on-spark-executors---reader-spark"
    assert slug("Type mapping (TiDB -> Delta)") == "type-mapping-tidb---delta"
    assert anchors("# A\n## A\n```\n# not a heading\n```\n") == {"a", "a-1"}


def test_links_outside_code_only() -> None:
    text = "[a](x.md) `[b](y.md)` [`c`](z.md#h)\n```\n[d](w.md)\n```\n"
    assert links(text) == ["x.md", "z.md#h"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in links(page.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http(s):, mailto:, ...
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file or directory")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text(encoding="utf-8")):
            broken.append(f"{target}: no heading with anchor #{anchor} in {dest.relative_to(ROOT)}")
    assert broken == [], f"{page.relative_to(ROOT)}: broken links"


def test_code_spans_keep_their_lines() -> None:
    """Failures name a line; fenced blocks, indented ones in list items included, hold no spans."""
    text = "a `x`\n```\n`not a span`\n```\nb ``y`` and \\`z\\` `w`\n- item\n  ```sh\n  `no`\n  ```\n`v`\n"
    assert code_spans(text) == [(1, "x"), (5, "y"), (5, "w"), (10, "v")]


def test_layout_rows_give_their_directory() -> None:
    """A Layout row's cells write names relative to the directory its first cell names."""
    text = "| path | what |\n| `replicator/engine/` | `window.py` |\n| `replicator/x.py` | y |\n"
    assert row_dirs(text) == {2: "replicator/engine/"}


def test_code_paths_are_checked_where_they_name_repository_files() -> None:
    """The drift this check is for: a module renamed, moved or turned into a package."""
    names = {"writer.py", "loop.py"}

    def problem(span: str) -> str | None:
        return path_problem(span, source_names=names)

    for fine in ["replicator/engine/loop.py", "engine/loop.py", "codec/craft/", "replicator/delta/",
                 "bench/", "tests/unit/test_docs_links.py", "docs/craft.md#batching", "writer.py", "craft/",
                 "java/s3commit", "localkafka/", "unit/", "integration/test_install.py",
                 "grafana/replicator.json", "prometheus/fetch.sh"]:
        assert problem(fine) is None, fine
    assert problem("replicator/codec/craft.py") == "replicator/codec/craft.py: no such file or directory"
    assert problem("codec/craft.py") == "replicator/codec/craft.py: no such file or directory"
    assert problem("sim/localkafka.py") == "replicator/sim/localkafka.py: no such file or directory"
    assert problem("tools/nothing/") == "tools/nothing/: no such file or directory"
    assert problem("engine/loop.py/") == "replicator/engine/loop.py/: not a directory"
    assert problem("docs/craft.md#no-such-heading") == "docs/craft.md: no heading with anchor #no-such-heading"
    assert problem("ddl.py") == "no file named ddl.py under replicator, bench, tests, tools"
    assert problem("craft/nothing.py") == "craft/nothing.py: no such file or directory in replicator/, " \
        "replicator/<package>/, tests/, deploy/ or tools/"
    assert problem("java/s3commit/Nothing.java") is not None
    assert problem("engine.md/") is not None  # ends like a file of ours: it must resolve


def test_layout_row_names_resolve_in_the_row_directory() -> None:
    """`window.py` in the row of `replicator/engine/` is that package's file, not any `window.py`."""
    assert path_problem("window.py", row_dir="replicator/engine/") is None
    assert path_problem("decoder.py", row_dir="replicator/codec/") is None  # in a package of the row's
    assert path_problem("window.py", row_dir="replicator/codec/") == "no file named window.py under replicator/codec/"
    assert path_problem("java/s3commit", row_dir="replicator/delta/") is None
    assert path_problem("localfs", row_dir="tools/") is None  # neither a slash nor .py: not read
    assert path_problem("prometheus/fetch.sh", row_dir="tools/") is None
    assert path_problem("prometheus/nothing.yml", row_dir="deploy/") == "prometheus/nothing.yml: no such " \
        "file or directory in replicator/, replicator/<package>/, tests/, deploy/ or tools/"
    assert path_problem("nothing/", row_dir="replicator/codec/craft/") == "nothing/: no such file or " \
        "directory in replicator/codec/craft/, replicator/, replicator/<package>/, tests/, deploy/ or tools/"


def test_dotted_names_are_modules_attributes_or_declared_packages() -> None:
    """Python modules and their attributes on disk (nothing imported), Java classes, proto packages."""
    assert dotted_names("python -m replicator.sim.demo -v /etc/replicator.toml x.replicator.y replicator.toml") \
        == ["replicator.sim.demo"]
    assert dotted_names("a=replicator.s3commit.Pin, `bench.features`") == ["replicator.s3commit.Pin", "bench.features"]
    for fine in ["replicator.delta.explore", "replicator.delta.explore.open_warehouse", "replicator.errors",
                 "replicator.engine.pipeline", "replicator.engine.pipeline.Engine", "replicator.__file__",
                 "replicator.s3commit.Pin", "replicator.localfs.*", "replicator.archive", "bench.features"]:
        assert dotted_problem(fine) is None, fine
    assert dotted_problem("replicator.codec.craft.nothing") == "replicator.codec.craft.nothing: no module " \
        "replicator.codec.craft.nothing, and replicator/codec/craft/__init__.py defines no nothing"
    assert dotted_problem("replicator.nothing.x") == "replicator.nothing.x: no module replicator.nothing " \
        "(no replicator/nothing.py or package), Java class or proto package"
    assert dotted_problem("replicator.s3commit.Nothing") is not None
    assert dotted_problem("replicator.nothing.*") == "replicator.nothing.*: no package replicator.nothing"


def test_notebooks_are_read_cell_by_cell() -> None:
    """A notebook's Markdown cells are checked too, each failure naming its cell and line."""
    page = ROOT / "notebooks" / "explore.ipynb"
    assert page in CODE_PAGES
    cells = markdown_of(page)
    assert cells and all(where.startswith("notebooks/explore.ipynb cell ") for where, _ in cells)
    assert any("`replicator.delta.explore`" in text for _, text in cells)


def test_example_paths_are_not_read_as_repository_files() -> None:
    """Warehouse layouts, URLs, placeholders, patterns and other projects' files are not ours."""
    for example in ["s3a://bucket/prefix", "/tmp/replicator/x.py", "./warehouse", ".cache/jvm",
                    "_replicator/state.json", "tables/<schema>/<table>-<uid>", "state/kafka", "a/b",
                    "tests/integration/test_*.py", "replicator run --help",
                    "meta/CDC_{uuid}.index", "replicator/x.py:12", "REPLICATOR_SHARD=I/N", "bench/results.json",
                    "my_job", "encoding/json", "DIR/expected.json", "_replicator/windows.jsonl", "dead_letters/",
                    "ticdc/ticdc-canal-json.md", "data/meta.properties", "schema/table/meta"]:
        assert path_problem(example, source_names=set()) is None, example


@pytest.mark.parametrize("page", CODE_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_code_paths_resolve(page: Path) -> None:
    """A code span that names a file, module or class of the repository names one that exists (see
    `path_problem`, `dotted_problem`), so a module that moves cannot leave the docs pointing at its old place."""
    names = _source_names()
    broken: list[str] = []
    for where, text in markdown_of(page):
        rows = row_dirs(text)
        for line, span in code_spans(text):
            broken += [f"{where}:{line}: `{span}`: {why}" for why in span_problems(span, rows.get(line), names)]
    assert broken == [], "code spans naming repository paths or modules that do not exist (moved or renamed?):\n" + \
        "\n".join(broken)


def test_readme_is_a_front_door() -> None:
    """The README stays short enough to read: reference material lives in docs/."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move reference material to docs/"

"""The README is a front door and the docs link up: every relative link in README.md and docs/*.md
leads to a file or directory that exists, and an anchor into a Markdown page names one of its headings.
Code spans that name a file of this repository (`replicator/engine/loop.py`, `engine/loop.py`,
`bench/`, `merge.py`) name one that exists, so a module that moves or becomes a package cannot leave
the docs pointing at its old place."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 420

_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
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
# Files the docs name that a command writes and git ignores (a fresh clone does not have them).
GENERATED = {"bench/results.json"}
# Directories a bare `name.py` is looked for in.
SOURCE_DIRS = ("replicator", "bench", "tests", "tools")


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


def _source_names() -> set[str]:
    return {p.name for d in SOURCE_DIRS for p in (ROOT / d).rglob("*.py") if "__pycache__" not in p.parts}


def path_problem(span: str, root: Path = ROOT, source_names: set[str] | None = None) -> str | None:
    """Why the code span `span` names a repository path that does not exist; None when it names one
    that does, or does not read as a repository path at all. `replicator/...`, `bench/...`,
    `tests/...` (any of TOP_DIRS) resolve from the root, `engine/loop.py` (a package of replicator/)
    under replicator/, a bare `merge.py` must be some file of SOURCE_DIRS; an anchor into a Markdown
    page must name one of its headings."""
    m = _PATH_SPAN.match(span)
    if not m:
        return None
    path, anchor = m.group("path"), m.group("anchor")
    first = path.split("/", 1)[0]
    if "/" not in path:
        if not path.endswith(".py"):
            return None
        names = _source_names() if source_names is None else source_names
        return None if path in names else f"no file named {path} under {', '.join(SOURCE_DIRS)}"
    if first in TOP_DIRS:
        dest, shown = root / path, path
    elif first in PACKAGES:
        dest, shown = root / "replicator" / path, f"replicator/{path}"
    else:
        return None  # a warehouse or state path (`_replicator/state.json`, `tables/<schema>`), a URL path...
    if path.rstrip("/") in GENERATED:
        return None
    if not dest.exists():
        return f"{shown}: no such file or directory"
    if path.endswith("/") and not dest.is_dir():
        return f"{shown}: not a directory"
    if anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text(encoding="utf-8")):
        return f"{shown}: no heading with anchor #{anchor}"
    return None


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
    text = "a `x`\n```\n`not a span`\n```\nb ``y`` and \\`z\\` `w`\n"
    assert code_spans(text) == [(1, "x"), (5, "y"), (5, "w")]


def test_code_paths_are_checked_where_they_name_repository_files() -> None:
    names = {"merge.py", "loop.py"}

    def problem(span: str) -> str | None:
        return path_problem(span, source_names=names)

    for fine in ["replicator/engine/loop.py", "engine/loop.py", "codec/craft/", "replicator/delta/",
                 "bench/", "tests/unit/test_docs_links.py", "docs/craft.md#batching", "merge.py"]:
        assert problem(fine) is None, fine
    assert problem("replicator/codec/craft.py") == "replicator/codec/craft.py: no such file or directory"
    assert problem("codec/craft.py") == "replicator/codec/craft.py: no such file or directory"
    assert problem("sim/localkafka.py") == "replicator/sim/localkafka.py: no such file or directory"
    assert problem("tools/nothing/") == "tools/nothing/: no such file or directory"
    assert problem("engine/loop.py/") == "replicator/engine/loop.py/: not a directory"
    assert problem("docs/craft.md#no-such-heading") == "docs/craft.md: no heading with anchor #no-such-heading"
    assert problem("ddl.py") == "no file named ddl.py under replicator, bench, tests, tools"


def test_example_paths_are_not_read_as_repository_files() -> None:
    for example in ["s3a://bucket/prefix", "/tmp/replicator/x.py", "./warehouse", ".cache/jvm",
                    "_replicator/state.json", "tables/<schema>/<table>-<uid>", "state/kafka", "a/b",
                    "grafana/replicator.json", "tests/integration/test_*.py", "replicator run --help",
                    "meta/CDC_{uuid}.index", "replicator/x.py:12", "REPLICATOR_SHARD=I/N", "bench/results.json",
                    "my_job", "encoding/json"]:
        assert path_problem(example, source_names=set()) is None, example


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_code_paths_resolve(page: Path) -> None:
    """A code span that names a file of the repository names one that exists (see `path_problem`)."""
    names = _source_names()
    rel = page.relative_to(ROOT)
    broken = [f"{rel}:{line}: `{span}`: {why}" for line, span in code_spans(page.read_text(encoding="utf-8"))
              if (why := path_problem(span, source_names=names))]
    assert broken == [], "code spans naming repository paths that do not exist (moved or renamed?):\n" + \
        "\n".join(broken)


def test_readme_is_a_front_door() -> None:
    """The README stays short enough to read: reference material lives in docs/."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move reference material to docs/"

"""What a simulated stream holds: its counts and the true final state of every table."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from replicator.errors import ConfigError

EXPECTED_FORMAT: Final = 1


@dataclass
class SimStats:
    """Counts of what the stream holds (reported in the expected file)."""

    transactions: int = 0
    row_changes: int = 0
    inserts: int = 0
    updates: int = 0
    deletes: int = 0
    key_changes: int = 0
    ddl: int = 0
    resolved: int = 0
    retries: int = 0
    restarts: int = 0
    replayed_events: int = 0
    messages: dict[int, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["messages"] = {str(k): v for k, v in sorted(self.messages.items())}
        return d


@dataclass
class ExpectedState:
    """The true final tables: ``tables["schema.table"]`` = rows (dicts in render.py JSON
    conventions, sorted by key), ``schemas`` = key and column types, ``watermark`` = final ts."""

    tables: dict[str, list[dict[str, Any]]]
    schemas: dict[str, dict[str, Any]]
    watermark: int
    generator: dict[str, Any]
    stats: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"format": EXPECTED_FORMAT, "generator": self.generator, "watermark": self.watermark,
                "stats": self.stats, "schemas": self.schemas, "tables": self.tables}

    def write(self, path: str | Path) -> Path:
        """Write as JSON (UTF-8), one row per line so that two files diff readably."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        doc = self.to_json()
        tables = doc.pop("tables")
        lines = ["{"]
        lines += [f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}," for k, v in doc.items()]
        lines.append(' "tables": {')
        names = sorted(tables)
        for i, name in enumerate(names):
            rows = [json.dumps(r, ensure_ascii=False, allow_nan=False) for r in tables[name]]
            end = "," if i < len(names) - 1 else ""
            if rows:
                lines.append(f"  {json.dumps(name, ensure_ascii=False)}: [")
                lines += [f"   {r}," for r in rows[:-1]] + [f"   {rows[-1]}", f"  ]{end}"]
            else:
                lines.append(f"  {json.dumps(name, ensure_ascii=False)}: []{end}")
        lines += [" }", "}"]
        p.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return p

    @staticmethod
    def load(path: str | Path) -> ExpectedState:
        try:
            doc = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read expected state {path}: {exc}") from None
        if not isinstance(doc, dict) or doc.get("format") != EXPECTED_FORMAT:
            raise ConfigError(f"{path} is not an expected-state file of format {EXPECTED_FORMAT}")
        return ExpectedState(doc["tables"], doc["schemas"], int(doc["watermark"]), doc.get("generator", {}),
                             doc.get("stats", {}))

"""Per-run decoder state: what a stateful format remembers between messages of one run.

Most formats decode each message on its own. TiCDC's Simple protocol does not: its DML messages
name their table's schema by (database, table, schemaVersion), and the schema itself arrives in
BOOTSTRAP and DDL messages. The engine creates one `CodecState` per run and hands it to the codec
through `DecodeOptions.state`; the codec fills it. It also counts the row checksums verified and
the mismatches found, for the run summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class CodecState:
    """Mutable, one per run (never shared between runs: a restart starts empty)."""

    schemas: dict[tuple[str, str, int], Any] = field(default_factory=dict)
    """Simple: (database, table, schema version) -> the table's schema (`simple.common.TableSchema`)."""
    schema_objects: dict[tuple[str, str, int], dict[str, Any]] = field(default_factory=dict)
    """The same schemas as their wire `tableSchema` objects: what the engine keeps in state.json, so
    a restart from a mid-topic offset decodes rows whose BOOTSTRAP came before that offset."""
    checksums_verified: int = 0
    """Row images whose CRC32 was computed and matched the one sent with them."""
    checksum_mismatches: int = 0
    """Row images whose CRC32 did not match (each raised a `ChecksumError`)."""

#!/usr/bin/env bash
# Regenerate replicator/_proto from schemas/*.proto (called by `make proto`).
# The generated modules are committed so a fresh clone works without running this; rerun it
# after editing a .proto and commit the result. grpcio-tools is pinned in pyproject.toml, so the
# output is reproducible; its gencode version (protoc 31.1 -> "Protobuf Python Version: 6.31.1")
# must not be newer than the protobuf runtime pin (6.33.0), or importing warns/fails.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
OUT=replicator/_proto
mkdir -p "$OUT"
"$PY" -m grpc_tools.protoc -I schemas \
  --python_out="$OUT" --pyi_out="$OUT" \
  schemas/archive.proto schemas/binlog.proto
# The generated stubs use bare generics (e.g. `_Mapping`) that strict mypy rejects; mypy reads
# them whenever our modules import the generated code, so mark them as not ours to type-check.
for stub in "$OUT"/archive_pb2.pyi "$OUT"/binlog_pb2.pyi; do
  { echo "# mypy: ignore-errors"; cat "$stub"; } > "$stub.tmp" && mv "$stub.tmp" "$stub"
done
[ -f "$OUT/__init__.py" ] || : > "$OUT/__init__.py"

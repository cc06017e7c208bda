"""The codec state a run keeps in state.json: Simple's schemas, restored at start and saved with progress."""

from __future__ import annotations

from replicator.codec.state import CodecState
from replicator.warehouse import State


def restore_codec_state(codec_state: CodecState, state: State) -> None:
    """Simple: the schemas earlier runs read (a restart's BOOTSTRAPs may lie behind it)."""
    if state.codec_schemas:
        from replicator.codec.simple import restore_schemas

        restore_schemas(codec_state, state.codec_schemas)


def keep_codec_state(codec_state: CodecState, state: State) -> None:
    """Put the schemas read so far into the state about to be saved."""
    if codec_state.schema_objects:
        state.codec_schemas = list(codec_state.schema_objects.values())

"""Batching and size limits the encoders share (the reference's defaults), defined once.

TiCDC batches up to `max-batch-size` row events in one Kafka message and keeps a message under
`max-message-bytes` (10 MiB, the default since TiCDC v6: pkg/config/sink.go).
"""

from __future__ import annotations

from typing import Final

from replicator.errors import ReplicatorError

DEFAULT_MAX_BATCH_SIZE: Final = 16
DEFAULT_MAX_MESSAGE_BYTES: Final = 10 * 1024 * 1024
# sarama's per-record overhead the reference adds to a message's size (common.MaxRecordOverhead).
MAX_RECORD_OVERHEAD: Final = 5 * 5 + 10 + 1


class MessageTooLargeError(ReplicatorError):
    """One row alone exceeds max-message-bytes (the reference's ErrMessageTooLarge)."""

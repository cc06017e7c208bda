"""The garbage collector's policy for a run: full collections made rare while rows are buffered."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

FULL_COLLECTION_EVERY = 1000
"""Python's collector checks its oldest generation after this many young collections (default 10).

Why: a catch-up run buffers its decoded rows (millions of small objects that all stay alive until
their step is applied), and with the default each growth of the heap by a quarter re-scans all of
them: 3 of 7 seconds of reading 100,000 Craft row changes went to full collections that found
nothing (`make bench`). Rows are freed by reference counting as their step is applied; the full
collections only find reference cycles, which the engine does not build per row."""


@contextmanager
def few_full_collections() -> Iterator[None]:
    """Raise the oldest generation's threshold to FULL_COLLECTION_EVERY for the run, then restore it."""
    old = gc.get_threshold()
    gc.set_threshold(old[0], old[1], max(old[2], FULL_COLLECTION_EVERY))
    try:
        yield
    finally:
        gc.set_threshold(*old)

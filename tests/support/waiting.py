"""Waiting for what another process or thread does: poll a condition against a deadline.

Every wait has a bound (a hung run fails its test instead of the whole job) and polls rather than
sleeping a guessed time (robust to slow, shared machines)."""

from __future__ import annotations

import time
from collections.abc import Callable


class Deadline:
    """An instant `seconds` from now on the monotonic clock: waits one after the other may share
    one budget."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def passed(self) -> bool:
        return time.monotonic() > self.at


def poll_until(cond: Callable[[], bool], timeout: float | Deadline, every: float = 0.25) -> bool:
    """Ask `cond` every `every` seconds until it is true or the deadline (`timeout` seconds from
    now, or a shared `Deadline`) has passed; whether it became true. For waits that carry on
    either way: what follows checks the outcome, with its own message."""
    deadline = timeout if isinstance(timeout, Deadline) else Deadline(timeout)
    while not cond():
        if deadline.passed():
            return False
        time.sleep(every)
    return True


def wait_for(what: str, cond: Callable[[], bool], timeout: float, every: float = 0.25) -> None:
    """Poll `cond` until true; fail naming `what` after `timeout` seconds."""
    if not poll_until(cond, timeout, every):
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")

"""The environment a replicator runs with in a test: a child process's (`clean_env`, `cli_env`) and
this process's own (`no_replicator_env`).

The replicator reads its settings from REPLICATOR_ variables (names compared ignoring case): one
left in a developer's shell, or by another test, must not change what a test sees."""

from __future__ import annotations

import os

import pytest


def _dropped(name: str, drop: tuple[str, ...]) -> bool:
    upper = name.upper()
    return any(upper.startswith(d[:-1].upper()) if d.endswith("*") else upper == d.upper() for d in drop)


def clean_env(*drop: str, **extra: str) -> dict[str, str]:
    """This process's environment for a child process, without the variables `drop` names
    (`NAME*`: every variable whose name starts with NAME; ignoring case) and with `extra` set."""
    env = {k: v for k, v in os.environ.items() if not _dropped(k, drop)}
    env.update(extra)
    return env


def cli_env(*drop: str, **extra: str) -> dict[str, str]:
    """A run's environment: a small Spark (one shuffle partition, a 1 GiB driver) and no fault
    unless `extra` gives one (never inherited); without `drop` and with `extra`, as `clean_env`."""
    small = {"REPLICATOR_SHUFFLE_PARTITIONS": "1", "REPLICATOR_DRIVER_MEMORY": "1g"}
    return clean_env("REPLICATOR_FAULT", *drop, **{**small, **extra})


@pytest.fixture
def no_replicator_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """This test runs without any REPLICATOR_ variable in the process environment (restored after)."""
    for name in list(os.environ):
        if _dropped(name, ("REPLICATOR_*",)):
            monkeypatch.delenv(name)

"""The replicator's command line as tests run it.

In this process (`run_cli`, `cli_stdout`): the session's Spark is shared, so a command costs no JVM
start. In a process of its own, as a user runs it (`replicator_argv`, `run_replicator`,
`start_replicator`): its own JVM, logging set-up and environment, and it can be killed like a
crashed machine (`kill_group`) or stopped by a signal."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import IO


def run_cli(*argv: str) -> tuple[int, str, str]:
    """`replicator ARGV` in this process (the session's Spark shared): exit code, stdout, stderr."""
    from replicator.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def cli_stdout(*argv: str) -> str:
    """`run_cli` of a command that must succeed: its stdout."""
    code, out, err = run_cli(*argv)
    assert code == 0, (argv, err[-2000:])
    return out


def replicator_argv(*args: str) -> list[str]:
    """`python -m replicator ARGS` on this interpreter: the command line a user runs."""
    return [sys.executable, "-m", "replicator", *args]


def run_replicator(*args: str, timeout: float, env: Mapping[str, str] | None = None, cwd: Path | None = None,
                   stdin: int | None = None) -> subprocess.CompletedProcess[str]:
    """`replicator ARGS` in a process of its own, to its end: exit code, stdout and stderr as text
    (pipes, not terminals). `env` None: this process's environment as it is."""
    return subprocess.run(replicator_argv(*args), capture_output=True, text=True, env=env, cwd=cwd, stdin=stdin,
                          timeout=timeout, check=False)


def start_replicator(*args: str, env: Mapping[str, str] | None = None, log: Path | None = None,
                     stdout: Path | None = None) -> subprocess.Popen[bytes]:
    """`replicator ARGS` in the background, in a process group of its own (`kill_group` ends the
    JVM it starts with it); stderr appended to the file `log`, stdout to the file `stdout` (each
    discarded when not given)."""
    with contextlib.ExitStack() as files:  # the child keeps its own descriptors
        err: IO[bytes] | int = files.enter_context(open(log, "ab")) if log is not None else subprocess.DEVNULL
        out: IO[bytes] | int = files.enter_context(open(stdout, "ab")) if stdout is not None else subprocess.DEVNULL
        return subprocess.Popen(replicator_argv(*args), stdout=out, stderr=err, env=env, start_new_session=True)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the run and everything it started (the Spark JVM), like a machine crash; reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)


def tail(path: Path, n: int = 40) -> str:
    """The last `n` lines of a run's log (empty when there is none): for a failure's message."""
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else ""

"""What tests share to drive the replicator through its front door, one version each:

* `waiting`: poll a condition against a deadline (`wait_for`, `poll_until`, `Deadline`).
* `cli`: the command line in this process (`run_cli`) or in one of its own as a user runs it
  (`replicator_argv`, `run_replicator`, `start_replicator`), and ending that process (`kill_group`).
* `env`: the environment of such a process (`clean_env`, `cli_env`) and of this one (the
  `no_replicator_env` fixture, registered in tests/conftest.py).
* `warehouse`: what a warehouse's progress file says (`applied_ts`, `steps_done`).
"""

"""`python -m replicator` = the `replicator` command."""

import sys

from replicator.cli import main

sys.exit(main())

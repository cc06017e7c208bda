"""``python -m replicator.sim.localkafka up|down|status``."""

import sys

from replicator.sim.localkafka.cli import main

sys.exit(main())

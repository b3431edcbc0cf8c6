"""`python -m latency_tuner.cli ...`: the `latency-tuner` command without its console script."""

import sys

from latency_tuner.cli import main

sys.exit(main())

"""`python -m latency_tuner.sandbox.apiserver --port N --kubeconfig PATH [--manifest F]...`"""

import sys

from latency_tuner.sandbox.apiserver._cli import main

sys.exit(main())

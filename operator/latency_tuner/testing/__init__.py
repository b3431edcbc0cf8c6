"""Fakes, written once, for the tests and the benchmarks that run the real operator.

- ``metrics``: a scripted metrics source (an answer per Deployment and window, counted, can be
  made unreachable) and plausible ``Observation`` values;
- ``rollouts``: the Deployment controller and kubelet reduced to what the operator reads (a new
  pod per template, ready or crash-looping, the old one gone, the Deployment's status).

They stand in only below the operator's ports (the metrics source) or outside it (the
controllers an API server would have): never for the operator's own code. Not imported by the
operator itself.
"""

"""A local cluster for one machine: API emulator, pod runner, Prometheus runner; for demo and e2e.

Never imported by the operator's code paths (handlers, adapters, core): the operator talks to
whatever API server its kubeconfig names, and this package only stands one up on 127.0.0.1.
"""

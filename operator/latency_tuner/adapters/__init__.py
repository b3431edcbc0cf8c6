"""I/O adapters: metrics sources (Prometheus, direct scrape) and Kubernetes.

Each adapter turns the outside world into the core's values and back. Adapters never decide
anything (no thresholds, no planning) and never block the event loop: blocking clients run on
bounded thread pools of their own kind (Kubernetes reads and writes, each Prometheus, the
scrape parser), never on asyncio's shared default pool.
"""

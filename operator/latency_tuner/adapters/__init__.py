"""I/O adapters: metrics sources (Prometheus, direct scrape) and Kubernetes.

Each adapter turns the outside world into the core's values and back. Adapters never decide
anything (no thresholds, no planning) and never block the event loop: blocking clients run in
``asyncio.to_thread``.
"""

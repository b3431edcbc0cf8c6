"""kopf glue, and the only package that imports kopf.

Handlers build the adapters (the shell: Kubernetes, Prometheus or the scrape pool), hand them
to ``controller.Reconciler`` as its ports, call ``run`` and hand its result back to kopf
(events, the operator's metrics). They must never hold decisions (those live in ``core``) nor
block the event loop.
"""

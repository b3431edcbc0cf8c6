"""kopf glue, and the only package that imports kopf.

Handlers parse the resource, call ``reconcile`` and hand its result back to kopf (one status
patch, events). They must never hold decisions (those live in ``core``) nor block the event
loop.
"""

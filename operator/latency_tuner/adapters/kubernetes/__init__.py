"""The Kubernetes adapter: Deployments, their pods and nodes, through the official client.

The ``kubernetes`` client is blocking, so every call runs in ``asyncio.to_thread``; objects are
read as plain JSON dicts (``_preload_content=False``) and turned into ``core.cluster`` values.
It decides nothing: whether a rollout failed or a change is wanted is the core's business.
"""

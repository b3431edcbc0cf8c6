"""The Kubernetes adapter: Deployments, their pods and nodes, through the official client.

The ``kubernetes`` client is blocking, so every call runs on a bounded thread pool of its kind
(``client.Calls``), never on the event loop nor on asyncio's shared default pool; calls go by
path through its ``ApiClient`` (``client.Rest``: its credentials and TLS, none of its typed API
classes), and objects are read as plain JSON dicts and turned into ``core.cluster`` values.
It decides nothing: whether a rollout failed or a change is wanted is the core's business.
"""

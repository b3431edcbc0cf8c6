"""The reconcile loop, once: observe through ports -> ``core.rollout.decide`` -> act through ports.

``Reconciler.run`` is the whole loop of one LatencyTarget: read it, ``gather`` the facts, decide,
write the status, apply the change, again while the decision says so. Every place that runs the
operator's loop runs this code: the kopf handlers (the Kubernetes and metrics adapters), the
convergence benchmark (a virtual Deployment, simulated metrics, a virtual clock) and
``latency-tuner diagnose`` (``gather`` over a Deployment file or the cluster, read only).

- ``ports``: the Protocols the loop needs (Deployments, nodes, LatencyTargets, metrics, clock),
  gathered in ``Ports``;
- ``errors``: the failures an implementation raises through them (adapters subclass them);
- ``deployment``: a Deployment as read (``DeploymentView``), pure;
- ``gather``: the ``Facts`` of one round;
- ``reconciler``: ``Reconciler.run``;
- ``attribution``: the annotations and field manager of every change to a Deployment.

It must never import an adapter (``latency_tuner.adapters``), kopf or a client library: the
shell (``handlers``, the CLIs, the sandbox) builds the adapters and hands them in. It holds no
decision: those are ``core``'s.
"""

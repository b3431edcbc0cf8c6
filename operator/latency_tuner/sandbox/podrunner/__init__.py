"""The Deployment controller and the kubelet of the sandbox: Deployments become local processes.

``PodRunner`` watches Deployments in some namespaces of an API server (over HTTP, like any
controller) and, for each, keeps ``spec.replicas`` pods of its current template running. A pod
is one process on a free 127.0.0.1 port chosen by a ``PodEngine``: by default
(``SimulatorEngine``) ``latency-tuner sim`` started from the container's vLLM command line
(``--host/--port`` replaced), with the GPU limit (``nvidia.com/gpu``) as ``--sim-gpus`` and the
node's GPU product as ``--sim-gpu``. It writes what Kubernetes writes:

- Nodes with NVIDIA GPU feature-discovery labels; pods are scheduled onto them by free GPUs
  (a pod that fits nowhere stays ``Pending`` with ``PodScheduled=False/Unschedulable``).
- ReplicaSets ``<deployment>-<pod-template-hash>`` and Pods
  ``<deployment>-<hash>-<5 chars>`` (template labels + ``pod-template-hash``, ``nodeName``).
- Pod status as the kubelet reports it: ``Pending``/``ContainerCreating``, ``Running``,
  ``Ready`` once ``/health`` answers 200, and on a crash ``restartCount`` + 1,
  ``lastState.terminated`` (exit code, ``Error``) and ``waiting: CrashLoopBackOff`` during an
  exponential back-off (kubelet: 10 s doubling to 5 min; here ``backoff`` scales it down).
- Rolling updates with the controller's arithmetic (``maxSurge``/``maxUnavailable``, 25 % each
  by default: one surge pod and none unavailable for one replica), ``Recreate``, scaling,
  ``minReadySeconds``, ``paused``; Deployment status through the status subresource with
  ``observedGeneration``, replica counts, ``Available`` and ``Progressing`` conditions
  (``NewReplicaSetCreated``, ``ReplicaSetUpdated``, ``NewReplicaSetAvailable``,
  ``ProgressDeadlineExceeded`` after ``progressDeadlineSeconds`` without progress).
- Deleting a Deployment (or a Pod, or the namespace) stops the processes and removes the
  objects. Pods carry a finalizer of ours so that a deleted pod shows ``Terminating`` until its
  process is gone, as with a real kubelet.

Inside: ``_rollout`` (the controller's arithmetic, pure), ``_nodes`` (the machines),
``_engine`` (what runs a container: the seam, and the simulator behind it), ``_vllm_engine``
(``RealVllmEngine``: real vLLM behind it, for ``demo --engine vllm`` and the real-engine tier),
``_pod`` (a pod's record and kubelet status), ``_objects`` (ReplicaSet and Pod bodies), ``_api``
(HTTP), ``_kubelet`` (process supervision), ``_runner`` (the control loop). Only the names
below are the public face.

Every process runs in its own process group and is stopped on exit (also on errors and
cancellation; an ``atexit`` hook kills what an abandoned event loop left). It never touches
objects it did not create, except Deployments' status and revision annotation, and is never
imported by the operator's code paths.
"""

from latency_tuner.sandbox.podrunner._engine import (
    EngineCommand,
    PodEngine,
    SimulatorEngine,
    sim_argv,
)
from latency_tuner.sandbox.podrunner._nodes import NodeHardware, gpu_label_value
from latency_tuner.sandbox.podrunner._objects import FINALIZER
from latency_tuner.sandbox.podrunner._pod import PodInfo
from latency_tuner.sandbox.podrunner._rollout import (
    Counts,
    ScalePlan,
    compute_status,
    plan_scale,
    resolve_strategy,
    set_condition,
    template_hash,
)
from latency_tuner.sandbox.podrunner._runner import PodRunner
from latency_tuner.sandbox.podrunner._vllm_engine import RealVllmEngine

__all__ = [
    "FINALIZER",
    "Counts",
    "EngineCommand",
    "NodeHardware",
    "PodEngine",
    "PodInfo",
    "PodRunner",
    "RealVllmEngine",
    "ScalePlan",
    "SimulatorEngine",
    "compute_status",
    "gpu_label_value",
    "plan_scale",
    "resolve_strategy",
    "set_condition",
    "sim_argv",
    "template_hash",
]

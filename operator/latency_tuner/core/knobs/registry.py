"""Every knob the operator can change, by name: one object per module of ``core.knobs``.

``CATALOG[name]`` is that knob's ``KNOB`` (the ``Knob`` protocol of ``core.knobs.base``). The
order is the one DESIGN section 4 lists them in. Adding a knob: its name in ``KnobName``, its
module with a ``KNOB``, one line here, and its entries in the table (``core.knobs.table``);
``tests/unit/core/knobs/test_core_knob_registry.py`` checks that nothing is missing. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable

from latency_tuner.core.knobs import (
    chunked_prefill,
    cpu_offload,
    enforce_eager,
    gpu_memory_utilization,
    kv_cache_dtype,
    max_num_batched_tokens,
    max_num_seqs,
    prefix_caching,
    quantization,
    speculative_decoding,
    tensor_parallel,
)
from latency_tuner.core.knobs.base import Knob, KnobClass, KnobName

KNOBS: tuple[Knob, ...] = (
    cpu_offload.KNOB,
    enforce_eager.KNOB,
    prefix_caching.KNOB,
    chunked_prefill.KNOB,
    max_num_seqs.KNOB,
    max_num_batched_tokens.KNOB,
    gpu_memory_utilization.KNOB,
    quantization.KNOB,
    speculative_decoding.KNOB,
    kv_cache_dtype.KNOB,
    tensor_parallel.KNOB,
)

CATALOG: dict[KnobName, Knob] = {knob.name: knob for knob in KNOBS}


def costliest_class(knobs: Iterable[str]) -> KnobClass:
    """The costliest class among ``knobs`` (names of knobs a configuration changes; SAFE for
    none): what the change as a whole costs."""
    classes = [CATALOG[KnobName(knob)].knob_class for knob in knobs]
    return max(classes, key=lambda c: c.rank, default=KnobClass.SAFE)


def class_of(knob: str) -> KnobClass | None:
    """The class of the knob named ``knob``; None for a name no knob has (a status trial's
    knob is read back from the resource, which a tenant can write)."""
    try:
        return CATALOG[KnobName(knob)].knob_class
    except ValueError:
        return None

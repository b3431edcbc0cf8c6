"""The quality gate's reads for the loop (``controller.ports.QualityProbe``): the tenant's
samples from its ConfigMap (one that opts in with ``SAMPLES_LABEL``), and greedy answers from
a pod."""

from __future__ import annotations

from collections.abc import Sequence

from latency_tuner.adapters.inference.answers import collect_answers
from latency_tuner.adapters.kubernetes.configmaps import ConfigMaps


class PodQualityProbe:
    def __init__(self, configmaps: ConfigMaps, *, deadline: float = 120.0) -> None:
        self._configmaps = configmaps
        self._deadline = deadline

    async def samples(self, *, namespace: str, name: str, key: str) -> str:
        return await self._configmaps.read_key(namespace=namespace, name=name, key=key)

    async def answers(
        self, base_url: str, model: str, prompts: Sequence[str], *, max_tokens: int
    ) -> tuple[list[str | None], list[str]]:
        got = await collect_answers(
            base_url, model, prompts, max_tokens=max_tokens, deadline=self._deadline
        )
        return got.texts, got.errors

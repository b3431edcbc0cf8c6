"""The arms of a canary trial select disjoint pods, whatever matchers the spec brings, and the
main Deployment's pod listing leaves the canary's pods out, a canary made before the labels
moved to latencytuner.io (0.1.0's latency-tuner.io) included."""

from __future__ import annotations

import re

import pytest

from latency_tuner.core.canary import (
    CANARY_LABEL,
    LEGACY_CANARY_LABEL,
    arms,
    canary_name,
    pod_selector,
)
from latency_tuner.core.promql import LabelMatcher, default_matchers
from latency_tuner.sandbox.apiserver import label_selector_matches

CANARY = canary_name("llama", "llama-latency")
MAIN_POD = "llama-7d9f8c6b5-x2x4z"
CANARY_POD = f"{CANARY}-6c4b9d7f8-k2l9p"


def selects(matchers: tuple[LabelMatcher, ...], pod: str) -> bool:
    """PromQL's reading of the pod matchers: anchored regexes, all of them must hold."""
    for m in matchers:
        if m.label != "pod":
            continue
        hit = (re.fullmatch(m.value, pod) is not None) if "~" in m.op else m.value == pod
        if hit == m.op.startswith("!"):
            return False
    return True


def test_with_the_default_matchers_each_arm_selects_only_its_own_pods() -> None:
    canary, baseline = arms(default_matchers("ml", "llama"), CANARY)
    assert selects(canary, CANARY_POD)
    assert not selects(canary, MAIN_POD)
    assert selects(baseline, MAIN_POD)
    assert not selects(baseline, CANARY_POD)


def test_a_spec_selector_that_matches_every_pod_still_splits_into_disjoint_arms() -> None:
    broad = (LabelMatcher("namespace", "=", "ml"), LabelMatcher("pod", "=~", "llama-.*"))
    assert selects(broad, CANARY_POD)  # the reason the baseline must exclude the canary
    canary, baseline = arms(broad, CANARY)
    assert selects(canary, CANARY_POD)
    assert not selects(canary, MAIN_POD)
    assert selects(baseline, MAIN_POD)
    assert not selects(baseline, CANARY_POD)


def test_both_arms_keep_the_namespace_of_the_selector() -> None:
    for arm in arms(default_matchers("ml", "llama"), CANARY):
        assert LabelMatcher("namespace", "=", "ml") in arm


def test_the_main_deployments_pod_selector_excludes_canary_pods_and_a_canarys_does_not() -> None:
    main = pod_selector({"app": "llama"})
    assert main == f"app=llama,!{CANARY_LABEL},!{LEGACY_CANARY_LABEL}"
    own = {"app": "llama", CANARY_LABEL: "llama"}
    assert pod_selector(own) == f"app=llama,{CANARY_LABEL}=llama"


@pytest.mark.parametrize("key", [CANARY_LABEL, LEGACY_CANARY_LABEL])
def test_each_deployment_lists_only_its_own_pods_whichever_key_the_canary_was_made_with(
    key: str,
) -> None:
    main_pod, canary_pod = {"app": "llama"}, {"app": "llama", key: "llama"}
    main, canary = pod_selector({"app": "llama"}), pod_selector(canary_pod)
    assert label_selector_matches(main, main_pod)
    assert not label_selector_matches(main, canary_pod)
    assert label_selector_matches(canary, canary_pod)
    assert not label_selector_matches(canary, main_pod)

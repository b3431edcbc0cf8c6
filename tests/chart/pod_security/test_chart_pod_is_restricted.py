"""The operator pod meets the Pod Security "restricted" profile in every option set."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Manifest = dict[str, Any]
Render = Callable[[str], list[Manifest]]


def pod_specs(manifests: list[Manifest]) -> list[dict[str, Any]]:
    """The operator's pod template: one, or one per shard."""
    specs = [m["spec"]["template"]["spec"] for m in manifests if m["kind"] == "Deployment"]
    assert specs
    return specs


def pod_spec(manifests: list[Manifest]) -> dict[str, Any]:
    (spec,) = pod_specs(manifests)
    return spec


def test_the_pod_runs_as_a_non_root_user_with_the_runtime_seccomp_profile(
    render: Render, option_set: str
) -> None:
    for spec in pod_specs(render(option_set)):
        context = spec["securityContext"]
        assert context["runAsNonRoot"] is True
        assert context["runAsUser"] == 65532
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}


def test_the_container_drops_every_capability_and_cannot_escalate(
    render: Render, option_set: str
) -> None:
    for spec in pod_specs(render(option_set)):
        (container,) = spec["containers"]
        context = container["securityContext"]
        assert context["runAsNonRoot"] is True
        assert context["runAsUser"] == 65532
        assert context["readOnlyRootFilesystem"] is True
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}
        assert "privileged" not in context or context["privileged"] is False


def test_the_pod_uses_no_host_namespaces_or_host_paths(render: Render, option_set: str) -> None:
    for spec in pod_specs(render(option_set)):
        for field in ("hostNetwork", "hostPID", "hostIPC"):
            assert not spec.get(field)
        for volume in spec["volumes"]:
            assert "hostPath" not in volume
        for port in spec["containers"][0]["ports"]:
            assert "hostPort" not in port


def test_tmp_is_a_writable_empty_dir_on_a_read_only_root(render: Render) -> None:
    spec = pod_spec(render("defaults"))
    volumes = {v["name"]: v for v in spec["volumes"]}
    (mount,) = [m for m in spec["containers"][0]["volumeMounts"] if m["mountPath"] == "/tmp"]
    assert "emptyDir" in volumes[mount["name"]]
    assert not mount.get("readOnly")


def test_the_container_has_requests_and_a_memory_limit(render: Render) -> None:
    resources = pod_spec(render("defaults"))["containers"][0]["resources"]
    assert set(resources["requests"]) == {"cpu", "memory"}
    assert "memory" in resources["limits"]


def test_the_probes_ask_kopfs_health_endpoint_on_the_probe_port(render: Render) -> None:
    (container,) = pod_spec(render("defaults"))["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": 8080, "probe": 8081}
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "probe"}

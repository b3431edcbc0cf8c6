"""What the emulator serves: one `ResourceDef` per group/version/plural, the builtin ones.

Pure data; never touches the store.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

import kmock

# What the operations raise: `.status` is the HTTP code, `.reason` the Kubernetes reason.
ApiError = kmock.KubernetesError

Body = dict[str, Any]
StoreKey = tuple[str, str]  # (group, plural): one store per resource, shared by its versions

SERVER_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-latency-tuner-emulator",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}
ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
SERVER_MANAGED_METADATA = (
    "uid",
    "creationTimestamp",
    "generation",
    "resourceVersion",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "name",
    "namespace",
)


@dataclasses.dataclass(frozen=True)
class ResourceDef:
    """One served group/version/plural, builtin or from a CRD."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()
    singular: str = ""
    schema: Mapping[str, Any] | None = None  # openAPIV3Schema of a CRD version
    custom: bool = False  # from a CRD: no strategic merge patch, schema validation
    printer_columns: tuple[Mapping[str, Any], ...] = ()  # a CRD version's additionalPrinterColumns

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def store_key(self) -> StoreKey:
        return (self.group, self.plural)

    @property
    def group_resource(self) -> str:
        """How the real server names it in messages: `deployments.apps`, `pods`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def kmock_resource(self) -> kmock.resource:
        return kmock.resource(self.group, self.version, self.plural)


def _builtin(
    api_version: str,
    plural: str,
    kind: str,
    *,
    namespaced: bool = True,
    short: Sequence[str] = (),
    status: bool = False,
) -> ResourceDef:
    group, _, version = api_version.rpartition("/")
    return ResourceDef(
        group=group,
        version=version,
        plural=plural,
        kind=kind,
        namespaced=namespaced,
        short_names=tuple(short),
        subresources=frozenset({"status"} if status else set()),
        singular=kind.lower(),
    )


BUILTIN_RESOURCES: tuple[ResourceDef, ...] = (
    _builtin("v1", "namespaces", "Namespace", namespaced=False, short=["ns"], status=True),
    _builtin("v1", "nodes", "Node", namespaced=False, short=["no"], status=True),
    _builtin("v1", "pods", "Pod", short=["po"], status=True),
    _builtin("v1", "services", "Service", short=["svc"], status=True),
    _builtin("v1", "endpoints", "Endpoints", short=["ep"]),
    _builtin("v1", "configmaps", "ConfigMap", short=["cm"]),
    _builtin("v1", "secrets", "Secret"),
    _builtin("v1", "serviceaccounts", "ServiceAccount", short=["sa"]),
    _builtin("v1", "events", "Event", short=["ev"]),
    _builtin("v1", "persistentvolumeclaims", "PersistentVolumeClaim", short=["pvc"], status=True),
    _builtin("apps/v1", "deployments", "Deployment", short=["deploy"], status=True),
    _builtin("apps/v1", "replicasets", "ReplicaSet", short=["rs"], status=True),
    _builtin("apps/v1", "statefulsets", "StatefulSet", short=["sts"], status=True),
    _builtin("apps/v1", "daemonsets", "DaemonSet", short=["ds"], status=True),
    _builtin("events.k8s.io/v1", "events", "Event", short=["ev"]),
    _builtin("coordination.k8s.io/v1", "leases", "Lease"),
    _builtin("rbac.authorization.k8s.io/v1", "roles", "Role"),
    _builtin("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding"),
    _builtin("rbac.authorization.k8s.io/v1", "clusterroles", "ClusterRole", namespaced=False),
    _builtin(
        "rbac.authorization.k8s.io/v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        namespaced=False,
    ),
    _builtin(
        "apiextensions.k8s.io/v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        namespaced=False,
        short=["crd", "crds"],
        status=True,
    ),
)
CRD = ("apiextensions.k8s.io", "customresourcedefinitions")
NAMESPACES = ("", "namespaces")
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")

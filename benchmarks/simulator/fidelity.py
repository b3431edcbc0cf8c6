"""The simulator against every published point it can model: error per row and per group.

Groups (median and max |error|):
- NVLink: latency_points.csv H100 rows (kernel-only: those rows leave out HTTP, tokenisation
  and scheduler time, so the comparison uses ``predict(kernel_only=True)``) and the end-to-end
  measured_points.csv rows on H100/H200 SXM (vLLM CI latency runs, NIM closed-loop tables);
- A100: latency_points.csv A100 rows (kernel-only) and the measured A100 rows;
- PCIe: the published L40S points of effect_sizes.md (all-reduce times, 70B TTFT at TP2/TP4)
  and the direction of TP on PCIe;
- H200 FP8: the FP8 weight / FP8 KV gain on H200 next to H100's (the published H200 gains are
  9-16 points smaller; the figures themselves are held back, so the points are printed);
- light-load TTFT: measured TTFT at QPS 1 / one client (these include HTTP, tokenisation and
  engine CPU time).
Rows the simulator cannot model are listed with the reason (tests/unit/simulator/cost/
test_measured_points.py holds the same list).

    .venv/bin/python benchmarks/simulator/fidelity.py [--reference DIR] [--fast]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from latency_tuner.simulator.measured import (
    NOT_COMPARED,
    REFERENCE_GPUS,
    MeasuredRow,
    load_measured_rows,
    simulate_measured_row,
    unsupported_reason,
)
from latency_tuner.simulator.predict import predict

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "reference"


@dataclass(frozen=True)
class Line:
    group: str
    id: str
    what: str
    reference: float
    model: float

    @property
    def error(self) -> float:
        return self.model / self.reference - 1.0


def _latency_rows(folder: Path) -> list[Line]:
    import csv

    lines = []
    with (folder / "latency_points.csv").open(newline="") as f:
        for row in csv.DictReader(f):
            ttft = row["measure"] == "ttft"
            got = predict(
                row["model"],
                REFERENCE_GPUS.get(row["gpu"], row["gpu"]),
                tp=int(row["tp"]),
                quantization="fp8" if row["weights"] == "fp8" else None,
                kv_cache_dtype="fp8" if row["kv_cache"] == "fp8" else None,
                prompt_tokens=int(row["prompt_tokens"]),
                output_tokens=int(row["output_tokens"]),
                batch=int(row["batch"]),
                kernel_only=True,
            )
            group = "A100" if row["gpu"].startswith("a100") else "NVLink"
            ref = float(row["ttft_ms" if ttft else "itl_ms"])
            lines.append(
                Line(group, row["id"], row["measure"], ref, got.ttft_ms if ttft else got.itl_ms)
            )
    return lines


def _measured_lines(rows: Sequence[MeasuredRow], fast: bool) -> tuple[list[Line], list[str]]:
    lines: list[Line] = []
    skipped: list[str] = []
    for row in rows:
        reason = unsupported_reason(row)
        if reason is not None:
            skipped.append(f"{row.id}: {reason}")
            continue
        if fast and row.concurrency > 50:
            skipped.append(f"{row.id}: left out by --fast")
            continue
        try:
            result = simulate_measured_row(row)
        except ValueError as exc:  # e.g. a GPU or a setup the simulator refuses
            skipped.append(f"{row.id}: the simulator refused it: {exc}")
            continue
        group = "A100" if "A100" in row.gpu else "NVLink"
        for measure, ref, got in result.comparisons():
            lines.append(Line(group, row.id, measure, ref, got))
            light = row.concurrency <= 1 or row.rate_qps is not None
            if measure == "ttft_ms" and light:
                lines.append(Line("light-load TTFT", row.id, measure, ref, got))
    return lines, skipped


# PCIe points published in effect_sizes.md (aiconfigurator kernel timings on L40S).
def _pcie_lines() -> list[Line]:
    from latency_tuner.perf.config import build_engine_config
    from latency_tuner.perf.cost import CostModel
    from latency_tuner.simulator.predict import flags_for

    def allreduce_ms(tp: int, message_bytes: float) -> float:
        config = build_engine_config(
            flags_for("meta-llama/Llama-3.1-70B-Instruct", tp=tp, quantization="fp8"),
            gpu="L40S",
            num_gpus=tp,
        )
        tokens = message_bytes / (config.model.hidden * 2.0)
        return CostModel(config).allreduce_time(tokens) * 1e3

    def ttft(tp: int) -> float:
        return predict(
            "meta-llama/Llama-3.1-70B-Instruct",
            "L40S",
            tp=tp,
            quantization="fp8",
            prompt_tokens=2048,
            output_tokens=2,
            kernel_only=True,
        ).ttft_ms

    return [
        Line("PCIe", "allreduce_33.5MB_tp2", "ms", 1.7, allreduce_ms(2, 33.5e6)),
        Line("PCIe", "allreduce_33.5MB_tp8", "ms", 39.0, allreduce_ms(8, 33.5e6)),
        Line("PCIe", "allreduce_0.5MB_tp2", "ms", 0.05, allreduce_ms(2, 0.5e6)),
        Line("PCIe", "allreduce_0.5MB_tp8", "ms", 0.5, allreduce_ms(8, 0.5e6)),
        Line("PCIe", "l40s_70b_fp8_ttft_tp2", "ttft_ms", 961.0, ttft(2)),
        Line("PCIe", "l40s_70b_fp8_ttft_tp4", "ttft_ms", 2500.0, ttft(4)),
    ]


def _effects() -> list[str]:
    def cut(gpu: str, batch: int, **kw: object) -> float:
        def run(**extra: object) -> float:
            return predict(
                "meta-llama/Llama-3.1-8B-Instruct",
                gpu,
                prompt_tokens=kw.get("prompt_tokens", 1024),  # type: ignore[arg-type]
                output_tokens=256,
                batch=batch,
                **extra,  # type: ignore[arg-type]
            ).itl_ms

        base = run()
        after = run(**{k: v for k, v in kw.items() if k != "prompt_tokens"})
        return (after / base - 1.0) * 100

    lines = [
        "H200 FP8: gain on Llama-3.1-8B ITL        H100-SXM    H200  H200 smaller by  published",
    ]
    for label, batch, kw, published in (
        ("FP8 weights, batch 1", 1, {"quantization": "fp8"}, "-29% (H100)"),
        ("FP8 weights, batch 64", 64, {"quantization": "fp8"}, "-21% (H100)"),
        ("FP8 KV, batch 32, 8k context", 32, {"kv_cache_dtype": "fp8", "prompt_tokens": 8192},
         "-27% (H100)"),
    ):  # fmt: skip
        h100, h200 = cut("H100-SXM", batch, **kw), cut("H200", batch, **kw)
        lines.append(
            f"{label:40} {h100:+7.1f}% {h200:+6.1f}% {h200 - h100:+9.1f} points   {published}"
        )
    lines.append("(issue 18: H200's published FP8 gains are 9-16 points smaller than H100's)")

    def tp_itl(tp: int) -> float:
        return predict(
            "meta-llama/Llama-3.1-70B-Instruct",
            "L40S",
            tp=tp,
            quantization="fp8",
            prompt_tokens=1024,
            output_tokens=256,
        ).itl_ms

    lines.append(
        f"L40S 70B FP8 decode, TP4 / TP8 ITL ratio: {tp_itl(4) / tp_itl(8):.2f}x "
        "(measured: TP8 about 1.8x faster)"
    )
    return lines


def _summary(lines: Sequence[Line]) -> list[str]:
    out = [f"{'group':16} {'rows':>4} {'median |err|':>12} {'max |err|':>10}"]
    for group in ("NVLink", "A100", "PCIe", "light-load TTFT"):
        errors = [abs(line.error) for line in lines if line.group == group]
        if errors:
            out.append(
                f"{group:16} {len(errors):>4} {statistics.median(errors):>11.1%} "
                f"{max(errors):>9.1%}"
            )
    return out


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, default=FIXTURES)
    parser.add_argument("--fast", action="store_true", help="skip rows above 50 clients")
    args = parser.parse_args(argv)
    lines = _latency_rows(args.reference)
    measured, skipped = _measured_lines(load_measured_rows(args.reference), args.fast)
    lines += measured + _pcie_lines()
    show: Callable[[Line], str] = lambda line: (  # noqa: E731
        f"{line.group:16} {line.id:34} {line.what:8} {line.reference:10.2f} "
        f"{line.model:10.2f} {line.error:+7.1%}"
    )
    print(f"{'group':16} {'row':34} {'measure':8} {'reference':>10} {'model':>10} {'error':>7}")
    for line in lines:
        print(show(line))
    print()
    print("\n".join(_summary(lines)))
    print()
    print("\n".join(_effects()))
    print()
    print("rows the simulator does not model:")
    for reason in skipped:
        print(f"  {reason}")
    print("figures not compared:")
    for (row_id, measure), reason in NOT_COMPARED.items():
        print(f"  {row_id} {measure}: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

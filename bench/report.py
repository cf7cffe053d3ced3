"""Render the benchmark results as a markdown table with ratios and targets."""

from __future__ import annotations

from typing import Any

from common import S4_CALLS, SCENARIOS, UNTRACED, summary
from systems import PEERS, __doc__ as SETUP_NOTES

BASE = "reference"
MAIN = "lionops"


def _median(results: dict[str, Any], system: str, scenario: str) -> float | None:
    entry = results.get(system, {}).get(scenario, {})
    xs = entry.get("samples")
    return summary(xs)["median"] if xs else None


def _cell(results: dict[str, Any], system: str, scenario: str) -> str:
    sysres = results.get(system, {})
    if "error" in sysres:
        return "failed"
    entry = sysres.get(scenario, {})
    if "unsupported" in entry:
        return "n/a"
    if "error" in entry:
        return "error"
    xs = entry.get("samples")
    if not xs:
        return "-"
    s = summary(xs)
    spread = (s["p75"] - s["p25"]) / 2 / s["median"] * 100 if s["median"] else 0.0
    return f"{s['median']:,.1f} ±{spread:.0f}%"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}×" if a and b else "-"


def _s4(results: dict[str, Any], system: str) -> dict[str, Any] | None:
    entry = results.get(system, {}).get("S4")
    return entry if entry and "wall_ms" in entry else None


def render(doc: dict[str, Any]) -> str:
    results = doc["results"]
    systems = [s for s in doc["systems"] if s not in (BASE, MAIN)]
    peers = [s for s in systems if s in PEERS]
    others = [s for s in systems if s not in PEERS]
    head = ["scenario (µs per call)", BASE, MAIN, f"{MAIN}/{BASE}"]
    for s in others:
        head += [s, f"{s}/{BASE}"]
    for s in peers:
        head += [s, f"{s}/{MAIN}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def row(label: str, cells: list[str]) -> None:
        lines.append("| " + " | ".join([label, *cells]) + " |")

    for sc in SCENARIOS:
        base, main = _median(results, BASE, sc), _median(results, MAIN, sc)
        cells = [_cell(results, BASE, sc), _cell(results, MAIN, sc), _ratio(main, base)]
        for s in others:
            cells += [_cell(results, s, sc), _ratio(_median(results, s, sc), base)]
        for s in peers:
            cells += [_cell(results, s, sc), _ratio(_median(results, s, sc), main)]
        row(sc, cells)

    def s4_row(label: str, fmt: Any) -> None:
        vals = {s: fmt(_s4(results, s)) if _s4(results, s) else None for s in doc["systems"]}

        def cell(s: str) -> str:
            return f"{vals[s]:,.1f}" if vals.get(s) is not None else ("failed" if "error" in results.get(s, {}) else "-")

        cells = [cell(BASE), cell(MAIN), _ratio(vals.get(MAIN), vals.get(BASE))]
        for s in others:
            cells += [cell(s), _ratio(vals.get(s), vals.get(BASE))]
        for s in peers:
            cells += [cell(s), _ratio(vals.get(s), vals.get(MAIN))]
        row(label, cells)

    s4_row(f"S4 wall ms ({S4_CALLS} concurrent, 10 ms middle)", lambda e: summary(e["wall_ms"])["median"])
    s4_row("S4 peak RSS MiB", lambda e: e["rss_peak_mib"])
    s4_row("S4 RSS growth MiB (peak − after warm-up)", lambda e: e["rss_peak_mib"] - e["rss_baseline_mib"])

    clock = "process CPU time" if doc.get("clock", "cpu") == "cpu" else "wall-clock time"
    out = [f"Per-call rows: median µs of {clock} per call (± half the interquartile range of the "
           "samples); S4: wall-clock.", "", "\n".join(lines), ""]
    extras = results.get(MAIN, {}).get("extras", {})
    s1 = _median(results, MAIN, "S1")
    untraced = _median(results, MAIN, UNTRACED)
    share = trace_share(results)
    facts = []
    if s1 and untraced and share is not None:
        facts.append(f"- Trace recording: S1 {s1:.1f} µs traced vs {untraced:.1f} µs untraced (medians); "
                     f"block by block, interleaved in one process, recording is {share * 100:.0f}% of S1.")
    if extras.get("trace_to_json_us"):
        tj = summary(extras["trace_to_json_us"])["median"]
        facts.append(f"- An S2 trace serializes (`to_json`) in {tj:.1f} µs.")
    if extras.get("traces_per_s"):
        tps = summary(extras["traces_per_s"])["median"]
        facts.append(f"- S5 traces written to a JSONL file: {tps:,.0f} traces/s.")
    out += facts
    out += ["", "Targets (ratios from this run):", ""]
    out += [f"- {t}" for t in targets(doc)]
    errors = [f"- {s}: {results[s]['error']}" for s in doc["systems"] if "error" in results.get(s, {})]
    if errors:
        out += ["", "Failures:", "", *errors]
    errors = [f"- {s} {sc}: {e['error']}" for s in doc["systems"] for sc, e in results.get(s, {}).items()
              if isinstance(e, dict) and "error" in e]
    if errors:
        out += ["", "Scenario errors:", "", *errors]
    unsupported = sorted({
        f"- {s} {sc}: {e['unsupported']}" for s in doc["systems"] for sc, e in results.get(s, {}).items()
        if isinstance(e, dict) and "unsupported" in e
    })
    if unsupported:
        out += ["", "Not expressible:", "", *unsupported]
    if peers:
        notes = SETUP_NOTES.split("Setup differences (also printed under the table):", 1)[-1].strip()
        out += ["", "Setup differences:", "", notes]
    return "\n".join(out)


def trace_share(results: dict[str, Any]) -> float | None:
    """Median over paired blocks of (traced - untraced) / traced S1 time.

    The worker times an S1 block and then an untraced S1 block in every
    pass, so pairs share the machine's state; the median of their shares is
    steadier than the ratio of two medians.
    """
    traced = results.get(MAIN, {}).get("S1", {}).get("samples")
    untraced = results.get(MAIN, {}).get(UNTRACED, {}).get("samples")
    if not traced or not untraced:
        return None
    return summary([(t - u) / t for t, u in zip(traced, untraced)])["median"]


def targets(doc: dict[str, Any]) -> list[str]:
    results = doc["results"]
    out = []

    def check(label: str, value: float | None, limit: float, higher: bool = False) -> None:
        if value is None:
            out.append(f"{label}: not measured")
            return
        ok = value >= limit if higher else value <= limit
        out.append(f"{label}: {value:.2f} ({'met' if ok else 'MISSED'}, target {'≥' if higher else '≤'} {limit:g})")

    def ratio(a: str, b: str, sc: str) -> float | None:
        x, y = _median(results, a, sc), _median(results, b, sc)
        return x / y if x and y else None

    check("S1 lionops/reference", ratio(MAIN, BASE, "S1"), 5)
    check("S2 lionops/reference", ratio(MAIN, BASE, "S2"), 3)
    w_main, w_base = _s4(results, MAIN), _s4(results, BASE)
    check("S4 wall lionops/reference",
          summary(w_main["wall_ms"])["median"] / summary(w_base["wall_ms"])["median"] if w_main and w_base else None, 3)
    if "lionagi" in doc["systems"]:
        check("S1 lionagi/lionops", ratio("lionagi", MAIN, "S1"), 10, higher=True)
        check("S2 lionagi/lionops", ratio("lionagi", MAIN, "S2"), 10, higher=True)
    check("trace recording share of S1", trace_share(results), 0.20)
    tj = results.get(MAIN, {}).get("extras", {}).get("trace_to_json_us")
    check("S2 trace to_json ms", summary(tj)["median"] / 1000 if tj else None, 1)
    return out

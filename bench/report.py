"""Render the benchmark results as markdown tables with ratios and targets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from common import H3_CALLS, H_SCENARIOS, S4_CALLS, SCENARIOS, UNTRACED, summary
from e2e import E2E_PEERS
from e2e import __doc__ as E2E_NOTES
from systems import PEERS
from systems import __doc__ as SETUP_NOTES

BASE = "reference"
MAIN = "lionops"
E2E_BASE = "floor"

#: a row's value of one system: (number for ratios or None, cell text)
Value = Callable[[dict[str, Any], str], tuple[float | None, str]]


def _median(results: dict[str, Any], system: str, scenario: str, key: str = "samples") -> float | None:
    entry = results.get(system, {}).get(scenario, {})
    xs = entry.get(key) if isinstance(entry, dict) else None
    return summary(xs)["median"] if xs else None


def _missing(results: dict[str, Any], system: str, scenario: str) -> str | None:
    """The cell text when there is no number: failed, n/a, error or -."""
    sysres = results.get(system, {})
    if "error" in sysres:
        return "failed"
    entry = sysres.get(scenario, {})
    if "unsupported" in entry:
        return "n/a"
    if "error" in entry:
        return "error"
    return "-"


def samples_of(scenario: str, key: str = "samples") -> Value:
    """Median ± half the interquartile range of per-call samples."""

    def value(results: dict[str, Any], system: str) -> tuple[float | None, str]:
        entry = results.get(system, {}).get(scenario, {})
        xs = entry.get(key) if isinstance(entry, dict) else None
        if not xs:
            return None, _missing(results, system, scenario) or "-"
        s = summary(xs)
        spread = (s["p75"] - s["p25"]) / 2 / s["median"] * 100 if s["median"] else 0.0
        return s["median"], f"{s['median']:,.1f} ±{spread:.0f}%"

    return value


def concurrent_of(scenario: str, fmt: Callable[[dict[str, Any]], float]) -> Value:
    """A figure of a concurrent run (S4, H3): wall time or memory."""

    def value(results: dict[str, Any], system: str) -> tuple[float | None, str]:
        entry = results.get(system, {}).get(scenario)
        if entry and "wall_ms" in entry:
            v = fmt(entry)
            return v, f"{v:,.1f}"
        return None, "failed" if "error" in results.get(system, {}) or (entry and "error" in entry) else "-"

    return value


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}×" if a and b else "-"


def grid(results: dict[str, Any], systems: list[str], base: str, main: str, peers: tuple[str, ...],
         rows: list[tuple[str, Value]], corner: str) -> list[str]:
    """A markdown table: base, main, main/base, each other system and its ratio
    to base, then each peer and its ratio to main."""
    rest = [s for s in systems if s not in (base, main)]
    others = [s for s in rest if s not in peers]
    peer_cols = [s for s in rest if s in peers]
    head = [corner, base, main, f"{main}/{base}"]
    for s in others:
        head += [s, f"{s}/{base}"]
    for s in peer_cols:
        head += [s, f"{s}/{main}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, value in rows:
        vals = {s: value(results, s) for s in [base, main, *rest]}
        cells = [vals[base][1], vals[main][1], _ratio(vals[main][0], vals[base][0])]
        for s in others:
            cells += [vals[s][1], _ratio(vals[s][0], vals[base][0])]
        for s in peer_cols:
            cells += [vals[s][1], _ratio(vals[s][0], vals[main][0])]
        lines.append("| " + " | ".join([label, *cells]) + " |")
    return lines


def _wall(e: dict[str, Any]) -> float:
    return summary(e["wall_ms"])["median"]


def _notes(doc: str, heading: str = "Setup differences (also printed under the table):") -> str:
    return doc.split(heading, 1)[-1].strip()


def render(doc: dict[str, Any]) -> str:
    out: list[str] = []
    if doc.get("systems"):
        out += render_inprocess(doc)
    if doc.get("e2e_systems"):
        out += ([""] if out else []) + render_e2e(doc)
    if doc.get("paired"):
        out += ([""] if out else []) + render_paired(doc["paired"])
    return "\n".join(out)


#: paired rows: scenario, label, the floor's name, the key of the ratios, and the goal (or None)
PAIRED_ROWS: list[tuple[str, str, str, str, float | None]] = [
    ("S1", "S1 CPU", BASE, "ratios", 1.3),
    ("S2", "S2 CPU", BASE, "ratios", 1.3),
    ("S3", "S3 CPU", BASE, "ratios", 1.3),
    ("S5-1", "S5-1 CPU", BASE, "ratios", 1.3),
    ("H1", "H1 CPU", E2E_BASE, "ratios", 1.2),
    ("H2", "H2 CPU", E2E_BASE, "ratios", 1.2),
    ("H2", "H2 wall", E2E_BASE, "wall_ratios", None),
    ("H3-200", "H3 wall (200 concurrent H2)", E2E_BASE, "wall_ratios", 1.2),
]


def _spread(xs: list[float]) -> tuple[float, str]:
    s = summary(xs)
    spread = (s["p75"] - s["p25"]) / 2 / s["median"] * 100 if s["median"] else 0.0
    return s["median"], f"±{spread:.0f}%"


def paired_ratio(paired: dict[str, Any], scenario: str, key: str) -> float | None:
    """The median of the per-pair ratios lionops/floor of one scenario."""
    xs = paired.get(scenario, {}).get(key)
    return summary(xs)["median"] if xs else None


def render_paired(paired: dict[str, Any]) -> list[str]:
    """The goal ratios by the paired method: the floor and lionops in one worker
    process, block by block (H3: burst by burst), the order alternating."""
    out = ["Paired (the floor and lionops in the same worker process, blocks interleaved in alternating "
           "order; the ratio is the median of the per-pair ratios ± half their interquartile range; "
           "per-call medians of process CPU time, H3 of wall-clock bursts):", "",
           "| scenario | floor | floor µs | lionops µs | lionops/floor (paired) | pairs |",
           "|---|---|---|---|---|---|"]
    lines = []
    for scenario, label, base, key, goal in PAIRED_ROWS:
        entry = paired.get(scenario, {})
        xs = entry.get(key)
        if not xs:
            cell = "error: " + entry["error"] if "error" in entry else "-"
            out.append(f"| {label} | {base} | - | - | {cell} | 0 |")
            continue
        ratio, spread = _spread(xs)
        if "base_ms" in entry:
            b, m = summary(entry["base_ms"])["median"], summary(entry["main_ms"])["median"]
            figures = f"{b:,.1f} ms | {m:,.1f} ms"
        else:
            suffix = "_wall" if key == "wall_ratios" else ""
            b, m = summary(entry["base" + suffix])["median"], summary(entry["main" + suffix])["median"]
            figures = f"{b:,.1f} | {m:,.1f}"
        out.append(f"| {label} | {base} | {figures} | {ratio:.2f}× {spread} | {len(xs)} |")
        if goal is not None:
            lines.append(f"{label} lionops/{base} (paired): {ratio:.2f} "
                         f"({'met' if ratio <= goal else 'MISSED'}, target ≤ {goal:g})")
    out += ["", "Targets by the paired method:", ""] + [f"- {line}" for line in lines]
    errors = paired.get("errors")
    if errors:
        out += ["", "Paired worker failures:", ""] + [f"- {e}" for e in errors]
    return out


def render_inprocess(doc: dict[str, Any]) -> list[str]:
    results = doc["results"]
    rows: list[tuple[str, Value]] = [(sc, samples_of(sc)) for sc in SCENARIOS]
    rows += [
        (f"S4 wall ms ({S4_CALLS} concurrent, 10 ms middle)", concurrent_of("S4", _wall)),
        ("S4 peak RSS MiB", concurrent_of("S4", lambda e: e["rss_peak_mib"])),
        ("S4 RSS growth MiB (peak − after warm-up)",
         concurrent_of("S4", lambda e: e["rss_peak_mib"] - e["rss_baseline_mib"])),
    ]
    clock = "process CPU time" if doc.get("clock", "cpu") == "cpu" else "wall-clock time"
    out = [f"Per-call rows: median µs of {clock} per call (± half the interquartile range of the "
           "samples); S4: wall-clock.", "",
           "\n".join(grid(results, doc["systems"], BASE, MAIN, PEERS, rows, "scenario (µs per call)")), ""]
    extras = results.get(MAIN, {}).get("extras", {})
    s1 = _median(results, MAIN, "S1")
    untraced = _median(results, MAIN, UNTRACED)
    share = trace_share(results)
    if s1 and untraced and share is not None:
        out.append(f"- Trace recording: S1 {s1:.1f} µs traced vs {untraced:.1f} µs untraced (medians); "
                   f"block by block, interleaved in one process, recording is {share * 100:.0f}% of S1.")
    if extras.get("trace_to_json_us"):
        tj = summary(extras["trace_to_json_us"])["median"]
        out.append(f"- An S2 trace serializes (`to_json`) in {tj:.1f} µs.")
    if extras.get("traces_per_s"):
        tps = summary(extras["traces_per_s"])["median"]
        out.append(f"- S5 traces written to a JSONL file: {tps:,.0f} traces/s.")
    out += ["", "Targets (ratios from this run):", ""]
    out += [f"- {t}" for t in targets(doc)]
    out += _problems(results, doc["systems"])
    if any(s in PEERS for s in doc["systems"]):
        out += ["", "Setup differences:", "", _notes(SETUP_NOTES)]
    return out


def render_e2e(doc: dict[str, Any]) -> list[str]:
    results = doc["e2e"]
    rows: list[tuple[str, Value]] = [(f"{sc} CPU", samples_of(sc)) for sc in H_SCENARIOS]
    rows += [(f"{sc} wall", samples_of(sc, "wall")) for sc in H_SCENARIOS]
    for calls in H3_CALLS:
        rows += [
            (f"H3 wall ms ({calls} concurrent H2)", concurrent_of(f"H3-{calls}", _wall)),
            (f"H3 peak RSS MiB ({calls})", concurrent_of(f"H3-{calls}", lambda e: e["rss_peak_mib"])),
        ]
    shapes = {"native": "tools sent natively (`tools=`, `tool_calls`)",
              "in_body": "tools described in the prompt, requested in the structured answer"}
    shape = shapes[doc.get("shape", "in_body")]
    out = ["End-to-end over HTTP to a loopback peer in its own process (`bench/peer.py`): median µs per "
           "call of the client's process CPU time (the peer excluded) and of wall-clock time (± half the "
           f"interquartile range); H3: wall-clock of the whole burst, peak RSS of the client. Floors: {shape}.",
           "", "\n".join(grid(results, doc["e2e_systems"], E2E_BASE, MAIN, E2E_PEERS, rows, "scenario")), ""]
    out += ["Targets (ratios from this run):", ""]
    out += [f"- {t}" for t in e2e_targets(doc)]
    out += _problems(results, doc["e2e_systems"])
    if any(s in E2E_PEERS for s in doc["e2e_systems"]):
        out += ["", "Setup differences:", "", _notes(E2E_NOTES)]
    return out


def _problems(results: dict[str, Any], systems: list[str]) -> list[str]:
    out: list[str] = []
    errors = [f"- {s}: {results[s]['error']}" for s in systems if "error" in results.get(s, {})]
    if errors:
        out += ["", "Failures:", "", *errors]
    errors = [f"- {s} {sc}: {e['error']}" for s in systems for sc, e in results.get(s, {}).items()
              if isinstance(e, dict) and "error" in e]
    if errors:
        out += ["", "Scenario errors:", "", *errors]
    unsupported = sorted({
        f"- {s} {sc}: {e['unsupported']}" for s in systems for sc, e in results.get(s, {}).items()
        if isinstance(e, dict) and "unsupported" in e
    })
    if unsupported:
        out += ["", "Not expressible:", "", *unsupported]
    return out


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
    return summary([(t - u) / t for t, u in zip(traced, untraced, strict=False)])["median"]


class _Checks:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, label: str, value: float | None, limit: float, higher: bool = False) -> None:
        if value is None:
            self.lines.append(f"{label}: not measured")
            return
        ok = value >= limit if higher else value <= limit
        self.lines.append(
            f"{label}: {value:.2f} ({'met' if ok else 'MISSED'}, target {'≥' if higher else '≤'} {limit:g})")


def _of(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def targets(doc: dict[str, Any]) -> list[str]:
    results = doc["results"]
    check = _Checks()

    def ratio(a: str, b: str, sc: str) -> float | None:
        return _of(_median(results, a, sc), _median(results, b, sc))

    for sc in SCENARIOS:  # every in-process scenario within 1.3x of the floor
        check(f"{sc} lionops/reference", ratio(MAIN, BASE, sc), 1.3)
    wall = concurrent_of("S4", _wall)
    check("S4 wall lionops/reference", _of(wall(results, MAIN)[0], wall(results, BASE)[0]), 1.3)
    growth = concurrent_of("S4", lambda e: e["rss_peak_mib"] - e["rss_baseline_mib"])
    check("S4 RSS growth lionops/reference", _of(growth(results, MAIN)[0], growth(results, BASE)[0]), 1.3)
    if "lionagi" in doc["systems"]:
        check("S1 lionagi/lionops", ratio("lionagi", MAIN, "S1"), 10, higher=True)
        check("S2 lionagi/lionops", ratio("lionagi", MAIN, "S2"), 10, higher=True)
    check("trace recording share of S1", trace_share(results), 0.20)
    tj = results.get(MAIN, {}).get("extras", {}).get("trace_to_json_us")
    check("S2 trace to_json ms", summary(tj)["median"] / 1000 if tj else None, 1)
    return check.lines


def e2e_targets(doc: dict[str, Any]) -> list[str]:
    results = doc["e2e"]
    check = _Checks()
    for sc in ("H1", "H2", "H4"):
        check(f"{sc} CPU lionops/floor", _of(_median(results, MAIN, sc), _median(results, E2E_BASE, sc)), 1.2)
    wall = concurrent_of("H3-200", _wall)
    check("H3 200 concurrent wall lionops/floor", _of(wall(results, MAIN)[0], wall(results, E2E_BASE)[0]), 1.2)
    for peer in E2E_PEERS:
        if peer in doc["e2e_systems"]:
            for sc in ("H1", "H2"):
                check(f"{sc} CPU {peer}/lionops (lionops ahead above 1)",
                      _of(_median(results, peer, sc), _median(results, MAIN, sc)), 1, higher=True)
    return check.lines

"""Benchmark lionops' pipeline overhead against the hand-written floor and peers.

    python bench/run.py                 # lionops, its reference engine, the floor
    python bench/run.py --peers         # plus lionagi 0.36.0 and pydantic-ai-slim
    python bench/run.py --quick         # one iteration of everything (smoke)

Each system runs in its own worker process (``--worker``), started in
``--rounds`` rounds that rotate the systems, so machine drift spreads over
all of them. A worker warms every scenario up, then times blocks of calls
(about 5 ms each), cycling through the scenarios until its time is up; a
sample is the mean per-call CPU time of one block. Round r runs every
worker with PYTHONHASHSEED=r (dict layouts follow string hashes and move
per-call times by up to a third between processes). S4 runs in one more process
per system, so its peak RSS is that system's alone. The table gives medians
(± half the interquartile range) and ratios; results land in
``out/bench/results.json`` and ``out/bench/results.md``.

The goal ratios (S1, S2 against the reference; H1, H2 and 200 concurrent H2
against the httpx floor) are also measured by the paired method
(``--paired-rounds`` workers per set, ``--set p`` for these alone): the
floor and lionops run in the SAME worker process, block by block (H3: burst
by burst), the order alternating, and a ratio is the median of the per-pair
ratios, so the drift between processes on a shared machine cancels out.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from common import H3_CALLS, H_SCENARIOS, S4_CALLS, S4_SLEEP, SCENARIOS, UNTRACED  # noqa: E402
from systems import LOCAL, PEERS, Unsupported, build  # noqa: E402

PEERS_DIR = ROOT / ".cache" / "bench-peers"
#: Per-call samples are CPU time of the worker process (ns): on a shared
#: machine, time spent descheduled is not the system's work. ``--clock wall``
#: (LIONOPS_BENCH_CLOCK=wall in workers) times wall-clock instead. S4 is
#: always wall-clock.
CLOCK = time.perf_counter_ns if os.environ.get("LIONOPS_BENCH_CLOCK") == "wall" else time.process_time_ns
BLOCK_S = 0.005
WARMUP_S = 0.15
#: a block of end-to-end calls (each a loopback round trip) lasts about this long
E2E_BLOCK_S = 0.02
#: the peer's root URL and H3's concurrent calls, as the parent hands them to a worker
PEER_ENV = "LIONOPS_BENCH_PEER"
CALLS_ENV = "LIONOPS_BENCH_CALLS"


# ---------------------------------------------------------------- worker side


async def time_scenarios(system: Any, seconds: float, quick: bool,
                         extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Per-call samples (µs) of every scenario the system can express, and of
    the ``extra`` cases (name -> (new_branch, call)) each timed right after S1."""
    out: dict[str, Any] = {}
    cases = {}
    for name, (shape, k) in SCENARIOS.items():
        try:
            cases[name] = system.scenario(shape, k)
        except Unsupported as exc:
            out[name] = {"unsupported": str(exc)}
        if name == "S1":
            cases.update(extra or {})  # timed right after S1, block by block
    return await time_cases(cases, seconds, quick, out)


async def warm(new_branch: Any, call: Any, quick: bool, block_s: float) -> int:
    """Warm one case up (at least ``WARMUP_S`` and 3 calls); the calls in a
    block of about ``block_s``."""
    branch, n, t0 = new_branch(), 0, time.perf_counter()
    while True:
        await call(branch)
        n += 1
        elapsed = time.perf_counter() - t0
        if quick or (elapsed > WARMUP_S and n >= 3) or elapsed > 2.0:
            break
    return 1 if quick else max(1, int(block_s / (elapsed / n)))


async def time_cases(cases: dict[str, Any], seconds: float, quick: bool, out: dict[str, Any],
                     block_s: float = BLOCK_S) -> dict[str, Any]:
    """Warm each case (name -> (new_branch, call)) up, size its block to about
    ``block_s``, then time block after block, cycling through the cases until
    ``seconds`` are up. Into ``out``: per case, ``samples`` (µs per call of
    ``CLOCK``) and ``wall`` (µs per call of wall-clock time), or ``error``."""
    blocks: dict[str, int] = {}
    for name, (new_branch, call) in list(cases.items()):
        try:
            blocks[name] = await warm(new_branch, call, quick, block_s)
        except Exception as exc:  # noqa: BLE001 - reported in the table, the others still run
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
            del cases[name]
    samples: dict[str, list[float]] = {name: [] for name in cases}
    walls: dict[str, list[float]] = {name: [] for name in cases}
    deadline = time.perf_counter() + seconds
    while True:
        for name, (new_branch, call) in cases.items():
            branch, n = new_branch(), blocks[name]
            gc.collect()
            w0, t0 = time.perf_counter_ns(), CLOCK()
            for _ in range(n):
                await call(branch)
            samples[name].append((CLOCK() - t0) / n / 1000)
            walls[name].append((time.perf_counter_ns() - w0) / n / 1000)
        if quick or time.perf_counter() > deadline:
            break
    for name, xs in samples.items():
        out[name] = {"samples": xs, "wall": walls[name]}
    return out


async def trace_figures(system: Any, quick: bool) -> dict[str, float]:
    """S2 trace ``to_json`` time (µs) and S5-100 traces written per second to a JSONL file."""
    reps = 1 if quick else 2000
    new_branch, call = system.scenario("actions", 3)
    branch = new_branch()
    await call(branch)
    trace = branch.traces[-1]
    t0 = time.perf_counter_ns()
    for _ in range(reps):
        trace.to_json()
    to_json_us = (time.perf_counter_ns() - t0) / reps / 1000
    new_branch, call = system.scenario("actions", 100)
    branch = new_branch()
    await call(branch)
    trace = branch.traces[-1]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "traces.jsonl"
        t0 = time.perf_counter()
        with path.open("w", encoding="utf-8") as fh:
            for _ in range(reps * 5):
                fh.write(trace.to_json())
                fh.write("\n")
        rate = reps * 5 / (time.perf_counter() - t0)
    return {"trace_to_json_us": to_json_us, "traces_per_s": rate}


def _rss_mib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def concurrent(new_branch: Any, call: Any, calls: int, reps: int) -> dict[str, Any]:
    """Wall time of ``calls`` concurrent calls, ``reps`` times, and the process's peak RSS."""
    branches = [new_branch() for _ in range(20)]
    await asyncio.gather(*(call(b) for b in branches))
    del branches
    gc.collect()
    baseline = _rss_mib()
    walls = []
    for _ in range(reps):
        branches = [new_branch() for _ in range(calls)]
        gc.collect()
        t0 = time.perf_counter()
        await asyncio.gather(*(call(b) for b in branches))
        walls.append((time.perf_counter() - t0) * 1000)
        del branches
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"wall_ms": walls, "rss_baseline_mib": baseline, "rss_peak_mib": peak}


async def s4(system: Any, calls: int, reps: int) -> dict[str, Any]:
    """S4: ``calls`` concurrent operate() calls, Middle sleeping 10 ms."""
    return await concurrent(*system.scenario("structured", 0, S4_SLEEP), calls, reps)


async def worker(name: str, mode: str, seconds: float, quick: bool) -> dict[str, Any]:
    if mode in ("e2e", "h3"):
        return await e2e_worker(name, mode, seconds, quick)
    if mode.startswith("paired-"):
        return await paired_worker(mode, seconds, quick)
    system = build(name)
    if mode == "s4":
        return await s4(system, 20 if quick else S4_CALLS, 1 if quick else 5)
    extra = {}
    if name == "lionops":
        # Trace recording's cost: the same S1 without it, in the same process.
        extra[UNTRACED] = build("lionops-untraced").scenario(*SCENARIOS["S1"])
    result = await time_scenarios(system, seconds, quick, extra)
    if name in ("lionops", "lionops-transitions"):
        result["extras"] = await trace_figures(system, quick)
    return result


async def e2e_worker(name: str, mode: str, seconds: float, quick: bool) -> dict[str, Any]:
    """H1, H2 and H4 per call (``e2e``), or H3: ``LIONOPS_BENCH_CALLS`` concurrent H2 calls."""
    import e2e

    system = e2e.build(name, os.environ[PEER_ENV], os.environ.get(e2e.SHAPE_ENV, e2e.DEFAULT_SHAPE))
    if mode == "h3":
        calls = int(os.environ[CALLS_ENV])
        return await concurrent(*system.case("H2"), 20 if quick else calls, 1 if quick else H3_CALLS[calls])
    out: dict[str, Any] = {}
    cases = {}
    for scenario in H_SCENARIOS:
        try:
            cases[scenario] = system.case(scenario)
        except e2e.Unsupported as exc:
            out[scenario] = {"unsupported": str(exc)}
    return await time_cases(cases, seconds, quick, out, block_s=E2E_BLOCK_S)


async def paired_cases(cases: dict[str, tuple[Any, Any]], seconds: float, quick: bool,
                       block_s: float) -> dict[str, Any]:
    """The paired method: ``cases`` maps a scenario to (floor case, lionops
    case), both in this process. Each pass times, per scenario, one block of
    each (both of the floor's block size), the order alternating from pass to pass; a pair's ratio is
    lionops' per-call time over the floor's in that pass. Into the result, per
    scenario: ``ratios`` (``CLOCK``), ``wall_ratios``, and the per-call samples
    ``base``/``main`` (µs), or ``error``."""
    out: dict[str, Any] = {}
    blocks: dict[tuple[str, int], int] = {}
    for name, pair in list(cases.items()):
        try:
            for side, (new_branch, call) in enumerate(pair):
                blocks[name, side] = await warm(new_branch, call, quick, block_s)
        except Exception as exc:  # noqa: BLE001 - reported in the table, the others still run
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
            del cases[name]
    res = {name: {"ratios": [], "wall_ratios": [], "base": [], "main": [], "base_wall": [], "main_wall": []}
           for name in cases}
    deadline, k = time.perf_counter() + seconds, 0
    while True:
        for name, pair in cases.items():
            cpu, wall = [0.0, 0.0], [0.0, 0.0]
            for side in ((0, 1) if k % 2 == 0 else (1, 0)):
                new_branch, call = pair[side]
                # Both sides run the floor's block size: each block starts cold
                # (a fresh branch, just after gc.collect()), and a side running
                # fewer calls per block would carry more of that start per call.
                branch, n = new_branch(), blocks[name, 0]
                gc.collect()
                w0, t0 = time.perf_counter_ns(), CLOCK()
                for _ in range(n):
                    await call(branch)
                cpu[side] = (CLOCK() - t0) / n / 1000
                wall[side] = (time.perf_counter_ns() - w0) / n / 1000
            r = res[name]
            r["base"].append(cpu[0])
            r["main"].append(cpu[1])
            r["base_wall"].append(wall[0])
            r["main_wall"].append(wall[1])
            if cpu[0] > 0:
                r["ratios"].append(cpu[1] / cpu[0])
            if wall[0] > 0:
                r["wall_ratios"].append(wall[1] / wall[0])
        k += 1
        if quick or time.perf_counter() > deadline:
            break
    out.update(res)
    return out


async def paired_bursts(pair: tuple[tuple[Any, Any], tuple[Any, Any]], calls: int, reps: int) -> dict[str, Any]:
    """H3 paired: ``reps`` bursts of ``calls`` concurrent calls of each side in
    this process, the order alternating; a pair's ratio is of the two bursts'
    wall times."""
    for new_branch, call in pair:  # warm both sides up
        await asyncio.gather(*(call(new_branch()) for _ in range(20)))
    base: list[float] = []
    main: list[float] = []
    for k in range(reps):
        walls = [0.0, 0.0]
        for side in ((0, 1) if k % 2 == 0 else (1, 0)):
            new_branch, call = pair[side]
            branches = [new_branch() for _ in range(calls)]
            gc.collect()
            t0 = time.perf_counter()
            await asyncio.gather(*(call(b) for b in branches))
            walls[side] = (time.perf_counter() - t0) * 1000
            del branches
        base.append(walls[0])
        main.append(walls[1])
    return {"wall_ratios": [m / b for m, b in zip(main, base, strict=True) if b > 0], "base_ms": base, "main_ms": main}


#: the scenarios the goals name, timed by the paired method (``--set p``):
#: in process against the reference, end to end against the httpx floor.
PAIRED_S = ("S1", "S2", "S3", "S5-1")
PAIRED_H = ("H1", "H2")
PAIRED_BURST = 200


async def paired_worker(mode: str, seconds: float, quick: bool) -> dict[str, Any]:
    """``paired-s``: S1, S2, S3 and S5-1, reference and lionops; ``paired-h``: H1 and H2,
    the httpx floor and lionops, then H3 (200 concurrent H2) burst by burst."""
    if mode == "paired-s":
        base, main = build("reference"), build("lionops")
        cases = {sc: (base.scenario(*SCENARIOS[sc]), main.scenario(*SCENARIOS[sc])) for sc in PAIRED_S}
        return await paired_cases(cases, seconds, quick, BLOCK_S)
    import e2e

    root, shape = os.environ[PEER_ENV], os.environ.get(e2e.SHAPE_ENV, e2e.DEFAULT_SHAPE)
    floor, lionops = e2e.build("floor", root, shape), e2e.build("lionops", root)
    cases = {sc: (floor.case(sc), lionops.case(sc)) for sc in PAIRED_H}
    out = await paired_cases(cases, seconds, quick, E2E_BLOCK_S)
    burst = (floor.case("H2"), lionops.case("H2"))
    out[f"H3-{PAIRED_BURST}"] = await paired_bursts(burst, 20 if quick else PAIRED_BURST, 2 if quick else 6)
    return out


# ---------------------------------------------------------------- parent side


def python_of(system: str) -> Path:
    if system in PEERS:
        return PEERS_DIR / system / "bin" / "python"
    return Path(sys.executable)


def install_failure(system: str) -> str | None:
    """Why a peer's environment is unusable, or ``None``."""
    if system not in PEERS or (PEERS_DIR / system / ".installed").exists():
        return None
    log = PEERS_DIR / f"{system}.log"
    tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
    return "install failed: " + (" | ".join(tail) or "no environment (run make bench-peers)")


#: A peer library that reaches for the network (a tokenizer download, say)
#: meets a dead proxy on loopback instead; loopback itself goes direct.
_NO_NETWORK = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
               "NO_PROXY": "127.0.0.1,localhost,::1"}


def run_worker(system: str, mode: str, seconds: float, quick: bool, seed: int = 0,
               env: dict[str, str] | None = None) -> dict[str, Any]:
    # String hashing decides dict layouts; a random seed per process moves
    # per-call times by up to a third. Every system gets the same seed in a
    # round, and each round another.
    env = {**os.environ, **(_NO_NETWORK if system in PEERS else {}), **(env or {}), "PYTHONHASHSEED": str(seed)}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        cmd = [str(python_of(system)), str(HERE / "run.py"), "--worker", system, "--mode", mode,
               "--seconds", str(seconds), "--out", str(out)] + (["--quick"] if quick else [])
        # cwd is a scratch dir: some peers write logs into the working directory.
        proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0 or not out.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:]  # the exception line
            return {"error": " | ".join(tail) or f"exit {proc.returncode}"}
        return json.loads(out.read_text())


def merge(results: dict[str, dict[str, Any]], system: str, part: dict[str, Any]) -> None:
    dest = results.setdefault(system, {})
    for key, value in part.items():
        if isinstance(value, dict) and "samples" in value:
            entry = dest.setdefault(key, {"samples": [], "wall": []})
            entry["samples"].extend(value["samples"])
            entry["wall"].extend(value.get("wall", ()))
        elif key == "extras":
            for k, v in value.items():
                dest.setdefault("extras", {}).setdefault(k, []).append(v)
        else:
            dest[key] = value


def _rounds(systems: list[str], rounds: int, seconds: float, quick: bool, mode: str,
            env: dict[str, str] | None = None) -> tuple[dict[str, Any], list[str]]:
    """Timing workers of every usable system, in ``rounds`` rotated rounds; the
    results, and the systems whose environment is usable."""
    results: dict[str, dict[str, Any]] = {}
    usable = []
    for s in systems:
        why = install_failure(s)
        if why:
            results[s] = {"error": why}
        else:
            usable.append(s)
    for r in range(rounds):
        for s in usable[r % len(usable):] + usable[: r % len(usable)]:
            print(f"  {mode} round {r + 1}/{rounds}: {s}", file=sys.stderr, flush=True)
            merge(results, s, run_worker(s, mode, seconds, quick, seed=r, env=env))
    return results, usable


def collect(systems: list[str], rounds: int, seconds: float, quick: bool) -> dict[str, Any]:
    """The in-process scenarios S1–S5."""
    results, usable = _rounds(systems, rounds, seconds, quick, "timing")
    for s in usable:
        print(f"  S4: {s}", file=sys.stderr, flush=True)
        results.setdefault(s, {})["S4"] = run_worker(s, "s4", seconds, quick)
    return results


def collect_e2e(systems: list[str], rounds: int, seconds: float, quick: bool, shape: str) -> dict[str, Any]:
    """The end-to-end scenarios H1–H4 against one peer process (``bench/peer.py``)."""
    from e2e import SHAPE_ENV
    from peer import Peer

    with Peer() as peer:
        env = {PEER_ENV: peer.root, SHAPE_ENV: shape}
        results, usable = _rounds(systems, rounds, seconds, quick, "e2e", env)
        for s in usable:
            if s == "lionops-long":  # concurrent calls on one conversation are not H3
                continue
            for calls in H3_CALLS:
                print(f"  H3-{calls}: {s}", file=sys.stderr, flush=True)
                results.setdefault(s, {})[f"H3-{calls}"] = run_worker(
                    s, "h3", seconds, quick, env={**env, CALLS_ENV: str(calls)})
    return results


def collect_paired(rounds: int, seconds: float, quick: bool, shape: str, sets: str) -> dict[str, Any]:
    """The paired runs: per round one ``paired-s`` and one ``paired-h`` worker
    (each the floor and lionops in one process), every round its own hash seed."""
    from e2e import SHAPE_ENV
    from peer import Peer

    results: dict[str, Any] = {}

    def add(part: dict[str, Any]) -> None:
        if "error" in part and not isinstance(part["error"], dict):
            results.setdefault("errors", []).append(part["error"])
            return
        for key, value in part.items():
            dest = results.setdefault(key, {})
            for k, v in value.items():
                if isinstance(v, list):
                    dest.setdefault(k, []).extend(v)
                else:
                    dest[k] = v

    with Peer() as peer:
        env = {PEER_ENV: peer.root, SHAPE_ENV: shape}
        for r in range(rounds):
            for mode in ("paired-s", "paired-h") if r % 2 == 0 else ("paired-h", "paired-s"):
                if (mode == "paired-s" and sets == "h") or (mode == "paired-h" and sets == "s"):
                    continue
                print(f"  paired round {r + 1}/{rounds}: {mode}", file=sys.stderr, flush=True)
                add(run_worker("paired", mode, seconds, quick, seed=r, env=env))
    return results


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "python": sys.version.split()[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers", action="store_true", help="also run lionagi and pydantic-ai")
    ap.add_argument("--systems", help="comma-separated subset of systems")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3.0, help="timed seconds per worker")
    ap.add_argument("--quick", action="store_true", help="one iteration of each scenario")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                    help="time per-call samples as process CPU time (default) or wall-clock")
    ap.add_argument("--set", choices=("all", "s", "h", "p"), default="all",
                    help="in-process scenarios S1-S5 (s), end-to-end H1-H4 over HTTP (h), only the paired "
                         "runs of the goal ratios (p), or all of them")
    ap.add_argument("--paired-rounds", type=int, default=3, help="paired workers per set (0: none)")
    ap.add_argument("--paired-seconds", type=float, default=4.0, help="timed seconds per paired worker")
    ap.add_argument("--e2e-seconds", type=float, default=2.0, help="timed seconds per end-to-end worker")
    ap.add_argument("--shape", choices=("native", "in_body"), default="in_body",
                    help="how the floors offer tools: described in the prompt (lionops' default under a "
                         "caller model), or tools= natively")
    ap.add_argument("--out", default=str(ROOT / "out" / "bench"))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="timing", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.worker:
        result = asyncio.run(worker(args.worker, args.mode, args.seconds, args.quick))
        Path(args.out).write_text(json.dumps(result))
        return 0

    from e2e import E2E_LOCAL, E2E_PEERS
    from report import render

    os.environ["LIONOPS_BENCH_CLOCK"] = args.clock

    chosen = set(args.systems.split(",")) if args.systems else None

    def pick(names: list[str]) -> list[str]:
        return [n for n in names if chosen is None or n in chosen]

    systems = pick(list(LOCAL) + (list(PEERS) if args.peers else []))
    e2e_systems = pick(list(E2E_LOCAL) + (list(E2E_PEERS) if args.peers else []))
    rounds = 1 if args.quick else args.rounds
    t0 = time.perf_counter()
    doc: dict[str, Any] = {"machine": machine(), "clock": args.clock, "systems": [], "results": {},
                           "e2e_systems": [], "e2e": {}, "shape": args.shape}
    if args.set in ("all", "s") and systems:
        doc["systems"], doc["results"] = systems, collect(systems, rounds, args.seconds, args.quick)
    if args.set in ("all", "h") and e2e_systems:
        doc["e2e_systems"] = e2e_systems
        doc["e2e"] = collect_e2e(e2e_systems, rounds, args.e2e_seconds, args.quick, args.shape)
    if args.paired_rounds > 0:
        doc["paired"] = collect_paired(1 if args.quick else args.paired_rounds, args.paired_seconds,
                                       args.quick, args.shape, {"all": "all", "p": "all"}.get(args.set, args.set))
    doc["seconds"] = round(time.perf_counter() - t0, 1)
    table = render(doc)
    print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = "results-peers" if args.peers else "results"
    (out / f"{name}.json").write_text(json.dumps(doc, indent=1))
    (out / f"{name}.md").write_text(table + "\n")
    print(f"\nwritten: {out / (name + '.md')} ({doc['seconds']} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Mutation run over the safety-critical modules (``make mutation``).

Each module is mutated by mutmut in its own scratch copy of the repository
(``out/mutation/work/<module>/``) and every mutant is run against the fast test
subset below; the verdicts of each module are kept in
``out/mutation/results/<module>.json``, so modules can be run one at a time and
the report always covers every module run so far. The report is
``out/mutation/report.md`` (and ``report.json``): the score per module and every
surviving mutant with its diff. Mutants judged equivalent (no test could tell
them from the original) are listed in ``scripts/mutation-equivalent.toml`` with
the reason; they are excluded from the score and listed in the report.

Usage::

    python scripts/mutation.py [--modules lionops/tools.py,...] [--max-children 2]
    python scripts/mutation.py --report-only
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

#: The test subset of each module: the few fast test files that exercise it
#: (no Temporal server, no real CLI agents from npm, no Mermaid/Node, no OTLP
#: collector). mutmut runs each mutant only against the tests of this subset it
#: saw call the mutated function, with ``-x`` and without random ordering, so a
#: killed mutant costs about one test. Every ``tests/**/test_mutation_*.py`` file is
#: added to every subset (those files are written to kill mutants).
TESTS: dict[str, list[str]] = {
    "lionops/pipeline/act.py": [
        "tests/contract/test_safety_rules.py",
        "tests/contract/test_adr_d4.py",
        "tests/contract/test_governance_records.py",
        "tests/contract/test_governance_offered.py",
        "tests/contract/test_governance_branch.py",
        "tests/peers/test_otel_spans.py",
        "tests/unit/test_call_paths_keep_behaviour.py",
    ],
    "lionops/_invalid_mark.py": [
        "tests/contract/test_safety_rules.py",
        "tests/contract/test_adr_d4.py",
    ],
    "lionops/pipeline/validate.py": [
        "tests/contract/test_safety_rules.py",
        "tests/contract/test_adr_d3.py",
        "tests/contract/test_adr_d4.py",
        "tests/unit/test_engines.py",
    ],
    "lionops/pipeline/adapter.py": [
        "tests/contract/test_safety_rules.py",
        "tests/contract/test_adr_d4.py",
        "tests/contract/test_adr_d3.py",
        "tests/peers/test_cli_adapter.py",
        "tests/peers/test_otel_spans.py",
    ],
    "lionops/pipeline/enrich.py": [
        "tests/contract/test_safety_rules.py",
        "tests/contract/test_adr_d2.py",
        "tests/contract/test_adr_d4.py",
        "tests/contract/test_governance_records.py",
        "tests/peers/test_otel_spans.py",
    ],
    "lionops/pipeline/outcomes.py": [
        "tests/contract/test_safety_rules.py",
        "tests/contract/test_adr_d3.py",
        "tests/peers/test_api_operate.py",
    ],
    "lionops/pipeline/prepare.py": [
        "tests/contract/test_prepare_checks.py",
        "tests/contract/test_governance_arguments_and_gates.py",
        "tests/contract/test_adr_d1.py",
        "tests/contract/test_safety_rules.py",
    ],
    "lionops/pipeline/schema.py": [
        "tests/contract/test_adr_d2.py",
        "tests/contract/test_safety_rules.py",
        "tests/contract/test_governance_offered.py",
    ],
    "lionops/parse.py": [
        "tests/unit/test_parse.py",
        "tests/contract/test_adr_d3.py",
        "tests/contract/test_safety_rules.py",
    ],
    "lionops/tools.py": [
        "tests/unit/test_tool_derivation.py",
        "tests/contract/test_tool_signatures.py",
        "tests/contract/test_adr_d2.py",
        "tests/contract/test_adr_d4.py",
        "tests/contract/test_safety_rules.py",
    ],
}

#: The safety-critical modules: the one place to repoint when modules move.
MODULES = list(TESTS)

#: Run again, in full, against every mutant that survived its mutmut run:
#: mutmut runs each mutant against the tests it saw call the mutated function,
#: and that mapping can miss a test (a value cached by an earlier test). The
#: first two files of the module's subset, plus the ``test_mutation_*`` files.
RECHECK_FILES = 2

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "out" / "mutation"
EQUIVALENT = ROOT / "scripts" / "mutation-equivalent.toml"
#: Copied into each scratch copy besides the mutated package (tests read them).
COPY = ["lionops", "tests", "states", "docs", "diagrams", "bench", "README.md", "pyproject.toml", "Makefile"]
#: Fewer examples per property under mutation: each mutant reruns them.
HYPOTHESIS_EXAMPLES = "30"


def tests_of(module: str, root: Path = ROOT) -> list[str]:
    """The test files run against the mutants of ``module`` (those present under ``root``)."""
    extra = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_mutation_*.py"))
    return [t for t in dict.fromkeys([*TESTS[module], *extra]) if (root / t).exists()]


def recheck_tests_of(module: str, root: Path) -> list[str]:
    tests = tests_of(module, root)
    return [*TESTS[module][:RECHECK_FILES], *(t for t in tests if "test_mutation_" in t)]


def slug(module: str) -> str:
    return module.removesuffix(".py").replace("/", ".")


@dataclass
class Mutant:
    name: str
    status: str
    function: str
    diff: str
    key: str = ""
    equivalent_reason: str | None = None


@dataclass
class ModuleResult:
    module: str
    seconds: float
    tests: list[str]
    mutants: list[Mutant] = field(default_factory=list)
    date: str = ""


def mutant_function(name: str) -> str:
    """``Class.method`` or ``function`` of a mutmut mutant name
    (``lionops.tools.xǁToolǁ_call__mutmut_1``, ``lionops.tools.x__derive__mutmut_2``)."""
    mangled = re.sub(r"__mutmut_\d+$", "", name.rsplit(".", 1)[-1])
    if mangled.startswith("xǁ"):
        return mangled[2:].replace("ǁ", ".")
    return mangled.removeprefix("x_")


def changed_lines(diff: str) -> str:
    """The stable key of a mutant: its removed and added lines, stripped of
    indentation and of mutmut's mangled function names."""
    out = []
    for line in diff.splitlines():
        if line.startswith(("---", "+++", "@@")):
            continue
        if line.startswith(("-", "+")):
            text = re.sub(r"x[ǁ_]\w*?__mutmut_(orig|\d+)", "", line[1:]).strip()
            if text.startswith("def "):
                continue
            out.append(line[0] + text)
    return "\n".join(out)


def load_equivalent() -> list[dict[str, str]]:
    if not EQUIVALENT.exists():
        return []
    data = tomllib.loads(EQUIVALENT.read_text("utf-8"))
    return list(data.get("mutant", []))


def match_equivalent(module: str, mutant: Mutant, entries: list[dict[str, str]]) -> str | None:
    for entry in entries:
        if entry.get("module") != module:
            continue
        if entry.get("function") and entry["function"] != mutant.function:
            continue
        if entry.get("change", "").strip() == mutant.key.strip():
            return entry.get("reason", "(no reason given)")
    return None


def prepare(module: str, work: Path) -> None:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    for name in COPY:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, work / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), symlinks=True)
        elif src.exists():
            shutil.copy2(src, work / name)
    if (ROOT / ".cache").exists():
        (work / ".cache").symlink_to(ROOT / ".cache")
    tests = tests_of(module)
    conf = "\n[tool.mutmut]\n" + "\n".join([
        'source_paths = ["lionops"]',
        f"only_mutate = [{json.dumps(module)}]",
        f"also_copy = {json.dumps([n for n in COPY if n not in ('lionops', 'pyproject.toml', 'tests')])}",
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}",
        'pytest_add_cli_args = ["-p", "no:xdist", "-p", "no:cacheprovider", "-q"]',
        "use_git_change_detection = false",
        "timeout_multiplier = 10.0",
        "timeout_constant = 5.0",
    ]) + "\n"
    with open(work / "pyproject.toml", "a", encoding="utf-8") as f:
        f.write(conf)


def mutmut(work: Path, *args: str, env: dict[str, str], check: bool = True) -> str:
    exe = Path(sys.executable).with_name("mutmut")
    cmd = [str(exe), *args] if exe.exists() else [sys.executable, "-m", "mutmut", *args]
    proc = subprocess.run(cmd, cwd=work, env=env, text=True, capture_output=True)
    if check and proc.returncode != 0:
        tail = proc.stdout[-4000:] + proc.stderr[-4000:]
        raise SystemExit(f"mutmut {' '.join(args)} failed ({proc.returncode}):\n{tail}")
    return proc.stdout


def _env() -> dict[str, str]:
    env = dict(os.environ, LIONOPS_HYPOTHESIS_EXAMPLES=HYPOTHESIS_EXAMPLES, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTEST_ADDOPTS", None)
    return env


def run_module(module: str, max_children: int) -> ModuleResult:
    work = OUT / "work" / slug(module)
    prepare(module, work)
    start = time.monotonic()
    print(f"[mutation] {module}: running mutmut with {max_children} children in {work}", flush=True)
    proc = subprocess.run([str(Path(sys.executable).with_name("mutmut")), "run", "--max-children", str(max_children)],
                          cwd=work, env=_env(), text=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"mutmut run failed for {module} ({proc.returncode})")
    return collect(module, round(time.monotonic() - start, 1))


#: The longest one mutant's recheck may take, in seconds; past it the child is
#: killed and the mutant counts as killed by a timeout (as mutmut counts it).
RECHECK_TIMEOUT = 120

_PYTEST_ARGS = ["-x", "-q", "-p", "no:xdist", "-p", "no:randomly", "-p", "no:cacheprovider"]


def recheck(work: Path, module: str, names: list[str], *, whole_subset: bool = False) -> set[str]:
    """The mutants of ``names`` the recheck tests of ``module`` kill (with
    ``whole_subset``: every test file of its subset).

    One worker process (``--recheck-worker``) imports pytest, lionops and the
    tests once, then forks one child per mutant, so a recheck costs the tests,
    not the imports."""
    if not names:
        return set()
    tests = tests_of(module, work / "mutants") if whole_subset else recheck_tests_of(module, work / "mutants")
    # The files written to kill mutants first: with -x a killed mutant stops at its first failure.
    tests = sorted(tests, key=lambda t: "test_mutation_" not in t)
    listing = work / "recheck.json"
    listing.write_text(json.dumps({"names": names, "tests": tests}), "utf-8")
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--recheck-worker", str(listing)],
                          cwd=work / "mutants", env=_env(), text=True, capture_output=True)
    if proc.returncode == 3:
        raise SystemExit(f"{module}: the recheck tests fail on the unmutated code in {work / 'mutants'}:"
                         " fix the tests or run the module again")
    killed = set()
    for line in proc.stdout.splitlines():
        if line.startswith("[recheck] "):
            name, code = line.removeprefix("[recheck] ").rsplit(" ", 1)
            if code in ("1", "timeout"):
                killed.add(name)
    return killed


def recheck_worker(listing: Path) -> int:
    """Run in ``mutants/``: the recheck tests once per mutant, each in a forked child."""
    import io
    from contextlib import redirect_stdout

    import pytest

    data = json.loads(listing.read_text("utf-8"))
    sys.path.insert(0, os.getcwd())
    with redirect_stdout(io.StringIO()):
        pytest.main(["--collect-only", "-qqq", *_PYTEST_ARGS[1:], *data["tests"]])
    # First the unmutated code: a test that fails there would count every mutant as killed.
    for name in ["(none)", *data["names"]]:
        pid = os.fork()
        if pid == 0:
            os.environ["MUTANT_UNDER_TEST"] = name
            signal.alarm(RECHECK_TIMEOUT)  # a mutant that loops forever ends here, by SIGALRM
            with redirect_stdout(io.StringIO()):
                code = int(pytest.main([*_PYTEST_ARGS, *data["tests"]]))
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if name == "(none)" and code != 0:
            print(f"[recheck] the tests fail on the unmutated code (exit {code})", flush=True)
            return 3
        print(f"[recheck] {name} {'timeout' if code == -signal.SIGALRM else code}", flush=True)
    return 0


def refresh_copy(module: str, work: Path) -> None:
    """Bring the tests and every module but the mutated one in ``work`` up to
    date with the repository; refuse when the mutated module itself changed
    since its run (its mutants would be of the old code)."""
    if (work / module).read_bytes() != (ROOT / module).read_bytes():
        raise SystemExit(f"{module} changed since its mutation run: run it again (make mutation MODULES={module})")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "tests", work / "mutants" / "tests", dirs_exist_ok=True, ignore=ignore)
    for src in (ROOT / "lionops").rglob("*.py"):
        rel = src.relative_to(ROOT)
        if str(rel) != module:
            (work / "mutants" / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, work / "mutants" / rel)


def collect(module: str, seconds: float, *, refresh: bool = False) -> ModuleResult:
    """The verdicts of the mutmut run of ``module`` so far (also of one that
    was stopped: mutants it did not reach are ``not checked``); survivors are
    rechecked against the recheck tests of the module (with ``refresh``, against every
    test file of its subset as they are now in the repository, not as they were when
    the run started)."""
    work = OUT / "work" / slug(module)
    if refresh:
        refresh_copy(module, work)
    env = _env()
    result = ModuleResult(module=module, seconds=seconds, tests=tests_of(module, work),
                          date=time.strftime("%Y-%m-%d", time.gmtime()))
    listing = mutmut(work, "results", "--all", "true", env=env)
    verdicts = []
    for line in listing.splitlines():
        line = line.strip()
        if not line or ":" not in line:
            continue
        name, status = (s.strip() for s in line.rsplit(":", 1))
        verdicts.append((name, status))
    killed = recheck(work, module, [n for n, st in verdicts if st in ("survived", "no tests")], whole_subset=refresh)
    for name, status in verdicts:
        diff = ""
        if name in killed:
            status = "killed (recheck)"
        if status not in ("killed", "killed (recheck)", "not checked"):
            diff = mutmut(work, "show", name, env=env, check=False)
            diff = "\n".join(diff.splitlines()[1:]).strip()
        result.mutants.append(Mutant(name=name, status=status, function=mutant_function(name), diff=diff,
                                     key=changed_lines(diff)))
    (OUT / "results").mkdir(parents=True, exist_ok=True)
    (OUT / "results" / f"{slug(module)}.json").write_text(
        json.dumps({"module": module, "seconds": result.seconds, "tests": result.tests, "date": result.date,
                    "mutants": [m.__dict__ for m in result.mutants]}, indent=1), "utf-8")
    return result


def load_results() -> list[ModuleResult]:
    out = []
    for module in MODULES:
        path = OUT / "results" / f"{slug(module)}.json"
        if not path.exists():
            continue
        data = json.loads(path.read_text("utf-8"))
        mutants = [Mutant(**m) for m in data["mutants"]]
        out.append(ModuleResult(module=module, seconds=data["seconds"], tests=data["tests"], mutants=mutants,
                                date=data.get("date", "")))
    return out


def report(results: list[ModuleResult]) -> None:
    entries = load_equivalent()
    rows, survivors, equivalents, summary = [], [], [], []
    for res in results:
        counted = killed = 0
        for m in res.mutants:
            m.key = changed_lines(m.diff) if m.diff else m.key
            m.function = mutant_function(m.name)
            m.equivalent_reason = (match_equivalent(res.module, m, entries)
                                   if m.status in ("survived", "no tests", "suspicious") else None)
            if m.equivalent_reason:
                equivalents.append((res.module, m))
                continue
            if m.status in ("skipped", "not checked"):
                continue
            counted += 1
            if m.status in ("killed", "killed (recheck)", "timeout", "segfault"):
                killed += 1
            else:
                survivors.append((res.module, m))
        score = 100.0 * killed / counted if counted else 100.0
        n_eq = sum(1 for m in res.mutants if m.equivalent_reason)
        unchecked = sum(1 for m in res.mutants if m.status == "not checked")
        rows.append(f"| {res.module} | {len(res.mutants)} | {unchecked} | {n_eq} | {killed}/{counted} | {score:.1f} % "
                    f"| {res.seconds:.0f} s |")
        summary.append({"module": res.module, "mutants": len(res.mutants), "not_checked": unchecked,
                        "equivalent": n_eq, "killed": killed,
                        "counted": counted, "score": round(score, 1), "seconds": res.seconds,
                        "date": res.date, "tests": res.tests})
    lines = ["# Mutation report", "",
             "Killed = killed by a test (in the mutmut run, or when a survivor is run again against the recheck"
             " tests), by a timeout or by a crash; equivalent mutants and mutants a stopped run did not reach"
             " (not checked) are excluded from the score.", "",
             "| module | mutants | not checked | equivalent | killed | score | run time |",
             "|---|---|---|---|---|---|---|", *rows, "",
             "Test subset of each module:", "",
             *(f"- {res.module}: " + ", ".join(res.tests) for res in results), "", "## Surviving mutants", ""]
    if not survivors:
        lines.append("None.")
    for module, m in survivors:
        lines += [f"### {module} `{m.name}` ({m.status})", "", "```diff", m.diff, "```", ""]
    lines += ["", "## Equivalent mutants (excluded)", ""]
    if not equivalents:
        lines.append("None.")
    for module, m in equivalents:
        lines += [f"- {module} `{m.name}`: {m.equivalent_reason}", "", "```diff", m.key, "```", ""]
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "report.md").write_text("\n".join(lines) + "\n", "utf-8")
    (OUT / "report.json").write_text(json.dumps({
        "modules": summary,
        "survivors": [{"module": mod, "name": m.name, "status": m.status, "function": m.function, "diff": m.diff,
                       "key": m.key} for mod, m in survivors],
        "equivalent": [{"module": mod, "name": m.name, "reason": m.equivalent_reason, "key": m.key}
                       for mod, m in equivalents],
    }, indent=1), "utf-8")
    for row in summary:
        print(f"[mutation] {row['module']}: {row['score']} % ({row['killed']}/{row['counted']}, "
              f"{row['equivalent']} equivalent)")
    print(f"[mutation] report: {OUT / 'report.md'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", default="", help="comma- or space-separated subset of the module list")
    parser.add_argument("--max-children", type=int, default=2, help="parallel mutant runs (default 2)")
    parser.add_argument("--report-only", action="store_true", help="rewrite the report from the kept results")
    parser.add_argument("--collect", action="store_true",
                        help="read the verdicts of the last (possibly stopped) run of each module, recheck its"
                             " survivors against the current tests, then report")
    parser.add_argument("--recheck-worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.recheck_worker:
        return recheck_worker(args.recheck_worker)
    chosen = [m for m in re.split(r"[,\s]+", args.modules) if m] or MODULES
    unknown = [m for m in chosen if m not in MODULES]
    if unknown:
        parser.error(f"not in the module list: {', '.join(unknown)} (known: {', '.join(MODULES)})")
    if args.collect:
        for module in chosen:
            if (OUT / "work" / slug(module) / "mutants").exists():
                kept = OUT / "results" / f"{slug(module)}.json"
                seconds = json.loads(kept.read_text("utf-8"))["seconds"] if kept.exists() else 0.0
                collect(module, seconds=seconds, refresh=True)
    elif not args.report_only:
        for module in chosen:
            run_module(module, max(1, args.max_children))
    report(load_results())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

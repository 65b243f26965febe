"""Every script in benchmarks/ runs in its quick mode and prints its figures, so a change that breaks one
cannot land (the full runs print the README's figures; benchmarks/_run_mode.py states the convention)."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import subprocess
import sys
from concurrent import futures
from pathlib import Path

import pytest
from benchmark_scripts import load_benchmark

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))

# What each script's quick run must print: a figure line (pattern) and, where the quick run keeps a
# check, the line that says it passed. A new script needs an entry (and a --quick mode).
FIGURES: dict[str, tuple[str, ...]] = {
    "audit_dp_representation.py": (r"full rank, default C\s+1 .* ok$",
                                   r"MIS-CALIBRATED \(labels uncounted\)\s+8 .* caught$",
                                   r"correct releases exceeding their claim: none"),
    "audit_privacy.py": (r"dp_count by arm\s+substitute-one .* ok$", r"claims exceeded under substitution: none"),
    "bench_ckks.py": (r"^n = 10,000", r"^\| max_subject_error \| \d", r"^checks: every error within its bound"),
    "bench_cli_startup.py": (r"collabcausal --version\s+\d+\.\d+ s", r"collabcausal party join --help\s+\d+\.\d+ s",
                             r"--help < 1 s: not judged \(--quick\)"),
    "bench_dcqe.py": (r"\[1\] LaLonde 2x2 table.* B = 50, .*\d+\.\d+ s", r"ATE by IPW: W-clb 0\.\d+, CA 0\.\d+",
                      r"\[3\] peak memory .*: not judged \(--quick\)"),
    "bench_dp_effects.py": (r"### binary outcome", r"### continuous outcome", r"### LaLonde",
                            r"\| dp_effects plain eps 1 \|", r"interval within 1\.5x"),
    "bench_dp_effects_audit.py": (r"dp_effects_statistics\s+correct\s+1 .* ok$",
                                  r"dp_effects_scores\s+correct\s+1 .* ok$",
                                  r"total \d+ s; 0 violation\(s\)"),
    "bench_dp_cate_projection.py": (r"RMSE dp_effects projection\s+-?\d", r"RMSE LinearDRLearner \(non-private\)\s+\d",
                                    r"quick: every figure finite"),
    "bench_dp_effects_small.py": (r"\| 600 \(0\.83\) \| \d+ refused \|", r"\| 10000 \(0\.05\) \| \d+ \(0 refused\) \|",
                                  r"raise \[dp_effects\] epsilon to 1\.72 or more"),
    "bench_dp_effects_vertical_audit.py": (r"scores label holder\s+correct\s+1 .* ok$",
                                           r"statistics evaluator\s+correct\s+1 .* ok$",
                                           r"total \d+ s; 0 violation\(s\)"),
    "bench_dp_effects_vertical.py": (r"\| vertical dp_effects eps 1 \(2 column groups\) \| -?\d",
                                     r"\| vertical dp_effects eps 1, 3 column groups \| -?\d"),
    "bench_dp_mechanisms.py": (r"discrete_gaussian\s+\d+\.\d+us",),
    "bench_drlearner.py": (r"ratio EconML/ours = \d+\.\d+ \(target >= 2: not judged", r"agree within one se: True"),
    "bench_faults.py": (r"replies acknowledged: [1-9]\d*; missing their 'released' audit line: 0",
                        r"checks: nothing acknowledged lost, chain and ledgers intact"),
    "bench_grpc.py": (r"array echo \d+ MB over mutual TLS: \d+ MB/s \(target >= 600: not judged",
                      r"DC-QE 2x2, [\d,]+ subjects: gRPC .* ratio \d+\.\d+ \(target <= 1: not judged"),
    "bench_hsic.py": (r"naive dense\s+\d+\.\d+", r"\|difference\| = \d"),
    "bench_load.py": (r"dc-qe study\s+\d+\.\d+\s+\d+\.\d+", r"hostile calls refused\s+0\.00\s+[1-9]\d*\.00",
                      r"estimates equal the honest study's: True", r"allowance: True", r"not judged \(--quick\)"),
    "bench_out_of_core.py": (r"moments, Dask\s+\d+\.\d+", r"not judged \(--quick\): open adds",
                             r"check: the engines' n and Gram agree .*: True"),
    "bench_psm.py": (r"TiedMatches.*\d+\.\d+x", r"identical effects .*: True; identical indices: True"),
    "bench_reconstruction.py": (r"\| a: known anchor \|", r"### paper-003"),
    "bench_secagg.py": (r"^\s+4\s+\d+\.\d+\s+\d+\.\d+", r"^\s+8\s+\d+\s+\d+\s+\d+\.\d+"),
    "bench_secagg_sybil.py": (r"^\s+99\s+\d+\.\d+\s+refused, nothing charged",),
    "bench_sources.py": (r"^reader\s+\d+\.\d+", r"2\.0x\): not judged \(--quick\)"),
    "redteam_kinds.py": (r"privacy loss \d", r"DP-EBM regressor", r"ms per request"),
}


def test_every_benchmark_script_declares_what_its_quick_run_prints():
    assert sorted(FIGURES) == SCRIPTS, "add the new script's quick-run figures to FIGURES (and give it --quick)"


def _quick_run(script: str) -> subprocess.CompletedProcess:
    # the package of this tree (the script's folder, not the working directory, heads a script's sys.path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, str(BENCHMARKS / script), "--quick"], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=540)


@pytest.fixture(scope="module")
def quick_runs(request):
    """The quick runs of the selected scripts, two at a time (the suite itself runs on one core of two)."""
    selected = [item.callspec.params["script"] for item in request.session.items
                if item.originalname == "test_quick_run_exits_0_and_prints_its_figures"]
    with futures.ThreadPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
        yield {script: pool.submit(_quick_run, script) for script in selected}


@pytest.mark.parametrize("script", SCRIPTS)
def test_quick_run_exits_0_and_prints_its_figures(script, quick_runs):
    run = quick_runs[script].result()
    assert run.returncode == 0, f"{script} --quick exited {run.returncode}:\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
    for pattern in FIGURES[script]:
        assert re.search(pattern, run.stdout, re.MULTILINE), f"{script} --quick printed no {pattern!r}:\n{run.stdout}"


def _script(name: str):
    return load_benchmark(name)


@pytest.fixture(scope="module")
def run_mode():
    return _script("_run_mode")


def test_a_size_takes_its_full_or_quick_default_and_a_given_value_wins(run_mode):
    parser = run_mode.BenchmarkParser("doc")
    parser.add_size("--n", type=int, full=1000, quick=10, help="subjects")
    parser.add_size("--eps", type=float, nargs="+", full=[0.5, 1.0], quick=[1.0])
    assert (parser.parse_args([]).n, parser.parse_args([]).eps) == (1000, [0.5, 1.0])
    assert (parser.parse_args(["--quick"]).n, parser.parse_args(["--quick"]).eps) == (10, [1.0])
    assert parser.parse_args(["--quick", "--n", "7"]).n == 7
    assert "(default 1000; --quick: 10)" in parser.format_help()


def test_a_time_or_memory_target_is_judged_in_full_runs_only(run_mode):
    assert [run_mode.verdict(m, False) for m in (True, False)] == ["met", "MISSED"]
    assert run_mode.verdict(False, True) == "not judged (--quick)"
    assert run_mode.target_ok(False, True) and run_mode.target_ok(True, False) and not run_mode.target_ok(False, False)


def test_the_projection_benchmark_judges_the_subgroups_intervals_as_well():
    bench = _script("bench_dp_cate_projection")
    summary = {"outcome": "binary", "rmse_ratio": 1.3, "coverage_private": [0.95, 0.96, 0.94], "reps": 1000,
               "subgroup_coverage": [0.95, 0.975, 0.955, 0.96], "pehe_wins": 1.0}
    assert bench.misses(summary) == ["binary: subgroups' coverage [0.95, 0.975, 0.955, 0.96] outside [0.93, 0.97]"]
    assert bench.misses({**summary, "subgroup_coverage": [0.95, 0.97, 0.93, 0.96]}) == []


def test_the_projection_benchmark_pools_logs_and_refuses_mixed_settings_repeated_seeds_and_broken_lines(tmp_path):
    bench = _script("bench_dp_cate_projection")
    row = {"outcome": "binary", "seed": 0, "n": 25000, "epsilon": 1.0, **dict.fromkeys(bench.SETTINGS), "private": [1]}
    first, second, other = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    first.write_text(json.dumps(row) + "\n" + json.dumps({**row, "outcome": "continuous"}) + "\n")
    second.write_text(json.dumps({**row, "seed": 1}) + "\n\n")
    pooled = bench.read_logs([first, second], ["binary", "continuous"])
    assert [r["seed"] for r in pooled["binary"]] == [0, 1] and len(pooled["continuous"]) == 1
    other.write_text(json.dumps({**row, "seed": 2, "replicate_step": 3.0}) + "\n")
    with pytest.raises(SystemExit, match=r"c\.jsonl:1: the binary runs differ in replicate_step; pool only"):
        bench.read_logs([first, other], ["binary"])
    with pytest.raises(SystemExit, match=r"a\.jsonl:1: binary data seed 0 is also in .*a\.jsonl; pool runs of"):
        bench.read_logs([first, first], ["binary"])
    other.write_text(json.dumps(row)[:-5] + "\n")
    with pytest.raises(SystemExit, match=r"c\.jsonl:1 is not a replication line of a --log file"):
        bench.read_logs([other], ["binary"])
    with pytest.raises(SystemExit, match=r"--from-log .*missing\.jsonl: No such file"):
        bench.read_logs([tmp_path / "missing.jsonl"], ["binary"])


def test_bench_load_stops_at_once_naming_an_attacker_that_died_without_a_word():
    bench_load, context = _script("bench_load"), multiprocessing.get_context("fork")
    reports, dead = context.Queue(), context.Process(target=sys.exit, args=(3,))
    dead.start()
    dead.join()
    with pytest.raises(bench_load.WorkerFailed, match="exited with code 3 before reporting 'registered'"):
        bench_load._report(reports, dead, "registered")


def test_bench_load_passes_on_the_attackers_own_error():
    bench_load, context = _script("bench_load"), multiprocessing.get_context("fork")
    reports = context.Queue()
    reports.put(("error", "RpcError: party 'mallory' speaks protocol v1, this analyst v2"))
    with pytest.raises(bench_load.WorkerFailed, match=r"hostile party failed: RpcError: .* speaks protocol v1"):
        bench_load._report(reports, multiprocessing.current_process(), "registered")

"""The CKKS benchmark runs quick and measures errors within the bounds the presets state."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from collabcausal.vertical import PRESETS

ROOT = Path(__file__).resolve().parents[2]


def test_quick_benchmark_measures_errors_within_the_stated_bounds():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's package, not an installed one
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_ckks.py"), "--quick"]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=300, env=env).stdout
    assert out.startswith("n = 10,000")
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 1 + len(PRESETS) and cells[0] not in ("measure", "---"):
            rows[cells[0]] = [float(c) for c in cells[1:]]
    for i, depth in enumerate(sorted(PRESETS)):
        bound = PRESETS[depth].error_bound
        assert 0 < rows["max_subject_error"][i] <= bound
        assert 0 < rows["squaring_chain_error"][i] <= bound
        assert rows["total_error"][i] <= 10_000 * bound
        assert rows["ciphertexts"][i] == -(-10_000 // PRESETS[depth].slot_count)
        assert rows["unflooded_max"][i] < 1e-3  # CKKS error only: slot 0's sum is masked out of it

"""An out-of-core party answers from a table larger than a memory cap the test sets (issue 24).

A child process caps its own data segment (``RLIMIT_DATA``: heap and private writable mappings) at
what it holds after its imports plus :data:`CAP_MB`, then opens a directory of Parquet files whose
covariates alone take :data:`TABLE_MB` (more than the cap) in memory, reduces it (the reducer's
moments), and answers a ``dp_effects_statistics`` release through ``Party.handle``. The same child
then fails to allocate the covariate matrix an in-memory party would read the table into, which shows
the cap binds. The parent
checks the child's exact sums and moments against numpy on the whole table.

The child runs with one BLAS thread and the system allocator for Arrow (``ARROW_DEFAULT_MEMORY_POOL``):
jemalloc and OpenBLAS reserve address space they never touch, which ``RLIMIT_DATA`` would count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

N_FILES, ROWS_PER_FILE, N_COVARIATES = 10, 300_000, 10
ROW_GROUP = 50_000
TABLE_MB = N_FILES * ROWS_PER_FILE * N_COVARIATES * 8 / 2**20  # 229 MB of float64 covariates
CAP_MB = 160

CHILD = textwrap.dedent("""
    import json, resource, sys
    import numpy as np
    from collabcausal.estimators.blocks import ColumnMoments
    from collabcausal.estimators.dp.effects.design import FeatureMap
    from collabcausal.estimators.dp.effects.release import party_statistics
    from collabcausal.estimators.dp.zcdp import zcdp_rho
    from collabcausal.ledger import PrivacyLedger
    from collabcausal.messages import Message
    from collabcausal.party import Party
    from collabcausal.party.dp_effects import STATISTICS, parse_request, row_sums
    from collabcausal.party.sources import DataSource, read_table
    import dask.threaded  # noqa: F401  (imported before the cap, as a party's imports are)

    def data_mb():
        for line in open("/proc/self/status"):
            if line.startswith("VmData"):
                return int(line.split()[1]) / 1024

    directory, ledger_path, cap_mb = sys.argv[1], sys.argv[2], float(sys.argv[3])
    limit = int((data_mb() + cap_mb) * 2**20)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    columns = [f"x{j}" for j in range(10)]
    table = read_table(DataSource(path=__import__("pathlib").Path(directory), workers=1), columns,
                       treatment="t", outcome="y")
    moments = table.reduce_rows(lambda _, X, t, y: ColumnMoments.of(X), columns, ColumnMoments.merge)
    party = Party("registry", table, ledger=PrivacyLedger(ledger_path, epsilon=10.0, delta=1e-6))
    fm = FeatureMap(tuple((-5.0, 5.0) for _ in columns), (-5.0, 5.0), n_sites=1)
    request = Message(STATISTICS, {"study": "s", "rho": zcdp_rho(1.0, 1e-9), "delta": 1e-9, "columns": columns,
                                   "design": fm.to_spec(), "site": 0, "n_folds": 1})
    reply = party.handle(request)
    exact = row_sums(party, parse_request(party, request),
                     lambda X, t, y, folds: party_statistics(X, t, y, fm, 0, folds, 1)).sums
    try:  # the covariate matrix an in-memory party allocates at the table's size (sources._fill)
        np.empty((table.n_subjects, len(columns)))
        in_memory = "allocated"
    except MemoryError:
        in_memory = "MemoryError"
    print(json.dumps({"n": moments.n, "mean": moments.mean.tolist(), "gram": moments.gram.tolist(),
                      "statistics": exact.ravel().tolist(), "released": len(reply.arrays["values"].ravel()),
                      "charges": len(party.ledger.history()), "in_memory": in_memory}))
""")


def _write_registry(directory) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(24)
    X = rng.uniform(-4.0, 4.0, size=(N_FILES * ROWS_PER_FILE, N_COVARIATES))
    t = (X[:, 0] + rng.normal(size=X.shape[0]) > 0).astype(np.int8)
    y = np.clip(X[:, 1] + t + rng.normal(size=X.shape[0]), -5, 5)
    for k in range(N_FILES):
        rows = slice(k * ROWS_PER_FILE, (k + 1) * ROWS_PER_FILE)
        columns = {f"x{j}": X[rows, j] for j in range(N_COVARIATES)} | {"t": t[rows], "y": y[rows]}
        pq.write_table(pa.table(columns), directory / f"part-{k:02d}.parquet", row_group_size=ROW_GROUP,
                       compression="none")
    return X, t, y


def test_a_table_larger_than_the_memory_cap_is_reduced_and_released_out_of_core(tmp_path):
    from collabcausal.estimators.dp.effects.design import FeatureMap
    from collabcausal.estimators.dp.effects.release import party_statistics

    assert TABLE_MB > 1.4 * CAP_MB
    directory = tmp_path / "registry"
    directory.mkdir()
    X, t, y = _write_registry(directory)
    env = os.environ | {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                        "ARROW_DEFAULT_MEMORY_POOL": "system", "MALLOC_ARENA_MAX": "2"}
    done = subprocess.run([sys.executable, "-c", CHILD, str(directory), str(tmp_path / "ledger.sqlite"),
                           str(CAP_MB)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["in_memory"] == "MemoryError"  # the cap binds: the table does not fit under it
    assert result["n"] == X.shape[0] and result["charges"] == 1 and result["released"] > 0
    mean = X.mean(axis=0)
    np.testing.assert_allclose(result["mean"], mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(result["gram"], (X - mean).T @ (X - mean), rtol=1e-9, atol=1e-6)
    fm = FeatureMap(tuple((-5.0, 5.0) for _ in range(N_COVARIATES)), (-5.0, 5.0), n_sites=1)
    expected = party_statistics(X, t, y, fm, 0, np.zeros(X.shape[0], dtype=np.int8), 1).ravel()
    np.testing.assert_allclose(result["statistics"], expected, rtol=1e-9, atol=1e-6)

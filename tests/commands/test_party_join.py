"""``collabcausal party join``: configuration and identity errors exit with their documented codes."""

from __future__ import annotations

import socket

import numpy as np
import pandas as pd

from collabcausal.cli import main

TOML = """
[party]
name = "h"
[analyst]
address = "{address}"
insecure = true
[data]
path = "t.csv"
[policy]
columns = ["a"]
operations = ["describe"]
min_subjects = 5
"""


CLI = "import sys; from collabcausal.cli import main; sys.exit(main(sys.argv[1:]))"


def _config(tmp_path, address="10.1.2.3:50051"):
    pd.DataFrame({"a": np.arange(10.0)}).to_csv(tmp_path / "t.csv", index=False)
    path = tmp_path / "party.toml"
    path.write_text(TOML.format(address=address))
    return path


def test_plaintext_off_loopback_is_refused_with_identity_exit_code(tmp_path, capsys):
    assert main(["party", "join", "--config", str(_config(tmp_path))]) == 7
    assert "works only on 127.0.0.1" in capsys.readouterr().err


def test_bad_config_exits_with_config_code(tmp_path, capsys):
    path = _config(tmp_path)
    path.write_text(path.read_text().replace("[policy]", "[policies]"))
    assert main(["party", "join", "--config", str(path)]) == 3
    assert "unknown section [policies]" in capsys.readouterr().err


def test_refused_connection_fails_fast_with_its_cause_in_one_line(tmp_path, capsys):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = _config(tmp_path, f"127.0.0.1:{port}")
    path.write_text(path.read_text().replace('insecure = true', 'insecure = true\nreconnect_timeout = 1'))
    assert main(["party", "join", "--config", str(path)]) == 9
    err = capsys.readouterr().err
    assert "unreachable for 1 s" in err and "connection refused" in err
    assert sum("unreachable" in line for line in err.splitlines()) == 2  # the outage logged once, then the error


def test_check_of_an_out_of_core_table_names_its_blocks_and_the_operations_it_refuses(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "registry").mkdir()
    for k in range(2):
        pq.write_table(pa.table({"a": np.arange(10.0) + k}), tmp_path / "registry" / f"part-{k}.parquet")
    path = tmp_path / "party.toml"
    path.write_text(TOML.format(address="127.0.0.1:50051").replace('path = "t.csv"', 'path = "registry"')
                    .replace('["describe"]', '["describe", "dp_mean"]') + "[privacy]\nepsilon = 1.0\n")
    assert main(["party", "join", "--config", str(path), "--check"]) == 0
    out = capsys.readouterr().out
    assert "20 subjects" in out and "read out of core (2 row groups, " in out
    assert "refuses dp_mean (they need the table in memory)" in out


def test_the_same_party_started_twice_is_refused_naming_the_first_process(tmp_path, capsys):
    """Issue 38, item 1: a second `party join` of one party.toml exits 3 before touching its files."""
    import subprocess
    import sys

    from collabcausal.protocol.server import GrpcGrid

    with GrpcGrid(["h"], tls=None, study="s") as grid:
        path = _config(tmp_path, grid.address)
        first = subprocess.Popen(
            [sys.executable, "-c", CLI, "party", "join", "--config", str(path)], stderr=subprocess.PIPE
        )
        try:
            assert grid.wait_for_parties(120.0) == ["h"]
            audit = (tmp_path / "audit.jsonl").read_text()
            capsys.readouterr()  # the analyst's plaintext warning
            assert main(["party", "join", "--config", str(path)]) == 3
            err = capsys.readouterr().err.strip()
            assert f"in use by another process (pid {first.pid}" in err and f"kill {first.pid}" in err
            assert len(err.splitlines()) == 1
            assert (tmp_path / "audit.jsonl").read_text() == audit  # the second process wrote nothing
        finally:
            grid.finish(linger=30.0)
            assert first.wait(60) == 0, first.stderr.read().decode()


def test_a_wrong_study_id_exits_with_the_configuration_code_naming_both_studies(tmp_path, capsys):
    """Issue 38, item 7: `[party] study` unlike the analyst's is a party.toml to fix (exit 3), not a failed study."""
    from collabcausal.protocol.server import GrpcGrid

    with GrpcGrid(["h"], tls=None, study="lalonde") as grid:
        path = _config(tmp_path, grid.address)
        path.write_text(path.read_text().replace('name = "h"', 'name = "h"\nstudy = "lalonde-2"'))
        capsys.readouterr()
        assert main(["party", "join", "--config", str(path)]) == 3
    err = capsys.readouterr().err
    assert "asked to join study 'lalonde-2' but this analyst runs 'lalonde'" in err
    assert "fix: set [party] study in party.toml to the coordinator's study id" in err
LABELLED = """
[party]
name = "h"
[analyst]
address = "127.0.0.1:50051"
insecure = true
[data]
path = "{path}"
treatment = "t"
outcome = "y"
[policy]
columns = ["a"]
operations = ["describe"]
min_subjects = 5
"""


def _labelled(folder, ranges: str = "", *, parquet: bool = False):
    """A label holder of 40 subjects: a in 0..39, y in 0..59 step 1.5 (its study declares y in [0, 1])."""
    frame = pd.DataFrame({"a": np.arange(40.0), "t": np.arange(40) % 2, "y": np.arange(40) * 1.5})
    if parquet:
        (folder / "registry").mkdir()
        frame.iloc[:20].to_parquet(folder / "registry" / "part-0.parquet")
        frame.iloc[20:].to_parquet(folder / "registry" / "part-1.parquet")
    else:
        frame.to_csv(folder / "t.csv", index=False)
    path = folder / "party.toml"
    path.write_text(LABELLED.format(path="registry" if parquet else "t.csv") + ranges)
    return path


def test_check_counts_the_values_a_dp_release_would_clip_to_the_declared_ranges(tmp_path, capsys):
    """Issue 38 item 5: outcomes outside the study's range were clipped silently; --check counts them first."""
    path = _labelled(tmp_path, "[ranges]\na = [0, 29]\noutcome = [0, 1]\n")
    assert main(["party", "join", "--config", str(path), "--check"]) == 0
    out = capsys.readouterr().out
    expected = (sum(np.arange(40.0) > 29), sum(np.arange(40) * 1.5 > 1))  # (10, 39): y = 0 is the one inside
    assert (f"clipped by every DP release (counted here, never sent): a {expected[0]} of 40, y {expected[1]} of 40"
            in out)


def test_check_counts_out_of_core_tables_alike(tmp_path, capsys):
    path = _labelled(tmp_path, "[ranges]\ny = [0, 30]\n", parquet=True)
    assert main(["party", "join", "--config", str(path), "--check"]) == 0
    assert f"y {sum(np.arange(40) * 1.5 > 30)} of 40" in capsys.readouterr().out


def test_check_without_ranges_says_how_to_count_and_a_bad_range_is_one_line(tmp_path, capsys):
    path = _labelled(tmp_path)
    assert main(["party", "join", "--config", str(path), "--check"]) == 0
    assert "declared ranges: none in party.toml; add [ranges]" in capsys.readouterr().out
    path.write_text(path.read_text() + "[ranges]\ny = [1, 0]\n")
    assert main(["party", "join", "--config", str(path), "--check"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "[ranges] y = [1, 0] is not a range lo < hi" in err[0]

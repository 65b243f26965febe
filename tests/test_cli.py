"""The top-level command: lazy imports, help for users, quiet broken pipes, -v/-q."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from collabcausal.cli import BROKEN_PIPE_EXIT, COMMANDS, main
from collabcausal.ledger import PrivacyLedger

# every runnable (sub)command, as typed after `collabcausal`
LEAVES = (
    ["simulate"],
    ["discover"],
    ["party", "join"],
    ["party", "budget"],
    ["party", "audit"],
    ["party", "init"],
    ["analyst", "serve"],
    ["analyst", "init"],
    ["certs", "init"],
    ["certs", "issue"],
    ["certs", "request"],
    ["certs", "sign"],
    ["certs", "fingerprint"],
    ["certs", "self-sign"],
    ["certs", "anchor-key"],
)
HEAVY = ("numpy", "scipy", "pandas", "sklearn", "grpc")


def test_help_and_version_import_no_command_module() -> None:
    code = (
        "import sys\n"
        "from collabcausal.cli import main\n"
        "for argv in (['--help'], ['--version']):\n"
        "    assert main(argv) == 0\n"
        "heavy = sorted(m for m in ('numpy', 'grpc', 'pandas', 'collabcausal.commands') if m in sys.modules)\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "HEAVY []" in out
    assert "collabcausal 0." in out


def test_every_command_help_imports_no_numerics_or_network() -> None:
    """`collabcausal <command> --help` answers at once: the command modules import heavy libraries in run()."""
    code = (
        "import sys\n"
        "from collabcausal.cli import main\n"
        f"for argv in {[list(a) for a in LEAVES]!r}:\n"
        "    assert main([*argv, '--help']) == 0\n"
        f"    heavy = sorted(m for m in {HEAVY!r} if m in sys.modules)\n"
        "    print('HEAVY', ' '.join(argv), heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    lines = [line for line in out.splitlines() if line.startswith("HEAVY")]
    assert len(lines) == len(LEAVES)
    assert all(line.endswith("[]") for line in lines), lines


def test_top_level_help_lists_every_command_with_examples(capsys) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in COMMANDS)
    assert "examples:" in out


@pytest.mark.parametrize("argv", LEAVES, ids=" ".join)
def test_every_command_help_shows_an_example_and_no_markup(argv, capsys) -> None:
    assert main([*argv, "--help"]) == 0
    out = capsys.readouterr().out
    assert f"collabcausal {' '.join(argv)} --" in out.split("example", 1)[1], "no example of the command itself"
    for markup in ("``", "::", ":func:", ":mod:", "Parameters\n"):
        assert markup not in out


def test_closed_stdout_exits_quietly(tmp_path) -> None:
    """``collabcausal party budget --json | head -0``: no BrokenPipeError traceback."""
    ledger = PrivacyLedger(tmp_path / "l.sqlite", epsilon=2.0, dataset="hospital.csv")
    for _ in range(50):
        ledger.charge("dp_count", 0.01, study="s")
    # The reader closes the pipe before the command writes: every write raises BrokenPipeError.
    process = subprocess.Popen(
        [sys.executable, "-m", "collabcausal.cli", "party", "budget", "--ledger", str(ledger.path), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) == BROKEN_PIPE_EXIT
    assert stderr == ""


def test_quiet_and_verbose_set_the_progress_level(tmp_path, capsys) -> None:
    args = ["certs", "init", "--dir", str(tmp_path / "a")]
    assert main(["-q", *args]) == 0
    assert logging.getLogger("collabcausal").level == logging.WARNING
    assert main(["-v", "certs", "init", "--dir", str(tmp_path / "b")]) == 0
    assert logging.getLogger("collabcausal").level == logging.DEBUG


@pytest.mark.parametrize(
    ("argv", "typo", "meant"),
    [
        (["simulate", "--setings", "W,CA"], "--setings", "--settings"),
        (["simulate", "--bootstrp", "5"], "--bootstrp", "--bootstrap"),
        (["simulate", "--covarites", "age,sex", "--settings", "W"], "--covarites", "--covariates"),
        (["simulate", "cate", "--epsilom", "1"], "--epsilom", "--epsilon"),
        (["party", "budget", "--confg", "p.toml"], "--confg", "--config"),
        (["analyst", "serve", "--studdy=s.toml"], "--studdy", "--study"),
        (["certs", "init", "--dri", "certs"], "--dri", "--dir"),
        (["discover", "--data", "d.csv", "--x", "a", "--y", "b", "--epsilom", "1"], "--epsilom", "--epsilon"),
    ],
)
def test_a_misspelt_option_is_named_with_a_suggestion_in_one_line(argv, typo, meant, capsys) -> None:
    """`simulate --setings W,CA` once said `argument kind: invalid choice: 'W,CA'` after the whole usage."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert f"unknown option {typo}" in lines[0]
    assert f"did you mean {meant}?" in lines[0]
    assert "invalid choice" not in lines[0]


def test_an_unknown_option_with_nothing_close_lists_where_the_options_are(capsys) -> None:
    assert main(["simulate", "--zzzzzz", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "unknown option --zzzzzz" in err and "collabcausal simulate --help" in err


def test_abbreviations_negative_numbers_and_words_after_double_dash_still_parse(tmp_path) -> None:
    from collabcausal.cli import build_parser

    args = build_parser("simulate").parse_args(["simulate", "cate", "--outcome-range", "-8", "8", "--boot", "3"])
    assert (args.outcome_range, args.bootstrap) == ([-8.0, 8.0], 3)
    for words in (["--outcome-range", "-2,8"], ["--outcome-range=-2,8"], ["--outcome-range", "-2", "8"]):
        args = build_parser("simulate").parse_args(["simulate", "dp_effects", *words, "--trim", "0.1"])
        assert (args.outcome_range, args.trim) == ([-2.0, 8.0], 0.1)  # study.toml's [-2, 8], a negative first
    args = build_parser("simulate").parse_args(["simulate", "--columns=age;re74", "--settings", "W"])
    assert args.columns == "age;re74"

"""One source of the DC-QE defaults, and the configuration line that names what decides a study's numbers."""

from __future__ import annotations

from pathlib import Path

from collabcausal.analyst.config import load_study_config
from collabcausal.analyst.study_defaults import (
    PARTY_COMPONENTS,
    configuration_line,
    ranges_digest,
    simulation_study_id,
)
from collabcausal.messages import Message
from collabcausal.simulations.datasets import load_lalonde
from collabcausal.simulations.dcqe_experiment import ExperimentConfig
from collabcausal.simulations.partition import partition_grid
from collabcausal.simulations.settings import parse_settings

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "lalonde-2x2" / "study.toml"


def test_a_simulation_of_lalonde_on_2x2_has_the_example_s_study_id() -> None:
    data = load_lalonde()
    partition = partition_grid(data, 2)
    config = ExperimentConfig(data, partition, parse_settings(["W"], partition))
    assert config.study == simulation_study_id("lalonde", (2, 2)) == load_study_config(EXAMPLE).study
    assert config.party_components == PARTY_COMPONENTS


def test_study_toml_defaults_are_simulate_s(tmp_path) -> None:
    text = EXAMPLE.read_text().replace("n_anchors = 2675\n", "").replace("party_components = 3\n", "")
    (tmp_path / "study.toml").write_text(text)
    plan = load_study_config(tmp_path / "study.toml").plan()
    described = {p: Message("describe", {"n_subjects": n}) for p, n in {"p11": 1338, "p21": 1337}.items()}
    assert plan.anchor_rows(described) == 2675  # r = n, as simulate and paper 003
    assert plan.party_components == PARTY_COMPONENTS


def test_the_configuration_line_changes_with_whatever_changes_the_anchor() -> None:
    base = {"study": "s", "anchor_key": "k", "n_anchors": 10, "ranges": {"a": [0, 1]}, "party_components": 3,
            "n_components": None, "seed": 0}
    line = configuration_line(**base)
    assert line == f"DC-QE configuration: study 's', anchor key: k, r 10, ranges {ranges_digest({'a': [0, 1]})}, " \
        "m~ 3, m^ rank, seed 0"
    for key, value in {"study": "t", "anchor_key": "j", "n_anchors": 11, "ranges": {"a": [0, 2]}}.items():
        assert configuration_line(**base | {key: value}) != line
    assert ranges_digest({"a": [0, 1], "b": [1, 2]}) == ranges_digest({"b": [1.0, 2.0], "a": [0.0, 1.0]})

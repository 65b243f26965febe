"""study.toml's kinds: each kind's section validated, refused in one line with the fix."""

from __future__ import annotations

import pytest

from collabcausal.analyst.config import load_study_config
from collabcausal.analyst.kind_config import AdumSection, CateSection, DiscoverySection
from collabcausal.errors import ConfigError

BASE = """
[study]
id = "s"
kind = "{kind}"
[server]
address = "127.0.0.1:0"
insecure = true
[anchor_ranges]
age = [17, 55]
re74 = [0, 40]
[[row_groups]]
parties = ["a"]
[[row_groups]]
parties = ["b"]
"""
SECTIONS = {
    "adum": '[adum]\nepsilon = 1.0\noutcome_range = [0, 125]\ncolumns = ["age"]\ncells = [10]\n',
    "cate": "[cate]\nepsilon = 1.0\noutcome_range = [0, 125]\nfeature_bound = 0.2\n",
    "discovery": '[discovery]\nepsilon = 1.0\npairs = [["age", "re74"]]\n',
}


def write(tmp_path, kind: str, section: str | None = None, old: str = "", new: str = ""):
    path = tmp_path / "study.toml"
    text = BASE.format(kind=kind) + (SECTIONS.get(kind, "") if section is None else section)
    path.write_text(text.replace(old, new) if old else text)
    return path


@pytest.mark.parametrize("kind", ["adum", "cate", "discovery"])
def test_each_kind_loads_with_its_own_section(tmp_path, kind):
    config = load_study_config(write(tmp_path, kind))
    assert config.kind == kind
    assert isinstance(config.analysis, {"adum": AdumSection, "cate": CateSection, "discovery": DiscoverySection}[kind])


def test_without_a_kind_a_study_is_dcqe_as_before(tmp_path):
    path = write(tmp_path, "dcqe", section="")
    path.write_text(path.read_text().replace('kind = "dcqe"\n', ""))
    config = load_study_config(path)
    assert (config.kind, config.analysis) == ("dcqe", None)


REFUSED = [
    ("adum", None, "epsilon = 1.0", "epsilon = 1.0\nepsilonn = 2", "unknown key \\[adum\\] epsilonn; fix: did you"),
    ("adum", None, "cells = [10]", "cells = [10]\nkmeans_clusters = 4", "exactly one partition"),
    ("adum", None, "cells = [10]", "cells = [10, 2]", "1 columns but 2 cell counts"),
    ("adum", None, '["age"]', '["bmi"]', "'bmi', which has no public range; fix: add bmi"),
    ("adum", None, "[0, 125]", "[125, 0]", "low < high"),
    ("adum", None, "epsilon = 1.0", "epsilon = 0", "\\[adum\\] epsilon = 0 is invalid.*fix: each party"),
    ("adum", SECTIONS["adum"] + SECTIONS["cate"], "", "", '\\[cate\\] belongs to kind = "cate" but \\[study\\] kind ='),
    ("adum", "", "", "", 'kind = "adum" needs a \\[adum\\] section'),
    ("cate", SECTIONS["discovery"], "", "", 'remove \\[discovery\\] or set kind = "discovery"'),
    ("cate", None, "feature_bound = 0.2", "feature_bound = -1", "\\[cate\\] feature_bound = -1"),
    ("cate", None, "epsilon = 1.0", 'epsilon = 1.0\nlearner = "x"', '"r" or "dr"'),
    ("discovery", None, '[["age", "re74"]]', '[["age", "age"]]', "two different covariates"),
    ("discovery", None, '[["age", "re74"]]', '[["age"]]', "\\[discovery\\] pairs\\[0\\]"),
    ("dcqe", SECTIONS["adum"], "", "", '\\[adum\\] belongs to kind = "adum"'),
    ("anm", "", "", "", "\\[study\\] kind = 'anm' is invalid"),
    ("adum", None, 'kind = "adum"', 'kind = "adum"\nestimators = ["ipw"]', 'estimators is not used by kind = "adum"'),
    ("discovery", None, 'kind = "discovery"', 'kind = "discovery"\nestimand = "att"', "estimand is not used"),
    ("cate", None, 'kind = "cate"', 'kind = "cate"\nbootstrap = 10', "bootstrap is not used"),
    # red team: no key of study.toml (the coordinator's file) reaches a DP release's noise generator
    ("cate", None, "epsilon = 1.0", "epsilon = 1.0\nnoise_seed = 3", "unknown key \\[cate\\] noise_seed"),
    ("cate", None, "epsilon = 1.0", "epsilon = 1.0\nnoise_rng = 3", "unknown key \\[cate\\] noise_rng"),
    ("adum", None, "epsilon = 1.0", "epsilon = 1.0\nseed = 3", "unknown key \\[adum\\] seed"),
    ("discovery", None, "epsilon = 1.0", "epsilon = 1.0\nrandom_state = 3", "unknown key \\[discovery\\] random_state"),
]


@pytest.mark.parametrize(("kind", "section", "old", "new", "match"), REFUSED)
def test_a_bad_kind_section_is_one_config_error_with_the_fix(tmp_path, kind, section, old, new, match):
    with pytest.raises(ConfigError, match=match) as caught:
        load_study_config(write(tmp_path, kind, section, old, new))
    assert "\n" not in str(caught.value)


def test_adum_refuses_row_groups_sharing_subjects(tmp_path):
    path = write(tmp_path, "adum", old='parties = ["b"]', new='parties = ["b", "c"]')
    with pytest.raises(ConfigError, match="one party per \\[\\[row_groups\\]\\]"):
        load_study_config(path)


BALANCE = "[balance]\nepsilon = 0.5\ndelta = 1e-6\n"
DP_REPRESENTATION = "[dp_representation]\nepsilon = 4.0\ndelta = 1e-6\noutcome_range = [0, 125]\n"


@pytest.mark.parametrize("kind", ["dcqe", "cate"])
def test_balance_selects_dp_moments_in_the_plan_of_a_dcqe_study(tmp_path, kind):
    from collabcausal.analyst.balance import DPBalanceSpec

    config = load_study_config(write(tmp_path, kind, SECTIONS.get(kind, "") + BALANCE))
    assert config.balance == DPBalanceSpec(0.5, 1e-6)
    assert config.plan().dp_balance == DPBalanceSpec(0.5, 1e-6)
    assert load_study_config(write(tmp_path, kind)).plan().dp_balance is None  # exact moments by default


BALANCE_REFUSED = [
    ("adum", SECTIONS["adum"] + BALANCE, '\\[balance\\] is used by kind = "dcqe" or "cate", not "adum"'),
    ("discovery", SECTIONS["discovery"] + BALANCE, "fix: remove \\[balance\\]"),
    ("dcqe", DP_REPRESENTATION + BALANCE, "\\[balance\\] cannot go with \\[dp_representation\\]: the analyst holds"),
    ("dcqe", BALANCE.replace("epsilon = 0.5", "epsilon = 0"), "\\[balance\\] epsilon = 0 is invalid"),
    ("dcqe", BALANCE.replace("delta = 1e-6", "delta = 1"), "\\[balance\\] delta = 1 is invalid"),
    ("dcqe", BALANCE.replace("epsilon", "epsilom"), "unknown key \\[balance\\] epsilom.*did you mean 'epsilon'"),
    ("dcqe", BALANCE.replace("delta = 1e-6\n", ""), "\\[balance\\] delta is missing"),
]


@pytest.mark.parametrize(("kind", "section", "match"), BALANCE_REFUSED)
def test_a_bad_balance_section_is_one_config_error_with_the_fix(tmp_path, kind, section, match):
    with pytest.raises(ConfigError, match=match) as caught:
        load_study_config(write(tmp_path, kind, section))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("keys", "expected"), [
    ("", ("noise-trace", 2.0, 0.25, None)),
    ('projection_allocation = "equal"\nmodifier_clip = "none"\ngram_weight = "none"\n', ("equal", None, None, None)),
    ("modifier_clip = 3\ngram_weight = 0.5\nprojection_centre = 1\n", ("noise-trace", 3.0, 0.5, 1.0)),
])
def test_dp_effects_projection_shaping_keys_reach_the_spec(tmp_path, keys, expected):
    from collabcausal.analyst.kind_dp_effects import dp_effects_spec

    section = ('[dp_effects]\nepsilon = 1.0\noutcome_range = [0, 125]\ntrim = 0.1\nmodifiers = ["age"]\n' + keys)
    spec = dp_effects_spec(load_study_config(write(tmp_path, "dp_effects", section)))
    assert (spec.projection_allocation, spec.modifier_clip, spec.gram_weight, spec.projection_centre) == expected
    assert spec.residual_clip is None  # the outcome clipped to its range unless declared
    assert spec.clip_compensation is None  # nothing added back unless declared


def test_a_residual_clip_reaches_the_spec(tmp_path):
    from collabcausal.analyst.kind_dp_effects import dp_effects_spec

    section = ('[dp_effects]\nepsilon = 1.0\noutcome_range = [0, 125]\ntrim = 0.1\nmodifiers = ["age"]\n'
               "residual_clip = 0.33\n")
    assert dp_effects_spec(load_study_config(write(tmp_path, "dp_effects", section))).residual_clip == 0.33


def test_a_replicate_step_reaches_the_spec(tmp_path):
    from collabcausal.analyst.kind_dp_effects import dp_effects_spec

    section = '[dp_effects]\nepsilon = 1.0\noutcome_range = [0, 1]\ntrim = 0.1\n'
    assert dp_effects_spec(load_study_config(write(tmp_path, "dp_effects", section))).replicate_step == 1.0
    spec = dp_effects_spec(load_study_config(write(tmp_path, "dp_effects", section + "replicate_step = 3\n")))
    assert spec.replicate_step == 3.0


def test_a_clip_compensation_reaches_the_spec(tmp_path):
    from collabcausal.analyst.kind_dp_effects import dp_effects_spec

    section = ('[dp_effects]\nepsilon = 1.0\noutcome_range = [0, 1]\ntrim = 0.1\nmodifiers = ["age"]\n'
               "projection_clip = 5\nclip_compensation = 0.1\n")
    assert dp_effects_spec(load_study_config(write(tmp_path, "dp_effects", section))).clip_compensation == 0.1


@pytest.mark.parametrize("keys", ["modifier_clip = 0\n", "gram_weight = 2\n", 'projection_allocation = "best"\n',
                                  'modifier_clip = "off"\n', "projection_centre = 0\n", "residual_clip = 0\n",
                                  "residual_clip = 1.5\n", 'residual_clip = "0.3"\n', "clip_compensation = 0\n",
                                  "clip_compensation = 2\n", "replicate_step = 0.5\n", "replicate_step = 11\n",
                                  "replicate_step = nan\n", 'replicate_step = "3"\n'])
def test_bad_dp_effects_shaping_keys_are_one_config_error(tmp_path, keys):
    section = '[dp_effects]\nepsilon = 1.0\noutcome_range = [0, 125]\ntrim = 0.1\nmodifiers = ["age"]\n' + keys
    with pytest.raises(ConfigError):
        load_study_config(write(tmp_path, "dp_effects", section))

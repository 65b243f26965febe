"""The peers of the discovery benchmark: causal-learn's ANM and lingam's RESIT, with their defaults."""

import pytest

from collabcausal.errors import InputError
from collabcausal.simulations.discovery_peers import PEERS, check_peers
from collabcausal.simulations.pair_families import family_pairs

MODULE = {"causal-learn": "causallearn", "lingam": "lingam"}


@pytest.mark.parametrize("peer", list(PEERS))
def test_each_peer_names_the_cause_of_clear_additive_noise_pairs_and_its_reverse(peer):
    pytest.importorskip(MODULE[peer], reason=f"{peer} is not installed (`pip install -e '.[benchmarks]'`; lingam "
                        "pins scipy <= 1.13.1, so the dev extra leaves it out)")
    # Seeded AN-s pairs (injective sigmoid plus noise): the direction is plain; swapped columns swap it.
    for pair in family_pairs("AN-s", 2, 200, seed=0):
        forward, backward = PEERS[peer](pair.x, pair.y), PEERS[peer](pair.y, pair.x)
        assert forward == pair.direction and {forward, backward} == {"x->y", "y->x"}


def test_unknown_peers_are_refused_with_the_list():
    with pytest.raises(InputError, match="unknown peer"):
        check_peers(["causal-learn", "cdt"])
    assert check_peers(["lingam"]) == ["lingam"]

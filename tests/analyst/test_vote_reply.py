"""The analyst's check of a ``dp_discover_vote`` reply: the number of groups the request means, "auto" included."""

import pytest

from collabcausal.analyst.replies import check_vote
from collabcausal.errors import StudyFailedError
from collabcausal.messages import Message


def reply(n_groups, epsilon=1.0):
    return Message("dp_discover_vote", {"votes": 2.3, "n_groups": n_groups, "epsilon": epsilon,
                                        "noise_scale": 1.0 / epsilon, "direction": "x->y", "probability": 0.6})


@pytest.mark.parametrize(("group_size", "epsilon", "n_groups"), [(100, 1.0, 10), ("auto", 1.0, 8), ("auto", 10.0, 1)])
def test_a_reply_with_the_groups_the_request_means_is_accepted(group_size, epsilon, n_groups):
    request = {"columns": ["x", "y"], "epsilon": epsilon, "group_size": group_size}
    check_vote("a", reply(n_groups, epsilon), request, n_subjects=1000)


def test_a_reply_with_other_groups_than_auto_means_is_refused():
    # 1000 subjects at eps 1: "auto" means 8 groups of 125; a party answering with the old 10 of 100 is refused.
    request = {"columns": ["x", "y"], "epsilon": 1.0, "group_size": "auto"}
    with pytest.raises(StudyFailedError, match="n_groups 10 is not its 1000 subjects in groups of 125"):
        check_vote("a", reply(10), request, n_subjects=1000)

"""The analyst's one line when parties are lost mid-study: who, during what, and what was charged.

A differentially private request is charged to the party's ledger before it is computed
(:class:`collabcausal.ledger.PrivacyLedger`), so a party lost while it owed a DP reply may have
paid for a release the analyst never received; what the analyst did receive was charged. The
analyst cannot read the parties' ledgers, so it says what it knows and where the party looks.
"""

from __future__ import annotations

from collections.abc import Mapping

from collabcausal.errors import StudyFailedError


def lost_error(
    owed: Mapping[str, str],
    silence: Mapping[str, float],
    received: Mapping[str, Mapping[str, int]],
    *,
    heartbeat: float,
) -> StudyFailedError:
    """The study's failure for lost parties.

    Parameters
    ----------
    owed : mapping
        Lost party -> the operation it owed a reply to.
    silence : mapping
        Lost party -> seconds without contact when it was declared lost.
    received : mapping
        Party -> {operation: replies the analyst accepted during the study}.
    heartbeat : float
        Seconds between a live party's calls, for the message.
    """
    import collabcausal.party  # noqa: F401  (registers the operations release_kinds looks up)
    from collabcausal.party.operations import release_kinds

    names = sorted(owed)
    private = set(release_kinds({*owed.values(), *(op for counts in received.values() for op in counts)})[0])
    lost = "; ".join(
        f"{name} during {owed[name]!r} (no contact for {silence[name]:.0f} s; a live party calls every {heartbeat:g} s)"
        for name in names
    )
    unpaid = [
        f"{name}'s {owed[name]!r} may have been charged to its ledger with nothing released "
        f"(`collabcausal party budget` at {name} shows it)"
        if owed[name] in private
        else f"{name}'s {owed[name]!r} is not differentially private (no charge)"
        for name in names
    ]
    paid = [
        f"{name} {count}x {op}"
        for name, counts in sorted(received.items())
        for op, count in sorted(counts.items())
        if op in private and count
    ]
    charged = f"charged and received: {', '.join(paid)}" if paid else "no differentially private release was received"
    return StudyFailedError(
        f"part{'ies' if len(names) > 1 else 'y'} lost: {lost}; {charged}; {'; '.join(unpaid)}; "
        "nothing more was asked of any party",
        "restart the lost party (`collabcausal party join`) and run the study again (this step needs every "
        'party\'s reply; docs/protocol.md, "parties lost mid-study", lists the steps on_missing_party = '
        '"continue" goes on without one)',
    )

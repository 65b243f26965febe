"""How a party names why the analyst is unreachable (issue 38, item 8: gRPC's words were printed as they came)."""

from __future__ import annotations

import grpc

from collabcausal.protocol.client import connection_lost, unreachable_cause


def test_a_removed_stream_is_named_a_dropped_connection_not_in_grpcs_words():
    details = "Stream removed (Socket closed)"
    assert connection_lost(grpc.StatusCode.UNKNOWN, details)  # retried
    cause = unreachable_cause(details)
    assert cause == "the connection dropped: the analyst closed it or the network broke it"
    assert "Stream removed" not in cause and "Socket" not in cause

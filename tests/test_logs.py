"""Progress lines: one line per event, prefixed by elapsed seconds and the party."""

from __future__ import annotations

import logging
import re

from collabcausal.logs import configure_logging, log_progress, progress_logger


def test_progress_lines_name_the_party(capsys) -> None:
    configure_logging(0)
    log_progress("p11", "dc_representation: sent")
    progress_logger("hospital-a")("joined study 'x'")
    logging.getLogger("collabcausal.progress").warning("slow reply")
    lines = capsys.readouterr().err.splitlines()
    assert re.fullmatch(r"\[\s*\d+\.\ds\] p11: dc_representation: sent", lines[0])
    assert re.fullmatch(r"\[\s*\d+\.\ds\] hospital-a: joined study 'x'", lines[1])
    assert lines[2].endswith("progress: warning: slow reply")


def test_quiet_keeps_warnings_only(capsys) -> None:
    configure_logging(-1)
    log_progress("p11", "sent")
    logging.getLogger("collabcausal.x").warning("careful")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert lines[0].endswith("x: warning: careful")

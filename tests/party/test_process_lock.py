"""One process at a time per party: the OS lock on its audit log and ledger (issue 38, item 1)."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from collabcausal.errors import ConfigError
from collabcausal.party.process_lock import PartyFilesLock

HOLDER = """
import sys, time
from collabcausal.party.process_lock import PartyFilesLock
lock = PartyFilesLock("h", sys.argv[1:])
print("held", flush=True)
time.sleep(600)
"""


@pytest.fixture()
def holder(tmp_path):
    """Another process holding the audit log and ledger of party ``h`` (killed at the end)."""
    files = [tmp_path / "audit.jsonl", tmp_path / "ledger.sqlite"]
    process = subprocess.Popen([sys.executable, "-c", HOLDER, *map(str, files)], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "held"
    yield process, files
    process.kill()
    process.wait()


def test_a_second_process_is_refused_naming_the_holders_pid(holder) -> None:
    process, files = holder
    with pytest.raises(ConfigError) as refused:
        PartyFilesLock("h", files)
    message = str(refused.value)
    assert f"pid {process.pid}" in message and f"kill {process.pid}" in message
    assert "\n" not in message


def test_the_ledger_alone_is_enough_to_refuse(holder, tmp_path) -> None:
    """Two configs of one data file (its default ledger) with different audit logs: one process."""
    process, files = holder
    with pytest.raises(ConfigError, match=f"ledger.sqlite is in use by another process \\(pid {process.pid}"):
        PartyFilesLock("h", [tmp_path / "other-audit.jsonl", files[1]])
    PartyFilesLock("h", [tmp_path / "other-audit.jsonl"]).release()  # the refusal left nothing held


def test_a_killed_holder_leaves_no_stale_lock(holder) -> None:
    process, files = holder
    process.send_signal(signal.SIGKILL)
    process.wait()
    with PartyFilesLock("h", files):
        with pytest.raises(ConfigError, match="in use by another process"):  # held again, by this process
            PartyFilesLock("h", files)
    PartyFilesLock("h", files).release()  # and released

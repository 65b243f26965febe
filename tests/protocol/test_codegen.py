"""The committed stubs match collabcausal.proto."""

from __future__ import annotations

import importlib.util
import sys

from collabcausal.protocol import codegen
from collabcausal.protocol.generated import collabcausal_pb2, collabcausal_pb2_grpc


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_stubs_match_the_proto(tmp_path, monkeypatch):
    codegen.generate(tmp_path)
    fresh = (tmp_path / "collabcausal_pb2.py").read_text()
    committed = (codegen.GENERATED / "collabcausal_pb2.py").read_text()
    # The serialized file descriptor is the whole protocol; compare it (robust to protoc banners).
    marker = "AddSerializedFile("
    assert fresh[fresh.index(marker) :].split(")", 1)[0] == committed[committed.index(marker) :].split(")", 1)[0]
    service = (tmp_path / "collabcausal_pb2_grpc.py").read_text()
    committed_service = (codegen.GENERATED / "collabcausal_pb2_grpc.py").read_text()
    methods = [line.strip() for line in service.splitlines() if line.strip().startswith("'/collabcausal.v1.")]
    assert methods and methods == [
        line.strip() for line in committed_service.splitlines() if line.strip().startswith("'/collabcausal.v1.")
    ]


def test_stubs_declare_the_versioned_package_and_import_from_the_package():
    assert collabcausal_pb2.DESCRIPTOR.package == "collabcausal.v1"
    assert set(collabcausal_pb2.DESCRIPTOR.services_by_name["Study"].methods_by_name) == {
        "Register", "PullTask", "UploadResult", "Status",
    }
    assert collabcausal_pb2_grpc.collabcausal__pb2 is sys.modules["collabcausal.protocol.generated.collabcausal_pb2"]


def test_codegen_command_writes_into_a_chosen_folder(tmp_path):
    assert codegen.main(["--out", str(tmp_path)]) == 0
    assert {p.name for p in tmp_path.iterdir()} >= {"collabcausal_pb2.py", "collabcausal_pb2_grpc.py", "__init__.py"}

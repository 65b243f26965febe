"""Regenerate the committed gRPC stubs from ``collabcausal.proto`` (``make proto``).

``python -m collabcausal.protocol.codegen`` writes ``collabcausal_pb2.py``, ``collabcausal_pb2.pyi``
and ``collabcausal_pb2_grpc.py`` into :mod:`collabcausal.protocol.generated`. protoc writes the
service module with a top-level ``import collabcausal_pb2``; it is rewritten to a package import
so the stubs work from the installed package.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from collabcausal.errors import ProtocolError

PROTO = Path(__file__).with_name("collabcausal.proto")
GENERATED = Path(__file__).with_name("generated")
STEM = PROTO.stem + "_pb2"


def generate(out_dir: Path = GENERATED) -> list[Path]:
    """Compile :data:`PROTO` into ``out_dir``; return the files written."""
    from grpc_tools import protoc

    out_dir.mkdir(parents=True, exist_ok=True)
    include = Path(protoc.__file__).parent / "_proto"
    code = protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{PROTO.parent}",
            f"-I{include}",
            f"--python_out={out_dir}",
            f"--pyi_out={out_dir}",
            f"--grpc_python_out={out_dir}",
            str(PROTO),
        ]
    )
    if code != 0:
        raise ProtocolError(f"protoc failed on {PROTO} (exit {code})", "fix the .proto file")
    service = out_dir / f"{STEM}_grpc.py"
    service.write_text(
        service.read_text().replace(f"import {STEM} as", f"from collabcausal.protocol.generated import {STEM} as")
    )
    init = out_dir / "__init__.py"
    init.write_text('"""Stubs generated from collabcausal.proto by collabcausal.protocol.codegen; do not edit."""\n')
    return [out_dir / f"{STEM}.py", out_dir / f"{STEM}.pyi", service, init]


def main(argv: list[str] | None = None) -> int:
    """Command line: regenerate the stubs (optionally into another directory)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=GENERATED, help="output directory (default: the package's)")
    args = parser.parse_args(argv)
    for path in generate(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

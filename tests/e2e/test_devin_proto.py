"""wire/devin_pb2.py is what protoc generates from wire/devin.proto today."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from support import ROOT


def test_generated_module_is_current(tmp_path):
    """wire/devin_pb2.py is what protoc makes of wire/devin.proto today."""
    pytest.importorskip("grpc_tools")
    (tmp_path / "wire").mkdir()
    shutil.copy(ROOT / "wire" / "devin.proto", tmp_path / "wire" / "devin.proto")
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-I.", "--python_out=.", "wire/devin.proto"],
        cwd=tmp_path,
        check=True,
    )
    assert (tmp_path / "wire" / "devin_pb2.py").read_bytes() == (ROOT / "wire" / "devin_pb2.py").read_bytes()

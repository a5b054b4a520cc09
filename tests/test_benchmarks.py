"""Benchmark scripts that must behave on any machine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(torch.cuda.is_available(), reason="with a GPU the check runs for real")
def test_cuda_check_skips_with_a_clear_message_without_a_gpu() -> None:
    script = ROOT / "benchmarks" / "cuda_check.py"
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "CUDA is not available" in result.stdout

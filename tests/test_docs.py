"""Generated env pages match the env docstrings, and every env has a page in the nav."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import rla_gym

ROOT = Path(__file__).resolve().parent.parent


def test_env_pages_are_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "gen_env_pages.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_every_env_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    for env_id in rla_gym.ENV_IDS:
        assert f"{env_id}: envs/" in nav

"""Shared test fixtures: the project root on sys.path and ../shared/data."""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)


def shared_path(*parts: str) -> str:
  """Path under ../shared/data; a test that needs it fails in CI and skips elsewhere."""
  path = os.path.join(SHARED_DATA, *parts)
  if not os.path.exists(path):
    if os.environ.get("CI"):
      pytest.fail(f"{path} is missing: CI must run with ../shared beside the checkout")
    pytest.skip(f"{path} is missing (../shared/data not beside the checkout)")
  return path

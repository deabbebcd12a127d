"""Puts the examples directory on sys.path so tests can import the example processors."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))

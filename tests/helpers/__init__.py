"""Test helpers, imported by test modules as ``from helpers.profiles import ...`` (never from conftest)."""

"""Test support code shared by several test folders (not a test module)."""

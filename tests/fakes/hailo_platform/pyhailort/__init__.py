"""Fake of hailo_platform.pyhailort (tests only)."""

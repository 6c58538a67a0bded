"""The precision profiles a HEF build takes by name (``compile hef --precision``); each is
defined in :mod:`hefsearch.embed.precision`."""

from __future__ import annotations

from hefsearch.embed.precision import PROFILES

#: the profile names, in the order the help lists them
PROFILE_NAMES: tuple[str, ...] = tuple(PROFILES)

"""hefsearch.diagnose: ``doctor`` (checks with fixes), ``inspect`` (HEF streams) and the
shareable hardware report. It sits above ``evaluate`` (``doctor --verify`` runs its comparison)."""

"""``hefsearch compile robust``: a copy of the body that survives 8 bits (entry: build.build_robust)."""

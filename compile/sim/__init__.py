"""``hefsearch compile sim``: the fake-quantised 8-bit NPU simulation of a bundle's body (entry: build.build_sim)."""

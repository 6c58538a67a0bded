"""``hefsearch compile export``: a Hugging Face model -> a model bundle (entry: bundle.export_bundle)."""

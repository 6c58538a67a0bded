"""hefsearch: multilingual semantic search over your own document folders, with the encoder on a
Hailo NPU or the CPU. The subpackages live in the repository's top-level folders (see
docs/ARCHITECTURE.md); this package only holds ``python -m hefsearch``. Importing it loads nothing."""

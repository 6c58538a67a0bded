"""hefsearch.evaluate: what the 8-bit encoders cost, measured. The quality benchmark
(``bench quality``), the bundled multilingual parallel set, ``doctor --verify``'s NPU-vs-CPU
comparison and the recall plot. It sits above ``search`` and is never imported by the query path."""

"""hefsearch.readers: a document's text out of its file (one module per format, the table of
formats, OCR, image decoding, mail files, file types by suffix and content, and the per-document budget
every reader runs within). Below the library (index/), which stores and syncs what they read."""

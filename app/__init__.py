"""hefsearch.app: the application layer under every front end (the CLI, the TUI, the server).

- :mod:`~hefsearch.app.session`: :class:`~hefsearch.app.session.LibrarySession`, one open
  library with its searcher and encoders (search, compare, similar, read, status, re-index);
- :mod:`~hefsearch.app.indexing`: :func:`~hefsearch.app.indexing.run_index`, the whole
  ``hefsearch index`` run over an :class:`~hefsearch.app.requests.IndexRequest` (the library
  created or discarded, its folders, crawl options, Ray, encoders, the sync, the default bundle);
- :mod:`~hefsearch.app.reindex`: :func:`~hefsearch.app.reindex.reindex`, one sync run
  (encoders opened and closed, the sync, the language-neutral space kept), under
  ``run_index``, the TUI's re-index, ``hefsearch watch`` and the server;
- :mod:`~hefsearch.app.folders`: the library's folders (recorded, there now) and where it lives;
- :mod:`~hefsearch.app.requests`: one request type per operation;
- :mod:`~hefsearch.app.index_settings`, :mod:`~hefsearch.app.backfill`,
  :mod:`~hefsearch.app.embedding`: ``settings``, ``backfill``, ``embed``;
- :mod:`~hefsearch.app.service`: the JSON answers of ``search --json``, the HTTP API and the
  MCP tools, made by one function each, with the limits a server needs;
- :mod:`~hefsearch.app.searching`: how a front end asks for a search (modes, the query check,
  filters from what people type);
- :mod:`~hefsearch.app.freshness`: how fresh the library is (last sync, a running watcher);
- :mod:`~hefsearch.app.watch`: ``hefsearch watch``, folders followed by events or polling.

Nothing here imports a web framework or Textual (the server lives in ``hefsearch.serve``).
"""

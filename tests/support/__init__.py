"""What the tests share: builders of documents and containers, tiny models, fixtures of
libraries, servers, the web page and the fake Hailo SDKs, and the isolation of every run."""

"""Storage: the per-track record store (journals, part files, the workdir lock), the columnar
part files, the content-addressed explanation cache and the records tools (convert, export).
Internal to the runner: outside code reaches it through :mod:`xaibench.runner`."""

"""``otelstream doctor`` and the runtime self-check: the fault matrix run through the SDKs and HTTP
libraries installed where it runs, in-process over their own mock transports, observed by the real patches and
reported to a private listener only.

Modules by job: ``faults`` (the catalogue: what each fault is and what otelstream must report for it), ``bodies``
(what the mock server sends for a fault, and the counts that implies), ``transport`` (the mock transports' handlers),
``clients`` (SDK clients over them, one stream opener per surface), ``callers`` (how the caller consumes: drain,
break and close, cancel, drop), ``routing`` (the private listener and the routing of the doctor's streams to it),
``runner`` (cells run and compared), ``versions``, ``render`` (text and JSON), ``command`` (the CLI) and
``runtime_check`` (the small matrix once in the background after ``instrument()``).

This package's ``__init__`` imports nothing, so ``otelstream --help`` stays fast.
"""

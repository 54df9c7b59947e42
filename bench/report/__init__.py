"""``RESULTS.md``: its sections (``record``), the budget table (``budgets``), the other tables (``tables``)."""

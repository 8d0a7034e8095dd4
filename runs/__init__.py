"""A run directory: what each phase keeps in its model dir, and its reading and writing
(docs/architecture.md names each module's part)."""

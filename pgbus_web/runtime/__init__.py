"""The workflow runtime: definitions, the outside verbs, the action plan,
signals, the system transitions and the worker (see docs/runtime.md)."""

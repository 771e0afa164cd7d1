"""The rules every layer reads, each in one home: statuses and stuck
reasons (states), when a run is stuck (stuck), which verb fits which
status (verb_table), the runs' filter model (run_filters), the roles,
the bounds of stored values (limits).
Leaves: they import nothing of the project but i18n."""

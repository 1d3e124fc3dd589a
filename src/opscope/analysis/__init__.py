"""Analysis: op tables, time breakdowns and findings computed from a Trace.  Returns data only."""

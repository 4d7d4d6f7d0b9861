"""What an operator sees and bounds: traces, metrics, the audit log, rate limits, live configuration.

Owns: `tracing` (the spans of a run, through the OpenTelemetry API only), `metrics` (Prometheus and
OpenTelemetry instruments), `audit` (the JSON-lines audit log), `rate_limits` (tool calls per principal and
minute), `live` (the upstream servers' tasks, and watching the configuration files while serving).
None of it ever fails a run: telemetry that breaks is logged and left out.
May import: the foundations only. May be imported by: `run` and `faces`. Must never be imported by: `model`,
`sessions`, `store`, the foundations, `sandbox` or `toolpacks`.
"""

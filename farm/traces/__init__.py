"""What an agent does inside a turn, as OpenTelemetry spans: captured from an in-process agent
(:mod:`farm.traces.capture`) and judged by the trace assertions (:mod:`farm.assertions.traces`).
See docs/traces.md."""

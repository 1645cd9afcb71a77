"""Traffic: what the offered load looks like and where each request goes (arrival schedules,
request lengths, routing policies) — one definition, used by the live bench and the simulator."""

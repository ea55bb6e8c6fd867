"""The fault sets the simulator's tests run: which of them today's code survives."""

TODAY_SAFE = "all,-skew,-clock_steps,-pause,-starved_renewals,-slow_handlers"
"""Every fault kind except those that break invariants on today's code: a clock off the
database's (skew, steps), and a claim queued behind a handler that outlives its lease
(pause, slow handlers, starved renewals). See test_simulate_today_bugs.py."""

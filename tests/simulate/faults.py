"""The fault sets the simulator's tests run."""

TODAY_SAFE = "all"
"""Every fault kind: since issue 20's fixes (the database's clock, the lease-alive check) the
code survives all of them, skew, clock steps, pauses, slow handlers and starved renewals
included (10,000 seeds of `make soak`, 0 broken). The name is kept for the tests that use it."""

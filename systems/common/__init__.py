"""What every system adapter shares: the plan, the oracle, snapshots and the run loop (docs/systems.md)."""

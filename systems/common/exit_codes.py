"""Exit codes of an adapter process (docs/reliability.md, "Exit codes"; docs/systems.md)."""

OK = 0
SYSTEM_FAILED = 1   # the system under test raised: a finding, described in rank_<r>.json
BAD_PLAN = 2        # a malformed plan, or one this adapter cannot run
ENVIRONMENT = 3     # imports, the process group, a peer that died, the filesystem
TIMEOUT = 124       # a collective that got no answer within the plan's timeout

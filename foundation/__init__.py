"""The foundation: helpers every layer may use and that know no product (typed settings from
the environment, GPU types, rate limiting, the Redis client, lookups, API helpers, the money
and hours template filters). It imports nothing else of the portal; see docs/architecture.md."""

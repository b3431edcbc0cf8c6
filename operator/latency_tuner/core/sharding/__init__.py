"""Sharding: which operator shard owns which LatencyTarget, and the claim that keeps a target
from ever having two owners while shards are added, removed or rolled."""

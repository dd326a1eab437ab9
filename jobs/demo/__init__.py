"""`rebalance-planner demo`: the whole product on embedded parts, in phases."""

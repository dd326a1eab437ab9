"""The rebalance-planner pipeline stages and command line."""

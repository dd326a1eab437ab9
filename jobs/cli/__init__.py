"""The `rebalance-planner` command line: one parser, pipeline, runtime and local commands."""

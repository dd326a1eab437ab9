"""The pipeline's stages: each a pure DataFrame transform plus a runner that reads and MERGEs tables."""

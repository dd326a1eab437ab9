"""Pure wire formats: what crosses a process boundary, with one reader and one writer each."""

"""Day-2 change: compare two plans (`railforge diff`), write the work order, guard `build` against renumbering."""

"""Hardware reference data: the switch, host and media catalog railforge ships, merged with a spec's own `catalog:`."""

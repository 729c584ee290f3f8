"""Pure planners: decisions without I/O or clocks."""

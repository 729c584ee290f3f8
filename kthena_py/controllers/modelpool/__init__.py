"""The ModelPool controller: swaps members of a pool in and out of its GPU slots on demand."""

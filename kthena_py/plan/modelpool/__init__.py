"""ModelPool (pure): demand read from a pool's annotations, and which member to load or evict next."""

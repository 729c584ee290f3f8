"""LoRA adapters: the desired set on a ModelServing, and (pure) what to load and unload on its pods."""

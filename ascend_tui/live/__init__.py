"""Everything that touches torch: devices, capture, sanitizing, watching. torch is imported lazily."""

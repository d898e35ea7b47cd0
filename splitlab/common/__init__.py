"""Facts every part of splitlab shares, with no dependency on torch: element types, the shipped presets, the
identity stamped on every KV cache, and the small argument checks."""

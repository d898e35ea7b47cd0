"""The book's figures, drawn from splitlab's own results: :mod:`.phases` (chapters 1-3: one request, the cache,
the roofline), :mod:`.serving` (chapters 4 and 6: serving runs), :mod:`.transfer` (chapter 5: moving the cache).

Every function draws on a given matplotlib Axes (or makes one), labels both axes with units, sets a title and
returns the Axes."""

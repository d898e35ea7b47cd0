"""What the book needs on top of the package: its figures (:mod:`.figures`), the interactive explorers
(:mod:`.widgets`) and the exercise checkers (:mod:`.check`)."""

"""What the driving commands do, as functions of one typed argument dataclass each (the CLI parses
flags into it, a job runs): ``drive`` (train, evaluate, render, bench), ``demo``, ``data``
(convert, collect, fit-dynamics, ground) and ``vehicle`` (validate); ``scenes`` and ``console``
are what they share. The Go1 jobs are ``scenefactory.go1.jobs``."""

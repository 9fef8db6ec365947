"""The course's exercises: one module per lesson, exNN.py, each registering its checkers with
`course.checks.exercise` (see notebooks/course/checks.py). `check("NN.k", ...)` imports exNN lazily."""

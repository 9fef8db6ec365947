"""The course's exercises: one module per lesson, exNN.py, each registering its checkers with
`course.exercise` (see notebooks/course.py). `course.check("NN.k", ...)` imports exNN lazily."""

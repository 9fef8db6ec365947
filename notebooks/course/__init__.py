"""The course's machinery, one module per job (the lessons import from each):

- `course.checks`: the exercise checker (`check`, and `exercise`, `close`, `equals`, ... for notebooks/exercises/);
- `course.pictures`: the pictures a lesson stores and redraws (`picture`, `png_bytes`, `flow_picture`, ...);
- `course.controls`: a lesson's "Try it" (`try_it`).
"""

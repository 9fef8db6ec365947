"""The view model: what each view shows, decided once in Python.

`records` is the one table of views (tab, title, which selections it takes, its renderers' names); `data` turns a
trace into each view's data (numbers, tokens, tables); `panels` is the small layout language that places that data
on the screen for a selection (app.js reads the same layouts); `limits` holds the sizes every renderer keeps to.
"""

"""The renderers: the pictures drawn from the view model.

`assets/app.js` (and app.css) draws every view in the browser, for the widget and the exported page; `figures` draws
the same views with plotly; `static` draws PNGs with matplotlib.
"""

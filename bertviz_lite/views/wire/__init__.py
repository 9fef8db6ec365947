"""The wire: how view data reaches a browser.

`codec` packs arrays for the page, `export` builds the offline page (the same front-end as the widget), `widget` is
the anywidget explorer and its saved-notebook output, `files` writes output files whole and checks their targets,
`selection` checks what a caller asks to show (tab, layer, head, query).
"""

"""Every size limit of the views, in one place: how many tokens a view draws in full, how its numbers
travel, how large a page may grow. The views, the exported page, the saved notebook page, the PNGs
and the front-end (through `data.facts(...)["limits"]`) read them from here.

One length decides most of them: an input is LONG above LONG_INPUT tokens. Up to it every map is
drawn and sent in full at full precision; above it maps are sent at fewer bits or as block means,
labels are thinned, and the saved notebook page keeps fewer tabs. Each limit below says why it is
that length, so one can be moved without the others.
"""

from __future__ import annotations

LONG_INPUT = 128  # tokens: up to here an input is short (every map in full, every label drawn)

# --- what the views draw
# attention from elsewhere can be of any length: above MAX_TOKENS the views refuse before they draw
# (a 10,000-token map of 12 heads is 9.6 GB as float64: one layer's maps, read once to draw them)
MAX_TOKENS = 2048
LABEL_ALL_UP_TO = LONG_INPUT  # every token label drawn (front-end, PNGs) up to here; above, thinned (hover for all)
THUMB_TOKENS = 48  # the model view's thumbnails: block means of at most this many tokens a side
STACK_ABOVE = 60  # the compare view's three maps side by side up to this many tokens; above, one per line
# the compare view above LONG_INPUT tokens: A, B and B - A as block means of COMPARE_MAPS tokens a side (at 512
# tokens one BERT-base layer's three maps at full resolution are 19 MB as uint16; the attention tab shows each
# map in full)
COMPARE_FULL_UP_TO = LONG_INPUT
COMPARE_MAPS = LONG_INPUT

# --- how view data travels to the notebook (widget.wire_dtypes)
EXACT_UP_TO = LONG_INPUT  # a view's token x token maps (its record's `maps`) as float32 up to here, uint16 above

# --- the exported page (export.py)
FULL_UP_TO = LONG_INPUT  # maps in full as uint16 up to here; above, uint8 and block means of SMALL_MAPS a side
SMALL_MAPS = 96  # the always-kept maps of a long input: block means of this many tokens a side
STEP_ROWS, STEP_CELLS = 48, 2048  # each step in the page: block means of at most STEP_ROWS x STEP_CELLS / STEP_ROWS
DEFAULT_MAX_BYTES = 14_000_000  # export_html's default size cap
MIN_BYTES = 200_000  # the front-end alone is ~60 kB; a cap below this keeps next to nothing

# --- the page a saved notebook keeps (widget.saved_page)
# every tab up to SAVED_EVERY_TAB_UP_TO tokens while the page fits SAVED_PAGE_BYTES, in the records' priority order
# (the neuron view of every layer before the step-through and the one-token view); else the tabs whose record has
# saved_long (attention, model view, head view, parameters, compare); else only the picture, saying why.
# MiniLM (6 layers x 12 heads), measured 2026-11-26: the neuron view takes 0.6 MB a layer at 128 tokens (the
# recorded scores at 16 bits, as it prints them: they hardly compress), so a 128-token page with the attention
# maps, the model view, the parameters and every layer's neuron view is 6.9 MB (a 129-token pair: 7.1 MB); under
# the former 5 MB every layer fits up to about 100 tokens (tests/views/test_saved_page_neuron.py)
SAVED_PAGE_BYTES = 8_000_000
SAVED_EVERY_TAB_UP_TO = LONG_INPUT  # above, the step-through's ~100 tensors and the one-token view take seconds

# what the front-end reads (data.facts(...)["limits"]): the same numbers, never written again in app.js
FRONT_END = dict(label_all_up_to=LABEL_ALL_UP_TO, long_input=LONG_INPUT)

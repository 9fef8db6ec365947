"""bertviz's neuron-view import, as a drop-in: bertviz's `neuron_view.show` with bertviz's signature.

    from bertviz_lite.neuron_view import show     # was: from bertviz.neuron_view import show
    show(model, "bert", tokenizer, sentence_a, sentence_b, layer=2, head=0)

It is `bertviz_lite.views.neuron_view` (the explorer opened on its neuron view tab, displayed where it is
called) under bertviz's name and defaults. Importing it loads the views (`bertviz_lite.views`), which load
no widget library until a widget is made.
"""

from __future__ import annotations

import sys
import types

from .views.explorer import neuron_view


def show(model, model_type, tokenizer, sentence_a, sentence_b=None, display_mode="dark", layer=None, head=None,
         html_action="view"):
    """bertviz's `neuron_view.show` (its arguments and defaults): how a query's q and each key's k make the
    scores and the attention weights, for one layer and head, displayed where it is called; returns None
    (html_action="return": the page's HTML).

    model, tokenizer: a Hugging Face transformers model of the BERT family with its tokenizer (the
    sentences are traced through bertviz-lite's BERT with that model's weights), or a bertviz-lite model
    (`bv.load(...)`, tokenizer None). model_type: "bert", "roberta", ... (bertviz's). layer, head: the
    start (None: 0). display_mode: "dark" (bertviz's default) or "light"; `bv.views.neuron_view` takes
    None to follow the notebook's theme."""
    return neuron_view(model, model_type, tokenizer, sentence_a, sentence_b, display_mode=display_mode,
                       layer=layer, head=head, html_action=html_action)


class _CallableModule(types.ModuleType):
    # importing this module binds it to bertviz_lite.neuron_view (Python sets a submodule on its parent),
    # where bv.neuron_view was the function: calling the module calls the function, so bv.neuron_view(...)
    # works whether this module was imported or not
    def __call__(self, *args, **kwargs):
        return neuron_view(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

